"""TE-CCL with in-switch reduction end to end: horizon, solve, extract partial sums and totals, judge.

The horizon starts at an arithmetic estimate (the longest contributor-to-total-to-destination path in
epochs, plus the chunks a GPU must send over its links), grows while HiGHS proves it infeasible, and
once a schedule uses E epochs, E - 1 is tried: its proven infeasibility makes E optimal in the epoch
model. Partial sums become transfers with op ``combine`` into a reducing switch and ``reduce`` into a
GPU (or through a switch that only forwards); the total travels with ``copy``. The simulator replays
the untimed schedule ASAP and the judge checks it; a schedule it rejects is not returned.
"""

from __future__ import annotations

import math
import time
from collections import defaultdict

from ccviz.errors import CcvizError
from ccviz.judge.simulate import simulate
from ccviz.model.collectives import Collective
from ccviz.model.routing import earliest_arrivals
from ccviz.model.schedule import COMBINE, Schedule, Transfer
from ccviz.model.topology import Topology
from ccviz.model.units import us_text
from ccviz.synth.registry import Progress, SynthOptions
from ccviz.synth.teccl.epochs import EpochGrid
from ccviz.synth.teccl.extract import USED, Hop, to_transfers
from ccviz.synth.teccl.in_switch import InSwitchGraph, NodeEpoch, Send, in_switch_model
from ccviz.synth.teccl.solve import HighsRun, Interrupted, stop_interrupts

SEARCH_SHARE = 0.5  # of the time left, for one horizon
NO_GREEDY_SHARE = 0.6  # of the time limit, for the model when no greedy schedule exists (the rest: the reversal)
MAX_HORIZON_STEPS = 12  # infeasible horizons tried upward before giving up
MIN_SOLVE_S = 0.5
JUDGE_MARGIN = 1.5  # the model's search ends this many times the greedy schedule's judging before the limit

Plan = tuple[int, list[tuple[Hop, str]], str, float | None]  # (epochs used, hops with their ops, termination, gap)


