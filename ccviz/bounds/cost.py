"""Lower bounds on any topology and closed-form alpha-beta costs of textbook algorithms.

Two different questions live here:

* ``lower_bound(topology, collective)``: no valid schedule on this topology can
  finish sooner. It is asserted ``simulated time >= bound`` for every
  algorithm, so every part is a relaxation of the simulator's own rules
  (store-and-forward hops, one chunk per transfer, serialization per lane,
  switch->X hops charged by ``switch_hop`` through ``Topology.arrival_delay``
  and ``occupancy``, copy switches).
* ``formula(collective, algorithm, n, size, alpha, bw)``: the textbook cost of
  an algorithm on an abstract fabric of ``n`` ranks, ``time = n_alpha * alpha
  + n_beta * M / BW`` with ``M`` the nccl-tests buffer size (see
  ``ccviz.model.collectives``).
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from ccviz.bounds.cut import cached
from ccviz.errors import CcvizError
from ccviz.model.collectives import Collective
from ccviz.model.routing import earliest_arrivals
from ccviz.model.topology import Topology
from ccviz.model.units import format_time

# =========================================================================== lower bounds


@dataclass(frozen=True)
class LowerBound:
    """The best proven lower bound and its parts (each a valid bound on its own).

    ``bandwidth_s`` is never below the fabric's limit (``limit_s``, bandwidth alone, any chunking)
    where that limit bounds every schedule; ``chunked_s`` is the cut bound at the collective's own
    chunk size, which can be larger; ``chunks_to_limit`` is then a chunk count per rank at which the
    chunked bound comes within 1 % of the limit (a schedule may approach the limit from there).
    """

    time_s: float
    bandwidth_s: float
    latency_s: float
    explanation: str
    limit_s: float | None = None
    chunked_s: float | None = None
    chunks_to_limit: int | None = None
    any_chunking: bool = False  # holds for every schedule of the collective, however it cuts its buffers

@dataclass(frozen=True)
class _CutLink:
    """A link crossing a cut, reduced to the timing of chunk number m on one of its lanes."""

    first_arrival_s: float  # arrival of the first chunk started at time 0
    per_chunk_s: float  # serialization: each further chunk on the same lane starts this much later
    lanes: int

    def delivered_by(self, t: float) -> int:
        """How many chunks can have arrived by time t over this link."""
        if t < self.first_arrival_s:
            return 0
        return self.lanes * (int(math.floor((t - self.first_arrival_s) / self.per_chunk_s + 1e-12)) + 1)

    def sort_key(self) -> tuple[float, float, int]:
        return self.first_arrival_s, self.per_chunk_s, self.lanes

    def arrival_of(self, m: int) -> float:
        """Arrival of the m-th chunk (0-based) on one lane."""
        return self.first_arrival_s + m * self.per_chunk_s


class _CutBound:
    """Chunks that must cross a node set X, over the links that cross it.

    Each chunk crossing needs at least one transfer of its own on a crossing
    link (one transfer carries one chunk), so the k-th crossing cannot arrive
    before the k-th smallest possible arrival over those links.
    """

    def __init__(self, topology: Topology, chunk_bytes: float) -> None:
        self.topology = topology
        self.chunk_bytes = chunk_bytes
        self._kth: dict[tuple[tuple[_CutLink, ...], int], float] = {}

    def cut_links(self, inside: frozenset[int], inward: bool) -> list[_CutLink]:
        if len(inside) == 1:  # one GPU: its own links, not a scan of the fabric (1024 GPUs x 4096 links)
            (node,) = inside
            crossing = self.topology.in_links[node] if inward else self.topology.out_links[node]
            keys = [(lk.src, lk.dst) for lk in crossing if lk.src != lk.dst]
        else:
            keys = [(u, v) for u, v in self.topology.links
                    if ((v in inside and u not in inside) if inward else (u in inside and v not in inside))]
        return [_CutLink(self.topology.arrival_delay(u, v, self.chunk_bytes),
                         self.topology.occupancy(u, v, self.chunk_bytes), self.topology.links[(u, v)].lanes)
                for u, v in keys]

    def kth_arrival(self, links: list[_CutLink], k: int) -> float:
        """Earliest time by which k chunks can have crossed (exact k-th smallest arrival).

        The answer depends on the multiset of links only, so cuts alike (the GPUs of a mesh or torus
        come in a few kinds) share one computation.
        """
        if k <= 0 or not links:
            return 0.0
        key = (tuple(sorted(links, key=_CutLink.sort_key)), k)
        if key not in self._kth:
            self._kth[key] = self._kth_arrival(links, k)
        return self._kth[key]

    def _kth_arrival(self, links: list[_CutLink], k: int) -> float:
        lo = 0.0
        hi = max(lk.arrival_of(k) for lk in links)
        for _ in range(200):  # bisection on the count of deliverable chunks
            mid = 0.5 * (lo + hi)
            if sum(lk.delivered_by(mid) for lk in links) >= k:
                hi = mid
            else:
                lo = mid
            if hi - lo <= 1e-15 * max(hi, 1e-30):
                break
        # Snap to the exact answer: the smallest candidate arrival <= hi that already delivers k chunks.
        best = hi
        for lk in links:
            if hi >= lk.first_arrival_s:
                candidate = lk.arrival_of(int(math.floor((hi - lk.first_arrival_s) / lk.per_chunk_s + 1e-9)))
                if candidate < best and sum(other.delivered_by(candidate) for other in links) >= k:
                    best = candidate
        return best

    def bound(self, enter: int, leave: int, inside: frozenset[int]) -> float:
        t_in = self.kth_arrival(self.cut_links(inside, inward=True), enter) if enter else 0.0
        t_out = self.kth_arrival(self.cut_links(inside, inward=False), leave) if leave else 0.0
        return max(t_in, t_out)


class _Demands:
    """The collective's chunks folded into distinct (pre, post, reduce) signatures with counts."""

    def __init__(self, collective: Collective) -> None:
        counts: dict[tuple[frozenset[int], frozenset[int], bool], int] = {}
        for c in collective.chunks:
            key = (c.pre, c.post, c.reduce)
            counts[key] = counts.get(key, 0) + 1
        self.signatures = counts

    def crossings(self, inside: frozenset[int]) -> tuple[int, int]:
        """(chunks that must enter X, chunks that must leave X)."""
        enter = leave = 0
        for (pre, post, reduce), count in self.signatures.items():
            post_in = not post.isdisjoint(inside)
            pre_in = not pre.isdisjoint(inside)
            post_out = not post <= inside
            pre_out = not pre <= inside
            if reduce:  # every contribution must reach every post rank
                enter += count * (post_in and pre_out)
                leave += count * (post_out and pre_in)
            else:  # one holder suffices
                enter += count * (post_in and not pre_in)
                leave += count * (post_out and not pre_out)
        return enter, leave

    def per_rank_crossings(self) -> tuple[dict[int, int], dict[int, int]]:
        """Crossings of every single-GPU cut in one pass: (must receive, must send) per rank."""
        receive: Counter[int] = Counter()
        send: dict[int, int] = defaultdict(int)
        for (pre, post, reduce), count in self.signatures.items():
            if reduce:
                for r in post:
                    if len(pre) > 1 or r not in pre:
                        receive[r] += count
                for p in pre:
                    if len(post) > 1 or p not in post:
                        send[p] += count
            else:
                if count == 1:
                    receive.update(post - pre)  # Counter.update counts in C: a million (chunk, rank) pairs at 1,024 GPUs
                else:
                    for r in post - pre:
                        receive[r] += count
                if len(pre) == 1 and not post <= pre:  # its only holder must send it (a scatter's root: all)
                    send[next(iter(pre))] += count
        return receive, send


