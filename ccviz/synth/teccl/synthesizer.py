"""TE-CCL end to end: pick the model, choose the horizon, solve, certify, build the schedule.

Horizon search (the paper's Algorithm 1, made cheap): the arithmetic lower
bound L (``bounds``) and the epoch greedy's makespan U (``greedy``) bracket
the optimum. The model is solved at K = min(U, L + slack) with the
early-arrival objective, so a solution using fewer epochs than K is found
without searching K; HiGHS is stopped as soon as an incumbent meets L (it is
then optimal). A proven-infeasible K raises L; when time remains after a
solution using E > L epochs, K = E - 1 is tried, and its infeasibility proves
E optimal. Whatever happens, the best schedule so far (at worst the greedy
one) is returned with an honest status.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace

import numpy as np
import pyomo.environ as pyo

from ccviz.errors import CcvizError
from ccviz.judge.simulate import simulate
from ccviz.model.collectives import Chunk, Collective
from ccviz.model.routing import earliest_arrivals
from ccviz.model.schedule import Schedule, Transfer
from ccviz.model.topology import Topology
from ccviz.model.units import us_text
from ccviz.synth.catalog import TecclOptions
from ccviz.synth.registry import Progress, SynthOptions
from ccviz.synth.teccl.bounds import EpochLowerBound, bound_deadline
from ccviz.synth.teccl.epochs import EpochGrid
from ccviz.synth.teccl.extract import USED, Hop, chunk_hops, prune_copy_sends, split_flows, to_transfers
from ccviz.synth.teccl.greedy import EpochGreedy
from ccviz.synth.teccl.model import copy_model, flow_model
from ccviz.synth.teccl.solve import HighsRun, Interrupted, SolveResult, stop_interrupts
from ccviz.synth.teccl.time_expanded import (
    TimeExpandedGraph,
    candidate_send_bound,
    chunk_commodities,
    source_commodities,
)

DEFAULT_TIME_LIMIT_S = 120.0
DEFAULT_GAP = 1e-4  # the paper's "optimal"
WARM_SHARE = 0.6  # of the remaining time, for the solve warm-started with the greedy schedule
SEARCH_SHARE = 0.5  # of the remaining time, for a horizon below the best schedule so far
INTEGRAL_FLOW_MAX_SENDS = 5000  # below this the flow model uses whole chunks (exact, no rounding)
LP_MAX_EPOCHS = 64
UNPRUNED_FACTOR = 20  # the time-expanded graph prunes unreachable sends; refuse only far beyond the limit
BYTES_PER_VARIABLE = 500  # Pyomo variable + time-expanded graph entry, measured order of magnitude
HANDOVER_PER_BUILD = 6.0  # measured: APPSI's set_instance takes ~5-6x the Pyomo build of the copy model
MIN_SOLVE_S = 1.0
GREEDY_ORDERS = ("given", "reversed", "nearest first", "farthest first")
GREEDY_SHARE = 0.35  # of the time left, for trying further greedy orders
MTEG_SHARE = 0.2  # of the time left, for MTEG's trees as a second upper bound
GRAPH_S_PER_SEND = 3e-6  # the time-expanded graph's own build per candidate send (NVL72 AllToAll, 8 epochs: ~5 s)
SETUP_S_PER_VARIABLE = 2e-4  # measured build + hand-over time per variable on a loaded 2-core machine  # a longer LP horizon is solved on epochs lengthened by a whole factor


def copy_helps(collective: Collective) -> bool:
    """Copies pay only when some chunk has several destinations (else the LP is exact)."""
    return any(len(c.post - c.pre) > 1 for c in collective.chunks)


@dataclass
class EpochPlan:
    """A schedule in epochs: hops, epochs used, and how it was obtained."""

    hops: list[Hop]
    epochs: int
    status: str
    gap: float | None
    notes: list[str] = field(default_factory=list)


class EpochProblem:
    """One non-reducing collective on one topology's epoch grid, to be solved before ``deadline``.

    ``mirrored_from``: the real fabric when ``topology`` is its reversal (a reduction's mirror): each
    reversed link keeps the epoch timing of the real link it stands for.
    """

    def __init__(self, topology: Topology, collective: Collective, options: SynthOptions, deadline: float,
                 started: float, mirrored_from: Topology | None = None) -> None:
        self.topology = topology
        self.collective = collective
        self.options = options
        self.deadline = deadline
        self.started = started
        self.grid = EpochGrid.build(topology, collective.chunk_bytes, options.epoch, mirrored_from)


class EpochSolver(EpochProblem):
    """One copy (MILP) or flow (LP) problem on one topology, solved over a searched horizon."""

    def __init__(self, topology: Topology, collective: Collective, options: SynthOptions, deadline: float,
                 started: float, mirrored_from: Topology | None = None) -> None:
        super().__init__(topology, collective, options, deadline, started, mirrored_from)
        self.use_copy = copy_helps(collective)
        self.commodities = chunk_commodities(collective) if self.use_copy else source_commodities(collective)
        self.posts = {c.id: c.post for c in collective.chunks}
        self.gap = options.gap if options.gap is not None else DEFAULT_GAP
        self.buffer_limit = options.settings(TecclOptions).buffer_limit
        self.notes = list(self.grid.notes)
        self.mirrored = mirrored_from is not None
        self.proven_lower: int | None = None  # epochs no schedule can beat in this grid, once solve() ran
        self._greedy: dict[str, tuple[list[Hop], int]] = {}  # order -> the greedy's sends, run once each

    def solve(self) -> EpochPlan:
        bound = EpochLowerBound(self.topology, self.grid, self.commodities, fractional=not self.use_copy)
        lower = bound.value(deadline=bound_deadline(self.started, self.deadline))
        if bound.cuts_left:
            self.notes.append(f"the epoch lower bound left {bound.cuts_left} of its cuts uncounted at a quarter of the "
                              "time limit: a weaker bound, still a bound")
        self.proven_lower = lower
        greedy = self.best_greedy(lower)
        tree = self.mteg_plan() if greedy.epochs > lower else None
        if tree is not None and tree.epochs < greedy.epochs:
            greedy = tree
        self.notes.append(f"{'MILP (copy)' if self.use_copy else 'LP (flow)'}; epoch {us_text(self.grid.tau_s)}; "
                          f"lower bound {lower} epochs, {greedy.notes[0]} {greedy.epochs} epochs")
        self.say(f"the epoch greedy schedule uses {greedy.epochs} epochs", lower)
        if tree is greedy:
            self.offer(greedy)
        if self.options.epochs is not None:
            return self.solve_fixed_horizon(int(self.options.epochs), lower, greedy)
        if greedy.epochs <= lower and self.buffer_limit is None:
            greedy.status, greedy.gap = "optimal", 0.0
            return greedy
        if not self.use_copy and greedy.epochs > LP_MAX_EPOCHS:
            self.notes.append(f"LP over {greedy.epochs} epochs is too large; see the coarse-epoch LP")
            return greedy
        return self.search_horizon(lower, greedy)

    def greedy_plan(self, order: str = "given", deadline: float | None = None) -> EpochPlan:
        """An upper bound that fits the epoch model exactly (and the fallback schedule).

        The epoch greedy with chunks taking turns in ``order`` (one of GREEDY_ORDERS); a fresh plan each call
        (callers change its status), the greedy itself runs once per order. ``deadline``: it gives up (a
        ``CcvizError``) past this ``perf_counter`` time."""
        if order not in self._greedy:
            demanded = self.chunk_order(order)
            sends, makespan = EpochGreedy(self.topology, self.grid, [c.pre for c in demanded],
                                          [c.post for c in demanded], deadline=deadline).run()
            self._greedy[order] = ([(demanded[c].id, i, j, k) for c, i, j, k in sends], makespan)
        hops, makespan = self._greedy[order]
        return EpochPlan(list(hops), makespan, "feasible", None, [f"epoch greedy ({order} order)"])

    def chunk_order(self, order: str) -> list[Chunk]:
        demanded = [c for c in self.collective.chunks if c.post - c.pre]
        if order == "given":
            return demanded
        if order == "reversed":
            return demanded[::-1]
        offsets = {key: link.offset for key, link in self.grid.links.items()}
        arrivals: dict[frozenset[int], dict[int, float]] = {}  # one search per set of holders, not per chunk
        for c in demanded:  # (NVL72 AllToAll: 72 sources, 5,112 chunks; 10 of the greedy's 18 s searched again)
            if frozenset(c.pre) not in arrivals:
                arrivals[frozenset(c.pre)] = earliest_arrivals(self.topology, dict.fromkeys(c.pre, 0), offsets)
        reach = {c.id: max(arrivals[frozenset(c.pre)].get(d, math.inf) for d in c.post) for c in demanded}
        sign = 1 if order == "nearest first" else -1
        return sorted(demanded, key=lambda c: sign * reach[c.id])

    def best_greedy(self, lower: int) -> EpochPlan:
        """The best of the greedy's chunk orders, tried until one meets the bound or the greedy share is spent.

        The order in which chunks take turns decides who waits at a busy link; which order wins depends on
        the fabric (on DGX2 at 1 MB chunks that can leave the chassis at once must go first, at 1 KB the
        reverse), so a few cheap orders are tried instead of one.
        """
        until = time.perf_counter() + GREEDY_SHARE * max(0.0, self.deadline - time.perf_counter())
        best: EpochPlan | None = None
        for order in GREEDY_ORDERS:
            if best is not None and (best.epochs <= lower or self.buffer_limit is not None
                                     or time.perf_counter() >= until or self.options.stopped()):
                break
            if best is None:
                plan = self.greedy_plan(order, deadline=self.deadline)  # no schedule at all past the time limit
            else:
                try:
                    plan = self.greedy_plan(order, deadline=until)
                except CcvizError:
                    break  # a further order that would not finish in the greedy's share: keep the best so far
            if best is None or plan.epochs < best.epochs:
                best = plan
                self.offer(plan)
        return best

    def offer(self, plan: EpochPlan) -> None:
        """Offer an upper-bound plan as a schedule (``SynthOptions.offer``): the answer if the solve is ended
        from outside (the app's worker after Stop or the wall-clock limit) before it returns."""
        if self.options.best is None or self.mirrored:
            return
        offered = plan_schedule(self.topology, self.collective, plan, self.grid)
        offered.notes = [*self.notes, *offered.notes, f"stopped early: an upper-bound schedule ({plan.epochs} "
                         "epochs) found before the solver was ended"]
        self.options.offer(offered)

    def mteg_plan(self) -> EpochPlan | None:
        """MTEG's Steiner-tree schedule on this grid, when it fits the epoch model: a second upper bound.

        MTEG rounds links to slots with the same rule (``Topology.delay_epochs``), so with slot = epoch its
        schedule is usually a valid epoch plan; it is checked before use. On alpha-dominated instances
        (small buffers) its trees often meet the lower bound where the chunk-by-chunk greedy does not.
        """
        if not self.use_copy or self.mirrored or self.buffer_limit is not None:
            return None
        from ccviz.synth.budget import Budget
        from ccviz.synth.mteg import mteg_schedule  # mteg does not import teccl; kept local to stay so

        share = max(0.1, MTEG_SHARE * (self.deadline - time.perf_counter()))
        budget = Budget(replace(self.options, time_limit=share, progress=None))  # stop event kept
        try:
            schedule = mteg_schedule(self.topology, self.collective, self.grid.tau_s, budget=budget)
        except CcvizError:
            return None
        hops = [(t.chunk, t.src, t.dst, int(t.step)) for t in schedule.transfers]
        if not self.fits_epoch_model(hops):
            return None
        return EpochPlan(hops, self.epochs_used(hops), "feasible", None, ["MTEG trees"])

    def fits_epoch_model(self, hops: list[Hop]) -> bool:
        """Every send has its chunk in time, switches forward what arrives, windows hold, demands are met."""
        links = self.grid.links
        if any((i, j) not in links for _, i, j, _ in hops):
            return False
        landing: dict[tuple[int, int], list[int]] = {}
        for c, i, j, k in hops:
            landing.setdefault((c, j), []).append(k + links[(i, j)].offset)
        pre = {c.id: c.pre for c in self.collective.chunks}
        forwarded: dict[tuple[int, int, int], int] = {}
        for c, i, _, k in hops:
            if self.topology.is_switch(i):
                if k not in landing.get((c, i), ()):
                    return False
                forwarded[(c, i, k)] = forwarded.get((c, i, k), 0) + 1
            elif i not in pre[c] and min(landing.get((c, i), [k + 1])) > k:
                return False
        for (c, n, k), count in forwarded.items():
            if not self.topology.nodes[n].copy and count > landing[(c, n)].count(k):
                return False
        met = all((c.id, d) in landing for c in self.collective.chunks for d in c.post - c.pre)
        return met and not self.overloaded_windows(hops)

    def solve_fixed_horizon(self, horizon: int, lower: int, greedy: EpochPlan) -> EpochPlan:
        """The user fixed K: solve at exactly that horizon."""
        most = self.options.settings(TecclOptions).max_variables * UNPRUNED_FACTOR
        unpruned = horizon * len(self.commodities) * (len(self.topology.links) + len(self.topology.nodes))
        if unpruned > most:
            raise CcvizError(f"epochs: {horizon} epochs would lay out up to ~{unpruned:.3g} model variables "
                             f"(~{unpruned * BYTES_PER_VARIABLE / 1e9:.3g} GB); the limit is {most:.3g}: give "
                             f"fewer epochs (the greedy needs {greedy.epochs}) or leave --epochs automatic", "epochs")
        if horizon < lower:
            raise CcvizError(f"epochs: {horizon} epochs cannot hold this collective (lower bound {lower} epochs of "
                             f"{us_text(self.grid.tau_s)}); give --epochs >= {lower} or leave it automatic",
                             "epochs")
        plan, result = self.solve_at(horizon, lower, greedy)
        if plan is not None and plan.epochs <= lower:
            plan.status, plan.gap = "optimal", 0.0
        if plan is None:
            if result.termination == "infeasible":
                raise CcvizError(f"epochs: no schedule fits in {horizon} epochs; give more epochs or leave "
                                 "--epochs automatic", "epochs")
            greedy.status = "time_limit"
            greedy.notes.append(f"no solution at {horizon} epochs within the time limit: greedy schedule returned")
            return greedy
        return plan

    def search_horizon(self, lower: int, greedy: EpochPlan) -> EpochPlan:
        """Solve at the greedy horizon (warm-started), then one epoch below the best until proven or out of time.

        With a buffer limit the greedy schedule (which ignores it) is no answer: the horizon
        grows from the greedy's until the MILP finds a schedule within the limit.
        """
        best: EpochPlan | None = greedy if self.buffer_limit is None else None
        horizon = greedy.epochs
        limited = False
        while (best is None or lower < best.epochs) and not self.out_of_time():
            share = SEARCH_SHARE if best is not None and horizon < best.epochs else WARM_SHARE
            plan, result = self.solve_at(horizon, lower, greedy, share)
            limited = limited or (result.termination in ("time_limit", "interrupted") and not result.finished_early)
            if plan is not None and (best is None or plan.epochs < best.epochs):
                best = plan
            if plan is None and result.termination != "infeasible":
                break  # time limit or stop without a solution at this horizon
            if plan is None:
                lower = horizon + 1  # proven: nothing fits in this horizon
                self.proven_lower = lower
            if best is None:
                if horizon >= 2 * greedy.epochs + 2:
                    break
                horizon += 1
                continue
            if best.epochs - 1 >= horizon:
                break  # rounded LP paths did not fit the horizon they were solved for
            horizon = best.epochs - 1  # is one epoch less possible?
        if best is None:
            raise CcvizError(f"buffer_limit: no schedule keeping at most {self.buffer_limit} received chunks per GPU "
                             "was found; raise the limit or the time limit", "buffer_limit")
        if best.epochs <= lower:
            best.status, best.gap = "optimal", 0.0
        else:
            best.status = "time_limit" if limited or self.out_of_time() else "feasible"
        self.notes.append(f"proven lower bound {lower} epochs")
        return best

    def say(self, message: str, lower: int) -> None:
        """A progress line in words with the certified bound (the figures the result will end with)."""
        self.options.report(Progress(time.perf_counter() - self.started,
                                     f"TE-CCL: {message}; proven at least {lower} epochs",
                                     bound_s=lower * self.grid.tau_s))

    def out_of_time(self) -> bool:
        return self.options.stopped() or time.perf_counter() >= self.deadline - 0.2

    def solve_at(self, horizon: int, lower: int, greedy: EpochPlan, share: float = 1.0
                 ) -> tuple[EpochPlan | None, SolveResult]:
        """Build, solve and extract the model at one horizon."""
        t0 = time.perf_counter()
        bound = candidate_send_bound(self.topology, self.grid, self.commodities, horizon)
        if bound * GRAPH_S_PER_SEND > (self.deadline - time.perf_counter()) * SEARCH_SHARE:  # as the model's check
            self.notes.append(f"horizon {horizon}: up to {bound} candidate sends; building even the time-expanded "
                              f"graph (~{bound * GRAPH_S_PER_SEND:.0f} s) does not fit the time left; try "
                              "teccl-astar, coarser epochs or more time")
            return None, SolveResult("too_large", False, None, None, None, time.perf_counter() - t0)
        teg = TimeExpandedGraph(self.topology, self.grid, self.commodities, horizon)
        if teg.unreachable_demands():
            return None, SolveResult("infeasible", False, None, None, None, time.perf_counter() - t0)
        variables = len(teg.sends) + len(teg.holds)
        setup_s = variables * SETUP_S_PER_VARIABLE
        if variables > self.options.settings(TecclOptions).max_variables or \
                setup_s > (self.deadline - time.perf_counter()) * SEARCH_SHARE:
            self.notes.append(f"horizon {horizon}: {teg.size()} is too large to build and solve in the time left "
                              f"(~{setup_s:.0f} s just to build); try teccl-astar, coarser epochs or more time")
            return None, SolveResult("too_large", False, None, None, None, time.perf_counter() - t0)
        integral = len(teg.sends) <= INTEGRAL_FLOW_MAX_SENDS
        what = f"the {'MILP' if self.use_copy else 'LP'} for {horizon} epochs"
        self.say(f"building {what} ({teg.size()})", lower)
        try:
            with stop_interrupts(self.options, deadline=self.deadline):
                model = copy_model(teg, self.buffer_limit) if self.use_copy else flow_model(teg, integral)
            build_s = time.perf_counter() - t0
            watch, describe, finish_when = self.incumbent_watch(model, teg, lower)
            warm = (self.use_copy and self.buffer_limit is None and horizon >= greedy.epochs
                    and self.warm_start(model, teg, greedy))
            # Handing the model to HiGHS (APPSI's set_instance) takes several times the Pyomo build and is
            # not covered by HiGHS's own time limit: leave it out of the solve's budget, or skip the solve.
            handover_s = HANDOVER_PER_BUILD * build_s
            budget = (self.deadline - time.perf_counter()) * share - handover_s
            if budget < MIN_SOLVE_S:
                self.notes.append(f"horizon {horizon}: {teg.size()} built in {build_s:.1f} s; handing it to HiGHS "
                                  f"(~{handover_s:.0f} s) and solving does not fit the time left; give more time")
                return None, SolveResult("too_large", False, None, None, None, time.perf_counter() - t0)
            run = HighsRun(model, self.options, budget, self.gap, self.started, describe, finish_when, watch,
                           bound_s=lower * self.grid.tau_s, epoch_s=self.grid.tau_s, what=what)
            result = run.solve(warm_start=warm)
        except Interrupted:
            return None, SolveResult("interrupted", False, None, None, None, time.perf_counter() - t0)
        if not result.has_solution:
            return None, result
        self.say(f"extracting the schedule from {what}", lower)
        hops = self.extract(model, teg)
        used = self.epochs_used(hops)
        overloaded = not self.use_copy and self.overloaded_windows(hops)
        if result.termination == "optimal":
            status = "feasible"  # optimal for the early-arrival objective; the epoch count is certified separately
        else:
            status = "time_limit" if result.termination in ("time_limit", "interrupted") else "feasible"
        notes = [f"horizon {horizon}: {teg.size()}, built in {build_s:.2f} s, solved in {result.elapsed_s:.2f} s "
                 f"({result.termination}{', whole-chunk flows' if integral and not self.use_copy else ''})"]
        if overloaded:
            # Whole chunks on the LP's fractional paths overload some links: the epochs are not certain.
            notes.append(f"rounding LP flows to whole chunks overloads {overloaded} link windows")
            used = horizon + 1 if used <= horizon else used
        self.say(f"{what}: {result.termination.replace('_', ' ')}, the schedule uses {used} epochs", lower)
        return EpochPlan(hops, used, status, result.gap, notes), result

    def incumbent_watch(self, model, teg: TimeExpandedGraph, lower: int):
        """Columns the callbacks read: demand holdings per epoch (copy model only)."""
        if not self.use_copy:
            return [], None, None
        keys = [(c, n, k) for c, n, k in teg.holds if n in teg.commodities[c].destinations]
        demand_index: dict[tuple[int, int], int] = {}
        index = np.array([demand_index.setdefault((c, n), len(demand_index)) for c, n, _ in keys], dtype=np.int64)
        epochs = np.array([k for _, _, k in keys], dtype=float)
        at_lower = np.array([k == lower for _, _, k in keys])
        n_demands = len(demand_index)
        tau = self.grid.tau_s

        def describe(values: np.ndarray) -> float | None:
            first = np.full(n_demands, np.inf)
            np.minimum.at(first, index, np.where(values >= USED, epochs, np.inf))
            return float(first.max() * tau) if np.isfinite(first.max()) else None

        def finish_when(values: np.ndarray) -> bool:
            return bool(at_lower.sum() == n_demands and np.all(values[at_lower] >= USED))

        return [model.hold[key] for key in keys], describe, finish_when

    def warm_start(self, model, teg: TimeExpandedGraph, greedy: EpochPlan) -> bool:
        """Load the greedy schedule as a MIP start (it fits any horizon >= its makespan)."""
        commodity_of = {com.chunks[0]: com.id for com in teg.commodities}
        first_hold: dict[tuple[int, int], int] = {}
        for chunk, i, j, k in greedy.hops:
            key = (commodity_of[chunk], i, j, k)
            if key not in model.send:
                return False
        for v in model.send.values():
            v.set_value(0)
        for chunk, i, j, k in greedy.hops:
            c = commodity_of[chunk]
            model.send[(c, i, j, k)].set_value(1)
            land = k + self.grid.links[(i, j)].offset
            if not self.topology.is_switch(j):
                first_hold[(c, j)] = min(first_hold.get((c, j), land), land)
        for (c, n, k), var in model.hold.items():
            var.set_value(1 if k >= first_hold.get((c, n), teg.horizon + 1) else 0)
        return True

    def extract(self, model, teg: TimeExpandedGraph) -> list[Hop]:
        if self.use_copy:
            used = [s for s, v in model.send.items() if (v.value or 0) > USED]
            return chunk_hops(teg, prune_copy_sends(teg, used))
        flow = {s: float(pyo.value(v) or 0.0) for s, v in model.flow.items()}
        sent: dict[tuple[int, int, int], float] = {}
        for (c, i, _, k), v in flow.items():
            sent[(c, i, k)] = sent.get((c, i, k), 0.0) + v
        carry = {key: float(pyo.value(v) or 0.0) - sent.get(key, 0.0) for key, v in model.store.items()}
        read = {key: float(pyo.value(v) or 0.0) for key, v in model.read.items()}
        return split_flows(teg, flow, carry, read, self.posts)

    def overloaded_windows(self, hops: list[Hop]) -> int:
        """How many link windows carry more whole chunks than the link's capacity."""
        per_link: dict[tuple[int, int], dict[int, int]] = {}
        for _, i, j, k in hops:
            per_link.setdefault((i, j), {}).setdefault(k, 0)
            per_link[(i, j)][k] += 1
        count = 0
        for key, per_epoch in per_link.items():
            link = self.grid.links[key]
            for w in per_epoch:
                if sum(per_epoch.get(e, 0) for e in range(w, w + link.kappa)) > link.window_slots:
                    count += 1
        return count

    def epochs_used(self, hops: list[Hop]) -> int:
        lands = [k + self.grid.links[(i, j)].offset for _, i, j, k in hops if not self.topology.is_switch(j)]
        return max(lands, default=0)


def plan_schedule(topology: Topology, collective: Collective, plan: EpochPlan, grid: EpochGrid,
                  op: str = "copy") -> Schedule:
    """An untimed schedule from an epoch plan (the simulator replays it ASAP)."""
    transfers: list[Transfer] = to_transfers(topology, grid, plan.hops, op)
    return Schedule(topology, collective, transfers, "teccl", status=plan.status, mip_gap=plan.gap,
                    epoch_s=grid.tau_s, epochs=plan.epochs, estimated_finish_s=plan.epochs * grid.tau_s,
                    notes=list(plan.notes))


def solve_copy_or_flow(topology: Topology, collective: Collective, options: SynthOptions, deadline: float,
                       started: float, mirrored_from: Topology | None = None) -> Schedule:
    """Solve a non-reducing collective; keep the schedule the simulator finds fastest among the verified ones."""
    solver = EpochSolver(topology, collective, options, deadline, started, mirrored_from)
    plan = solver.solve()
    candidates = [(plan, solver)]
    if (plan.status != "optimal" and not solver.use_copy and plan.epochs > LP_MAX_EPOCHS and options.epochs is None
            and not options.stopped()):
        # The fluid LP does not need fine epochs: lengthen them by a whole factor so the horizon fits.
        factor = math.ceil(plan.epochs / LP_MAX_EPOCHS)
        coarse = EpochSolver(topology, collective, replace(options, epoch=solver.grid.tau_s * factor), deadline,
                             started, mirrored_from)
        coarse_plan = coarse.solve()
        coarse.notes.append(f"LP on epochs lengthened x{factor} to {us_text(coarse.grid.tau_s)}")
        candidates.append((coarse_plan, coarse))
    best: tuple[float, Schedule] | None = None
    for candidate, owner in candidates:
        for attempt in (candidate, None):  # the greedy schedule only if the candidate fails the simulator
            attempt = attempt or owner.greedy_plan()
            if attempt is not candidate and attempt.hops == candidate.hops:
                continue  # the plan is the greedy one already checked
            options.report(Progress(time.perf_counter() - started, f"TE-CCL: simulating the {attempt.epochs}-epoch "
                                    "schedule to check it"))
            schedule = plan_schedule(topology, collective, attempt, owner.grid)
            schedule.notes = owner.notes + schedule.notes
            schedule.bound_epochs = owner.proven_lower
            timeline = simulate(schedule)
            if timeline.verified and (best is None or timeline.finish_time_s < best[0] - 1e-15):
                best = (timeline.finish_time_s, schedule)
            if timeline.verified and owner.use_copy:
                break  # an integral copy plan is exact; a rounded LP plan is compared with the greedy
    if best is None:
        raise CcvizError("algorithm: TE-CCL produced no schedule the simulator accepts; please report this "
                         "topology and collective", "algorithm")
    if options.stopped() and best[1].status != "optimal":
        best[1].notes.append(f"stopped early: the best verified schedule so far ({best[1].epochs} epochs) is returned")
    return best[1]
