"""teccl-astar: TE-CCL in rounds, for fabrics too large for one MILP.

Each round looks ``horizon`` epochs ahead from the state reached so far
(what every GPU holds, chunks still in flight, link capacity already taken by
sends of earlier rounds) and solves a small MILP over that look-ahead, but
commits only the sends that start in its first ``round_epochs`` epochs; a
committed send may land in a later round (it is carried over in flight, and
its kappa window keeps the link busy into the next round). Demands need not be
met inside a round: the objective rewards progress, the paper's shortest-
distance reward: holding chunk c at GPU n earns, for every destination d that
still misses c, the epochs by which n is closer to d than the nearest current
holder (a destination itself earns its whole distance), more when held early;
each send costs a little so that silly sends are not made.

Each round is warm-started with the epoch greedy (``greedy.py``) continued
from the round's state, and "committed prefix + greedy continuation" is a
complete schedule at every round: the best one is kept, so the result is never
worse than the greedy, and a time limit or the stop event returns it at once.
When a round's solution meets every remaining demand it is committed whole
and the rounds stop. The MILP of a round is written for HiGHS directly
(highspy): rounds are many and small, and Pyomo's setup would dominate.
"""

from __future__ import annotations

import time
from collections import defaultdict

import highspy
import numpy as np

from ccviz.bounds.solver_output import quiet_highs
from ccviz.judge.simulate import simulate
from ccviz.model.collectives import Collective
from ccviz.model.schedule import Schedule
from ccviz.model.topology import Topology
from ccviz.synth.catalog import TecclAstarOptions
from ccviz.synth.registry import Progress, SynthOptions
from ccviz.synth.teccl.bounds import EpochLowerBound, bound_deadline
from ccviz.synth.teccl.extract import USED, Hop, landings
from ccviz.synth.teccl.greedy import EpochGreedy
from ccviz.synth.teccl.solve import highs_threads
from ccviz.synth.teccl.synthesizer import EpochPlan, EpochProblem, EpochSolver, plan_schedule
from ccviz.synth.teccl.time_expanded import INF, epoch_distances

ROUND_MIN_EPOCHS = 2  # epochs committed per round, at least (and at least the slowest link's kappa)
LOOKAHEAD_EXTRA = 2  # look-ahead = round + largest offset + largest kappa + this
ROUND_GAP = 0.02  # a round need not be solved to proof
ROUND_TIME_CAP_S = 4.0  # a round is one step of a heuristic
EARLY_WEIGHT = 0.5  # share of the progress reward paid for holding early (per epoch held)
SEND_COST = 1e-3  # per send: no silly sends
GREEDY_SHARE = 0.25  # run the greedy continuation each round only while it costs less than this share of a round
HEURISTIC_EFFORT = 0.3  # HiGHS default 0.05: a round wants good incumbents fast, not a proof

Key = tuple[int, int, int, int]  # (chunk index, src, dst, relative epoch)


