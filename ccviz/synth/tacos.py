"""TACOS: greedy link-chunk matching on an event-driven time-expanded network.

Won et al., "TACOS: Topology-Aware Collective Algorithm Synthesizer for
Distributed Machine Learning" (MICRO 2024). At time 0 and whenever a chunk
lands or a link frees, every rank still missing chunks looks at its free
in-routes, fastest first, and pulls a chunk the route's source already holds
(strictly causal: only chunks that have *arrived*). The result is a timed
schedule; its finish time is the last arrival.

Which chunk a free link pulls (``pick``): the paper picks at random. With ``spread`` (the default) a
link first looks at the chunks that none of the rank's *later* free links could bring and picks one
of those at random when there are any, so the rank's free links bring as many distinct chunks as
they can (on tori random picks collide often). The official TACOS gets a similar effect by
shuffling all unmet (chunk, destination) pairs and giving each the earliest-arriving source; spread
matches its 16x16 and 8x8x8 torus times at every seed tried (bench/scale.py).

Why it scales: every node keeps bitsets (Python ints) of the chunks it holds
and the chunks it still wants (missing and not in flight), so a route's
candidates are one AND, ``held[src] & want[dst]``, and only ranks touched by
an event are looked at again. Nothing rescans every (chunk, node) pair.

Switches are handled natively: a route may pass through switches
(GPU -> switch ... -> GPU); all its links are booked together and each hop
out of a switch starts the instant the chunk arrives there, so a switch never
holds data. Reductions come from ``ccviz.synth.reversal``: ReduceScatter and
Reduce are AllGather and Broadcast on the reversed topology, reversed in
time; AllReduce is ReduceScatter then AllGather.
"""

from __future__ import annotations

import heapq
import math
import random
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from ccviz.bounds.limit import bandwidth_limit
from ccviz.errors import CcvizError
from ccviz.model.collectives import Collective
from ccviz.model.groups import is_whole, judged_on, needs_relays, relay_fabric
from ccviz.model.physics import LinkCost, link_costs
from ccviz.model.routing import earliest_arrivals
from ccviz.model.schedule import COMBINE, Schedule, Transfer, gc_paused
from ccviz.model.topology import Topology
from ccviz.synth.budget import Budget
from ccviz.synth.catalog import TacosOptions
from ccviz.synth.common import Check, Forward, ReversalSynthesizer, best_of_restarts, check_restarts
from ccviz.synth.registry import SynthOptions
from ccviz.synth.reversal import schedule_end

SWITCHED_NOTE_ABOVE = 1.5  # on a switched fabric, a schedule this far over the limit names a better algorithm
BANDWIDTH_LIMITED = ("allgather", "reducescatter", "allreduce", "broadcast", "reduce")  # (AllToAll's is an LP)
SLOW_ROUTE = 2.0  # patience: a route this many times slower than a rank's fastest in-route is "slow"
# A route is revisited exactly when its later hop's link frees, up to float rounding of the sum of
# hop delays; this slack (far inside the simulator's tolerance) keeps that revisit from missing it.
_FREE_SLACK = 1e-12
CHECK_EVERY = 4  # events between looks at the clock / stop event (a power of two; a look costs ~1 us, an event
# costs from ~10 us on small fabrics to ~5 ms on a 32x32 mesh)


