"""mcf: AllToAll along the flows of its exact limit, cut into chunks and booked link by link.

The maximum concurrent flow LP (``ccviz.bounds.concurrent_flow``) says how much of every pair's
data each link carries at the limit. Here each source's flow is split into paths to each
destination (``decompose``: walk back from the destination along the largest in-flow, cancel a
cycle when one appears), every pair's ``M / N`` bytes are cut into chunks and each chunk takes one
of its pair's paths, the one whose links are least loaded so far (``assign_paths``: the loads then
follow the LP's to within a chunk per link). On a fabric the LP reduced by symmetry, source 0's
paths are decomposed once and translated to every other source.

The chunks are then booked hop by hop on link calendars in time order (``LinkCalendars``,
``book_chunks``): a chunk leaves a GPU as soon as it has arrived there and a lane of the next link
is free, the chunk with the most hops still to go first; a route through bufferless switches is
booked as one chain (each hop starts the instant the previous one lands: a switch stores nothing),
fitted into the first time every link of the chain is free, gaps between earlier bookings included.

What it does not do: latency. The LP is bandwidth only (alpha ignored), so at small sizes, where
alpha dominates, latency-optimal algorithms (bruck, direct) win; Compare shows where.
"""

from __future__ import annotations

import heapq
import math
import os
import sys
import time
from bisect import bisect_left, bisect_right
from dataclasses import dataclass

import numpy as np

from ccviz.collectives import Collective, make_collective
from ccviz.errors import CcvizError
from ccviz.physics import link_costs
from ccviz.schedule import Schedule, Transfer
from ccviz.synth.registry import Progress, SynthOptions
from ccviz.topology import Topology

TRANSFER_BUDGET = 300_000  # automatic chunks per pair keep the schedule under this many transfers
CHUNK_CHOICES = (8, 6, 4, 3, 2, 1)
PATHS_PER_PAIR = 8  # a pair's candidate paths: its largest flows
_FLOW_EPS = 1e-9  # flow (in pairs' demands) treated as zero
_TIME_EPS = 1e-15  # s: bookings that only touch do not overlap
STOP_EVERY = 20_000  # bookings between two looks at the stop flag


# ------------------------------------------------------------------------------ flows into paths
@dataclass(frozen=True)
class _Fabric:
    """The topology as positions and link indices (the LP's link order)."""

    nodes: list[int]
    index: dict[int, int]
    links: list[tuple[int, int]]
    tail: np.ndarray
    head: np.ndarray
    is_gpu: np.ndarray


def _fabric(topology: Topology, links: list[tuple[int, int]]) -> _Fabric:
    nodes = list(topology.nodes)
    index = {n: i for i, n in enumerate(nodes)}
    is_gpu = np.array([not topology.is_switch(n) for n in nodes])
    return _Fabric(nodes, index, links, np.array([index[u] for u, _ in links]), np.array([index[v] for _, v in links]),
                   is_gpu)


def decompose(fabric: _Fabric, row: np.ndarray, source: int, dests: list[int]) -> dict[int, list[tuple[float, list[int]]]]:
    """Source ``source``'s flow (one unit to each of ``dests``, node positions) as paths: per destination
    a list of (fraction, link indices), fractions summing to 1."""
    flow = np.where(row > _FLOW_EPS, row, 0.0)
    into: dict[int, list[int]] = {}
    for e in np.flatnonzero(flow).tolist():
        into.setdefault(int(fabric.head[e]), []).append(e)
    tail = fabric.tail
    out: dict[int, list[tuple[float, list[int]]]] = {}
    for t in dests:
        need, paths = 1.0, []
        for _ in range(10_000):
            if need <= 1e-6:
                break
            path = _walk_back(flow, into, tail, source, t)
            if path is None:
                break
            amount = min(need, float(flow[path].min()))
            flow[path] -= amount
            paths.append((amount, path))
            need -= amount
        if not paths:
            raise CcvizError(f"topology: the flow LP left no path from node {fabric.nodes[source]} to "
                             f"{fabric.nodes[t]}", "topology")
        total = sum(amount for amount, _ in paths)
        out[t] = [(amount / total, path) for amount, path in paths]
    return out