class AStarRounds(EpochProblem):
    """Round-by-round TE-CCL for a non-reducing collective."""

    def __init__(self, topology: Topology, collective: Collective, options: SynthOptions, deadline: float,
                 started: float, mirrored_from: Topology | None = None) -> None:
        super().__init__(topology, collective, options, deadline, started, mirrored_from)
        self.mirrored_from = mirrored_from
        links = self.grid.links.values()
        kappa = max(lk.kappa for lk in links)
        settings = options.settings(TecclAstarOptions)
        self.round_epochs = settings.astar_round or max(ROUND_MIN_EPOCHS, kappa)
        self.horizon = settings.astar_horizon or (self.round_epochs + max(lk.offset for lk in links) + kappa
                                                  + LOOKAHEAD_EXTRA)
        self.chunks = [c for c in collective.chunks if c.post - c.pre]
        self.posts = [frozenset(c.post) for c in self.chunks]
        self.held = [dict.fromkeys(c.pre, 0) for c in self.chunks]  # GPU -> epoch it holds the chunk from
        self.usage: dict[tuple[int, int], dict[int, int]] = defaultdict(dict)  # link -> epoch -> sends
        self.hops: list[Hop] = []
        self.gpus = list(topology.gpus)
        self.distance = {n: epoch_distances(topology, self.grid, {n: 0}) for n in topology.nodes}
        self.best: tuple[int, list[Hop], str] | None = None  # (epochs, hops, how)
        self.greedy_s = 0.0
        self.use_greedy = settings.astar_greedy  # False: the rounds alone (to measure them)
        self.rounds = 0
        self.planned: list[Key] = []  # the last round's sends beyond what it committed, shifted to the next round

    # ------------------------------------------------------------------ driver
    def solve(self) -> EpochPlan:
        lower = EpochLowerBound(self.topology, self.grid, EpochSolver(
            self.topology, self.collective, self.options, self.deadline, self.started,
            self.mirrored_from).commodities).value(deadline=bound_deadline(self.started, self.deadline))
        start = 0
        limited = False
        idle = 0
        while self.missing():
            greedy = self.continue_greedy(start)
            if self.best is not None and self.best[0] <= lower:
                break
            if self.out_of_time():
                limited = True
                break
            done = self.solve_round(start, greedy, lower)
            self.rounds += 1
            idle = idle + 1 if done is None else 0
            if idle * self.round_epochs > self.horizon:
                break  # rounds commit nothing: keep the best complete schedule
            start += self.round_epochs
        if not self.missing():
            epochs = max(t for held in self.held for t in held.values())
            self.offer(epochs, list(self.hops), "rounds")
        if self.best is None:  # rounds alone that did not finish: their prefix + the greedy, or the plain greedy
            if self.hops:
                self.continue_greedy(start, force=True)
            plain = EpochSolver(self.topology, self.collective, self.options, self.deadline, self.started,
                                self.mirrored_from).greedy_plan(deadline=self.last_resort())
            self.offer(plain.epochs, plain.hops, "epoch greedy")
        epochs, hops, how = self.best
        # A* is a heuristic: it never says "optimal", even when its epoch count meets the epoch model's bound
        status = "time_limit" if limited else "heuristic"
        notes = [f"A*: {self.rounds} rounds committing {self.round_epochs} epochs, looking {self.horizon} ahead; "
                 f"best = {how}; lower bound {lower} epochs"
                 + (" (met in TE-CCL's epoch model, whose epochs round times up)" if epochs <= lower else "")]
        return EpochPlan(hops, epochs, status, None, notes)

    def missing(self) -> bool:
        return any(post - set(held) for post, held in zip(self.posts, self.held, strict=True))

    def out_of_time(self) -> bool:
        return self.options.stopped() or time.perf_counter() >= self.deadline - 0.2

    def offer(self, epochs: int, hops: list[Hop], how: str) -> None:
        if self.best is None or epochs < self.best[0]:
            self.best = (epochs, hops, how)

    def report(self, message: str, lower: int | None = None) -> None:
        tau = self.grid.tau_s
        self.options.report(Progress(time.perf_counter() - self.started, f"TE-CCL A*: {message}",
                                     incumbent_s=self.best[0] * tau if self.best else None,
                                     bound_s=lower * tau if lower is not None else None))

    def continue_greedy(self, start: int, force: bool = False) -> list[tuple[int, int, int, int]]:
        """The greedy from the current state: a complete schedule (offered) and the round's MIP start."""
        budget = self.round_budget(start)
        if not force and (not self.use_greedy or self.best is not None and self.greedy_s > GREEDY_SHARE * budget):
            return []
        t0 = time.perf_counter()
        held = [{n: max(t, start) for n, t in h.items()} for h in self.held]
        greedy = EpochGreedy(self.topology, self.grid, [frozenset(c.pre) for c in self.chunks], self.posts,
                             deadline=self.last_resort() if self.best is None else None)
        sends, makespan = greedy.run_from(held, self.usage)
        self.greedy_s = time.perf_counter() - t0
        makespan = max(makespan, max(t for h in self.held for t in h.values()))
        how = "epoch greedy" if start == 0 else f"rounds up to epoch {start}, then the epoch greedy"
        self.offer(makespan, self.hops + [(self.chunks[c].id, i, j, k) for c, i, j, k in sends], how)
        return sends

    def last_resort(self) -> float:
        """When the greedy that would give the first complete schedule gives up (one line, ``CcvizError``): half
        the time limit past it. It runs after the rounds, often at the limit, and takes milliseconds on most
        fabrics, but 40 s of CPU for NVL72's 5,112 AllToAll chunks (a 60 s limit ran 615 s on a loaded machine)."""
        return self.deadline + 0.5 * max(0.0, self.deadline - self.started)

    def round_budget(self, start: int) -> float:
        left = self.deadline - time.perf_counter()
        rounds_left = max(1.0, ((self.best[0] if self.best else start + 4 * self.horizon) - start)
                          / self.round_epochs)
        return max(0.3, min(ROUND_TIME_CAP_S, 0.9 * left / rounds_left))

    # ------------------------------------------------------------------ one round
    def solve_round(self, start: int, greedy: list[tuple[int, int, int, int]], lower: int) -> bool | None:
        """Solve one round's small MILP from epoch ``start`` and commit its sends: True when the round
        completed the collective, False when more rounds are needed, None when nothing was committed."""
        model = _RoundModel(self, start)
        if not model.sends:
            return None
        planned = [(c, i, j, k - start) for c, i, j, k in greedy if k >= start] if greedy else self.planned
        solution = model.solve(self.round_budget(start), planned)
        kept, complete = model.extract(solution)
        if complete:
            kept = self.tighten_tail(start, kept, lower)
        committed = kept if complete else model.commit(kept, self.round_epochs)
        done = set(committed)
        self.planned = [(c, i, j, k - self.round_epochs) for c, i, j, k in kept
                        if (c, i, j, k) not in done and k >= self.round_epochs]
        if not committed:
            return None
        for c, i, j, k in committed:
            absolute = start + k
            link = self.grid.links[(i, j)]
            self.usage[(i, j)][absolute] = self.usage[(i, j)].get(absolute, 0) + 1
            self.hops.append((self.chunks[c].id, i, j, absolute))
            if not self.topology.is_switch(j):
                land = absolute + link.offset
                self.held[c][j] = min(self.held[c].get(j, land), land)
        self.report(f"round from epoch {start} ({model.solve_info}): {len(committed)} sends committed", lower)
        return complete


    def finish_of(self, kept: list[Key]) -> int:
        links = self.grid.links
        return max((k + links[(i, j)].offset for _, i, j, k in kept if not self.topology.is_switch(j)), default=0)

    def tighten_tail(self, start: int, kept: list[Key], lower: int) -> list[Key]:
        """The round meets every demand: solve the rest exactly, one epoch less at a time (the tail is small)."""
        finish = self.finish_of(kept)
        while start + finish > lower and not self.out_of_time():
            model = _RoundModel(self, start, finish - 1, finish=True)
            if not model.feasible:
                break
            solution = model.solve(self.round_budget(start), [])
            if solution is None:
                break
            tighter, complete = model.extract(solution)
            if not complete or self.finish_of(tighter) >= finish:
                break
            kept, finish = tighter, self.finish_of(tighter)
            self.report(f"tail from epoch {start} meets every demand by epoch {start + finish}", lower)
        return kept


