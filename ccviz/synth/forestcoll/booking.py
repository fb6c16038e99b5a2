"""Pipelined booking on link calendars: when each piece of each tree crosses each link.

Decides the *times*: each tree's share is cut into pieces (``_refined``: as many as keep the schedule under the
transfer budget) and sent down its tree as pieces arrive; a free out-link sends its most urgent waiting piece,
first come first served, with routes through bufferless switches booked cut-through (every link of the route
free when the piece gets there) and, where switches have a buffer, pieces waiting in the switch's queue.
Reductions run the same booking on in-trees (``_InTrees``). ``ordered_pipeline`` also tries deep trees first
and a wider look-ahead, keeping the faster.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections.abc import Callable
from dataclasses import dataclass

import ccviz.synth.forestcoll.tuning as tuning
from ccviz.errors import CcvizError
from ccviz.model.collectives import Collective, make_collective
from ccviz.model.physics import link_costs
from ccviz.model.schedule import Schedule, Transfer
from ccviz.model.topology import Topology
from ccviz.model.validate import MIN_CHUNK_BYTES
from ccviz.synth.forestcoll.packing import Packing, _depths, _heights
from ccviz.synth.forestcoll.tuning import (
    _SEPARATION,
    DEEP_FIRST_ABOVE,
    LOOKAHEAD,
    MIN_PIECES,
    PIECE_COUNTS,
    WIDE_ABOVE,
    WIDE_BELOW,
    WIDE_LOOKAHEAD,
)
from ccviz.synth.registry import SynthOptions


# --------------------------------------------------------------------------- pipelining
@dataclass
class Pipelined:
    transfers: list[Transfer]
    finish_s: float


class _Calendar:
    """Busy intervals of one lane of a link out of a switch (later routes may fill the gaps)."""

    def __init__(self) -> None:
        self.starts: list[float] = []
        self.ends: list[float] = []

    def conflict(self, a: float, b: float) -> float | None:
        """None when [a, b) is free, else the end of the first busy interval overlapping it."""
        eps = 1e-12 * max(1.0, abs(b))
        i = bisect.bisect_right(self.ends, a + eps)
        if i < len(self.starts) and self.starts[i] < b - eps:
            return self.ends[i]
        return None

    def reserve(self, a: float, b: float) -> None:
        """Book [a, b), merged with the busy intervals it touches (so a search never walks a long run)."""
        eps = 1e-12 * max(1.0, abs(b))
        i = bisect.bisect_right(self.starts, a)
        if i and self.ends[i - 1] >= a - eps:  # touches the previous interval
            i -= 1
            a = self.starts[i]
            b = max(b, self.ends[i])
            del self.starts[i], self.ends[i]
        while i < len(self.starts) and self.starts[i] <= b + eps:  # and the following ones
            b = max(b, self.ends[i])
            del self.starts[i], self.ends[i]
        self.starts.insert(i, a)
        self.ends.insert(i, b)


class _OutTrees:
    """Copies flow down out-trees: a chunk arriving at a GPU releases the tree edges out of it."""

    def __init__(self, packing: Packing) -> None:
        self.packing = packing
        self.heights = {(r, j): _heights(t) for r, trees in packing.trees.items() for j, t in enumerate(trees)}
        self.depths: dict[tuple[int, int], dict[int, int]] = {}  # filled as ``level`` asks (rings only)

    def level(self, c, node: int) -> int:
        """The tree level of ``node`` in chunk ``c``'s tree (``pipeline(by_level=True)``)."""
        key = (next(iter(c.pre)), c.index % self.packing.k)
        if key not in self.depths:
            self.depths[key] = _depths(self.packing.trees[key[0]][key[1]])
        return self.depths[key][node]

    def starts(self, collective: Collective) -> list[tuple[int, int]]:
        return [(c.id, next(iter(c.pre))) for c in collective.chunks]

    def arrive(self, c, node: int, initial: bool) -> list[tuple[int, int, list[int]]]:
        key = (next(iter(c.pre)), c.index % self.packing.k)
        h = self.heights[key]
        return [(-h[child], child, route) for child, route in self.packing.trees[key[0]][key[1]].children.get(node, ())]