# --------------------------------------------------------------------------- routes
@dataclass
class Routes:
    """Every way one rank can hand a chunk to another: a direct link or a path through switches.

    A route is booked as a whole: hop h+1 starts when hop h arrives (so a switch
    stores nothing) and keeps its link booked for ``hold[h]`` from its start.
    """

    src: list[int] = field(default_factory=list)
    dst: list[int] = field(default_factory=list)
    hops: list[tuple[tuple[int, int], ...]] = field(default_factory=list)
    links: list[tuple[int, ...]] = field(default_factory=list)  # link ids of the hops
    delays: list[tuple[float, ...]] = field(default_factory=list)  # per hop: start to arrival
    holds: list[tuple[float, ...]] = field(default_factory=list)  # per hop: how long its link stays booked
    delay: list[float] = field(default_factory=list)  # start of the route to its final arrival
    link_keys: list[tuple[int, int]] = field(default_factory=list)  # link id -> (src, dst)
    lead: dict[int, float] = field(default_factory=dict)  # link id -> least time from a route's start to it

    @property
    def shares_links(self) -> bool:
        """True when some link serves several routes (paths through switches)."""
        return any(len(h) > 1 for h in self.hops)

    def add(self, hops: list[tuple[int, int]], costs: dict[tuple[int, int], LinkCost], link_hold: str,
            link_id: dict[tuple[int, int], int]) -> None:
        """Append the route along ``hops``; ``link_hold`` 'arrival' books each link until its chunk lands
        (TACOS), 'serialization' only while it serializes."""
        delays = tuple(costs[h].delay for h in hops)
        self.src.append(hops[0][0])
        self.dst.append(hops[-1][1])
        self.hops.append(tuple(hops))
        self.links.append(tuple(link_id[h] for h in hops))
        self.delays.append(delays)
        self.holds.append(tuple(costs[h].over if link_hold == "arrival" else costs[h].busy for h in hops))
        self.delay.append(sum(delays))
        offset = 0.0
        for link, delay in zip(self.links[-1], delays, strict=True):
            self.lead[link] = min(self.lead.get(link, offset), offset)
            offset += delay


def build_routes(topology: Topology, nbytes: float, link_hold: str) -> Routes:
    """Direct GPU->GPU links plus, per GPU pair, the fastest path whose interior is all switches."""
    routes = Routes()
    link_id = {key: i for i, key in enumerate(sorted(topology.links))}
    routes.link_keys = sorted(topology.links)
    costs = link_costs(topology, nbytes)
    # A switched route enters a switch first and leaves one last: a GPU->GPU link is never part of it.
    switched = {key: cost.delay if topology.is_switch(key[0]) or topology.is_switch(key[1]) else math.inf
                for key, cost in costs.items()}
    for gpu in topology.gpus:
        for link in sorted(topology.out_links[gpu], key=lambda lk: lk.dst):
            if not topology.is_switch(link.dst):
                routes.add([(gpu, link.dst)], costs, link_hold, link_id)
        if topology.switches:
            for _, path in sorted(_paths_through_switches(topology, gpu, switched).items()):
                routes.add(path, costs, link_hold, link_id)
    return routes


def _paths_through_switches(topology: Topology, gpu: int, switched: dict[tuple[int, int], float]
                            ) -> dict[int, list[tuple[int, int]]]:
    """The fastest switched path from ``gpu`` to every other GPU it reaches (``routing.earliest_arrivals``
    crossing switches only, GPU->GPU links weighted infinite; ties to the fewest hops)."""
    parents: dict[int, int] = {}
    arrival = earliest_arrivals(topology, {gpu: 0.0}, switched, through=topology.is_switch, parents=parents)
    paths: dict[int, list[tuple[int, int]]] = {}
    for dst in topology.gpus:
        if dst == gpu or arrival[dst] == math.inf:
            continue
        path, node = [], dst
        while node != gpu:
            path.append((parents[node], node))
            node = parents[node]
        paths[dst] = path[::-1]
    return paths


# --------------------------------------------------------------------------- one run
@dataclass
class Run:
    """The outcome of one seeded matching run: its transfers and the last arrival."""

    transfers: list[Transfer]
    finish_s: float
    feeders: dict[int, int]  # transfer out of a switch -> the transfer whose arrival it forwards


