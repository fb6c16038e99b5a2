"""The mix's weighted time on a fabric, exactly (the limits), and cheaply from below (cuts and prices seen).

An advisor that re-solved every limit for every candidate at every step would spend minutes on a 64-GPU
fabric. It need not: every exact solve also hands back a certificate that bounds any other fabric from
below. A cut S of ratio r (seconds per byte, its links carrying B GB/s) bounds the same collective on an
upgraded fabric by r * B / B', with B' what leaves S there (a limit is the worst cut: one cut bounds it).
AllToAll's LP duals are link prices p with the certificate T >= sum over pairs of the p-shortest path /
sum(p * capacity), true for any prices p >= 0 on any fabric (weak duality): new cables are priced at 0 or
at the distance they shortcut, whichever bounds higher. The planner evaluates exactly only the candidates
whose bound could still beat the best exact answer, so its choices are those of evaluating everything.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ccviz.advise.mix import MixItem
from ccviz.advise.upgrades import Upgrade, apply_upgrades
from ccviz.bounds.limit import bandwidth_limit, judged_fabric
from ccviz.model.topology import Topology

REL_TOL = 1e-6  # the AllToAll LP is exact to about 1e-7 relative: a gain below this is no gain


SHORTCUT_SHARES = (0.0, 0.25, 0.5, 0.75, 1.0)
PRICE_CERTIFICATES = 4  # the latest price vectors a bound tries (each a few shortest-path passes)


def judged_capacities(topology: Topology) -> dict[tuple[int, int], float]:
    """Each link's GB/s as the limit counts it (``judged_fabric``: sustained rates on a fabric that declares the
    hardware link model). The certificates come from limits on that fabric, so a bound that divided by the
    nominal rates would stay valid but fall short of the limit by the protocol's factor (dgxh100: 103 of 125)."""
    judged = judged_fabric(topology)
    return {k: link.bandwidth_GBps * link.lanes for k, link in judged.links.items()}


@dataclass(frozen=True)
class Score:
    """The mix on one fabric: weighted time, each item's limit, and each item's bottleneck in words."""

    weighted_s: float
    limits_s: tuple[float, ...]
    cut_words: tuple[str, ...]
    cut_links: tuple[tuple[tuple[int, int], ...], ...]
    own: bool = True  # False: some limits were pinned without a solve (their cut words are blank)


@dataclass
class _CutCertificate:
    nodes: frozenset[int]
    ratio: float  # seconds per byte on the fabric it was found on
    bandwidth: float  # GB/s leaving ``nodes`` there


@dataclass
class _PriceCertificate:
    prices: dict[tuple[int, int], float]
    seconds_per_unit: float  # pair GB: the limit is this times sum(dist) / sum(price x capacity)


@dataclass
class Scorer:
    """Scores subsets of ``candidates`` applied to ``base`` for ``mix``: exact (cached) and from below."""

    base: Topology
    mix: tuple[MixItem, ...]
    candidates: list[Upgrade]
    exact_evaluations: int = 0
    _cache: dict[frozenset[int], Score] = field(default_factory=dict)
    _cuts: dict[str, list[_CutCertificate]] = field(default_factory=dict)
    _prices: list[_PriceCertificate] = field(default_factory=list)

    # -------------------------------------------------------------------- fabrics
    def fabric(self, chosen: Iterable[int]) -> Topology:
        """The base fabric with the chosen candidates bought (in index order: the result does not depend on it)."""
        return apply_upgrades(self.base, [self.candidates[i] for i in sorted(chosen)])

    # -------------------------------------------------------------------- exact
    def exact(self, chosen: Iterable[int], own: bool = False) -> Score:
        """The weighted time at the fabric's exact limits (and every certificate kept for bounds).

        ``own``: every item's cut words must be this fabric's (not skipped by ``_known_limits``)."""
        key = frozenset(chosen)
        cached = self._cache.get(key)
        if cached is not None and (cached.own or not own):
            return cached
        topology = self.fabric(key)
        self.exact_evaluations += 1
        self._cache[key] = self._solve(topology, () if own else self._known_limits(key, topology))
        return self._cache[key]

    def _known_limits(self, key: frozenset[int], topology: Topology) -> list[float | None]:
        """Items whose limit is known without a solve: an upgrade never slows a fabric, so a subset's limit
        bounds it from above, and where a certificate's bound meets that, the limit is exactly it."""
        parents = [self._cache[key - {i}] for i in key if key - {i} in self._cache]
        known: list[float | None] = []
        capacity = judged_capacities(topology)
        for j, item in enumerate(self.mix):
            above = min((p.limits_s[j] for p in parents), default=None)
            if above is None or item.collective == "alltoall":
                known.append(None)
                continue
            below = item.size_bytes * self._lower_per_byte(topology, capacity, item.collective)
            known.append(above if below >= above * (1 - 1e-12) else None)
        return known

    def _solve(self, topology: Topology, known: Sequence[float | None] = ()) -> Score:
        limits, words, links = [], [], []
        known = list(known) or [None] * len(self.mix)
        for item, limit_s in zip(self.mix, known, strict=True):
            if limit_s is not None:  # pinned between a subset's limit and a certificate: no solve needed
                limits.append(limit_s)
                words.append("")
                links.append(())
                continue
            lim = bandwidth_limit(topology, item.collective, item.size_bytes)
            limits.append(lim.limit_s)
            words.append(lim.cut.words)
            links.append(tuple(lim.cut.links))
            self._keep_certificates(topology, item, lim)
        weighted = float(sum(item.weight * t for item, t in zip(self.mix, limits, strict=True)))
        return Score(weighted, tuple(limits), tuple(words), tuple(links), own=all(k is None for k in known))

    def _keep_certificates(self, topology: Topology, item: MixItem, lim) -> None:
        if item.collective == "alltoall":
            from ccviz.bounds.alltoall_limit import alltoall_flow

            flow = alltoall_flow(topology)
            slots = int(topology.meta.get("buffer_ranks", topology.n_gpus))
            prices = dict(zip(flow.links, (float(p) for p in flow.prices), strict=True))
            self._prices.append(_PriceCertificate(prices, 1.0 / slots / 1e9))  # per byte of the send buffer
            return
        pools = {"allgather": {"ag": lim.cut}, "reducescatter": {"rs": lim.cut}, "broadcast": {"bc": lim.cut},
                 "reduce": {"red": lim.cut}}.get(item.collective)
        if pools is None:  # allreduce: its halves, and the in-network cut where switches reduce
            pools = {{"reducescatter": "rs", "allgather": "ag", "in-network": "innet"}[name]: cut
                     for name, cut in lim.part_cuts.items()}
        for pool, cut in pools.items():
            entry = _CutCertificate(cut.nodes, cut.ratio, cut.bandwidth_GBps)
            kept = self._cuts.setdefault(pool, [])
            if all(e.nodes != entry.nodes for e in kept):
                kept.append(entry)

    # -------------------------------------------------------------------- from below
    def lower(self, chosen: Iterable[int]) -> float:
        """A weighted time no fabric with these candidates bought can beat (exact where already solved)."""
        key = frozenset(chosen)
        if key in self._cache:
            return self._cache[key].weighted_s
        topology = self.fabric(key)
        capacity = judged_capacities(topology)
        total = 0.0
        for item in self.mix:
            total += item.weight * item.size_bytes * self._lower_per_byte(topology, capacity, item.collective)
        return total

    def _lower_per_byte(self, topology: Topology, capacity, collective: str) -> float:
        if collective == "alltoall":
            graph = _PricedGraph(topology, capacity)
            kept = self._prices[:1] + self._prices[1:][-(PRICE_CERTIFICATES - 1):]  # the base fabric's, the latest
            return max((graph.bound(c) for c in kept), default=0.0)
        if collective == "allreduce":
            rs, ag = self._pool(capacity, "rs"), self._pool(capacity, "ag")
            if topology.reducing_switches:
                return max(rs, ag, self._pool(capacity, "innet"))
            return rs + ag
        return self._pool(capacity, {"allgather": "ag", "reducescatter": "rs", "broadcast": "bc",
                                     "reduce": "red"}[collective])

    def _pool(self, capacity: dict[tuple[int, int], float], pool: str) -> float:
        best = 0.0
        for cert in self._cuts.get(pool, ()):
            leaving = sum(c for (u, v), c in capacity.items() if u in cert.nodes and v not in cert.nodes)
            if leaving > 0:
                best = max(best, cert.ratio * cert.bandwidth / leaving)
        return best