class _InTrees:
    """Partial sums flow up in-trees: the out-trees packed on the reversed fabric, every route turned
    around. A GPU sends its partial to its parent once every child's partial has arrived."""

    def __init__(self, packing: Packing, topology: Topology, chunks) -> None:
        self.packing = packing
        real = {key: i for i, key in enumerate(sorted(topology.links))}
        reversed_keys = sorted((v, u) for u, v in topology.links)  # link ids of the reversed fabric
        self.up: dict[tuple[int, int], dict[int, tuple[int, list[int]]]] = {}
        self.depth: dict[tuple[int, int], dict[int, int]] = {}
        self.children: dict[tuple[int, int], dict[int, int]] = {}
        for r, trees in packing.trees.items():
            for j, tree in enumerate(trees):
                up, kids, depth = {}, {}, {r: 0}
                order = [r]
                for u in order:
                    for x, route in tree.children.get(u, ()):
                        hops = [reversed_keys[i] for i in reversed(route)]  # (a, b) on reversed = b -> a real
                        up[x] = (u, [real[(b, a)] for a, b in hops])
                        kids[u] = kids.get(u, 0) + 1
                        depth[x] = depth[u] + 1
                        order.append(x)
                self.up[(r, j)], self.children[(r, j)], self.depth[(r, j)] = up, kids, depth
        self.pending: dict[tuple[int, int], int] = {}
        self.chunks = chunks

    def _key(self, c) -> tuple[int, int]:
        return next(iter(c.post)), c.index % self.packing.k

    def starts(self, collective: Collective) -> list[tuple[int, int]]:
        out = []
        for c in collective.chunks:
            key = self._key(c)
            out += [(c.id, x) for x in self.up[key] if not self.children[key].get(x)]
        return out

    def arrive(self, c, node: int, initial: bool) -> list[tuple[int, int, list[int]]]:
        key = self._key(c)
        if not initial:
            left = self.pending.get((c.id, node), self.children[key].get(node, 0)) - 1
            self.pending[(c.id, node)] = left
            if left > 0:
                return []
        if node == key[0]:
            return []
        parent, route = self.up[key][node]
        return [(-self.depth[key][node], parent, route)]


class Superseded(Exception):  # noqa: N818 (not an error: the booking was not needed)
    """A booking abandoned because its caller already holds a complete schedule and the time limit has passed
    (``Budget.superseded``): the NVL72 ReduceScatter's trees, booked after its in-switch schedule, took 11 s
    past a 5 s limit for a schedule that then lost."""


GIVE_UP_EVERY = 512  # events between two looks at ``give_up`` (cheap, but not free)