class Matcher:
    """One seeded TACOS run of a copy collective (every chunk has one source rank).

    Chunks are bits: bit k of ``held[node]`` / ``want[node]`` is chunk k of the collective.
    """

    def __init__(self, topology: Topology, collective: Collective, routes: Routes, seed: int,
                 start_s: float = 0.0, patient: bool = True, spread: bool = True) -> None:
        self.topology = topology
        self.collective = collective
        self.patient = patient
        self.spread = spread
        self.routes = routes
        self.rng = random.Random(seed)
        self.start_s = start_s
        self.n_chunks = len(collective.chunks)
        self.chunk_ids = [c.id for c in collective.chunks]
        self.held: dict[int, int] = defaultdict(int)  # node -> chunks it holds
        self.want: dict[int, int] = defaultdict(int)  # node -> chunks it misses that are not in flight
        self.need: dict[int, int] = defaultdict(int)  # node -> chunks it must receive
        self.link_free_at = [start_s] * len(routes.link_keys)
        self.events: dict[float, list[tuple[int, int]]] = {}  # time -> [(node, chunk bits) landing | (link, 0) free]
        self.times: list[float] = []  # heap of the keys of ``events``
        self.transfers: list[Transfer] = []
        self.feeders: dict[int, int] = {}
        self.set_demands()
        self.index_routes()

    def set_demands(self) -> None:
        """Which chunks each rank starts with and which it must end with. (Chunks are grouped by their rank sets
        first: OR-ing one wide int per (chunk, rank) is quadratic.)"""
        by_pre: dict[frozenset[int], int] = defaultdict(int)
        by_post: dict[frozenset[int], int] = defaultdict(int)
        for bit, c in enumerate(self.collective.chunks):
            if c.reduce:
                raise CcvizError(f"collective: TACOS matches copies; chunk {c.id} is a reduction", "collective")
            by_pre[c.pre] |= 1 << bit
            by_post[c.post] |= 1 << bit
        for ranks, bits in by_pre.items():
            for r in ranks:
                self.held[r] |= bits
        for ranks, bits in by_post.items():
            for r in ranks:
                self.need[r] |= bits
        for r in list(self.need):
            self.need[r] &= ~self.held[r]
            self.want[r] = self.need[r]
        self.pending = sum(w.bit_count() for w in self.want.values())

    def index_routes(self) -> None:
        """Per rank its in-routes, fastest first with random tie-breaks, each with the faster routes that could
        still beat it; who to revisit after an event."""
        routes = self.routes
        self.in_routes: dict[int, list[tuple]] = defaultdict(list)
        for r in sorted(self.rng.sample(range(len(routes.src)), len(routes.src)), key=lambda r: routes.delay[r]):
            dst = routes.dst[r]
            direct = routes.links[r][0] if len(routes.links[r]) == 1 else -1
            slow = self.patient and bool(self.in_routes[dst]) and (
                routes.delay[r] >= SLOW_ROUTE * routes.delay[self.in_routes[dst][0][0]])
            self.in_routes[dst].append((r, routes.src[r], direct, routes.delays[r][0], routes.holds[r][0], slow))
        self.fast_sources = {
            dst: sorted({routes.src[q] for q, *_, slow in rs if not slow}) for dst, rs in self.in_routes.items()
        }
        dests_from: dict[int, set[int]] = defaultdict(set)  # node -> ranks it can feed
        dests_of_link: dict[int, set[int]] = defaultdict(set)  # link -> ranks whose routes use it
        for r, links in enumerate(routes.links):
            dests_from[routes.src[r]].add(routes.dst[r])
            for lk in links:
                dests_of_link[lk].add(routes.dst[r])
        self.dests_from = {n: sorted(d) for n, d in dests_from.items()}
        self.dests_of_link = {lk: sorted(d) for lk, d in dests_of_link.items()}
        self.shuffle_dirty = routes.shares_links

    def run(self, check: Callable[[float], bool] | None = None) -> Run | None:
        """Match at the start, then at every event, until every wanted chunk has landed.

        Every ``CHECK_EVERY`` events ``check(fraction of demands delivered)`` may end the run early
        (it returns True on a stop or an expired time limit); the run then returns None.
        """
        t = self.start_s
        dirty = set(self.want)
        total = self.pending or 1
        mask = CHECK_EVERY - 1
        events = 0
        while True:
            self.match(t, dirty)
            if not self.times:
                break
            events += 1
            if check is not None and not events & mask and check(1.0 - self.pending / total):
                return None
            t = heapq.heappop(self.times)
            dirty = self.apply_events(t)
        if self.pending:
            rank = next(r for r, w in sorted(self.want.items()) if w)
            raise CcvizError(
                f"collective: TACOS cannot deliver every chunk to rank {rank}; a chunk only travels through ranks "
                "that need it, so this demand does not fit the matching model (use allgather or broadcast)",
                "collective",
            )
        return Run(self.transfers, max((tr.end_s for tr in self.transfers), default=self.start_s), self.feeders)

    def apply_events(self, t: float) -> set[int]:
        """Land the chunks arriving at t and note the links freed at t; return the ranks to revisit."""
        received: set[int] = set()  # these ranks have a new chunk to offer and a free in-link again
        freed: list[int] = []
        held = self.held
        arrived = 0
        for node, bits in self.events.pop(t):
            if bits:
                held[node] |= bits
                arrived += bits.bit_count()
                received.add(node)
            else:
                freed.append(node)
        self.pending -= arrived
        dirty = set(received)
        dests_from, dests_of_link = self.dests_from, self.dests_of_link
        for node in received:
            dirty.update(dests_from.get(node, ()))
        for link in freed:
            dirty.update(dests_of_link[link])
        return dirty

    def match(self, t: float, dirty: set[int]) -> None:
        """Each revisited rank pulls chunks over its free in-routes, fastest first. The direct-link case is
        written out inline: it is the inner loop of the whole synthesizer."""
        order = sorted(dirty)
        if self.shuffle_dirty:
            self.rng.shuffle(order)
        want, held, in_routes, free_at = self.want, self.held, self.in_routes, self.link_free_at
        randbits, n_chunks, chunk_ids = self.rng.getrandbits, self.n_chunks, self.chunk_ids
        record, new = self.transfers.append, tuple.__new__
        spread = self.spread
        for dst in order:
            wanted = want.get(dst, 0)
            if not wanted:
                continue
            nearby = -1  # chunks a fast route could bring (computed on first need)
            landing_time, landing = -1.0, 0
            routes = in_routes[dst]
            later = None  # per route, the chunks the free direct routes after it could bring instead
            if spread:
                free = [k for k, route in enumerate(routes) if route[2] >= 0 and free_at[route[2]] <= t]
                if len(free) > 1:
                    later, after = [0] * len(routes), 0
                    for k in reversed(free):
                        later[k] = after
                        after |= held[routes[k][1]]
            for k, (r, src, link, delay, hold, slow) in enumerate(routes):
                if link >= 0 and free_at[link] > t:
                    continue
                candidates = held[src] & wanted
                if later is not None and link >= 0 and candidates & ~later[k]:
                    candidates &= ~later[k]  # chunks only this route can bring; later routes keep theirs
                if slow and candidates:
                    if nearby < 0:
                        nearby = self.nearby(dst)
                    candidates &= ~nearby
                if not candidates:
                    continue
                if link < 0:
                    bit = self.send_routed(r, candidates, t)
                    if bit:
                        wanted ^= bit
                        if not wanted:
                            break
                    continue
                # A random candidate: the first set bit at or after a random position, wrapping around.
                shift = randbits(32) % n_chunks
                above = candidates >> shift
                bit = (above & -above) << shift if above else candidates & -candidates
                wanted ^= bit
                arrival = t + delay
                free_at[link] = t + hold
                record(new(Transfer, (chunk_ids[bit.bit_length() - 1], src, dst, t, arrival, "copy", 0.0)))
                if arrival == landing_time:  # chunks landing together are one event entry
                    landing |= bit
                else:
                    if landing:
                        self.at(landing_time).append((dst, landing))
                    landing_time, landing = arrival, bit
                if hold != delay:
                    self.at(t + hold).append((link, 0))
                if not wanted:
                    break
            if landing:
                self.at(landing_time).append((dst, landing))
            want[dst] = wanted

    def nearby(self, dst: int) -> int:
        """Patience (not in the paper): a route at least SLOW_ROUTE times slower than the rank's fastest leaves
        alone the chunks that the source of a fast route holds or is receiving; slow links then carry what is
        rare nearby instead of duplicating what will come sooner anyway."""
        held, need, want = self.held, self.need, self.want
        mask = 0
        for src in self.fast_sources[dst]:
            mask |= held[src] | (need[src] & ~want[src])
        return mask

    def send_routed(self, r: int, candidates: int, t: float) -> int:
        """A route through switches: book every hop if all its links are free when the chunk reaches them."""
        routes, free_at = self.routes, self.link_free_at
        starts, start = [], t
        for link, delay in zip(routes.links[r], routes.delays[r], strict=True):
            if free_at[link] > start + _FREE_SLACK * start:
                return 0
            starts.append(start)
            start = start + delay
        shift = self.rng.getrandbits(32) % self.n_chunks
        above = candidates >> shift
        bit = (above & -above) << shift if above else candidates & -candidates
        chunk = self.chunk_ids[bit.bit_length() - 1]
        hops = zip(routes.hops[r], routes.links[r], starts, routes.delays[r], routes.holds[r], strict=True)
        for h, ((u, v), link, s, delay, hold) in enumerate(hops):
            free_at[link] = s + hold
            if h:  # out of a switch: it forwards the previous hop's arrival
                self.feeders[len(self.transfers)] = len(self.transfers) - 1
            self.transfers.append(Transfer(chunk, u, v, s, s + delay))
            # revisit when a route could first use the link again: ``lead`` before it frees
            self.at(max(t, s + hold - routes.lead[link])).append((link, 0))
        self.at(start).append((routes.dst[r], bit))
        return bit

    def at(self, t: float) -> list[tuple[int, int]]:
        """The event list of time t (created, and its time queued, on first use)."""
        bucket = self.events.get(t)
        if bucket is None:
            bucket = self.events[t] = []
            heapq.heappush(self.times, t)
        return bucket