class InSwitchSolver:
    """One reduction on a fabric with reducing switches, solved over a searched horizon before ``deadline``."""

    def __init__(self, topology: Topology, collective: Collective, options: SynthOptions, deadline: float,
                 started: float) -> None:
        self.topology = topology
        self.collective = collective
        self.options = options
        self.deadline = deadline
        self.started = started
        self.grid = EpochGrid.build(topology, collective.chunk_bytes, options.epoch)
        self.gap = options.gap if options.gap is not None else 1e-4
        self.notes: list[str] = list(self.grid.notes)

    def start_horizon(self) -> int:
        """The longest contributor -> total site -> destination path, plus the sends of the busiest GPU."""
        offsets = {key: link.offset for key, link in self.grid.links.items()}
        probe = InSwitchGraph(self.topology, self.grid, self.collective, 0)
        longest = 0
        for c in self.collective.chunks:
            if not c.reduce or not c.post:
                continue
            best = math.inf
            up = {g: earliest_arrivals(self.topology, {g: 0}, offsets) for g in c.pre}
            for site in probe.root_sites(c):
                gather = max(up[g].get(site, math.inf) for g in c.pre)
                spread = earliest_arrivals(self.topology, {site: 0}, offsets)
                best = min(best, gather + max(spread.get(d, math.inf) for d in c.post))
            longest = max(longest, best)
        per_epoch = defaultdict(float)
        for (i, _), link in self.grid.links.items():
            per_epoch[i] += link.window_slots / link.kappa
        sends = defaultdict(int)
        for c in self.collective.chunks:
            for g in c.pre:
                sends[g] += g not in c.post or len(c.post) > 1
        busiest = max((math.ceil(n / per_epoch[g]) for g, n in sends.items() if per_epoch[g]), default=0)
        return int(longest) + max(0, busiest - 1) if longest < math.inf else busiest + 1

    def solve(self) -> Schedule | None:
        """The best verified schedule found in the time, or None (with ``notes`` saying why).

        The greedy pipeline, where it applies, is the first schedule, judged at once; the MILP then looks
        for one epoch fewer until that is proven infeasible or time runs out, stopping early enough that
        a schedule it finds can be judged within the limit too (as long again as the greedy's took, and
        half that more)."""
        if self.options.epochs is not None:
            return self.solve_fixed_horizon(int(self.options.epochs))
        best: Plan | None = None
        first: Schedule | None = None  # the greedy's schedule, judged
        greedy = InSwitchGreedy(self.topology, self.grid, self.collective, deadline=self.deadline - 0.2)
        plan = greedy.run()
        if greedy.cut_short:  # no schedule and no time: the caller falls back to the reversal, saying so
            self.notes.append(f"the in-switch epoch greedy had placed {greedy.routed} chunks when the time limit "
                              "ran out")
            return None
        if plan is not None:
            best = (plan[3], self.plan_hops(plan), "greedy", None)
            self.notes.append(f"epoch greedy (NVLS pipeline): {plan[3]} epochs")
            horizon = plan[3] - 1
            judging = time.perf_counter()
            first = self.judged(best)
            self.deadline -= JUDGE_MARGIN * (time.perf_counter() - judging)
            if first is None:
                best = None
        else:
            self.deadline = self.started + NO_GREEDY_SHARE * (self.deadline - self.started)
            horizon = max(1, self.start_horizon())
        proven = limited = False
        tries = 0
        while horizon >= 1 and not self.out_of_time():
            found = self.solve_at(horizon)
            if found == "infeasible":
                if best is not None:
                    proven = True
                    break
                tries += 1
                if tries > MAX_HORIZON_STEPS:
                    self.notes.append(f"no schedule up to {horizon} epochs")
                    break
                horizon += max(1, horizon // 8)
                continue
            if found is None:
                limited = True
                break  # out of time without a schedule at this horizon
            hops, used, termination, gap = found
            if best is None or used < best[0]:
                best = (used, hops, termination, gap)
            horizon = min(horizon, used) - 1
        if best is not None and horizon < 1:
            proven = True
        if best is None:
            return None
        if best[2] != "greedy":
            schedule = self.judged(best)
            if schedule is not None:
                return self.finished(schedule, best, proven, limited)
            if first is None:
                return None
            best, proven = (first.epochs, [], "greedy", None), False  # the model's schedule failed: the greedy's
        return self.finished(first, best, proven, limited)

    def solve_fixed_horizon(self, horizon: int) -> Schedule | None:
        """``--epochs K``: the model at exactly K epochs (an error if it is infeasible)."""
        if horizon < 1:
            raise CcvizError(f"epochs: need at least 1 epoch, got {horizon}", "epochs")
        found = self.solve_at(horizon)
        if found == "infeasible":
            raise CcvizError(f"epochs: no in-switch schedule fits in {horizon} epochs of {us_text(self.grid.tau_s)}; "
                             "give more epochs or leave --epochs automatic", "epochs")
        if found is None:
            return None
        hops, used, termination, gap = found
        best = (used, hops, termination, gap)
        schedule = self.judged(best)
        return None if schedule is None else self.finished(schedule, best, False, termination != "optimal")

    def judged(self, best: Plan) -> Schedule | None:
        """The schedule of a plan, if the judge accepts it (else None, with a note)."""
        used, hops, _, _ = best
        schedule = Schedule(self.topology, self.collective, self.transfers(hops), "teccl", epoch_s=self.grid.tau_s,
                            epochs=used, estimated_finish_s=used * self.grid.tau_s)
        timeline = simulate(schedule)
        if not timeline.verified:
            self.notes.append(f"the in-switch schedule failed the judge: {timeline.violations[0].message}")
            return None
        return schedule

    def finished(self, schedule: Schedule, best: Plan, proven: bool, limited: bool) -> Schedule:
        """The judged schedule with the search's outcome: status, gap, the optimality certificate, the notes."""
        used, _, termination, gap = best
        schedule.status = "optimal" if proven else (
            "time_limit" if limited or termination in ("time_limit", "interrupted") else "feasible")
        self.notes.append(f"in-switch reduction model: {used} epochs of {us_text(self.grid.tau_s)}"
                          + ("; one epoch fewer is proven infeasible" if proven else ""))
        schedule.mip_gap = 0.0 if proven else gap
        schedule.bound_epochs = used if proven else None
        schedule.notes = list(self.notes)
        return schedule

    def out_of_time(self) -> bool:
        return self.options.stopped() or time.perf_counter() >= self.deadline - 0.2

    def solve_at(self, horizon: int) -> tuple[list[tuple[Hop, str]], int, str, float | None] | str | None:
        """(hops with their ops, epochs used, termination, gap), "infeasible", or None (no time, no solution)."""
        t0 = time.perf_counter()
        graph = InSwitchGraph(self.topology, self.grid, self.collective, horizon, deadline=self.deadline - 0.2)
        if graph.cut_short:
            self.notes.append(f"horizon {horizon}: the time limit ran out while its graph was being built")
            return None
        if not graph.roots or graph.stranded():
            return "infeasible"
        self.options.report(Progress(t0 - self.started, f"TE-CCL in-switch: building the model for {horizon} "
                                     f"epochs ({graph.size()})"))
        try:
            with stop_interrupts(self.options, deadline=self.deadline):
                model = in_switch_model(graph)
            budget = (self.deadline - time.perf_counter()) * SEARCH_SHARE
            if budget < MIN_SOLVE_S:
                return None
            run = HighsRun(model, self.options, budget, self.gap, self.started, epoch_s=self.grid.tau_s,
                           what=f"the in-switch model for {horizon} epochs")
            result = run.solve()
        except Interrupted:
            return None
        self.notes.append(f"horizon {horizon}: {graph.size()}, {result.termination} in {result.elapsed_s:.2f} s")
        if result.termination == "infeasible":
            return "infeasible"
        if not result.has_solution:
            return None
        hops = self.extract(model, graph)
        return hops, self.epochs_used(model, graph), result.termination, result.gap

    def extract(self, model, graph: InSwitchGraph) -> list[tuple[Hop, str]]:
        """Partial sums (``combine`` into an adding switch, else ``reduce``) and the pruned total (``copy``)."""
        topo = self.topology
        hops: list[tuple[Hop, str]] = []
        for s, v in model.up.items():
            if (v.value or 0) > USED:
                adds = topo.is_switch(s[2]) and topo.nodes[s[2]].reduce
                hops.append((s, COMBINE if adds else "reduce"))
        roots = [r for r, v in model.root.items() if (v.value or 0) > USED]
        down = [s for s, v in model.down.items() if (v.value or 0) > USED]
        hops.extend((s, "copy") for s in prune_total_sends(graph, down, roots))
        return hops

    def epochs_used(self, model, graph: InSwitchGraph) -> int:
        """The epoch the last demanded GPU first holds the total."""
        first: dict[tuple[int, int], int] = {}
        demands = set(graph.demands)
        for (c, n, k), v in model.hold.items():
            if (v.value or 0) > USED and (c, n) in demands:
                first[(c, n)] = min(first.get((c, n), k), k)
        return max(first.values(), default=graph.horizon)

    def plan_hops(self, plan: tuple[list[Send], list[Send], list[NodeEpoch], int]) -> list[tuple[Hop, str]]:
        topo = self.topology
        up, down, _, _ = plan
        return [(s, COMBINE if topo.is_switch(s[2]) and topo.nodes[s[2]].reduce else "reduce") for s in up] + [
            (s, "copy") for s in down]

    def transfers(self, hops: list[tuple[Hop, str]]) -> list[Transfer]:
        by_op: dict[str, list[Hop]] = defaultdict(list)
        for hop, op in hops:
            by_op[op].append(hop)
        out = [t for op, group in by_op.items() for t in to_transfers(self.topology, self.grid, group, op)]
        out.sort(key=lambda t: (t.step, t.src, t.dst, t.chunk))
        return out


class InSwitchGreedy:
    """The NVLS pipeline in epochs, chunk after chunk: an upper bound on the horizon and the MIP start.

    Each chunk goes through one reducing switch cabled to all its contributors (and, for a fused
    AllReduce, to every GPU that needs the total): every contributor sends the chunk so that all land
    together in the earliest epoch L the links allow (``combine``), and the switch sends the sum on at L
    (to the owner, or multicast). Where no such switch exists it gives up (returns None); past
    ``deadline`` it stops too (returns None, ``cut_short`` set): on NVL72 it was the one part of TE-CCL's
    first schedule that no time limit could interrupt.
    """

    def __init__(self, topology: Topology, grid: EpochGrid, collective: Collective,
                 deadline: float | None = None) -> None:
        self.topology = topology
        self.grid = grid
        self.collective = collective
        self.deadline = deadline
        self.cut_short = False
        self.routed = 0  # chunks placed before it ended
        self.window = {key: (link.kappa, link.window_slots) for key, link in grid.links.items()}
        self.used: dict[tuple[int, int], dict[int, int]] = defaultdict(lambda: defaultdict(int))

    def fits(self, link: tuple[int, int], k: int) -> bool:
        """One more chunk on ``link`` from epoch k keeps every window of kappa epochs within capacity."""
        if k < 0 or link not in self.window:
            return False
        kappa, slots = self.window[link]
        per = self.used.get(link)
        if not per:
            return True
        if kappa == 1:
            return per.get(k, 0) < slots
        counts = [per.get(e, 0) for e in range(k - kappa + 1, k + kappa)]  # the windows holding epoch k
        window = sum(counts[:kappa])
        if window >= slots:
            return False
        for i in range(kappa, len(counts)):
            window += counts[i] - counts[i - kappa]
            if window >= slots:
                return False
        return True

    def earliest_landing(self, switch: int, senders: list[int], dests: list[int]) -> int:
        """The first epoch from which every sender's chunk lands in ``switch`` together and the switch sends on
        to every destination: each link checked in turn, the epoch moved on past the one that is full (no
        epoch skipped fits, since that link did not), until all of them fit at once."""
        links = self.grid.links
        checks = [((g, switch), links[(g, switch)].offset) for g in senders] + [((switch, d), 0) for d in dests]
        land = max(links[(g, switch)].offset for g in senders)
        i = passed = 0
        while land < 10_000 and passed < len(checks):
            link, offset = checks[i]
            if self.fits(link, land - offset):
                passed += 1
                i = (i + 1) % len(checks)
            else:
                land += 1
                passed = 0
        return land

    def run(self) -> tuple[list[Send], list[Send], list[NodeEpoch], int] | None:
        """(partial-sum sends, total sends, total sites, epochs) or None."""
        topo, links = self.topology, self.grid.links
        up: list[Send] = []
        down: list[Send] = []
        roots: list[NodeEpoch] = []
        makespan = 0
        for c in self.collective.chunks:
            if not c.reduce or not c.post:
                continue
            if self.deadline is not None and time.perf_counter() >= self.deadline:
                self.cut_short = True
                return None
            gather = len(c.post) == 1 and c.post <= c.pre
            senders = sorted(c.pre - c.post) if gather else sorted(c.pre)
            best: tuple[int, int] | None = None
            for s in topo.reducing_switches:
                if not gather and not topo.nodes[s].copy:
                    continue
                if any((g, s) not in links for g in senders) or any((s, d) not in links for d in c.post):
                    continue
                land = self.earliest_landing(s, senders, sorted(c.post))
                if best is None or land < best[0]:
                    best = (land, s)
            if best is None:
                return None
            land, s = best
            for g in senders:
                k = land - links[(g, s)].offset
                up.append((c.id, g, s, k))
                self.used[(g, s)][k] += 1
            for d in sorted(c.post):
                self.used[(s, d)][land] += 1
                makespan = max(makespan, land + links[(s, d)].offset)
                (up if gather else down).append((c.id, s, d, land))
            owner = next(iter(c.post))
            roots.append((c.id, owner, land + links[(s, owner)].offset) if gather else (c.id, s, land))
            self.routed += 1
        return up, down, roots, makespan


def prune_total_sends(graph: InSwitchGraph, down: list[Send], roots: list[NodeEpoch]) -> list[Send]:
    """The total's sends that serve a demand: each GPU fed by its earliest arrival, a switch by the arrival
    (or the sum) of the epoch it forwards in; the rest cost nothing in the objective and are dropped."""
    topo = graph.topology
    formed = {(c, n): k for c, n, k in roots}
    landing: dict[tuple[int, int], list[tuple[int, Send]]] = defaultdict(list)
    for s in down:
        landing[(s[0], s[2])].append((graph.landing(s), s))
    for arrivals in landing.values():
        arrivals.sort()
    kept: set[Send] = set()
    fed: set[tuple[int, int]] = set()

    def feed(c: int, node: int, by: int) -> None:
        if (c, node) in formed and (formed[(c, node)] == by or not topo.is_switch(node) and formed[(c, node)] < by):
            return  # the total forms here
        if topo.is_switch(node):
            options = [s for land, s in landing[(c, node)] if land == by]
        else:
            if (c, node) in fed:
                return
            fed.add((c, node))
            options = [s for land, s in landing[(c, node)] if land <= by]
        if not options:
            return
        kept.add(options[0])
        feed(c, options[0][1], options[0][3])

    for c, d in graph.demands:
        feed(c, d, graph.horizon)
    return sorted(kept, key=lambda s: (s[3], s[0], s[1], s[2]))


def solve_in_switch(topology: Topology, collective: Collective, options: SynthOptions, deadline: float,
                    started: float) -> tuple[Schedule | None, list[str]]:
    """The in-switch schedule (judged), or None and the notes saying why."""
    solver = InSwitchSolver(topology, collective, options, deadline, started)
    return solver.solve(), solver.notes