def pipeline(topology: Topology, collective: Collective, packing: Packing, start_s: float = 0.0,
             switch_queue: bool = True, deep_first: bool = False, by_level: bool = False,
             lookahead: int = LOOKAHEAD, give_up: Callable[[], bool] | None = None) -> Pipelined:
    """Run every chunk through its tree; a GPU's out-link, when free, serves its most urgent waiting chunk.

    Copies (AllGather, Broadcast) go down out-trees; reductions (ReduceScatter, Reduce: ``packing`` made
    on the reversed fabric) go up the same trees turned around, every hop a ``reduce``. Chunk i of a
    root (its ``index``) rides tree ``i mod k``. Urgency: the earlier chunk first, then the longer path
    still ahead; with ``deep_first`` the chunk's index less the tree levels still below the edge, so
    that a chunk with h levels to go is as urgent as one h indices later with none and deep trees'
    last pieces do not trail behind (``ordered_pipeline`` tries both). Links out of switches keep
    calendars (a later route may use a gap an earlier one left). ``switch_queue``: a chunk that
    reaches a switch whose out-link is busy waits in the switch's queue and leaves once (as real
    NVSwitch / IB switches buffer packets); without it a route is booked cut-through, each hop
    starting the instant the previous one arrives, which loses throughput to crossbar conflicts on
    switched fabrics; a free link then weighs its ``lookahead`` most urgent waiting chunks. A copy switch forwards its latest arrival of a chunk, so
    two partial sums of one chunk never wait in it together.
    ``give_up``: asked every ``GIVE_UP_EVERY`` events; True abandons the booking (``Superseded``).
    """
    reducing = collective.is_reducing
    plan = _InTrees(packing, topology, collective.chunks) if reducing else _OutTrees(packing)
    op = "reduce" if reducing else "copy"
    links = sorted(topology.links)
    costs = link_costs(topology, collective.chunk_bytes)
    delay = [costs[key].delay for key in links]
    hold = [costs[key].busy for key in links]
    lanes_free: list[list[float]] = [[start_s] * topology.links[key].lanes for key in links]
    calendars = [[_Calendar() for _ in range(topology.links[key].lanes)] if topology.is_switch(key[0]) else []
                 for key in links]
    copy_switch = [reducing and topology.is_switch(u) and topology.nodes[u].copy for u, _ in links]
    # Only cut-through routes differ in when they can start (a route's later hops may be booked); with
    # switch queues every waiting chunk of a link starts when the link is free, so the most urgent goes.
    lookahead = 1 if switch_queue else lookahead
    multicast = not reducing and not switch_queue and any(topology.nodes[x].copy for x in topology.switches)
    same_chunk: dict[tuple[int, int], list[tuple]] = {}  # (first link, chunk) -> its waiting tree edges
    taken: set[int] = set()  # seq of waiting tree edges already sent (booked, or rode along)
    passes: dict[tuple[int, int], list[tuple[float, float]]] = {}  # (copy switch, chunk) -> [(arrival, departure)]
    chunks = collective.chunks
    same_route: dict[tuple[int, ...], list[int]] = {}
    waiting: dict[int, list[tuple]] = {}  # first link -> heap of (order, urgency, seq, chunk, dst, route)
    events: list[tuple[float, int, int, int, int]] = []  # (time, kind 0 arrival / 1 link free / 2 start, seq, a, b)
    seq = 0
    for cid, node in plan.starts(collective):
        events.append((start_s, 2, seq, cid, node))
        seq += 1
    heapq.heapify(events)
    transfers: list[Transfer] = []
    finish = start_s

    route_hops: dict[int, list[tuple]] = {}  # id(route) -> per hop after the first: (offset, hold, lanes' intervals)

    def earliest(route: list[int], now: float, bound: float = math.inf) -> tuple[float, list[int]]:
        """The first start >= now at which every hop finds a free lane (cut-through), and the lanes.

        The search gives up (returning a start >= ``bound`` and no lanes) once it cannot start before
        ``bound``: the caller only wants a start earlier than its best so far.
        """
        first_lane = lanes_free[route[0]].index(min(lanes_free[route[0]]))
        start = max(now, lanes_free[route[0]][first_lane])
        if switch_queue:
            return start, [first_lane]
        hops = route_hops.get(id(route))
        if hops is None:  # the calendars' lists are updated in place, so they can be held here
            hops, t = [], delay[route[0]]
            for lid in route[1:]:
                hops.append((t, hold[lid], [(cal.starts, cal.ends) for cal in calendars[lid]]))
                t += delay[lid]
            route_hops[id(route)] = hops
        while True:
            if start >= bound:
                return start, []
            chosen, moved = [first_lane], False
            for off, length, lanes in hops:
                a = start + off
                b = a + length
                eps = 1e-12 * max(1.0, abs(b))  # _Calendar.conflict, inlined: this loop is the pipeline's hot spot
                later = math.inf
                for lane, (starts, ends) in enumerate(lanes):
                    i = bisect.bisect_right(ends, a + eps)
                    if i < len(ends) and starts[i] < b - eps:
                        later = min(later, ends[i])
                    else:
                        chosen.append(lane)
                        break
                else:
                    start, moved = later - off, True
                    break
            if not moved:
                return start, chosen

    def place(cid: int, route: list[int], start: float, lanes: list[int]) -> list[tuple[int, int, float]] | float:
        """(link, lane, start) per hop, or a later first-hop start when a copy switch would hold two
        partials of the chunk at once."""
        hops, t = [], start
        for h, lid in enumerate(route):
            lane = lanes[h] if h < len(lanes) else 0
            if h and switch_queue:
                t, lane = _first_fit(calendars[lid], t, hold[lid])
            if h and copy_switch[lid]:
                arrival_here = hops[-1][2] + delay[route[h - 1]]
                for a, d in passes.get((links[lid][0], cid), ()):
                    if arrival_here <= d + _SEPARATION and t >= a - _SEPARATION:
                        return start + (d + _SEPARATION - arrival_here) + _SEPARATION
            hops.append((lid, lane, t))
            t += delay[lid]
        return hops

    def book(first: int, now: float) -> None:
        """Send, on link ``first``, the most urgent of its next ``lookahead`` waiting chunks that can start
        soonest (the first that can start now ends the search)."""
        nonlocal seq, finish
        heap = waiting[first]
        soon = now + 1e-12 * max(1.0, now)
        looked, best, seen = [], None, set()
        while heap and len(looked) < lookahead:
            item = heapq.heappop(heap)
            if item[2] in taken:  # rode along with an earlier transfer of its chunk
                continue
            looked.append(item)
            if id(item[-1]) in seen:  # the same route as an earlier candidate: the same start, not sooner
                continue
            seen.add(id(item[-1]))
            start, lanes = earliest(item[-1], now, math.inf if best is None else best[0])
            if best is None or max(start, soon) < best[0]:
                best = (max(start, soon), start, lanes, len(looked) - 1)
            if start <= soon:
                break
        if best is None:
            return
        _, start, lanes, n = best
        for m, item in enumerate(looked):
            if m != n:
                heapq.heappush(heap, item)
        taken.add(looked[n][2])
        *_, cid, dst, route = looked[n]
        while not isinstance(hops := place(cid, route, start, lanes), list):
            start, lanes = earliest(route, hops)  # moved past a partial at a copy switch: find free lanes again
        for h, (lid, lane, t) in enumerate(hops):
            if h == 0:
                lanes_free[lid][lane] = t + hold[lid]
            else:
                calendars[lid][lane].reserve(t, t + hold[lid])
                if copy_switch[lid]:
                    passes.setdefault((links[lid][0], cid), []).append((hops[h - 1][2] + delay[hops[h - 1][0]], t))
            transfers.append(Transfer(cid, links[lid][0], links[lid][1], t, t + delay[lid], op))
        t = hops[-1][2] + delay[hops[-1][0]]
        finish = max(finish, t)
        heapq.heappush(events, (t, 0, seq, cid, dst))
        seq += 1
        if multicast:
            ride(first, cid, route, hops)
        heapq.heappush(events, (min(lanes_free[first]), 1, seq, first, 0))
        seq += 1

    def ride(first: int, cid: int, route: list[int], hops: list[tuple[int, int, float]]) -> None:
        """Other tree edges of the same chunk waiting on this link ride along where their routes leave the
        booked one at a copy switch whose out-hops are free at that instant (cut-through multicast): the
        sender's link carries the chunk once instead of once per child."""
        nonlocal seq, finish
        booked = {tuple(route[:h + 1]): (lane, t) for h, (_, lane, t) in enumerate(hops)}
        for item in same_chunk.get((first, cid), ()):
            other = item[-1]
            if item[2] in taken:
                continue
            h = 0
            while h < len(other) and tuple(other[:h + 1]) in booked:
                h += 1
            branch = links[other[h - 1]][1] if 0 < h < len(other) else None
            if branch is None or not topology.nodes[branch].copy:
                continue
            t = booked[tuple(other[:h])][1] + delay[other[h - 1]]
            new_hops = []
            for lid in other[h:]:
                lane = None
                for n, cal in enumerate(calendars[lid]):
                    if cal.conflict(t, t + hold[lid]) is None:
                        lane = n
                        break
                if lane is None:
                    break
                new_hops.append((lid, lane, t))
                t += delay[lid]
            if len(new_hops) < len(other) - h:
                continue
            for k, (lid, lane, a) in enumerate(new_hops):
                calendars[lid][lane].reserve(a, a + hold[lid])
                booked[tuple(other[:h + k + 1])] = (lane, a)
                transfers.append(Transfer(cid, links[lid][0], links[lid][1], a, a + delay[lid], op))
            taken.add(item[2])
            finish = max(finish, t)
            heapq.heappush(events, (t, 0, seq, cid, item[4]))
            seq += 1

    handled = 0
    while events:
        handled += 1
        if give_up is not None and handled % GIVE_UP_EVERY == 0 and give_up():
            raise Superseded
        now, kind, _, a, b = heapq.heappop(events)
        if kind != 1:  # chunk a arrived at GPU b (or starts there): the tree edges it releases start waiting
            c = chunks[a]
            for urgency, dst, route in plan.arrive(c, b, kind == 2):
                route = same_route.setdefault(tuple(route), route)  # one list per route: book compares ids
                first = route[0]
                key = (plan.level(c, b), c.index) if by_level else c.index + urgency if deep_first else c.index
                item = (key, urgency, seq, a, dst, route)
                heapq.heappush(waiting.setdefault(first, []), item)
                if multicast:
                    same_chunk.setdefault((first, a), []).append(item)
                heapq.heappush(events, (max(now, min(lanes_free[first])), 1, seq + 1, first, 0))
                seq += 2
        elif waiting.get(a) and min(lanes_free[a]) <= now + 1e-15:
            book(a, now)
    return Pipelined(transfers, finish)