class _PricedGraph:
    """One fabric's links as a sparse graph whose weights are swapped per price vector (building the graph is
    the dear part; a shortest-path pass over it is cheap)."""

    def __init__(self, topology: Topology, capacity: dict[tuple[int, int], float]) -> None:
        from scipy.sparse import csr_matrix

        nodes = sorted(topology.nodes)
        index = {n: i for i, n in enumerate(nodes)}
        self.keys = list(capacity)
        self.capacity = np.array([capacity[k] for k in self.keys])
        self.gpus = np.array([index[g] for g in topology.gpus])
        self.gpu_row = {index[g]: r for r, g in enumerate(topology.gpus)}
        self.tail = np.array([index[u] for u, _ in self.keys])
        self.head = np.array([index[v] for _, v in self.keys])
        order = np.arange(1, len(self.keys) + 1, dtype=float)
        self.graph = csr_matrix((order, (self.tail, self.head)), shape=(len(nodes), len(nodes)))
        self.position = (self.graph.data - 1).astype(np.int64)  # stored entry -> index into keys

    def total_distance(self, prices: np.ndarray) -> tuple[float, np.ndarray]:
        """Sum over ordered GPU pairs of the shortest path under ``prices`` (and the GPU rows' distances)."""
        from scipy.sparse.csgraph import dijkstra

        self.graph.data = prices[self.position]  # explicit zeros stay edges
        dist = dijkstra(self.graph, directed=True, indices=self.gpus)
        return float(dist[:, self.gpus].sum()), dist

    def bound(self, cert: _PriceCertificate) -> float:
        """Weak duality with the kept prices; cables the prices never saw priced at 0 or at a share of the
        distance they shortcut (at the whole distance no shortest path changes), whichever bounds higher."""
        known = np.array([k in cert.prices for k in self.keys])
        prices = np.array([cert.prices.get(k, 0.0) for k in self.keys])
        base = float((prices * self.capacity).sum())
        if known.all():
            total, _ = self.total_distance(prices)
            return cert.seconds_per_unit * total / base if base > 0 else 0.0
        without = prices.copy()
        without[~known] = np.inf
        _, old = self.total_distance(without)
        shortcut = np.zeros(len(self.keys))
        for e in np.flatnonzero(~known):
            row = self.gpu_row.get(int(self.tail[e]))
            d = float(old[row, self.head[e]]) if row is not None else 0.0
            shortcut[e] = d if np.isfinite(d) else 0.0
        best = 0.0
        for share in SHORTCUT_SHARES:
            trial = prices.copy()
            trial[~known] = share * shortcut[~known]
            denominator = float((trial * self.capacity).sum())
            if denominator > 0:
                total, _ = self.total_distance(trial)
                best = max(best, cert.seconds_per_unit * total / denominator)
        return best