def _walk_back(flow: np.ndarray, into: dict[int, list[int]], tail: np.ndarray, source: int, t: int) -> list[int] | None:
    """Links of a path source -> t along the largest in-flows, walked back from t; a cycle met on the way
    is cancelled (its smallest flow taken off every link of it) and the walk starts again."""
    while True:
        node, links, seen = t, [], {t: 0}
        while node != source:
            candidates = [e for e in into.get(node, ()) if flow[e] > _FLOW_EPS]
            if not candidates:
                return None
            e = max(candidates, key=flow.__getitem__)
            links.append(e)
            node = int(tail[e])
            if node in seen:  # links[seen[node]:] form a cycle: cancel it
                cycle = links[seen[node]:]
                flow[cycle] -= flow[cycle].min()
                break
            seen[node] = len(links)
        else:
            links.reverse()
            return links


def pair_paths(flow, fabric: _Fabric, gpus: list[int]) -> dict[tuple[int, int], list[tuple[float, list[int]]]]:
    """Every ordered GPU pair's paths (fraction, link indices), keyed by node positions; on a symmetric
    fabric source 0's are translated to every source."""
    positions = [fabric.index[g] for g in gpus]
    group = flow.translations
    if group is None:
        out = {}
        for row, s in zip(flow.flows, positions, strict=True):
            for t, paths in decompose(fabric, row, s, [p for p in positions if p != s]).items():
                out[(s, t)] = _top(paths)
        return out
    s0 = positions[0]
    base = {t: _top(paths) for t, paths in decompose(fabric, flow.flows[0], s0, positions[1:]).items()}
    out = {}
    for g in range(len(positions)):
        perm, link_perm = group.perms[g], group.link_perm[g]
        for t, paths in base.items():
            out[(int(perm[s0]), int(perm[t]))] = [(frac, link_perm[path].tolist()) for frac, path in paths]
    return out


def _top(paths: list[tuple[float, list[int]]]) -> list[tuple[float, list[int]]]:
    """The ``PATHS_PER_PAIR`` largest paths, fractions renormalized."""
    kept = sorted(paths, key=lambda p: -p[0])[:PATHS_PER_PAIR]
    total = sum(f for f, _ in kept)
    return [(f / total, p) for f, p in kept]


def assign_paths(paths: dict[tuple[int, int], list[tuple[float, list[int]]]], pieces: int, capacity: np.ndarray,
                 seed: int) -> list[tuple[int, int, int, list[int]]]:
    """(source, dest, piece, links) for every piece of every pair: each piece takes the path of its pair
    whose busiest link (load over bandwidth, the piece included) is least busy, pairs in a seeded random
    order; a path is preferred while its pieces are below its LP fraction."""
    load = np.zeros(len(capacity))
    inverse = 1.0 / capacity
    rng = np.random.default_rng(seed)
    pairs = list(paths)
    gpu_rank = {s: i for i, s in enumerate(dict.fromkeys(s for s, _ in pairs))}
    n = len(gpu_rank)
    rotation = [(gpu_rank[t] - gpu_rank[s]) % n for s, t in pairs]
    out = []
    for k in range(pieces):
        shuffled = rng.permutation(len(pairs)).tolist()
        shuffled.sort(key=rotation.__getitem__)  # round r: every GPU sends to the one r ranks on
        for i in shuffled:
            pair = pairs[i]
            options = paths[pair]
            if len(options) == 1:
                best = options[0][1]
            else:
                best, best_score = None, np.inf
                for fraction, links in options:
                    # a path used beyond its share of the pieces is only a fallback
                    over = fraction * pieces < k + 1 - 1e-9 and pieces > 1
                    score = float(((load[links] + 1.0) * inverse[links]).max()) + (1e6 if over else 0.0)
                    if score < best_score:
                        best, best_score = links, score
            load[best] += 1.0
            out.append((pair[0], pair[1], k, best))
    return out