def ordered_pipeline(topology: Topology, collective: Collective, packing: Packing, start_s: float,
                     switch_queue: bool, limit_s: float, wide: bool = False,
                     deep_below: float = tuning.DEEP_FIRST_BELOW, give_up: Callable[[], bool] | None = None) -> Pipelined:
    """``pipeline`` by chunk index, and where that ends between ``DEEP_FIRST_ABOVE`` and ``DEEP_FIRST_BELOW``
    x the limit also deep trees first (``deep_first``; not for stars, all one level deep); the faster kept
    (further off, the order is not what holds the schedule back: crossbar conflicts are, which the slot grid
    takes on; ``railclos`` ReduceScatter's mirror ends 1.180 x by index and 1.004 x deep first, its deep trees'
    last pieces reach the rail leaves late); where routes are booked cut-through and the faster still ends
    between ``WIDE_ABOVE`` and ``WIDE_BELOW`` x the limit, with ``wide`` (``deep_below``: ``WIDE_BELOW`` where the
    slot grid follows and takes such schedules on, as before 2026-11-27: deep first there only costs time; up to
    ``SLOTS_AUTO_MAX_GPUS``, where the slot grid cannot run: the grid takes such fabrics on), both orders again with ``WIDE_LOOKAHEAD`` waiting chunks weighed per free
    link, the fastest kept. Neither order
    wins everywhere: deep first takes a 64-GPU torus AllGather from 1.050 to 1.024 x the limit and switch2d from 1.051 to 1.030, but the
    mirror of rfs3d's ReduceScatter (128 GPUs, 4 trees of 2 pieces) from 1.031 to 1.093."""
    run = pipeline(topology, collective, packing, start_s, switch_queue, give_up=give_up)
    if DEEP_FIRST_ABOVE * limit_s < run.finish_s - start_s < deep_below * limit_s and not packing.stars:
        deep = pipeline(topology, collective, packing, start_s, switch_queue, deep_first=True, give_up=give_up)
        if deep.finish_s < run.finish_s:
            run = deep
    if (wide and not switch_queue and topology.switches and topology.n_gpus <= tuning.SLOTS_AUTO_MAX_GPUS
            and WIDE_ABOVE * limit_s < run.finish_s - start_s < WIDE_BELOW * limit_s):
        for deep_first in (True, False):
            wide = pipeline(topology, collective, packing, start_s, switch_queue, deep_first, lookahead=WIDE_LOOKAHEAD,
                            give_up=give_up)
            if wide.finish_s < run.finish_s:
                run = wide
    return run