class _RoundModel:
    """The MILP of one round: sends and holdings over epochs 0..horizon after ``start``."""

    def __init__(self, rounds: AStarRounds, start: int, horizon: int | None = None, finish: bool = False) -> None:
        """``finish``: every remaining demand must be met by the horizon (the tail, solved exactly)."""
        self.rounds = rounds
        topo, grid = rounds.topology, rounds.grid
        horizon = rounds.horizon if horizon is None else horizon
        self.topo, self.grid, self.horizon, self.start = topo, grid, horizon, start
        self.cols_cost: list[float] = []
        self.cols_upper: list[float] = []
        self.integer: list[int] = []
        self.sends: dict[Key, int] = {}
        self.holds: dict[tuple[int, int, int], int] = {}
        self.holder_from: dict[tuple[int, int], int] = {}  # (c, GPU) -> relative epoch it holds c (<= 0: now)
        self.value: dict[tuple[int, int], float] = {}
        self.missing: dict[int, set[int]] = {}
        for c, held in enumerate(rounds.held):
            missing = set(rounds.posts[c]) - set(held)
            if not missing:
                continue
            self.missing[c] = missing
            for n, t in held.items():
                self.holder_from[(c, n)] = max(0, t - start)
            self._add_chunk(c, held, missing)
        self._prune_switch_sends()
        self.rows_lower: list[float] = []
        self.rows_upper: list[float] = []
        self.starts: list[int] = [0]
        self.index: list[int] = []
        self.coef: list[float] = []
        self.feasible = True
        self.must_finish = finish
        self.solve_info = ""
        if self.sends:
            self._constraints()
        if finish:
            for c, missing in self.missing.items():
                for d in missing:
                    if (c, d) in self.holder_from:
                        continue
                    col = self.holds.get((c, d, horizon))
                    if col is None:
                        self.feasible = False
                    else:
                        self._row([(col, 1.0)], 1.0, np.inf)

    def _col(self, cost: float, upper: float, integer: bool) -> int:
        self.cols_cost.append(cost)
        self.cols_upper.append(upper)
        if integer:
            self.integer.append(len(self.cols_cost) - 1)
        return len(self.cols_cost) - 1

    def _add_chunk(self, c: int, held: dict[int, int], missing: set[int]) -> None:
        topo, grid, horizon, dist = self.topo, self.grid, self.horizon, self.rounds.distance
        starts = {n: self.holder_from[(c, n)] for n in held}
        earliest = epoch_distances(topo, grid, starts)
        nearest = {d: min(dist[n][d] for n in held) for d in missing}
        for n in self.rounds.gpus:
            if n in held or earliest[n] > horizon:
                continue
            value = sum(max(0.0, nearest[d] - dist[n][d]) for d in missing)
            self.value[(c, n)] = value
            per_epoch = EARLY_WEIGHT * value / (horizon + 1)
            for k in range(int(earliest[n]), horizon + 1):
                cost = per_epoch + (value if k == horizon else 0.0)
                self.holds[(c, n, k)] = self._col(cost, 1.0, False)
        for (i, j), link in grid.links.items():
            if j in held or earliest[i] == INF:
                continue
            if not topo.is_switch(j) and (c, j, horizon) not in self.holds:
                continue
            first = self.holder_from.get((c, i), earliest[i])
            for k in range(int(first), horizon - link.offset + 1):
                self.sends[(c, i, j, k)] = -1

    def _prune_switch_sends(self) -> None:
        """A switch forwards only in the epoch a chunk reaches it; drop sends that cannot take part."""
        topo, links = self.topo, self.grid.links
        keys = list(self.sends)
        while True:
            reach = {(c, j, k + links[(i, j)].offset) for c, i, j, k in keys if topo.is_switch(j)}
            leave = {(c, i, k) for c, i, _, k in keys if topo.is_switch(i)}
            kept = [s for s in keys
                    if (not topo.is_switch(s[1]) or (s[0], s[1], s[3]) in reach)
                    and (not topo.is_switch(s[2]) or (s[0], s[2], s[3] + links[(s[1], s[2])].offset) in leave)]
            if len(kept) == len(keys):
                break
            keys = kept
        self.sends = {s: self._col(-SEND_COST, 1.0, True) for s in keys}

    def _row(self, terms: list[tuple[int, float]], lower: float, upper: float) -> None:
        for col, coef in terms:
            self.index.append(col)
            self.coef.append(coef)
        self.starts.append(len(self.index))
        self.rows_lower.append(lower)
        self.rows_upper.append(upper)

    def _constraints(self) -> None:
        topo, links, horizon = self.topo, self.grid.links, self.horizon
        arrivals: dict[tuple[int, int, int], list[int]] = defaultdict(list)
        out_of: dict[tuple[int, int, int], list[int]] = defaultdict(list)
        per_link: dict[tuple[int, int], dict[int, list[int]]] = defaultdict(lambda: defaultdict(list))
        for (c, i, j, k), col in self.sends.items():
            arrivals[(c, j, k + links[(i, j)].offset)].append(col)
            out_of[(c, i, k)].append(col)
            per_link[(i, j)][k].append(col)
            if not topo.is_switch(i) and (c, i) not in self.holder_from:
                self._row([(col, 1.0), (self.holds[(c, i, k)], -1.0)], -np.inf, 0.0)  # send what you hold
        for (c, n, k), col in self.holds.items():  # holding grows only by arrivals
            terms = [(col, 1.0)] + [(a, -1.0) for a in arrivals.get((c, n, k), ())]
            if (c, n, k - 1) in self.holds:
                terms.append((self.holds[(c, n, k - 1)], -1.0))
            self._row(terms, -np.inf, 0.0)
        for (c, s, k), cols in out_of.items():  # switches forward what reaches them, in that epoch
            if not topo.is_switch(s):
                continue
            feed = [(a, -1.0) for a in arrivals.get((c, s, k), ())]
            if topo.nodes[s].copy:
                for col in cols:
                    self._row([(col, 1.0)] + feed, -np.inf, 0.0)
            else:
                self._row([(col, 1.0) for col in cols] + feed, -np.inf, 0.0)
        usage = self.rounds.usage
        for key, per_epoch in per_link.items():  # capacity, with the sends of earlier rounds
            link = links[key]
            before = usage.get(key, {})
            for w in range(1 - link.kappa, horizon + 1):
                cols = [col for k in range(max(0, w), w + link.kappa) for col in per_epoch.get(k, ())]
                prior = sum(before.get(self.start + k, 0) for k in range(w, min(0, w + link.kappa)))
                if cols and len(cols) + prior > link.window_slots:
                    self._row([(col, 1.0) for col in cols], -np.inf, float(link.window_slots - prior))

    # ------------------------------------------------------------------ solve and read
    def solve(self, budget: float, planned: list[Key]) -> np.ndarray | None:
        options = self.rounds.options
        h = quiet_highs()
        h.setOptionValue("threads", highs_threads())
        h.setOptionValue("random_seed", options.seed or 0)
        h.setOptionValue("time_limit", float(max(0.2, budget)))
        h.setOptionValue("mip_rel_gap", ROUND_GAP)
        h.setOptionValue("mip_heuristic_effort", HEURISTIC_EFFORT)
        n = len(self.cols_cost)
        h.addCols(n, np.array(self.cols_cost), np.zeros(n), np.array(self.cols_upper), 0,
                  np.array([], dtype=np.int32), np.array([], dtype=np.int32), np.array([]))
        h.changeObjectiveSense(highspy.ObjSense.kMaximize)
        h.changeColsIntegrality(len(self.integer), np.array(self.integer, dtype=np.int32),
                                np.full(len(self.integer), 1, dtype=np.uint8))
        h.addRows(len(self.rows_lower), np.array(self.rows_lower), np.array(self.rows_upper), len(self.index),
                  np.array(self.starts[:-1], dtype=np.int32), np.array(self.index, dtype=np.int32),
                  np.array(self.coef))
        start = self._warm_start(planned)
        if not self.must_finish:  # sending nothing is feasible: a start HiGHS need not search for
            h.setSolution(n, np.arange(n, dtype=np.int32), start)
        stop = options.stop

        def poll(event) -> None:
            if stop is not None and stop.is_set():
                event.interrupt()
        h.cbMipInterrupt += poll
        t0 = time.perf_counter()
        h.run()
        values = np.array(h.getSolution().col_value, dtype=float)
        info = h.getInfo()
        gap = f"{info.mip_gap:.2g}" if np.isfinite(info.mip_gap) and info.mip_gap < 1e20 else "-"
        self.solve_info = (f"{len(self.integer)} sends, {len(self.rows_lower)} rows, "
                           f"{h.modelStatusToString(h.getModelStatus())} in {time.perf_counter() - t0:.2f} s, gap {gap}")
        if h.getInfo().primal_solution_status != 2 or len(values) != n:
            return None if self.must_finish else start
        return values

    def _warm_start(self, planned: list[Key]) -> np.ndarray:
        """A feasible start from planned sends (relative epochs): those that still fit, in epoch order."""
        topo, links = self.topo, self.grid.links
        values = np.zeros(len(self.cols_cost))
        first: dict[tuple[int, int], int] = {}
        at_switch: dict[tuple[int, int, int], int] = defaultdict(int)
        for c, i, j, k in sorted(planned, key=lambda s: (s[3], not topo.is_switch(s[1]))):
            col = self.sends.get((c, i, j, k))
            if col is None:
                continue
            if topo.is_switch(i):
                if at_switch[(c, i, k)] <= 0:
                    continue
                if not topo.nodes[i].copy:
                    at_switch[(c, i, k)] -= 1
            elif (c, i) not in self.holder_from and first.get((c, i), self.horizon + 1) > k:
                continue
            values[col] = 1.0
            land = k + links[(i, j)].offset
            if topo.is_switch(j):
                at_switch[(c, j, land)] += 1
            else:
                first[(c, j)] = min(first.get((c, j), land), land)
        for (c, n, k), col in self.holds.items():
            values[col] = 1.0 if first.get((c, n), self.horizon + 1) <= k else 0.0
        return values

    def extract(self, values: np.ndarray) -> tuple[list[Key], bool]:
        """The used sends that feed a GPU's first arrival (and the switch hops feeding them); all met?"""
        topo = self.topo
        landing = landings(self.grid.links, [s for s, col in self.sends.items() if values[col] > USED])
        kept: set[Key] = set()
        spent: set[Key] = set()

        def feed(s: Key) -> None:
            if s in kept:
                return
            kept.add(s)
            c, i, _, k = s
            if topo.is_switch(i):
                options = [a for land, a in landing[(c, i)] if land == k]
                if not topo.nodes[i].copy:
                    options = [a for a in options if a not in spent] or options
                if options:
                    spent.add(options[0])
                    feed(options[0])
            elif (c, i) not in self.holder_from:
                first = landing[(c, i)]
                if first:
                    feed(first[0][1])

        for (c, n), arrivals in sorted(landing.items()):
            if not topo.is_switch(n) and self.value.get((c, n), 0.0) > 0:
                feed(arrivals[0][1])  # relays are kept by what they feed
        reached = {(s[0], s[2]) for s in kept if not topo.is_switch(s[2])}
        complete = all((c, d) in reached or (c, d) in self.holder_from
                       for c, missing in self.missing.items() for d in missing)
        return sorted(kept, key=lambda s: (s[3], s[0], s[1], s[2])), complete

    def commit(self, kept: list[Key], round_epochs: int) -> list[Key]:
        """Sends a GPU starts in the round's first epochs, and the switch hops they feed."""
        topo, links = self.topo, self.grid.links
        committed: list[Key] = []
        at_switch: set[tuple[int, int, int]] = set()
        for s in kept:  # in epoch order: a switch hop comes after the send feeding it
            c, i, j, k = s
            if topo.is_switch(i):
                if (c, i, k) not in at_switch:
                    continue
            elif k >= round_epochs:
                continue
            committed.append(s)
            if topo.is_switch(j):
                at_switch.add((c, j, k + links[(i, j)].offset))
        return committed


def solve_astar(topology: Topology, collective: Collective, options: SynthOptions, deadline: float,
                started: float, mirrored_from: Topology | None = None) -> Schedule:
    """teccl-astar for a non-reducing collective, checked by the simulator (greedy if it fails)."""
    rounds = AStarRounds(topology, collective, options, deadline, started, mirrored_from)
    plan = rounds.solve()
    schedule = plan_schedule(topology, collective, plan, rounds.grid)
    if not simulate(schedule).verified:
        plan = EpochSolver(topology, collective, options, deadline, started, mirrored_from).greedy_plan()
        plan.status = "heuristic"
        plan.notes.append("A* schedule failed verification: epoch greedy schedule returned")
        schedule = plan_schedule(topology, collective, plan, rounds.grid)
    schedule.algorithm = "teccl-astar"
    return schedule