# ------------------------------------------------------------------------------ link calendars
class LinkCalendars:
    """Per link and lane, the busy intervals in time order (touching bookings merged into one, so a busy
    stretch is one interval); a chain of hops fitted into the first time all of its links are free (gaps
    left by earlier bookings included)."""

    def __init__(self, lanes: list[int]) -> None:
        self.starts = [[[] for _ in range(n)] for n in lanes]
        self.ends = [[[] for _ in range(n)] for n in lanes]

    def earliest(self, link: int, a: float, busy: float) -> tuple[float, int]:
        """The earliest x >= a at which a lane of ``link`` is free over [x, x + busy), and that lane."""
        best, best_lane = np.inf, 0
        for lane, (starts, ends) in enumerate(zip(self.starts[link], self.ends[link], strict=True)):
            x = a
            i = bisect_right(ends, x + _TIME_EPS)
            while i < len(starts) and starts[i] < x + busy - _TIME_EPS:
                x = ends[i]
                i += 1
            if x < best:
                best, best_lane = x, lane
                if x <= a:
                    break
        return best, best_lane

    def fit(self, ready: float, hops: list[tuple[int, float, float]]) -> tuple[float, list[int]]:
        """The earliest start >= ready at which every hop (link, offset from the start, busy seconds) finds a
        lane free, and those lanes."""
        t = ready
        while True:
            lanes = []
            for link, offset, busy in hops:
                x, lane = self.earliest(link, t + offset, busy)
                if x > t + offset + _TIME_EPS:
                    t = x - offset
                    break
                lanes.append(lane)
            else:
                return t, lanes

    def book(self, link: int, lane: int, a: float, b: float) -> None:
        """Mark [a, b) busy, merged with the bookings it touches."""
        starts, ends = self.starts[link][lane], self.ends[link][lane]
        i = bisect_left(starts, a)
        if i > 0 and ends[i - 1] >= a - _TIME_EPS:  # extends the previous interval
            i -= 1
            ends[i] = max(ends[i], b)
        else:
            starts.insert(i, a)
            ends.insert(i, b)
        while i + 1 < len(starts) and starts[i + 1] <= ends[i] + _TIME_EPS:  # swallows the next
            ends[i] = max(ends[i], ends[i + 1])
            del starts[i + 1], ends[i + 1]


