"""mcf: AllToAll along the flows of its exact limit, cut into chunks and booked link by link.

The maximum concurrent flow LP (``ccviz.bounds.concurrent_flow``) says how much of every pair's
data each link carries at the limit. Here each source's flow is split into paths to each
destination (``decompose``: walk back from the destination along the largest in-flow, cancel a
cycle when one appears), every pair's ``M / N`` bytes are cut into chunks and each chunk takes one
of its pair's paths, the one whose links are least loaded so far (``assign_paths``: the loads then
follow the LP's to within a chunk per link). On a fabric the LP reduced by symmetry, source 0's
paths are decomposed once and translated to every other source.

The chunks are then booked hop by hop in time order (``book_chunks``): on fabrics of direct links a
chunk leaves a GPU as soon as it has arrived there and a lane of the next link is free, the chunk
with the most hops still to go first. A route through bufferless switches is booked as one chain
(each hop starts the instant the previous one lands: a switch stores nothing) on per-link calendars
(``LinkCalendars``), fitted into the first time every link of the chain is free (gaps included),
along any switch path of the same length that fits first (``SwitchPaths``); chains of one length
go together, in rounds in which every GPU sends to a different GPU (the fabric's translations where
the LP found them, else matchings). Where either booking ends above 1.05 x the limit, the chunks are
booked again with the binding links first (``book_binding_first``: each binding link, when it frees
up, takes the first waiting segment that can cross it at that instant) and the faster schedule kept:
measured at 64 GPUs, first-fit left a leaf-spine's GPU links idle 16 % of the time between chains and
its detours overloaded a dragonfly's global links; on direct links it helps too (a100:boxes=8 1.085
-> 1.034 x, hypercube 1.051 -> 1.028 x). Small switched fabrics that still end above
1.05 x the limit also try ``ccviz.synth.slotted``'s slot grid and keep the faster schedule.

What it does not do: latency. The LP is bandwidth only (alpha ignored), so at small sizes, where
alpha dominates, latency-optimal algorithms (bruck, direct) win; Compare shows where.
"""

from __future__ import annotations

import heapq
import time
from bisect import bisect_left, bisect_right, insort

import numpy as np

from ccviz.bounds.concurrent_flow import FabricArrays, permuted_links
from ccviz.errors import CcvizError
from ccviz.model.collectives import Collective, make_collective
from ccviz.model.physics import link_costs
from ccviz.model.schedule import Schedule, Transfer
from ccviz.model.topology import Topology
from ccviz.model.units import format_time
from ccviz.synth.registry import Progress, SynthOptions
from ccviz.synth.slotted import slot_eligible, slotted_pipeline

TRANSFER_BUDGET = 300_000  # automatic chunks per pair keep the schedule under this many transfers
CHUNK_CHOICES = (8, 6, 4, 3, 2, 1)
SMALL_CHUNK_CHOICES = (32, 16)  # where even these stay under SMALL_BUDGET transfers: the last chunk's trip, the
SMALL_BUDGET = 60_000  # tail after the links fill, is 1/chunks of a pair's share (ring:n=6 1.056 -> 1.014 x)
PATHS_PER_PAIR = 8  # a pair's candidate paths: its largest flows, and every path as large as the last of them
MAX_TIED_PATHS = 64  # (NVL72: 18 equal paths, one per NVSwitch; the first 8 alone ran at 8/18 of the limit)
SLOT_GRID_GPUS = 32  # up to here a switched fabric whose calendars end above SLOT_GRID_ABOVE x the limit
SLOT_GRID_ABOVE = 1.05  # also tries ccviz.synth.slotted's grid (slower: it matches every slot's senders)
MAX_DETOURS = 64  # other switch paths a chain kept waiting may take
BINDING_SLACK = 0.02  # links booked within this fraction of the busiest count as binding
BINDING_WINDOW = 16  # distinct waiting chains compared when none can cross a binding link the instant it frees up
BINDING_ABOVE = 1.05  # calendars ending above this x the limit also try booking the binding links first
_FLOW_EPS = 1e-9  # flow (in pairs' demands) treated as zero
_TIME_EPS = 1e-15  # s: bookings that only touch do not overlap
STOP_EVERY = 20_000  # bookings between two looks at the stop flag
REPAIR_PASSES = 64  # passes of ``_even_out`` over the pieces at most (each lowers the busiest links)


# ------------------------------------------------------------------------------ flows into paths
def decompose(fabric: FabricArrays, row: np.ndarray, source: int, dests: list[int],
              needs: dict[int, float] | None = None) -> dict[int, list[tuple[float, list[int]]]]:
    """Source ``source``'s flow (one unit to each of ``dests``, node positions, or ``needs[t]`` units: an
    AllToAllv's matrix) as paths: per destination a list of (fraction, link indices), fractions summing to 1."""
    flow = np.where(row > _FLOW_EPS, row, 0.0)
    into: dict[int, list[int]] = {}
    for e in np.flatnonzero(flow).tolist():
        into.setdefault(int(fabric.head[e]), []).append(e)
    tail = fabric.tail
    out: dict[int, list[tuple[float, list[int]]]] = {}
    for t in dests:
        need, paths = (1.0 if needs is None else needs[t]), []
        done = 1e-6 * need
        for _ in range(10_000):
            if need <= done:
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