# --------------------------------------------------------------------------- synthesizer
def best_copy_run(topology: Topology, collective: Collective, options: SynthOptions,
                  start_s: float = 0.0, budget: Budget | None = None) -> tuple[Run, int]:
    """Best of ``options.restarts`` seeded matching runs of a copy collective (AllGather, Broadcast),
    and how many runs completed.

    ``start_s`` starts the run later (the AllGather half of an AllReduce) with times computed natively,
    so no float drift from shifting separates a switch hop from the arrival it forwards.

    ``budget`` (made from ``options`` when not given) carries the stop event, the time limit and the
    progress reports; they are looked at every ``CHECK_EVERY`` events *inside* a run as well as
    between runs. A stop or an expired limit abandons the current run: the best complete run is the
    answer, and with none complete yet a ``CcvizError`` says so (a partial run delivers only part of
    the collective, so it is no schedule; finishing it could take as long as the whole run).
    """
    check_restarts(options.restarts)
    budget = budget or Budget(options)
    settings = options.settings(TacosOptions)
    routes = build_routes(topology, collective.chunk_bytes, settings.link_hold)
    patience, spread = settings.patience, settings.pick == "spread"
    base = 0 if options.seed is None else int(options.seed)
    restarts = options.restarts
    workers = min(settings.workers, restarts)
    if workers > 1:
        jobs = [(base * 1_000_003 + k, patience == "on" or (patience == "alternate" and k % 2 == 1))
                for k in range(restarts)]
        return _parallel_runs(Matcher(topology, collective, routes, 0, start_s, True, spread), jobs, workers, budget)

    def attempt(k: int, check: Check) -> Run | None:
        patient = patience == "on" or (patience == "alternate" and k % 2 == 1)
        with gc_paused():
            return Matcher(topology, collective, routes, base * 1_000_003 + k, start_s, patient, spread).run(
                lambda f: check(f, f"{f:.0%} of demands delivered", f"{f:.0%} of its demands delivered"))

    return best_of_restarts(budget, "TACOS", "run", restarts, attempt, lambda run: run.finish_s,
                            "0% of its demands delivered")