def book_chunks(topology: Topology, fabric: _Fabric, routes: list[tuple[int, list[list[int]]]], chunk_bytes: float,
                stop=None, snap: bool = False) -> tuple[list[Transfer], float]:
    """Timed transfers for ``routes`` ((chunk id, its paths as link indices, the first preferred), every
    chunk ready at its source at time 0, and the last arrival.

    Events in time order: a chunk at a node that stores (a GPU, a switch with a buffer) books its next
    segment (the hops up to the next such node: one hop, or a chain through bufferless switches) at the
    earliest time the calendars allow; among chunks ready at the same time the one with the most hops to
    go first. A chunk whose first segment is a chain takes, of its paths, the one that fits first (and
    with ``snap`` starts chains on the grid of its first hop's delay, so no chain leaves a sliver of a
    link no other chunk fits in).
    """
    costs = link_costs(topology, chunk_bytes)
    delay = [costs[key].delay for key in fabric.links]
    busy = [costs[key].busy for key in fabric.links]
    calendars = LinkCalendars([costs[key].lanes for key in fabric.links])
    head = fabric.head.tolist()
    stores = [fabric.is_gpu[i] or topology.nodes[n].buffer for i, n in enumerate(fabric.nodes)]
    nodes = fabric.nodes
    link_ends = [(nodes[u], nodes[v]) for u, v in fabric.links]
    chosen = [paths[0] for _, paths in routes]
    rotation = os.environ.get("MCF_ORDER") == "rotation"
    heap = [(0.0, 0 if rotation else -len(paths[0]), seq, 0) for seq, (_, paths) in enumerate(routes)]
    heapq.heapify(heap)

    def segment(links: list[int], pos: int) -> list[tuple[int, float, float]]:
        end = pos + 1
        while not stores[head[links[end - 1]]]:
            end += 1
        hops, offset = [], 0.0
        for e in links[pos:end]:
            hops.append((e, offset, busy[e]))
            offset += delay[e]
        return hops

    def fit(hops: list[tuple[int, float, float]], ready: float) -> tuple[float, list[int]]:
        if snap and len(hops) > 1:
            slot = delay[hops[0][0]]
            while True:
                start, lanes = calendars.fit(ready, hops)
                grid = math.ceil(start / slot - 1e-9) * slot
                if grid <= start + _TIME_EPS:
                    return start, lanes
                ready = grid
        return calendars.fit(ready, hops)

    transfers: list[Transfer] = []
    finish = 0.0
    events = 0
    while heap:
        ready, _, seq, pos = heapq.heappop(heap)
        cid, paths = routes[seq]
        links = chosen[seq]
        hops = segment(links, pos)
        start, lanes = fit(hops, ready)
        if pos == 0 and len(hops) > 1 and len(paths) > 1:  # a chain: the path that fits first
            for other in paths[1:]:
                other_hops = segment(other, 0)
                other_start, other_lanes = fit(other_hops, ready)
                if other_start < start - _TIME_EPS:
                    links, hops, start, lanes = other, other_hops, other_start, other_lanes
            chosen[seq] = links
        end = pos + len(hops)
        t = start
        for (e, _, hold), lane, step in zip(hops, lanes, range(pos, end), strict=True):
            calendars.book(e, lane, t, t + hold)
            u, v = link_ends[e]
            transfers.append(Transfer(cid, u, v, t, t + delay[e], "copy", float(step)))
            t += delay[e]
        if end < len(links):
            heapq.heappush(heap, (t, -(len(links) - end), seq, end))
        else:
            finish = max(finish, t)
        events += 1
        if stop is not None and events % STOP_EVERY == 0 and stop.is_set():
            raise CcvizError("stop: mcf was stopped before its schedule was complete (it has no partial "
                             "schedule to return)", "stop")
    return transfers, finish


# ------------------------------------------------------------------------------ the slot grid
class RoutePlan:
    """Each chunk's path cut at the GPUs it passes, as the edges ``ccviz.synth.slotted`` books: routes
    through switches on its slot grid (every slot's senders matched together, detours along other switch
    paths of the same length), direct links whenever free."""

    def __init__(self, topology: Topology, fabric: _Fabric, routes: list[tuple[int, list[list[int]]]],
                 urgency: dict[int, float]) -> None:
        sorted_id = {key: i for i, key in enumerate(sorted(topology.links))}
        nodes, head = fabric.nodes, fabric.head
        self.urgency = urgency
        self.source: dict[int, int] = {}
        self.edges: dict[tuple[int, int], tuple[int, list[int]]] = {}  # (chunk, GPU) -> (next GPU, route)
        for cid, paths in routes:
            links = paths[0]
            at = nodes[fabric.tail[links[0]]]
            self.source[cid] = at
            route: list[int] = []
            for e in links:
                route.append(sorted_id[fabric.links[e]])
                v = nodes[head[e]]
                if not topology.is_switch(v):
                    self.edges[(cid, at)] = (v, route)
                    at, route = v, []

    def starts(self, collective: Collective) -> list[tuple[int, int]]:
        return list(self.source.items())

    def arrive(self, chunk, node: int, initial: bool) -> list[tuple[float, int, list[int]]]:
        edge = self.edges.get((chunk.id, node))
        return [] if edge is None else [(self.urgency[chunk.id], edge[0], edge[1])]


# ------------------------------------------------------------------------------ the synthesizer
def _pieces(collective: Collective, paths, n_pairs: int) -> int:
    """Chunks per pair: the collective's when it has several, else the most of ``CHUNK_CHOICES`` that keep
    the schedule under ``TRANSFER_BUDGET`` transfers."""
    if collective.chunks_per_rank > 1:
        return collective.chunks_per_rank
    hops = sum(frac * len(links) for options in paths.values() for frac, links in options) / max(1, n_pairs)
    for count in CHUNK_CHOICES:
        if n_pairs * hops * count <= TRANSFER_BUDGET:
            return count
    return 1