def pair_paths(flow, fabric: FabricArrays, gpus: list[int]
               ) -> tuple[dict[tuple[int, int], list[tuple[float, list[int]]]], dict[tuple[int, int], int]]:
    """Every ordered GPU pair's paths (fraction, link indices), keyed by node positions, and its round: on a
    symmetric fabric source 0's paths are translated to every source and the round is the translation
    (round r: every GPU sends along a translate of source 0's paths to GPU r), else the round is the rank
    difference (t - s) mod N."""
    positions = [fabric.index[g] for g in gpus]
    group = flow.translations
    if group is None:
        out, rounds = {}, {}
        rank = {p: i for i, p in enumerate(positions)}
        row_of = dict(zip(positions, flow.flows, strict=True))
        for members in flow.twins or [[s] for s in positions]:
            first = int(members[0])
            base = decompose(fabric, row_of[first], first, [p for p in positions if p != first])
            moves = _twin_moves(fabric, flow.twins, first, members) if flow.twins else [np.arange(len(fabric.nodes))]
            for move in moves:
                s = int(move[first])
                image = permuted_links(fabric, move)
                for t, paths in base.items():
                    d = int(move[t])
                    out[(s, d)] = _top([(f, image[path].tolist()) for f, path in paths])
                    rounds[(s, d)] = (rank[d] - rank[s]) % len(positions)
        return out, rounds
    s0 = positions[0]
    base = decompose(fabric, flow.flows[0], s0, positions[1:])
    sources = group.perms[:, s0].tolist()
    out: dict[tuple[int, int], list[tuple[float, list[int]]]] = {}
    rounds: dict[tuple[int, int], int] = {}
    for r, (t, paths) in enumerate(base.items(), start=1):
        dests = group.perms[:, t].tolist()
        for s, d in zip(sources, dests, strict=True):
            rounds[(s, d)] = r
        for fraction, path in _top(paths):
            moved = group.link_perm[:, path].tolist()  # the path from every source at once
            for s, d, links in zip(sources, dests, moved, strict=True):
                out.setdefault((s, d), []).append((fraction, links))
    return out, rounds


def _twin_moves(fabric: FabricArrays, twins: list[np.ndarray], first: int, members) -> list[np.ndarray]:
    """Node permutations taking ``first`` to each of its twins ``members`` in turn, each of which carries
    ``first``'s paths to that twin's (twin GPUs' flows are images of their class's first one: 144 GPUs of two
    NVL72 racks decompose 8 flows, not 144).

    The i-th twin's move swaps it with ``first`` after turning every class i steps (``first`` kept): any
    move that takes ``first`` there carries its flow to the twin's, but a swap alone would send every twin's
    pair to a GPU through the same relays, the ones ``decompose`` happened to name for ``first`` (two NVL72
    racks: NIC links booked 251 to 327 chunks where the LP's flow is 288 on each, the schedule 1.13 x its
    limit)."""
    n_nodes = len(fabric.nodes)
    moves = []
    for i, s in enumerate(int(m) for m in members):
        turn = np.arange(n_nodes)
        for cls in twins:
            ring = [int(g) for g in cls if int(g) != first]
            for j, g in enumerate(ring):
                turn[g] = ring[(j + i) % len(ring)]
        swap = np.arange(n_nodes)
        swap[first], swap[s] = s, first
        moves.append(swap[turn])
    return moves


def _top(paths: list[tuple[float, list[int]]]) -> list[tuple[float, list[int]]]:
    """The ``PATHS_PER_PAIR`` largest paths and those tied with the last of them (up to ``MAX_TIED_PATHS``),
    fractions renormalized. Why the ties: where the LP splits a pair evenly over k > PATHS_PER_PAIR twin
    switches, a cut at PATHS_PER_PAIR would leave k - PATHS_PER_PAIR switches idle for every pair."""
    # equal fractions (to the LP's tolerance) in link order: every pair then lists its twin switches alike,
    # and assign_paths' ties pick the same switch for every pair of a round
    ranked = sorted(paths, key=lambda p: (-round(p[0], 6), p[1]))
    cut = PATHS_PER_PAIR
    if len(ranked) > cut:
        last = ranked[cut - 1][0]
        while cut < min(len(ranked), MAX_TIED_PATHS) and ranked[cut][0] >= last * (1 - 1e-6):
            cut += 1
    kept = ranked[:cut]
    total = sum(f for f, _ in kept)
    return [(f / total, p) for f, p in kept]


