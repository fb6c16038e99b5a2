"""``advise``: what to add to a fabric for a workload mix, within a budget, and the whole cost/time curve.

The answer is a list of candidate upgrades (each the fabric-file edit it makes), the plan (indices into
them, in the order to buy), the mix's weighted time before and after each step with the cut each step
breaks, and the curve of cost against weighted time if one keeps buying the best value. Times are the
fabric's exact limits (bandwidth alone; alpha ignored), so a plan says what the fabric allows, and
``ccviz.advise.confirm`` checks what schedules realize of it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ccviz.advise import candidates as candidate_list
from ccviz.advise.costs import CostTable
from ccviz.advise.mix import MixItem, mix_text
from ccviz.advise.planner import (
    EXHAUSTIVE_SETS,
    Clock,
    Search,
    best_subset,
    buying_order,
    count_sets,
    greedy,
    improve_by_swaps,
)
from ccviz.advise.scoring import Scorer
from ccviz.advise.upgrades import Upgrade
from ccviz.errors import CcvizError
from ccviz.model.topology import Topology
from ccviz.model.units import format_time

DEFAULT_MAX_STEPS = 3
MAX_STEPS = 10
MAX_ADVISE_GPUS = 512


@dataclass(frozen=True)
class Step:
    """One purchase of the plan (or the curve): what, for how much, what it saves, which cut it breaks."""

    index: int
    cost: float
    total_cost: float
    weighted_time_s: float
    saved_s: float
    limits_s: tuple[float, ...]
    bottleneck: str  # the mix item whose weighted time this step cut most
    cut_before: str
    cut_after: str

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "cost": self.cost, "total_cost": self.total_cost,
                "weighted_time_s": self.weighted_time_s, "saved_s": self.saved_s, "limits_s": list(self.limits_s),
                "bottleneck": self.bottleneck, "cut_before": self.cut_before, "cut_after": self.cut_after}


@dataclass
class Advice:
    """The advisor's answer (``to_dict`` is the ``ccviz advise --json`` object)."""

    topology: str
    mix: tuple[MixItem, ...]
    costs: CostTable
    candidates: list[Upgrade]
    budget: float | None
    start_s: float
    start_limits_s: tuple[float, ...]
    steps: list[Step]
    curve: list[Step]
    method: str
    proven: bool
    cut_short: str | None
    exact_evaluations: int
    wall_s: float
    notes: list[str] = field(default_factory=list)

    @property
    def plan(self) -> list[int]:
        return [s.index for s in self.steps]

    @property
    def weighted_time_s(self) -> list[float]:
        return [self.start_s] + [s.weighted_time_s for s in self.steps]

    def to_dict(self) -> dict[str, Any]:
        return {
            "topology": self.topology,
            "mix": [{"collective": m.collective, "size_bytes": m.size_bytes, "weight": m.weight} for m in self.mix],
            "mix_text": mix_text(self.mix),
            "currency": self.costs.currency,
            "costs_source": self.costs.source,
            "budget": self.budget,
            "candidates": [c.to_dict() for c in self.candidates],
            "plan": self.plan,
            "total_cost": self.steps[-1].total_cost if self.steps else 0.0,
            "weighted_time_s": self.weighted_time_s,
            "speedup": self.start_s / self.weighted_time_s[-1] if self.weighted_time_s[-1] > 0 else None,
            "limits_before_s": list(self.start_limits_s),
            "steps": [s.to_dict() for s in self.steps],
            "curve": [{"cost": 0.0, "weighted_time_s": self.start_s, "index": None}]
            + [{"cost": s.total_cost, "weighted_time_s": s.weighted_time_s, "index": s.index} for s in self.curve],
            "method": self.method,
            "proven_best": self.proven,
            "cut_short": self.cut_short,
            "exact_evaluations": self.exact_evaluations,
            "wall_s": self.wall_s,
            "alpha_ignored": True,
            "notes": list(self.notes),
        }

    def summary_lines(self) -> list[str]:
        """The plan in words, for the command line and the page."""
        lines = [f"{self.topology}: mix {mix_text(self.mix)} weighs {format_time(self.start_s)} at the fabric's "
                 "limits (bandwidth only, alpha ignored)"]
        if not self.steps:
            lines.append("no candidate within the budget shortens the mix: " + (self.notes[-1] if self.notes else ""))
        for n, s in enumerate(self.steps, 1):
            up = self.candidates[s.index]
            lines.append(f"{n}. [{s.index}] {up.label or up.kind}: {s.cost:,.0f} {self.costs.currency} -> "
                         f"{format_time(s.weighted_time_s)} (-{format_time(s.saved_s)}); breaks {s.bottleneck}'s "
                         f"cut: {s.cut_before}")
        lines.append(f"{self.method}; {self.exact_evaluations} exact solves in {self.wall_s:.1f} s")
        return lines


