"""teccl-astar: TE-CCL in rounds, for fabrics too large for one MILP.

Each round is a small MILP over a few epochs that starts from what every GPU
holds so far. Demands need not be met inside a round; the objective rewards
deliveries (early ones more) plus progress: holding a chunk at the end of
the round at a GPU ``dist`` epochs from its nearest missing destination
earns 1/(1+dist). Every send of a round lands inside the round, so nothing
is in flight across rounds and link windows never straddle two rounds.
Rounds repeat until every demand is met; the schedule is their
concatenation (the paper reports 6-20% above the optimum, much faster).
"""

from __future__ import annotations

import time

from ccviz.collectives import Collective
from ccviz.schedule import Schedule
from ccviz.simulate import simulate
from ccviz.synth.registry import Progress, SynthOptions
from ccviz.synth.teccl.bounds import EpochLowerBound
from ccviz.synth.teccl.epochs import EpochGrid
from ccviz.synth.teccl.extract import Hop, chunk_hops, prune_copy_sends
from ccviz.synth.teccl.model import copy_model
from ccviz.synth.teccl.solve import HighsRun
from ccviz.synth.teccl.synthesizer import EpochPlan, EpochSolver, plan_schedule
from ccviz.synth.teccl.time_expanded import Commodity, TimeExpandedGraph, epoch_distances
from ccviz.topology import Topology

ROUND_EPOCHS = 6  # epochs of sending per round, on top of the slowest link's offset
ROUND_KAPPAS = 1  # ... and at least this many chunk times of the slowest link (longer rounds measured worse)
ROUND_GAP = 0.05  # a round need not be solved to proof
ROUND_TIME_LIMIT_S = 5.0  # a round is a step of a heuristic: cap it, keep the best incumbent
USED = 0.5


class AStarRounds:
    """Round-by-round TE-CCL for a non-reducing collective."""

    def __init__(self, topology: Topology, collective: Collective, options: SynthOptions, deadline: float,
                 started: float, mirrored_from: Topology | None = None) -> None:
        self.topology = topology
        self.collective = collective
        self.options = options
        self.deadline = deadline
        self.started = started
        self.mirrored_from = mirrored_from
        self.grid = EpochGrid.build(topology, collective.chunk_bytes, options.epoch, mirrored_from)
        # Long enough that a slow link (one chunk per kappa epochs) keeps its full rate within a round.
        links = self.grid.links.values()
        self.round_epochs = max(link.offset for link in links) + max(ROUND_EPOCHS,
                                                                       ROUND_KAPPAS * max(lk.kappa for lk in links))
        self.chunks = [c for c in collective.chunks if c.post - c.pre]
        self.held = [dict.fromkeys(c.pre, 0) for c in self.chunks]  # GPU -> epoch it holds the chunk from
        self.distance = {n: epoch_distances(topology, self.grid, {n: 0}) for n in topology.gpus}

    def solve(self) -> EpochPlan:
        hops: list[Hop] = []
        start = 0
        rounds = 0
        while self.missing() and not self.out_of_time():
            round_hops = self.solve_round(start)
            if round_hops is None:
                return self.fallback(hops, rounds)
            hops.extend(round_hops)
            start += self.round_epochs
            rounds += 1
        if self.missing():
            return self.fallback(hops, rounds)
        epochs = max(t for held in self.held for t in held.values())
        lower = EpochLowerBound(self.topology, self.grid, self.commodities_now(full=True)).value()
        status = "optimal" if epochs <= lower else "heuristic"
        return EpochPlan(hops, epochs, status, None, [f"A*: {rounds} rounds of {self.round_epochs} epochs; "
                                                      f"lower bound {lower} epochs"])

    def missing(self) -> bool:
        return any(set(c.post) - set(held) for c, held in zip(self.chunks, self.held, strict=True))

    def out_of_time(self) -> bool:
        return self.options.stopped() or time.perf_counter() >= self.deadline

    # What each chunk still needs, as commodities for one round (holders = who has it now).
    def commodities_now(self, full: bool = False) -> list[Commodity]:
        out = []
        for c, held in zip(self.chunks, self.held, strict=True):
            holders = frozenset(c.pre) if full else frozenset(held)
            needs = sorted(c.post - c.pre) if full else sorted(set(c.post) - set(held))
            out.append(Commodity(len(out), (c.id,), holders, tuple((d, 1) for d in needs)))
        return out

    # One round: a small MILP from the current holdings; record what it delivers.
    def solve_round(self, start: int) -> list[Hop] | None:
        commodities = self.commodities_now()
        teg = TimeExpandedGraph(self.topology, self.grid, commodities, self.round_epochs, require_demands=False)
        progress = {}
        for com in commodities:
            for n in self.topology.gpus:
                if n not in com.holders and com.needs:
                    dist = min(self.distance[n][d] for d, _ in com.needs)
                    progress[(com.id, n)] = 1.0 / (1.0 + dist)
        model = copy_model(teg, self.options.extra.get("buffer_limit"), progress)
        budget = max(0.5, min(ROUND_TIME_LIMIT_S, (self.deadline - time.perf_counter()) / 2))
        result = HighsRun(model, self.options, budget, ROUND_GAP, self.started).solve()
        if not result.has_solution:
            return None
        used = [s for s, v in model.send.items() if (v.value or 0) > USED]
        reached = {com.id: [n for n in self.topology.gpus
                            if (com.id, n, teg.horizon) in model.hold and (model.hold[com.id, n, teg.horizon].value
                                                                           or 0) > USED]
                   for com in commodities}
        kept = prune_copy_sends(teg, used, reached)
        if not kept:
            return None
        for c, i, j, k in kept:
            land = start + k + self.grid.links[(i, j)].offset
            if not self.topology.is_switch(j):
                self.held[c].setdefault(j, land)
                self.held[c][j] = min(self.held[c][j], land)
        self.options.report(Progress(time.perf_counter() - self.started,
                                     f"TE-CCL A*: round from epoch {start} placed {len(kept)} sends"))
        return [(chunk, i, j, start + k) for chunk, i, j, k in chunk_hops(teg, kept)]

    def fallback(self, hops: list[Hop], rounds: int) -> EpochPlan:
        """Out of time or a round found nothing: the epoch greedy finishes the job."""
        solver = EpochSolver(self.topology, self.collective, self.options, self.deadline, self.started,
                             self.mirrored_from)
        plan = solver.greedy_plan()
        plan.status = "time_limit" if self.out_of_time() else "heuristic"
        plan.notes.append(f"A* stopped after {rounds} rounds; epoch greedy schedule returned")
        return plan


def solve_astar(topology: Topology, collective: Collective, options: SynthOptions, deadline: float,
                started: float, mirrored_from: Topology | None = None) -> Schedule:
    """teccl-astar for a non-reducing collective, checked by the simulator (greedy if it fails)."""
    rounds = AStarRounds(topology, collective, options, deadline, started, mirrored_from)
    plan = rounds.solve()
    schedule = plan_schedule(topology, collective, plan, rounds.grid)
    if not simulate(schedule).verified:
        plan = rounds.fallback([], 0)
        plan.notes.append("A* schedule failed verification")
        schedule = plan_schedule(topology, collective, plan, rounds.grid)
    schedule.algorithm = "teccl-astar"
    return schedule