def assign_paths(paths: dict[tuple[int, int], list[tuple[float, list[int]]]], rounds: dict[tuple[int, int], int],
                 pieces: int, capacity: np.ndarray, seed: int) -> list[tuple[int, int, int, list[int]]]:
    """(source, dest, piece, links) for every piece of every pair, piece by piece and round by round (pairs
    of a round in a seeded random order): each piece takes the path of its pair whose busiest link (load
    over bandwidth, the piece included) is least busy; a path is preferred while its pieces are below its
    LP fraction."""
    load = [0.0] * len(capacity)
    inverse = (1.0 / capacity).tolist()
    rng = np.random.default_rng(seed)
    pairs = list(paths)
    rotation = [rounds[pair] for pair in pairs]
    out = []
    for k in range(pieces):
        shuffled = rng.permutation(len(pairs)).tolist()
        shuffled.sort(key=rotation.__getitem__)
        for i in shuffled:
            pair = pairs[i]
            options = paths[pair]
            best = options[0][1]
            if len(options) > 1:
                best_score = np.inf
                share = k + 1 - 1e-9 if pieces > 1 else -np.inf  # a path's fraction x pieces below this: beyond it
                for fraction, links in options:
                    score = 0.0
                    for e in links:  # the busiest link, as a loop: max() over a generator took 2 of 3 s here
                        x = (load[e] + 1.0) * inverse[e]
                        if x > score:
                            score = x
                    if fraction * pieces < share:
                        score += 1e6  # a path used beyond its share of the pieces is only a fallback
                    if score < best_score:
                        best, best_score = links, score
            for e in best:
                load[e] += 1.0
            out.append((pair[0], pair[1], k, best))
    _even_out(out, paths, load, inverse)
    return out


def _even_out(assigned: list[tuple[int, int, int, list[int]]], paths, load: list[float], inverse: list[float],
              passes: int = REPAIR_PASSES) -> None:
    """Pieces on the busiest links (load over bandwidth) move to another path of their pair whose busiest link,
    the piece added, stays below that level; pass after pass while any moves (in place).

    Why: one piece at a time, in round order, least-loaded choices cannot see the pairs that come later with a
    single path; on two NVL72 racks (4 pieces per pair, 8 to 25 paths each) they booked the NIC links 260 to
    316 chunks where the LP's flow is 288 on each, and the schedule finishes with its busiest link."""
    for _ in range(passes):
        top = max(x * y for x, y in zip(load, inverse, strict=True))
        level = top * (1 - 1e-9)
        moved = 0
        for i, (s, t, k, links) in enumerate(assigned):
            options = paths[(s, t)]
            if len(options) < 2 or not any(load[e] * inverse[e] >= level for e in links):
                continue
            on = set(links)
            best, best_score = None, level
            for _, other in options:
                score = 0.0
                for e in other:
                    x = (load[e] + (0.0 if e in on else 1.0)) * inverse[e]
                    if x > score:
                        score = x
                if score < best_score:
                    best, best_score = other, score
            if best is not None:
                for e in links:
                    load[e] -= 1.0
                for e in best:
                    load[e] += 1.0
                assigned[i] = (s, t, k, best)
                moved += 1
        if not moved:
            return