def synthesize_mcf(topology: Topology, collective: Collective, options: SynthOptions) -> Schedule:
    """Registry entry (AllToAll over every GPU)."""
    from ccviz.bounds.alltoall_limit import alltoall_flow

    t0 = time.perf_counter()
    if collective.name != "alltoall":
        raise CcvizError(f"collective: mcf synthesizes alltoall only, not {collective.name}", "collective")
    if tuple(collective.ranks) != tuple(topology.gpus):
        raise CcvizError("ranks: mcf runs AllToAll over every GPU of the fabric (its flow LP has no process "
                         "groups); drop --ranks or use direct / mteg", "ranks")
    options.report(Progress(time.perf_counter() - t0, "solving the maximum concurrent flow LP"))
    flow = alltoall_flow(topology, need_flows=True)
    fabric = _fabric(topology, flow.links)
    options.report(Progress(time.perf_counter() - t0, f"LP solved in {flow.solve_s:.2f} s; splitting flows into paths"))
    paths = pair_paths(flow, fabric, topology.gpus)
    n_pairs = len(paths)
    pieces = _pieces(collective, paths, n_pairs)
    if pieces != collective.chunks_per_rank:
        collective = make_collective("alltoall", topology, collective.size_bytes, pieces, collective.root)
    chunk_of = {(c.source, next(iter(c.post)), c.index): c.id for c in collective.chunks}
    assigned = assign_paths(paths, pieces, flow.capacity_GBps, options.seed or 0)
    nodes = fabric.nodes
    routes = [(chunk_of[(nodes[s], nodes[t], k)], [links] + [p for _, p in paths[(s, t)] if p is not links])
              for s, t, k, links in assigned]
    options.report(Progress(time.perf_counter() - t0, f"booking {len(routes)} chunks on the link calendars"))
    snap = os.environ.get("MCF_SNAP") == "1"
    t1 = time.perf_counter()
    transfers, finish = book_chunks(topology, fabric, routes, collective.chunk_bytes, options.stop, snap)
    print("calendar", finish / (flow.seconds_per_pair_GB * collective.size_bytes / topology.n_gpus / 1e9), time.perf_counter() - t1, file=sys.stderr)
    from ccviz.synth.slotted import slot_eligible, slotted_pipeline
    if topology.switches and slot_eligible(topology):
        t1 = time.perf_counter()
        urgency = {cid: -len(paths[0]) for cid, paths in routes}
        plan = RoutePlan(topology, fabric, routes, urgency)
        slotted = slotted_pipeline(topology, collective, plan, 0.0)
        print("slotted", slotted[1] / (flow.seconds_per_pair_GB * collective.size_bytes / topology.n_gpus / 1e9), time.perf_counter() - t1, file=sys.stderr)
        if slotted is not None and slotted[1] < finish:
            transfers, finish = slotted
    slots = int(topology.meta.get("buffer_ranks", topology.n_gpus))
    limit_s = flow.seconds_per_pair_GB * collective.size_bytes / slots / 1e9
    n_paths = sum(len(p) for p in paths.values())
    notes = [
        f"maximum concurrent flow LP ({flow.method}) solved in {flow.solve_s:.2f} s: limit "
        f"{limit_s * 1e6:.4g} us (bandwidth only, alpha ignored)",
        f"{n_paths} paths over {n_pairs} pairs; {pieces} chunk(s) per pair, each on its pair's least loaded path",
        f"booked hop by hop on link calendars: estimated finish {finish / limit_s:.3f} x the limit",
    ]
    return Schedule(topology, collective, transfers, "mcf", options={"chunks_per_pair": pieces}, status="heuristic",
                    synth_time_s=time.perf_counter() - t0, estimated_finish_s=finish, notes=notes)