def _candidate_cuts(topology: Topology, max_min_cuts: int = 6) -> Iterable[tuple[str, frozenset[int]]]:
    """Cheap multi-node cuts worth trying: each group (chassis), rank-order halves, a few min-cuts."""
    gpus = topology.gpus
    groups: dict[str, set[int]] = {}
    for node in topology.nodes.values():
        if node.group is not None:
            groups.setdefault(node.group, set()).add(node.id)
    for name, members in groups.items():
        yield f"group {name}", frozenset(members)
    half = len(gpus) // 2
    if half >= 2:
        yield "first half of the ranks", frozenset(gpus[:half])
        yield "second half of the ranks", frozenset(gpus[half:])
    yield from _min_cuts(topology, max_min_cuts)


def _min_cuts(topology: Topology, count: int) -> Iterable[tuple[str, frozenset[int]]]:
    """Source sides of min cuts (capacity = bandwidth) from the first GPU to a few spread-out GPUs."""
    if len(topology.nodes) > 600:
        return
    import networkx as nx  # imported where used: the CLI starts without it

    g = nx.DiGraph()
    for (u, v), link in topology.links.items():
        g.add_edge(u, v, capacity=link.bandwidth_GBps * link.lanes)
    gpus = topology.gpus
    source = gpus[0]
    stride = max(1, len(gpus) // count)
    for t in gpus[1::stride][:count]:
        _, (side, _) = nx.minimum_cut(g, source, t)
        yield f"min cut {source}|{t}", frozenset(side)


def _latency_bound(topology: Topology, demands: _Demands, chunk_bytes: float,
                   max_sources: int = 256) -> tuple[float, str]:
    """Store-and-forward shortest time of one chunk for the farthest demand.

    On big fabrics only an evenly spread sample of sources is examined; the
    maximum over a subset of demands is still a valid (if weaker) bound.
    """
    delay = {key: topology.arrival_delay(*key, chunk_bytes) for key in topology.links}
    sources = sorted({p for pre, _, _ in demands.signatures for p in pre})
    stride = max(1, math.ceil(len(sources) / max_sources))
    sampled = set(sources[::stride])
    rows = _arrival_rows(topology, sorted(sampled), delay)
    worst, what = 0.0, "no data has to move"
    for pre, post, reduce in demands.signatures:
        if reduce:  # every contribution must reach every post rank
            pairs = [(p, r) for p in pre & sampled for r in post if r != p]
            t, p, r = max(((rows[p].get(r, math.inf), p, r) for p, r in pairs), default=(0.0, 0, 0))
        elif len(pre) == 1 and pre <= sampled:  # the only holder must reach every destination
            p = next(iter(pre))
            row, targets = rows[p], post - pre
            t = max(map(row.__getitem__, targets), default=0.0)  # rows cover every node
            r = max((r for r in targets if row[r] == t), default=0) if t > worst else 0
        else:
            continue  # several holders (or none sampled): skipped, which only weakens the bound
        if t > worst:
            worst, what = t, f"a chunk needs {format_time(t)} to reach rank {r} (alpha + chunk time per hop)"
    return worst, what


def _arrival_rows(topology: Topology, sources: list[int], delay: dict[tuple[int, int], float]
                  ) -> dict[int, dict[int, float]]:
    """Earliest arrival at every node from each source (one chunk, no contention).

    When every link has the same positive delay (builder fabrics), the arrival after h hops is the
    same float for every path, so a breadth-first search of all sources at once (numpy, one step per
    hop) gives exactly what the per-source Dijkstra gives, at a fraction of the cost on 1,000 GPUs.
    """
    weights = set(delay.values())
    if len(weights) != 1 or not min(weights) > 0 or len(sources) < 8:
        return {p: earliest_arrivals(topology, {p: 0.0}, delay) for p in sources}
    import numpy as np

    (w,) = weights
    nodes = list(topology.nodes)
    index = {n: i for i, n in enumerate(nodes)}
    width = max((len(topology.in_links[n]) for n in nodes), default=0) or 1
    feeders = np.full((len(nodes), width), len(nodes))  # in-neighbours, padded with a never-reached node
    for n in nodes:
        for j, link in enumerate(topology.in_links[n]):
            feeders[index[n], j] = index[link.src]
    # reached[node, source]: one row per node, so that a node's in-neighbours are whole rows to OR in
    reached = np.zeros((len(nodes) + 1, len(sources)), dtype=bool)
    reached[[index[p] for p in sources], np.arange(len(sources))] = True
    hops = np.where(reached[:-1], 0, -1)
    level, t, times = 0, 0.0, [0.0]
    while True:
        grown = reached[:-1].copy()
        for column in feeders.T:
            grown |= reached[column]
        new = grown & ~reached[:-1]
        if not new.any():
            break
        level, t = level + 1, t + w
        times.append(t)
        hops[new] = level
        reached[:-1] = grown
    table = np.append(np.array(times), math.inf)[hops.T]  # hop count -1 (unreached) -> inf
    return {p: dict(zip(nodes, row, strict=True)) for p, row in zip(sources, table.tolist(), strict=True)}


def _chunked_bandwidth(topology: Topology, collective: Collective, cuts: Iterable[tuple[str, frozenset[int]]]
                       ) -> tuple[float, str, frozenset[int]]:
    """The cut bound at the collective's chunk size over every single GPU and the given cuts."""
    cut = _CutBound(topology, collective.chunk_bytes)
    demands = _Demands(collective)
    bandwidth, what, where = 0.0, "no cut has to be crossed", frozenset()
    receive, send = demands.per_rank_crossings()
    for g in topology.gpus:
        t = cut.bound(receive.get(g, 0), send.get(g, 0), frozenset([g]))
        if t > bandwidth:
            bandwidth, what, where = t, f"data crossing GPU {g} needs {format_time(t)}", frozenset([g])
    for name, inside in cuts:
        t = cut.bound(*demands.crossings(inside), inside)
        if t > bandwidth:
            bandwidth, what, where = t, f"data crossing {name} needs {format_time(t)}", inside
    return bandwidth, what, where


# The fabric's limit bounds every schedule of these (AllReduce's limit is that of ReduceScatter then
# AllGather; a schedule reducing on the way, e.g. pipelined trees into a hub, can beat it).
_LIMIT_BOUNDS = ("allgather", "reducescatter", "broadcast", "reduce", "alltoall")
CHUNK_COUNTS = (2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)
HINT_MAX_CHUNKS = 50_000  # the chunks-to-the-limit hint builds finer collectives only up to this many chunks


def limit_bounds_time(topology: Topology, collective: Collective) -> bool:
    """Whether the fabric's limit bounds this collective's finish time.

    It does when every hop's arrival waits for its bytes to cross the link. Under ``switch_hop`` "teccl"
    or "free" a hop out of a switch delivers before its link has finished serializing (the time is
    charged on the way in), so a chunk can arrive before the limit says its bytes could have crossed.
    Above ``ccviz.bounds.limit.AUTO_LIMIT_GPUS`` GPUs it is left out (it can take seconds to compute there).
    """
    if collective.name not in _LIMIT_BOUNDS or tuple(collective.ranks) != tuple(topology.gpus):
        return False
    from ccviz.bounds.limit import limit_is_quick

    return (topology.switch_hop == "paid" or not topology.switches) and limit_is_quick(topology, collective.name)


def _chunks_to_limit(topology: Topology, collective: Collective, limit_s: float,
                     cuts: list[tuple[str, frozenset[int]]]) -> int | None:
    """Fewest chunks per rank (from ``CHUNK_COUNTS``) whose chunked bound on the binding cuts, and whose
    one-chunk latency, are within 1 % of the limit; None when even 64 are not."""
    from ccviz.model.collectives import make_collective

    for count in CHUNK_COUNTS:
        if count <= collective.chunks_per_rank:
            continue
        if len(collective.chunks) * count > HINT_MAX_CHUNKS * collective.chunks_per_rank:
            return None  # too many chunks to build for a hint (AllToAll has N (N - 1) per chunk per rank)
        try:
            finer = make_collective(collective.name, topology, collective.size_bytes, count, collective.root)
        except CcvizError:  # chunks below a byte (tiny buffers): no finer split exists
            return None
        if (_chunked_bandwidth(topology, finer, cuts)[0] <= limit_s * 1.01
                and _latency_bound(topology, _Demands(finer), finer.chunk_bytes)[0] <= limit_s * 1.01):
            return count
    return None


def lower_bound(topology: Topology, collective: Collective) -> LowerBound:
    """A time no valid schedule of ``collective`` on ``topology`` can beat.

    Bandwidth part: the fabric's limit (``ccviz.bounds.limit``, exact, any chunking) and, at the collective's
    chunk size, for each cut (each GPU, each chassis group, rank halves, a few min cuts and the limit's
    bottleneck) the chunks that must cross it, one transfer each, over the crossing links. Latency
    part: the farthest demand's store-and-forward time. The bound is the larger of the two (adding
    them would not be valid).
    """
    from ccviz.bounds.limit import bandwidth_limit
    from ccviz.model.arguments import expect_collective, expect_topology

    expect_topology(topology)
    expect_collective(collective)
    limit = None
    cuts = list(_candidate_cuts(topology))
    if limit_bounds_time(topology, collective):
        limit = bandwidth_limit(topology, collective.name, collective.size_bytes, collective.root)
        cuts.append(("the fabric's bottleneck cut", limit.cut.nodes))
    chunked, bw_what, where = _chunked_bandwidth(topology, collective, cuts)
    bandwidth = chunked
    if limit is not None and limit.limit_s >= chunked:
        bandwidth, bw_what = limit.limit_s, f"the fabric's limit, {limit.cut.words}"
    latency, lat_what = _latency_bound(topology, _Demands(collective), collective.chunk_bytes)
    binding = bw_what if bandwidth >= latency else lat_what
    text = f"bound set by bandwidth: {binding}" if bandwidth >= latency else f"bound set by latency: {binding}"
    hint = None
    if limit is not None and max(bandwidth, latency) > limit.limit_s * 1.01:
        # once per topology and demand: it builds the collective at up to 64 chunks per rank, which every
        # algorithm's run of the same collective asked again (the Learn page's walk spent a sixth of its time here)
        hint = cached(topology, ("chunks to limit", collective.name, collective.size_bytes, collective.root,
                                 collective.chunks_per_rank, where, limit.cut.nodes),
                      lambda: _chunks_to_limit(topology, collective, limit.limit_s,
                                               [("binding cut", where), ("the fabric's bottleneck cut",
                                                                         limit.cut.nodes)]))
        advice = (f"about {hint} chunks per rank would let a schedule approach it" if hint
                  else "more than 64 chunks per rank would be needed to approach it")
        text += (f"; at {collective.chunks_per_rank} chunk(s) per rank this is above the fabric's limit of "
                 f"{format_time(limit.limit_s)} (bandwidth only); {advice}")
    return LowerBound(max(bandwidth, latency), bandwidth, latency, text,
                      None if limit is None else limit.limit_s, chunked, hint)


def any_chunking_bound(topology: Topology, collective: Collective) -> LowerBound | None:
    """A bound every schedule of this collective and size meets whatever its chunking, or None where the
    fabric's limit does not bound time (``limit_bounds_time``).

    Comparisons need it: ``lower_bound`` at each algorithm's own chunking gives each its own bound (ForestColl
    refines chunks, so on DGX-1 AllGather 64 MB it read 374 us beside TE-CCL's 481 us), and ratios against
    different bounds rank nothing. Its parts: the fabric's limit (bandwidth alone, any chunking) and the
    farthest demand's store-and-forward time for the smallest chunk a schedule may have (1 byte).
    """
    from ccviz.bounds.limit import bandwidth_limit
    from ccviz.model.validate import MIN_CHUNK_BYTES

    if not limit_bounds_time(topology, collective):
        return None
    limit = bandwidth_limit(topology, collective.name, collective.size_bytes, collective.root)
    latency, lat_what = _latency_bound(topology, _Demands(collective), MIN_CHUNK_BYTES)
    text = (f"bound set by bandwidth: the fabric's limit, {limit.cut.words}" if limit.limit_s >= latency
            else f"bound set by latency: {lat_what}") + " (holds at any chunking)"
    return LowerBound(max(limit.limit_s, latency), limit.limit_s, latency, text, limit.limit_s, any_chunking=True)


# ====================================================================== closed forms


@dataclass(frozen=True)
class CostResult:
    """``time_s = n_alpha * alpha + n_beta * M / BW`` with its formula written out."""

    time_s: float
    n_alpha: float
    n_beta: float
    text: str


@dataclass(frozen=True)
class _Formula:
    """One textbook cost: coefficients as a function of (n, beta) plus its expression."""

    expression: str
    coefficients: Callable[..., tuple[float, float]]  # (n, alpha_s, beta_s[, segments]) -> (n_alpha, n_beta)
    power_of_two: bool = False
    pipelined: bool = False  # coefficients take the segment count S (None = the best S)


def _log2(n: int) -> int:
    return math.ceil(math.log2(n))


def _tree_depth(n: int) -> int:
    """Edges from root to deepest leaf in a balanced binary tree of n nodes."""
    return int(math.floor(math.log2(n)))


def _best_segments(depth: int, alpha_s: float, beta_s: float) -> int:
    """Segment count S minimizing (depth + S - 1)(alpha + beta/S); capped for alpha = 0."""
    if depth <= 1 or beta_s <= 0:
        return 1
    if alpha_s <= 0:
        return 4096
    return max(1, min(4096, round(math.sqrt((depth - 1) * beta_s / alpha_s))))


def _pipelined(depth: int, share: float) -> Callable[..., tuple[float, float]]:
    """Pipelined chain/tree of ``depth`` hops carrying ``share`` of the buffer in S segments (None: best S)."""

    def coefficients(n: int, alpha_s: float, beta_s: float, segments: int | None = None) -> tuple[float, float]:
        d = depth if depth > 0 else 1
        s = segments or _best_segments(d, alpha_s, beta_s * share)
        return d + s - 1, (d + s - 1) * share / s

    return coefficients


def _pipelined_by_n(depth_of: Callable[[int], int], share: float, phases: int = 1):
    def coefficients(n: int, alpha_s: float, beta_s: float, segments: int | None = None) -> tuple[float, float]:
        a, b = _pipelined(depth_of(n), share)(n, alpha_s, beta_s, segments)
        return phases * a, phases * b

    return coefficients


def _piped(expression: str, depth_of: Callable[[int], int], share: float, phases: int = 1) -> _Formula:
    return _Formula(expression, _pipelined_by_n(depth_of, share, phases), pipelined=True)


def _bruck_alltoall(n: int, alpha_s: float, beta_s: float) -> tuple[float, float]:
    """Stage k moves the blocks whose distance has bit k set: n_beta = sum over stages / n."""
    stages = _log2(n)
    moved = sum(sum(1 for j in range(n) if j >> k & 1) for k in range(stages))
    return stages, moved / n


def _linear(a: Callable[[int], float], b: Callable[[int], float]):
    return lambda n, alpha_s, beta_s: (a(n), b(n))


def _ring_alltoall_beta(n: int) -> float:
    return (n - 1) / 2


_LOG = _log2
_FRACTION = lambda n: (n - 1) / n  # noqa: E731  (share of the buffer a rank does not own)

FORMULAS: dict[tuple[str, str], _Formula] = {
    # ----------------------------------------------------------------- allgather
    ("allgather", "ring"): _Formula("(N-1)(a + M/(N BW))", _linear(lambda n: n - 1, _FRACTION)),
    ("allgather", "direct"): _Formula("(N-1)(a + M/(N BW))  (pairwise exchange)",
                                      _linear(lambda n: n - 1, _FRACTION)),
    ("allgather", "rd"): _Formula("log2(N) a + (N-1)/N M/BW", _linear(_LOG, _FRACTION), power_of_two=True),
    ("allgather", "rhd"): _Formula("log2(N) a + (N-1)/N M/BW  (recursive doubling)", _linear(_LOG, _FRACTION),
                                   power_of_two=True),
    ("allgather", "tree"): _Formula("2 ceil(log2 N) a + ((N-1)/N + ceil(log2 N)) M/BW  (gather + broadcast)",
                                    _linear(lambda n: 2 * _log2(n), lambda n: _FRACTION(n) + _log2(n))),
    ("allgather", "bruck"): _Formula("ceil(log2 N) a + (N-1)/N M/BW", _linear(_LOG, _FRACTION)),
    ("allgather", "pat"): _Formula("ceil(log2 N) a + (N-1)/N M/BW  (parallel aggregated trees)",
                                   _linear(_LOG, _FRACTION)),
    # ------------------------------------------------------------- reducescatter
    ("reducescatter", "ring"): _Formula("(N-1)(a + M/(N BW))", _linear(lambda n: n - 1, _FRACTION)),
    ("reducescatter", "direct"): _Formula("(N-1)(a + M/(N BW))  (pairwise exchange)",
                                          _linear(lambda n: n - 1, _FRACTION)),
    ("reducescatter", "pat"): _Formula("ceil(log2 N) a + (N-1)/N M/BW  (parallel aggregated trees, reversed)",
                                       _linear(_LOG, _FRACTION)),
    ("reducescatter", "rhd"): _Formula("log2(N) a + (N-1)/N M/BW  (recursive halving)",
                                       _linear(_LOG, _FRACTION), power_of_two=True),
    # ----------------------------------------------------------------- allreduce
    ("allreduce", "ring"): _Formula("2(N-1) a + 2(N-1)/N M/BW",
                                    _linear(lambda n: 2 * (n - 1), lambda n: 2 * (n - 1) / n)),
    ("allreduce", "direct"): _Formula("2(N-1) a + 2(N-1)/N M/BW  (direct reduce-scatter + allgather)",
                                      _linear(lambda n: 2 * (n - 1), lambda n: 2 * (n - 1) / n)),
    ("allreduce", "rhd"): _Formula("2 log2(N) a + 2(N-1)/N M/BW  (Rabenseifner)",
                                   _linear(lambda n: 2 * _log2(n), lambda n: 2 * (n - 1) / n), power_of_two=True),
    ("allreduce", "rd"): _Formula("log2(N) (a + M/BW)", _linear(_LOG, _LOG), power_of_two=True),
    ("allreduce", "tree"): _Formula("2 ceil(log2 N) (a + M/BW)  (binomial reduce + broadcast)",
                                    _linear(lambda n: 2 * _log2(n), lambda n: 2 * _log2(n))),
    ("allreduce", "pipelined-tree"): _piped("2 (d+S-1)(a + M/(S BW)), d = floor(log2 N), S segments",
                                            _tree_depth, 1.0, 2),
    ("allreduce", "dbt"): _piped("2 (d+S-1)(a + M/(2 S BW)), two trees with half the buffer each, S segments",
                                 _tree_depth, 0.5, 2),
    # ----------------------------------------------------------------- broadcast
    ("broadcast", "tree"): _Formula("ceil(log2 N)(a + M/BW)", _linear(_LOG, _LOG)),
    ("broadcast", "pipelined-tree"): _piped("(d+S-1)(a + M/(S BW)), d = floor(log2 N), S segments",
                                            _tree_depth, 1.0),
    ("broadcast", "dbt"): _piped("(d+S-1)(a + M/(2 S BW)), two trees with half the buffer each, S segments",
                                 _tree_depth, 0.5),
    ("broadcast", "ring"): _piped("(N-1+S-1)(a + M/(S BW)), pipelined chain, S segments", lambda n: n - 1, 1.0),
    ("broadcast", "rhd"): _Formula("2 log2(N) a + 2(N-1)/N M/BW  (scatter + allgather)",
                                   _linear(lambda n: 2 * _log2(n), lambda n: 2 * (n - 1) / n), power_of_two=True),
    ("broadcast", "direct"): _Formula("(N-1)(a + M/BW)  (root sends to each)",
                                      _linear(lambda n: n - 1, lambda n: n - 1)),
    # ------------------------------------------------------------------ alltoall
    ("alltoall", "direct"): _Formula("(N-1)(a + M/(N BW))  (pairwise exchange)",
                                     _linear(lambda n: n - 1, _FRACTION)),
    ("alltoall", "bruck"): _Formula("ceil(log2 N) a + (blocks moved per stage)/N M/BW  (= log2(N)/2 M/BW, N=2^k)",
                                    _bruck_alltoall),
    ("alltoall", "ring"): _Formula("(N-1) a + (N-1)/2 M/BW  (store and forward around the ring)",
                                   _linear(lambda n: n - 1, _ring_alltoall_beta)),
    # ------------------------------------------------------------------ sendrecv
    ("sendrecv", "direct"): _Formula("a + M/BW  (one hop of the whole buffer)", _linear(lambda n: 1, lambda n: 1)),
    # ------------------------------------------------------------ gather/scatter
    ("scatter", "tree"): _Formula("ceil(log2 N) a + (N-1)/N M/BW", _linear(_LOG, _FRACTION)),
    ("scatter", "direct"): _Formula("(N-1)(a + M/(N BW))", _linear(lambda n: n - 1, _FRACTION)),
    ("scatter", "ring"): _Formula("(N-1)(a + M/(N BW))  (blocks stream down the chain, farthest first)",
                                  _linear(lambda n: n - 1, _FRACTION)),
}

def _mirrored(formulas: dict[tuple[str, str], _Formula]) -> dict[tuple[str, str], _Formula]:
    """A rooted collective run backwards costs the same: Reduce mirrors Broadcast, Gather mirrors Scatter."""
    mirrors = {
        "reduce": ("broadcast", {"(scatter + allgather)": "(reduce-scatter + gather)",
                                 "(root sends to each)": "(each rank sends to the root)"}),
        "gather": ("scatter", {}),
    }
    out = {}
    for mirror, (original, wording) in mirrors.items():
        for (collective, algorithm), f in formulas.items():
            if collective == original:
                text = f.expression
                for old, new in wording.items():
                    text = text.replace(old, new)
                out[(mirror, algorithm)] = replace(f, expression=text)
    return out


FORMULAS.update(_mirrored(FORMULAS))


def _both_ways(f: _Formula) -> _Formula:
    """ring-bidir: the ring's rounds, each direction carrying half the chunks once there are 2+ segments."""

    def coefficients(n: int, alpha_s: float, beta_s: float, segments: int | None = None) -> tuple[float, float]:
        a, b = f.coefficients(n, alpha_s, beta_s, segments) if f.pipelined else f.coefficients(n, alpha_s, beta_s)
        return a, b / 2 if (segments or 2) >= 2 else b

    return _Formula(f"{f.expression}, with M/BW halved by the two directions (2+ chunks per GPU)", coefficients,
                    f.power_of_two, pipelined=True)


FORMULAS.update({(c, "ring-bidir"): _both_ways(f) for (c, a), f in list(FORMULAS.items()) if a == "ring"})

def formula(
    collective: str, algorithm: str, n: int, size_bytes: float, alpha_us: float, bw_GBps: float,
    segments: int | None = None,
) -> CostResult:
    """The textbook alpha-beta cost of ``algorithm`` for ``collective`` over ``n`` ranks.

    ``segments`` is the pipelining depth S of the pipelined formulas (a schedule's chunks per GPU);
    None picks the best S, as the textbook does.
    """
    algorithm = str(algorithm).strip().lower()
    key = (collective, algorithm)
    if key not in FORMULAS:
        known = sorted(a for (c, a) in FORMULAS if c == collective)
        raise CcvizError(
            f"algorithm: no closed form for {algorithm!r} {collective}; "
            f"choose one of {', '.join(known) or 'none'}", "algorithm")
    if not isinstance(n, int) or n < 2:
        raise CcvizError(f"n: the number of ranks must be a whole number >= 2, got {n!r}", "n")
    if not bw_GBps > 0:
        raise CcvizError(f"bw: bandwidth must be positive GB/s, got {bw_GBps!r}", "bw")
    if not alpha_us >= 0:
        raise CcvizError(f"alpha: alpha must be >= 0 microseconds, got {alpha_us!r}", "alpha")
    if not size_bytes > 0:
        raise CcvizError(f"size: size must be positive, got {size_bytes!r}", "size")
    f = FORMULAS[key]
    if f.power_of_two and n & (n - 1):
        raise CcvizError(f"n: {algorithm} {collective} needs a power-of-two rank count, got {n}", "n")
    alpha_s = alpha_us * 1e-6
    beta_s = size_bytes / (bw_GBps * 1e9)
    if segments is not None and (not isinstance(segments, int) or segments < 1):
        raise CcvizError(f"segments: the pipelining depth must be a whole number >= 1, got {segments!r}", "segments")
    n_alpha, n_beta = f.coefficients(n, alpha_s, beta_s, segments) if f.pipelined else f.coefficients(n, alpha_s,
                                                                                                      beta_s)
    time_s = n_alpha * alpha_s + n_beta * beta_s
    s_text = f", S={segments}" if f.pipelined and segments else ""
    text = (f"{algorithm} {collective}: {f.expression} = {n_alpha:g} a + {n_beta:.6g} M/BW "
            f"(N={n}, a={alpha_us:g} us, M={size_bytes:g} B, BW={bw_GBps:g} GB/s{s_text})")
    return CostResult(float(time_s), float(n_alpha), float(n_beta), text)


class FormulaRow(dict):
    """One listing row: a plain dict for JSON, printed as one readable line."""

    def __str__(self) -> str:
        pow2 = "  [N = power of two]" if self["power_of_two"] else ""
        return f"{self['collective']:<14} {self['algorithm']:<15} {self['formula']}{pow2}"


def formula_table() -> list[FormulaRow]:
    """Every (collective, algorithm) with a closed form, for listings in the CLI and the app."""
    return [
        FormulaRow(collective=c, algorithm=a, formula=f.expression, power_of_two=f.power_of_two)
        for (c, a), f in FORMULAS.items()
    ]


def used_link_parameters(topology: Topology, links: Iterable[tuple[int, int]]) -> tuple[float, float]:
    """(alpha_us, bandwidth_GBps) a formula should use for a schedule: the largest alpha and the slowest
    bandwidth among the links it actually uses (all links when it uses none)."""
    used = [topology.links[key] for key in set(links) if key in topology.links] or list(topology.links.values())
    return max(link.alpha_us for link in used), min(link.bandwidth_GBps for link in used)