_TEMPLATE: Matcher | None = None  # the run every forked worker copies (set just before the pool forks)


def _one_run(job: tuple[int, bool]) -> tuple[float, int, Run]:
    """One seeded run in a worker process (a fresh Matcher built like the template)."""
    seed, patient = job
    t = _TEMPLATE
    with gc_paused():
        run = Matcher(t.topology, t.collective, t.routes, seed, t.start_s, patient, t.spread).run()
    return run.finish_s, seed, run


def _parallel_runs(template: Matcher, jobs: list[tuple[int, bool]], workers: int,
                   budget: Budget) -> tuple[Run, int]:
    """Restarts in ``workers`` forked processes; the best run wins, ties to the earliest seed as in the
    sequential loop, so the answer does not depend on the number of workers. A stop or an expired limit
    terminates the workers; the best complete run so far is the answer."""
    import multiprocessing

    global _TEMPLATE
    _TEMPLATE = template
    order = {seed: k for k, (seed, _) in enumerate(jobs)}
    best: tuple[float, int, Run] | None = None
    done = 0
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        results = pool.imap_unordered(_one_run, jobs)
        while done < len(jobs):
            try:
                finish, seed, run = results.next(timeout=0.1)
            except multiprocessing.TimeoutError:
                if budget.ends(done):
                    pool.terminate()
                    break
                continue
            done += 1
            if best is None or (finish, order[seed]) < (best[0], best[1]):
                best = (finish, order[seed], run)
            budget.report(f"TACOS run {done}/{len(jobs)} done ({workers} processes)", done / len(jobs),
                          incumbent_s=best[0], force=True)
    _TEMPLATE = None
    if best is None:
        raise budget.exhausted("TACOS", f"none of {len(jobs)} parallel runs completed")
    return best[2], done