def matching_rounds(pairs: list[tuple[int, int, int]]) -> dict[tuple[int, int, int], int]:
    """Per route length, the (source, dest) pairs cut into rounds in which every GPU sends at most one and
    receives at most one (repeated maximum bipartite matchings, scipy's Hopcroft-Karp): booked round by
    round, a round's chains do not ask for one in-link at the same instant."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import maximum_bipartite_matching

    out: dict[tuple[int, int, int], int] = {}
    by_length: dict[int, set[tuple[int, int]]] = {}
    for s, t, length in pairs:
        by_length.setdefault(length, set()).add((s, t))
    for length, left in by_length.items():
        ids = {n: i for i, n in enumerate(sorted({x for pair in left for x in pair}))}
        r = 0
        while left:
            rows = np.array([ids[s] for s, _ in left])
            cols = np.array([ids[t] for _, t in left])
            graph = csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(ids), len(ids)))
            match = maximum_bipartite_matching(graph, perm_type="column")
            names = list(ids)
            taken = {(names[i], names[j]) for i, j in enumerate(match.tolist()) if j >= 0}
            for s, t in taken:
                out[(s, t, length)] = r
            left -= taken
            r += 1
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
        lanes_starts = self.starts[link]
        if len(lanes_starts) == 1:  # one lane: the common case, without the loop over lanes
            starts, ends = lanes_starts[0], self.ends[link][0]
            i = bisect_right(ends, a + _TIME_EPS)
            n = len(starts)
            while i < n and starts[i] < a + busy - _TIME_EPS:
                a = ends[i]
                i += 1
            return a, 0
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

    def free_lane(self, link: int, x: float, busy: float) -> int:
        """A lane of ``link`` free over [x, x + busy), or -1."""
        for lane, (starts, ends) in enumerate(zip(self.starts[link], self.ends[link], strict=True)):
            i = bisect_right(ends, x + _TIME_EPS)
            if i == len(starts) or starts[i] >= x + busy - _TIME_EPS:
                return lane
        return -1

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


def book_chunks(topology: Topology, fabric: FabricArrays, routes: list[tuple[int, list[int]]], chunk_bytes: float,
                order: list[int], stop=None) -> tuple[list[Transfer], float]:
    """Timed transfers for ``routes`` ((chunk id, its path as link indices), every chunk ready at its source
    at time 0, and the last arrival.

    Events in time order: a chunk at a node that stores (a GPU, a switch with a buffer) books its next
    segment (the hops up to the next such node: one hop, or a chain through bufferless switches) at the
    earliest time the calendars allow. A chain may go along any switch path of the same length between
    its first and last switch (``SwitchPaths``): the one that fits first. Among chunks ready at the same
    time, ``order`` decides (rounds: in round r every GPU sends to a different GPU), on fabrics without
    chains the chunk with the most hops to go.
    """
    costs = link_costs(topology, chunk_bytes)
    delay = [costs[key].delay for key in fabric.links]
    busy = [costs[key].busy for key in fabric.links]
    if not any(topology.is_switch(v) and not topology.nodes[v].buffer for _, v in fabric.links):
        return _book_hops(fabric, routes, delay, busy, [costs[key].lanes for key in fabric.links], stop)
    calendars = LinkCalendars([costs[key].lanes for key in fabric.links])
    head = fabric.head.tolist()
    stores = [bool(fabric.is_gpu[i]) or topology.nodes[n].buffer for i, n in enumerate(fabric.nodes)]
    alternatives = SwitchPaths(fabric, stores)
    nodes = fabric.nodes
    link_ends = [(nodes[u], nodes[v]) for u, v in fabric.links]
    heap = [(0.0, order[seq], seq, 0) for seq in range(len(routes))]
    heapq.heapify(heap)
    chosen = [links for _, links in routes]

    def timed(chain: list[int]) -> list[tuple[int, float, float]]:
        hops, offset = [], 0.0
        for e in chain:
            hops.append((e, offset, busy[e]))
            offset += delay[e]
        return hops

    transfers: list[Transfer] = []
    finish = 0.0
    events = 0
    while heap:
        ready, rank, seq, pos = heapq.heappop(heap)
        cid = routes[seq][0]
        links = chosen[seq]
        end = pos + 1
        while not stores[head[links[end - 1]]]:
            end += 1
        hops = timed(links[pos:end])
        start, lanes = calendars.fit(ready, hops)
        if len(hops) > 1 and start > ready + _TIME_EPS:  # a chain kept waiting: another switch path
            # no path starts before its first link (the GPU's own) is free: the first that can, goes
            soonest, _ = calendars.fit(ready, hops[:1])
            for other in alternatives.around(links[pos:end]):
                if start <= soonest + _TIME_EPS:
                    break
                other_hops = timed(other)
                other_start, other_lanes = calendars.fit(soonest, other_hops)
                if other_start < start - _TIME_EPS:
                    hops, start, lanes = other_hops, other_start, other_lanes
            if [h[0] for h in hops] != links[pos:end]:
                links = chosen[seq] = links[:pos] + [h[0] for h in hops] + links[end:]
        t = start
        for (e, _, hold), lane, step in zip(hops, lanes, range(pos, end), strict=True):
            calendars.book(e, lane, t, t + hold)
            u, v = link_ends[e]
            transfers.append(Transfer(cid, u, v, t, t + delay[e], "copy", float(step)))
            t += delay[e]
        if end < len(links):
            heapq.heappush(heap, (t, rank, seq, end))
        else:
            finish = max(finish, t)
        events += 1
        _check_stop(stop, events)
    return transfers, finish


def _check_stop(stop, events: int) -> None:
    """Every ``STOP_EVERY`` booked events, end the booking if Stop was pressed (mcf has no partial schedule)."""
    if stop is not None and events % STOP_EVERY == 0 and stop.is_set():
        raise CcvizError("stop: mcf was stopped before its schedule was complete (it has no partial "
                         "schedule to return)", "stop")


class SwitchPaths:
    """The other ways through the switches: for a chain GPU -> switch ... switch -> GPU, every chain with
    the same first and last link whose middle is a switch path of the same length (a fat-tree's other
    aggregation and core switches), at most ``MAX_DETOURS``, found once per pair of switches."""

    def __init__(self, fabric: FabricArrays, stores: list[bool]) -> None:
        self.out: dict[int, list[tuple[int, int]]] = {}
        for e, (u, v) in enumerate(zip(fabric.tail.tolist(), fabric.head.tolist(), strict=True)):
            if not stores[u] and not stores[v]:
                self.out.setdefault(u, []).append((v, e))
        self.cache: dict[tuple[int, int, int], list[list[int]]] = {}
        self.tail = fabric.tail.tolist()
        self.head = fabric.head.tolist()
        self.hops_to: dict[int, dict[int, int]] = {}  # target switch -> hops from each switch (BFS, lazily)

    def around(self, chain: list[int]) -> list[list[int]]:
        if len(chain) < 3:
            return []
        a, b, hops = self.head[chain[0]], self.tail[chain[-1]], len(chain) - 2
        key = (a, b, hops)
        if key not in self.cache:
            found: list[list[int]] = []
            self._walk(a, b, hops, [], found, self._distances_to(b))
            self.cache[key] = found
        return [[chain[0], *middle, chain[-1]] for middle in self.cache[key] if middle != chain[1:-1]]

    def _distances_to(self, target: int) -> dict[int, int]:
        """Hops from every switch to ``target`` along switch links (a walk never steps out of reach)."""
        if target not in self.hops_to:
            into: dict[int, list[int]] = {}
            for u, outs in self.out.items():
                for v, _ in outs:
                    into.setdefault(v, []).append(u)
            dist, frontier = {target: 0}, [target]
            while frontier:
                nxt = []
                for v in frontier:
                    for u in into.get(v, ()):
                        if u not in dist:
                            dist[u] = dist[v] + 1
                            nxt.append(u)
                frontier = nxt
            self.hops_to[target] = dist
        return self.hops_to[target]

    def _walk(self, node: int, target: int, left: int, path: list[int], found: list[list[int]],
              dist: dict[int, int]) -> None:
        if len(found) >= MAX_DETOURS:
            return
        if left == 0:
            if node == target:
                found.append(list(path))
            return
        for v, e in self.out.get(node, ()):
            if dist.get(v, left) <= left - 1:
                path.append(e)
                self._walk(v, target, left - 1, path, found, dist)
                path.pop()


def _book_hops(fabric: FabricArrays, routes: list[tuple[int, list[int]]], delay: list[float], busy: list[float],
               lanes: list[int], stop=None) -> tuple[list[Transfer], float]:
    """``book_chunks`` where every segment is one hop (no bufferless switch): in time order a hop starts
    when its chunk is there and a lane is free. Nothing is ever booked before an earlier-booked hop's
    start then, so a lane's calendar is the time it frees up."""
    free: list = [0.0 if n == 1 else [0.0] * n for n in lanes]
    nodes = fabric.nodes
    link_ends = [(nodes[u], nodes[v]) for u, v in fabric.links]
    paths = [links for _, links in routes]
    chunk = [cid for cid, _ in routes]
    heap = [(0.0, -len(p), seq, 0) for seq, p in enumerate(paths)]
    heapq.heapify(heap)
    transfers: list[Transfer] = []
    append = transfers.append
    finish, events = 0.0, 0
    pop, push = heapq.heappop, heapq.heappush
    while heap:
        ready, togo, seq, pos = pop(heap)
        e = paths[seq][pos]
        lane = free[e]
        if isinstance(lane, float):
            start = ready if ready > lane else lane
            free[e] = start + busy[e]
        else:
            i = lane.index(min(lane))
            start = max(ready, lane[i])
            lane[i] = start + busy[e]
        u, v = link_ends[e]
        arrival = start + delay[e]
        append(Transfer(chunk[seq], u, v, start, arrival, "copy", float(pos)))
        if togo < -1:
            push(heap, (arrival, togo + 1, seq, pos + 1))
        elif arrival > finish:
            finish = arrival
        events += 1
        _check_stop(stop, events)
    return transfers, finish


# ------------------------------------------------------------------------------ binding links first
def binding_links(busy_total: list[float]) -> set[int]:
    """Links whose booked busy time (every chunk routed on them, over their lanes) is within
    ``BINDING_SLACK`` of the busiest: the ones that set the finish if they ever stand idle."""
    top = max(busy_total, default=0.0)
    return {e for e, total in enumerate(busy_total) if total >= (1.0 - BINDING_SLACK) * top > 0.0}


class _Segments:
    """Routes cut at the nodes that store (GPUs, switches with buffers): a segment is one hop or a chain
    through bufferless switches, held back to back. Tracks where each route is and when it got there."""

    def __init__(self, routes: list[tuple[int, list[int]]], stores: list[bool], head: list[int]) -> None:
        self.chosen = [list(links) for _, links in routes]
        self.at = [0] * len(routes)
        self.ready = [0.0] * len(routes)
        self.stores, self.head = stores, head

    def end(self, seq: int) -> int:
        """Where route ``seq``'s current segment ends (one past its last link)."""
        links, end = self.chosen[seq], self.at[seq] + 1
        while not self.stores[self.head[links[end - 1]]]:
            end += 1
        return end

    def current(self, seq: int) -> list[int]:
        return self.chosen[seq][self.at[seq]:self.end(seq)]

    def reroute(self, seq: int, chain: list[int]) -> None:
        """The current segment goes along ``chain`` (another switch path between the same GPUs)."""
        links, pos = self.chosen[seq], self.at[seq]
        self.chosen[seq] = links[:pos] + chain + links[self.end(seq):]


def book_binding_first(topology: Topology, fabric: FabricArrays, routes: list[tuple[int, list[int]]], chunk_bytes: float,
                       order: list[int], give_up=None) -> tuple[list[Transfer], float] | None:
    """``book_chunks`` driven by the binding links, for fabrics where first-fit in one fixed order loses: a
    chain through bufferless switches must find several links free at fixed offsets at once, and each
    chain placed at its own earliest time leaves the links that set the finish idle in between (on
    direct links, hops booked in time order, most hops to go first, leave them idle too).

    Each segment waits on the first binding link it crosses. The binding links are served in time order:
    when one frees up, the first of its waiting segments (in ``order``) that can cross it at that instant
    goes, along its own switch path or another of the same length that crosses the same binding links;
    when none can, the soonest of the first ``BINDING_WINDOW`` distinct chains. So a link at the limit stands idle only
    when no waiting chain fits. A segment that crosses no binding link is booked first-fit: at once when a
    later segment of its route waits on a binding link, else after the rest, into the gaps they left.
    None when ``give_up()`` says so (asked every ``STOP_EVERY`` bookings): the first booking stands.
    """
    costs = link_costs(topology, chunk_bytes)
    delay = [costs[key].delay for key in fabric.links]
    busy = [costs[key].busy for key in fabric.links]
    lanes_of = [costs[key].lanes for key in fabric.links]
    calendars = LinkCalendars(lanes_of)
    stores = [bool(fabric.is_gpu[i]) or topology.nodes[n].buffer for i, n in enumerate(fabric.nodes)]
    alternatives = SwitchPaths(fabric, stores)
    segments = _Segments(routes, stores, fabric.head.tolist())
    nodes = fabric.nodes
    link_ends = [(nodes[u], nodes[v]) for u, v in fabric.links]
    total = [0.0] * len(fabric.links)
    for _, links in routes:
        for e in links:
            total[e] += busy[e] / lanes_of[e]
    binding = binding_links(total)

    timings: dict[tuple[int, ...], list[tuple[int, float, float]]] = {}
    detours: dict[tuple[int, ...], list[tuple[int, ...]]] = {}

    def timed(chain: tuple[int, ...]) -> list[tuple[int, float, float]]:
        """(link, offset from the chain's start, busy seconds) per hop, worked out once per chain."""
        hops = timings.get(chain)
        if hops is None:
            hops, offset = [], 0.0
            for e in chain:
                hops.append((e, offset, busy[e]))
                offset += delay[e]
            timings[chain] = hops
        return hops

    def options(chain: tuple[int, ...]) -> list[tuple[int, ...]]:
        """The chain and its other switch paths that cross the same binding links."""
        found = detours.get(chain)
        if found is None:
            keeps = [e for e in chain if e in binding]
            found = detours[chain] = [chain] + [tuple(o) for o in alternatives.around(list(chain))
                                                if [e for e in o if e in binding] == keeps]
        return found

    transfers: list[Transfer] = []
    finish = 0.0

    def book(seq: int, hops: list[tuple[int, float, float]], start: float, lanes: list[int]) -> None:
        nonlocal finish
        segments.reroute(seq, [e for e, _, _ in hops])
        pos, t = segments.at[seq], start
        for (e, _, hold), lane, step in zip(hops, lanes, range(pos, pos + len(hops)), strict=True):
            calendars.book(e, lane, t, t + hold)
            u, v = link_ends[e]
            transfers.append(Transfer(routes[seq][0], u, v, t, t + delay[e], "copy", float(step)))
            t += delay[e]
        segments.at[seq], segments.ready[seq] = pos + len(hops), t
        if segments.at[seq] == len(segments.chosen[seq]):
            finish = max(finish, t)

    def first_fit(seq: int) -> None:
        """Book route ``seq``'s next segment at its earliest free time, along whichever switch path is soonest."""
        best = None
        for chain in options(tuple(segments.current(seq))):
            hops = timed(chain)
            start, lanes = calendars.fit(segments.ready[seq], hops)
            if best is None or start < best[0] - _TIME_EPS:
                best = (start, hops, lanes)
        book(seq, best[1], best[0], best[2])

    waiting: dict[int, list[tuple[int, int]]] = {}  # binding link -> (rank, route), in rank order
    frontier: list[tuple[float, int]] = []  # (time from which a binding link looks for its next hop, link)
    later: list[int] = []  # routes whose remaining segments cross no binding link

    def advance(seq: int) -> None:
        """Route ``seq``'s next segment: queued on its first binding link, or booked now, or left for later."""
        while segments.at[seq] < len(segments.chosen[seq]):
            chain = segments.current(seq)
            driver = next((e for e in chain if e in binding), None)
            if driver is not None:
                if not waiting.get(driver):
                    heapq.heappush(frontier, (segments.ready[seq], driver))
                insort(waiting.setdefault(driver, []), (order[seq], seq))
                return
            if not any(e in binding for e in segments.chosen[seq][segments.at[seq] + len(chain):]):
                later.append(seq)
                return
            first_fit(seq)

    def fits_now(chain: tuple[int, ...], ready: float, link: int, free_at: float
                 ) -> tuple[list[tuple[int, float, float]], float, list[int]] | None:
        """A way for the segment ``chain`` (at its start node from ``ready``) to cross ``link`` at ``free_at``:
        (hops, start, lanes), or None."""
        for option in options(chain):
            hops = timed(option)
            offset = next(off for e, off, _ in hops if e == link)
            start = free_at - offset
            if start < ready - _TIME_EPS:
                continue
            e, off, hold = hops[-1]  # the last link, every option's: when it is taken none fits
            if calendars.free_lane(e, start + off, hold) < 0:
                return None
            lanes = []
            for e, off, hold in hops:
                lane = calendars.free_lane(e, start + off, hold)
                if lane < 0:
                    break
                lanes.append(lane)
            else:
                return hops, start, lanes
        return None

    for seq in range(len(routes)):
        advance(seq)
    events = 0
    while frontier:
        free_at, link = heapq.heappop(frontier)
        queue = waiting[link]
        found, tried = None, set()
        for i, (_, seq) in enumerate(queue):
            chain = tuple(segments.current(seq))
            key = (segments.ready[seq] <= free_at, chain)
            if key in tried:  # the same chain, as ready: it fits no better
                continue
            tried.add(key)
            hit = fits_now(chain, segments.ready[seq], link, free_at)
            if hit is not None:
                found = (i, *hit)
                break
        if found is None:  # nothing crosses now: the soonest of the first few
            soonest = None
            tried = set()
            for i, (_, seq) in enumerate(queue):
                key = tuple(segments.current(seq))
                if key in tried:
                    continue
                tried.add(key)
                if len(tried) > BINDING_WINDOW:
                    break
                for option in options(key):
                    hops = timed(option)
                    offset = next(off for e, off, _ in hops if e == link)
                    start, lanes = calendars.fit(max(segments.ready[seq], free_at - offset), hops)
                    if soonest is None or start + offset < soonest[0] - _TIME_EPS:
                        soonest = (start + offset, i, hops, start, lanes)
            found = soonest[1:]
        i, hops, start, lanes = found
        _, seq = queue.pop(i)
        book(seq, hops, start, lanes)
        if queue:
            crossing = start + next(off for e, off, _ in hops if e == link)
            heapq.heappush(frontier, (crossing + busy[link] / lanes_of[link], link))
        advance(seq)
        events += 1
        if give_up is not None and events % STOP_EVERY == 0 and give_up():
            return None
    for seq in sorted(later, key=order.__getitem__):
        while segments.at[seq] < len(segments.chosen[seq]):
            first_fit(seq)
    return transfers, finish


# ------------------------------------------------------------------------------ the slot grid
class RoutePlan:
    """Each chunk's path cut at the GPUs it passes, as the edges ``ccviz.synth.slotted`` books: routes
    through switches on its slot grid (every slot's senders matched together, detours along other switch
    paths of the same length), direct links whenever free."""

    def __init__(self, topology: Topology, fabric: FabricArrays, routes: list[tuple[int, list[int]]],
                 urgency: dict[int, float]) -> None:
        sorted_id = {key: i for i, key in enumerate(sorted(topology.links))}
        nodes, head = fabric.nodes, fabric.head
        self.urgency = urgency
        self.source: dict[int, int] = {}
        self.edges: dict[tuple[int, int], tuple[int, list[int]]] = {}  # (chunk, GPU) -> (next GPU, route)
        for cid, links in routes:
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
    """Chunks per pair: the collective's when it has several, else the most of ``SMALL_CHUNK_CHOICES`` that
    keep a small fabric's schedule under ``SMALL_BUDGET`` transfers, else of ``CHUNK_CHOICES`` under
    ``TRANSFER_BUDGET``."""
    if collective.chunks_per_rank > 1:
        return collective.chunks_per_rank
    hops = sum(frac * len(links) for options in paths.values() for frac, links in options) / max(1, n_pairs)
    for count in SMALL_CHUNK_CHOICES:
        if n_pairs * hops * count <= SMALL_BUDGET:
            return count
    for count in CHUNK_CHOICES:
        if n_pairs * hops * count <= TRANSFER_BUDGET:
            return max(count, _even_split(paths, count, n_pairs * hops))
    return 1


def _even_split(paths, count: int, transfers_per_piece: float) -> int:
    """k where every pair's flow is split evenly over the same number k > ``count`` of paths (NVL72's 18
    NVSwitches) and k pieces stay under ``TRANSFER_BUDGET``: one chunk per path then loads every link
    alike (N - 1 chunks on each GPU link), where ``count`` chunks leave some links one chunk over the rest
    (8 per pair: 32 or 31 on a link, finish 1.046 x the limit; 18: 1.014 x). Else 0."""
    sizes = {len(options) for options in paths.values()}
    if len(sizes) != 1:
        return 0
    k = sizes.pop()
    even = all(max(f for f, _ in options) - min(f for f, _ in options) < 1e-6 for options in paths.values())
    return k if even and k > count and transfers_per_piece * k <= TRANSFER_BUDGET else 0


def _ranks(order: list[int]) -> list[int]:
    """Each route's position in ``order`` (a list of route indices)."""
    rank = [0] * len(order)
    for position, i in enumerate(order):
        rank[i] = position
    return rank


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
    fabric = flow.fabric
    options.report(Progress(time.perf_counter() - t0, f"LP solved in {flow.solve_s:.2f} s; splitting flows into paths"))
    paths, rounds = pair_paths(flow, fabric, topology.gpus)
    n_pairs = len(paths)
    pieces = _pieces(collective, paths, n_pairs)
    if pieces != collective.chunks_per_rank:
        collective = make_collective("alltoall", topology, collective.size_bytes, pieces, collective.root)
    chunk_of = {(c.source, next(iter(c.post)), c.index): c.id for c in collective.chunks}
    assigned = assign_paths(paths, rounds, pieces, flow.capacity_GBps, options.seed or 0)
    nodes = fabric.nodes
    routes = [(chunk_of[(nodes[s], nodes[t], k)], links) for s, t, k, links in assigned]
    options.report(Progress(time.perf_counter() - t0, f"booking {len(routes)} chunks on the link calendars"))
    # chains through switches hold their links back to back: routes of one length together (shortest
    # first), so a GPU's in-link is not asked for by a long route and a short one at the same instant
    same_length = len({len(links) for _, links in routes}) == 1
    if flow.translations is None and not same_length:  # no translation rounds: each length's pairs cut into matchings
        rounds = matching_rounds([(s, t, len(links)) for s, t, _, links in assigned])
        order = sorted(range(len(routes)), key=lambda i: (len(routes[i][1]), assigned[i][2],
                                                          rounds[(assigned[i][0], assigned[i][1], len(routes[i][1]))], i))
    else:
        order = sorted(range(len(routes)), key=lambda i: (len(routes[i][1]), i))
    transfers, finish = book_chunks(topology, fabric, routes, collective.chunk_bytes, _ranks(order), options.stop)
    slots = int(topology.meta.get("buffer_ranks", topology.n_gpus))
    limit_s = flow.seconds_per_pair_GB * collective.size_bytes / slots / 1e9
    how = "booked hop by hop on link calendars"
    deadline = None if options.time_limit is None else t0 + options.time_limit

    def give_up() -> bool:  # a stop or the time limit keeps the schedule booked so far
        return bool((options.stop is not None and options.stop.is_set())
                    or (deadline is not None and time.perf_counter() > deadline))

    if finish > BINDING_ABOVE * limit_s:
        options.report(Progress(time.perf_counter() - t0, "booking again, the binding links first"))
        # every length mixed, piece by piece: short routes left to the end would leave the links they
        # do not cross (a leaf-spine's spine links) idle at the start
        if flow.translations is None and not same_length:
            by_piece = sorted(range(len(routes)), key=lambda i: (assigned[i][2], rounds[(assigned[i][0], assigned[i][1],
                                                                                        len(routes[i][1]))], i))
        else:
            by_piece = list(range(len(routes)))  # assign_paths' order: piece by piece, round by round (one length:
            # the rank-difference rounds are matchings already, and the ones assign_paths balanced the links by)
        binding = book_binding_first(topology, fabric, routes, collective.chunk_bytes, _ranks(by_piece), give_up)
        if binding is None:
            how += " (booking the binding links first, tried beside them, was cut off by the time limit or Stop)"
        elif binding[1] < finish:
            transfers, finish = binding
            how = "booked binding links first (it beat first-fit on the link calendars)"
    if topology.switches and topology.n_gpus <= SLOT_GRID_GPUS and finish > SLOT_GRID_ABOVE * limit_s \
            and slot_eligible(topology):
        options.report(Progress(time.perf_counter() - t0, "trying the slot grid (routes through switches "
                                                          "matched slot by slot)"))
        urgency = {cid: -len(links) for cid, links in routes}
        slotted = slotted_pipeline(topology, collective, RoutePlan(topology, fabric, routes, urgency), 0.0, give_up)
        if slotted is None:
            how += " (the slot grid tried beside them was cut off by the time limit or Stop)"
        elif slotted[1] < finish:
            transfers, finish = slotted
            how = "booked on the slot grid (routes through switches matched slot by slot; it beat the calendars)"
    n_paths = sum(len(p) for p in paths.values())
    notes = [
        f"maximum concurrent flow LP ({flow.method}) solved in {flow.solve_s:.2f} s: limit "
        f"{format_time(limit_s)} (bandwidth only, alpha ignored)",
        f"{n_paths} paths over {n_pairs} pairs; {pieces} chunk(s) per pair, each on its pair's least loaded path",
        f"{how}: estimated finish {finish / limit_s:.3f} x the limit",
    ]
    return Schedule(topology, collective, transfers, "mcf", options={"chunks_per_pair": pieces}, status="heuristic",
                    synth_time_s=time.perf_counter() - t0, estimated_finish_s=finish, notes=notes)