def advise(topology: Topology, mix: Sequence[MixItem], *, budget: float | None = None,
           max_steps: int = DEFAULT_MAX_STEPS, costs: CostTable | None = None,
           candidates: Sequence[Upgrade] | None = None, max_candidates: int = candidate_list.DEFAULT_MAX_CANDIDATES,
           time_limit: float | None = None, stop: Callable[[], bool] | None = None) -> Advice:
    """The plan for ``budget`` (None: no budget, keep buying the best value for ``max_steps`` steps) and the
    cost/time curve; ``candidates`` replaces the generated list."""
    t0 = time.monotonic()
    mix = tuple(mix)
    costs = costs or CostTable()
    _check(topology, budget, max_steps)
    clock = Clock(time_limit, stop)
    probe = Scorer(topology, mix, [])
    start = probe.exact(())
    if candidates is None:
        candidates = candidate_list.generate(topology, costs, _cut_nodes(topology, mix),
                                             max_candidates, reducing=any(m.collective == "allreduce" for m in mix))
    candidates = list(candidates)
    scorer = Scorer(topology, mix, candidates)
    scorer._cache[frozenset()] = start
    scorer._cuts, scorer._prices = probe._cuts, probe._prices
    everything = tuple(range(len(candidates)))
    if budget is not None:
        cheapest = min((c.cost for c in candidates), default=math.inf)
        if cheapest > budget:
            raise CcvizError(f"budget: {budget:g} {costs.currency} is below every candidate's cost (the cheapest is "
                             f"{cheapest:,.0f}); raise --budget", "budget")
    notes: list[str] = []
    curve = greedy(scorer, Search(everything, math.inf, max_steps), clock)
    if budget is None:
        plan, method, proven = curve, "greedy: the best time saved per unit of cost, re-solved after each step", False
    else:
        search = Search(everything, budget, max_steps)
        sets = count_sets(search, [c.cost for c in candidates])
        if sets <= EXHAUSTIVE_SETS:
            plan, finished = best_subset(scorer, search, clock)
            method = (f"exhaustive over the {sets} candidate sets within the budget and {max_steps} steps, solved in "
                      "the order of their lower bounds")
            proven = finished
        else:
            plan = improve_by_swaps(scorer, search, clock, greedy(scorer, search, clock))
            method = (f"greedy within the budget then swaps (more than {EXHAUSTIVE_SETS} candidate sets: not proven "
                      "best)")
            proven = False
        plan = buying_order(scorer, plan)
    if not plan:
        notes.append("every candidate leaves the mix's limits where they are: the binding cuts are not crossed by "
                     "any upgrade offered, or several cuts tie and one upgrade raises only one of them")
    if clock.reason:
        proven = False
        notes.append(f"cut short by its {'time limit' if clock.reason == 'time_limit' else 'Stop'}: the best found "
                     "so far")
    return Advice(topology.name, mix, costs, candidates, budget, start.weighted_s, start.limits_s,
                  _steps(scorer, plan), _steps(scorer, curve), method, proven, clock.reason,
                  scorer.exact_evaluations + probe.exact_evaluations, time.monotonic() - t0, notes)


def _check(topology: Topology, budget: float | None, max_steps: int) -> None:
    if topology.n_gpus > MAX_ADVISE_GPUS:
        raise CcvizError(f"topology: the advisor takes fabrics of up to {MAX_ADVISE_GPUS} GPUs, got "
                         f"{topology.n_gpus}", "topology")
    if budget is not None and not (isinstance(budget, (int, float)) and math.isfinite(budget) and budget > 0):
        raise CcvizError(f"budget: a positive amount, got {budget!r}", "budget")
    if not (isinstance(max_steps, int) and 1 <= max_steps <= MAX_STEPS):
        raise CcvizError(f"max-steps: a whole number from 1 to {MAX_STEPS}, got {max_steps!r}", "max-steps")


def _cut_nodes(topology: Topology, mix) -> list[frozenset[int]]:
    """The node sets of the mix's binding cuts, the heaviest item's first (their crossings are the cables
    that can move a limit)."""
    from ccviz.bounds.limit import bandwidth_limit

    out = []
    for item in sorted(mix, key=lambda m: -m.weight):
        nodes = bandwidth_limit(topology, item.collective, item.size_bytes).cut.nodes
        if nodes and nodes not in out:
            out.append(nodes)
    return out


def _steps(scorer: Scorer, order: Sequence[int]) -> list[Step]:
    steps, total = [], 0.0
    for k, index in enumerate(order):
        before = scorer.exact(order[:k], own=True)
        after = scorer.exact(order[:k + 1], own=True)
        heaviest = max(range(len(scorer.mix)), key=lambda j: (scorer.mix[j].weight * (before.limits_s[j]
                                                                                 - after.limits_s[j]),
                                                              scorer.mix[j].weight * before.limits_s[j]))
        total += scorer.candidates[index].cost
        steps.append(Step(index, scorer.candidates[index].cost, total, after.weighted_s,
                          before.weighted_s - after.weighted_s, after.limits_s, scorer.mix[heaviest].label,
                          before.cut_words[heaviest], after.cut_words[heaviest]))
    return steps