def as_schedule(topology: Topology, collective: Collective, run: Run, options: SynthOptions,
                done: int | None = None, budget: Budget | None = None) -> Schedule:
    """A run as a timed Schedule, with its settings and (when restarts were cut short) why."""
    settings = options.settings(TacosOptions)
    hold, patience, pick = settings.link_hold, settings.patience, settings.pick
    done = options.restarts if done is None else done
    notes = [f"best of {done} seeded TACOS runs (link held until {hold}, patience {patience}, pick {pick})"]
    cut = budget.note("TACOS", done, options.restarts) if budget is not None else None
    if cut:
        notes.append(cut)
    return Schedule(topology, collective, run.transfers, "tacos", {"link_hold": hold, "patience": patience, "pick": pick},
                    "heuristic", estimated_finish_s=run.finish_s, notes=notes,
                    cut_short=budget.reason() if cut and budget is not None else None)


def copy_schedule(topology: Topology, collective: Collective, options: SynthOptions,
                  start_s: float = 0.0, budget: Budget | None = None) -> Schedule:
    """AllGather/Broadcast (any demand whose chunks every relay needs) by direct matching."""
    return Tacos(topology, collective, options, budget).copy(topology, collective, start_s=start_s).schedule


class Tacos(ReversalSynthesizer):
    """TACOS's copy core (best matching run) in the shared frame: reductions matched on the reversed
    fabric and reversed in time; AllReduce as ReduceScatter then AllGather.

    The stop event and time limit cover the whole synthesis; once the ReduceScatter half of an
    AllReduce has a run, a stop lets the AllGather half finish its first run, so the AllReduce still
    gets a schedule.
    """

    name = "tacos"

    def __init__(self, topology: Topology, collective: Collective, options: SynthOptions,
                 budget: Budget | None = None) -> None:
        super().__init__(topology, collective, options)
        self.budget = budget or self.budget

    def copy(self, topology: Topology, collective: Collective, *, mirrored_from: Topology | None = None,
             start_s: float = 0.0) -> Forward:
        """The best matching run, starting at ``start_s``; its switch hops name the arrival they forward."""
        run, done = best_copy_run(topology, collective, self.options, start_s, self.budget)
        return Forward(as_schedule(topology, collective, run, self.options, done, self.budget), run.feeders)

    def mirror_solves_gather(self, topology: Topology) -> bool:
        """The matching ignores ``mirrored_from``: a reduction's mirror on a self-reverse fabric is the AllGather."""
        return True

    def mirror_topology(self, topology: Topology) -> Topology:
        """The reversed fabric as it is: TACOS's matching never multicasts at a switch, so its copy flags
        change nothing, and keeping them lets an AllReduce on a self-reverse fabric solve its halves once."""
        return topology.reversed()

    def replay(self, schedule: Schedule) -> Schedule:
        """Matching runs are timed by TACOS's own link model (the simulator judges the final schedule)."""
        return schedule