def _first_fit(calendars: list[_Calendar], t: float, length: float) -> tuple[float, int]:
    """Earliest start >= t at which some lane of a link is free for ``length`` (the chunk waits at the switch)."""
    best = (math.inf, 0)
    for lane, cal in enumerate(calendars):
        a = t
        while (end := cal.conflict(a, a + length)) is not None:
            a = end
        best = min(best, (a, lane))
    return best


# --------------------------------------------------------------------------- synthesizer
def _refined(topology: Topology, collective: Collective, packing: Packing, pieces: int | None,
             counts: tuple[int, ...] = PIECE_COUNTS, least: int = MIN_PIECES) -> Collective:
    """The collective to schedule: the given one when its chunk count was chosen (``--chunks`` > 1), else
    k x pieces chunks per rank with the most pieces (of ``counts``, at least ``least``) that keep the schedule
    under ``MAX_TRANSFERS`` (in this link model more pieces never hurt: alpha is paid per hop, not per byte)."""
    if collective.chunks_per_rank > 1 and pieces is None:
        return collective
    if pieces is None:
        hops_per_piece = sum(len(tree.links) for trees in packing.trees.values() for tree in trees)
        pieces = least
        per_rank_bytes = collective.chunk_bytes * collective.chunks_per_rank  # one rank's share of the buffer
        for p in counts:  # more than ``least`` where the transfer budget allows, never fewer
            if p > pieces and hops_per_piece * p <= tuning.MAX_TRANSFERS and per_rank_bytes / (packing.k * p) >= MIN_CHUNK_BYTES:
                pieces = p
        pieces = max(1, min(pieces, int(per_rank_bytes // (packing.k * MIN_CHUNK_BYTES))))  # tiny buffers
        if per_rank_bytes / packing.k < MIN_CHUNK_BYTES:
            raise CcvizError(f"size: forestcoll sends each rank's {per_rank_bytes:g} B down {packing.k} trees, less "
                             "than a byte per tree; use a larger size or --opt trees=1", "size")
    return make_collective(collective.name, _over(topology, collective), collective.size_bytes, packing.k * pieces,
                           collective.root)


def _as_fabric_ranks(fabric: Topology, collective: Collective) -> Collective:
    """The group's collective with its ranks in the relay fabric's GPU order (same chunks)."""
    if tuple(collective.ranks) == tuple(fabric.gpus):
        return collective
    return make_collective(collective.name, fabric, collective.size_bytes, collective.chunks_per_rank, collective.root)


def _over(topology: Topology, collective: Collective) -> Topology | tuple[int, ...]:
    """What a re-chunked collective is made over: the fabric's GPUs, or the process group it names."""
    return topology if tuple(collective.ranks) == tuple(topology.gpus) else collective.ranks


def _roots(collective: Collective) -> list[int]:
    if collective.name in ("broadcast", "reduce") or collective.root is not None:
        return [collective.root]
    return list(collective.ranks)


def _offer(options: SynthOptions, topology: Topology, packing: Packing, refined: Collective, run: Pipelined,
           on_ring: bool) -> None:
    """Offer a complete schedule found on the way (``SynthOptions.offer``): the answer if forestcoll has to
    be ended before it returns (the app's Stop on a 64-GPU dragonfly: one pipeline step takes seconds)."""
    if options.best is None:
        return
    options.offer(Schedule(topology, refined, run.transfers, "forestcoll",
                           {"trees": packing.k, "chunks_per_rank": refined.chunks_per_rank, "ring": on_ring},
                           "heuristic", estimated_finish_s=run.finish_s,
                           notes=["stopped during synthesis: the first complete schedule forestcoll found is kept; "
                                  "the packings and bookings it would have tried next were skipped"]))