def synthesize_tacos(topology: Topology, collective: Collective, options: SynthOptions) -> Schedule:
    """Registry entry point: copies directly, reductions by reversal, AllReduce as RS then AG.

    Over a process group whose members reach each other only through other GPUs, the matching runs on
    the fabric with those GPUs as relays (TACOS moves a chunk only through ranks that want it),
    and the schedule is judged on the real fabric, where those GPUs relay.
    """
    if not is_whole(topology, collective.ranks) and needs_relays(topology, collective.ranks):
        return judged_on(topology, Tacos(relay_fabric(topology, collective.ranks), collective, options).synthesize())
    schedule = Tacos(topology, collective, options).synthesize()
    note = switched_fabric_note(topology, collective, schedule)
    if note:
        schedule.notes.append(note)
    return schedule


def switched_fabric_note(topology: Topology, collective: Collective, schedule: Schedule) -> str | None:
    """Where switches carry the traffic and the matching ends over ``SWITCHED_NOTE_ABOVE`` x the limit, why TACOS
    is the wrong tool there and which algorithm is right; else None.

    Why: TACOS (Won et al., MICRO 2024) matches one chunk to one free route at a time, a greedy made for
    direct-connect fabrics; through a switch box a route holds a GPU's up-link and one down-link for a whole
    chunk, and the greedy leaves most of the crossbar idle (``dgxh100`` AllGather 1 GB: 0.22 of the limit).
    forestcoll books every plane of such a box at once (its closed form) or packs trees through the switches."""
    if not topology.switches or not is_whole(topology, collective.ranks) or collective.name not in BANDWIDTH_LIMITED:
        return None
    try:
        limit = bandwidth_limit(topology, collective.name, collective.size_bytes, collective.root)
    except CcvizError:
        return None
    summed_in_switches = any(t.op == COMBINE for t in schedule.transfers)
    reachable = limit.limit_s if summed_in_switches else (limit.without_switch_sums_s or limit.limit_s)
    ratio = schedule_end(schedule) / reachable
    if ratio <= SWITCHED_NOTE_ABOVE:
        return None
    return (f"TACOS matches one chunk to one free route at a time, a greedy made for direct-connect fabrics; through "
            f"this fabric's switches it leaves links idle and ends at {ratio:.2f} x the limit. Use forestcoll "
            "(-a forestcoll): it books a box of crossbar planes (an NVSwitch box) in closed form, at the limit up to "
            "one route's delay, and packs trees through other switches")
