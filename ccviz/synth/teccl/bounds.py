"""Arithmetic lower bounds on the number of epochs: the optimality certificate.

Proving a MILP infeasible one epoch below the incumbent is slow; counting is
not. For a cut (S, T) of the nodes and a destination d in T, every chunk held
only in S that d needs must cross some link (i, j) from S to T and then
travel from j to d. A link delivers at most ``window_slots`` chunks per
window of kappa epochs, from the first epoch any of those chunks can be at
i, and what it delivers in epoch k reaches d no earlier than k + offset +
dist(j, d). The smallest horizon at which the crossing links can deliver
enough in time bounds the schedule; when a schedule meets the largest such
bound it is optimal for the epoch model. Cuts tried: each GPU alone (its
ingress) and the groups that stay connected when the slowest links are
removed (chassis).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence

import networkx as nx
import numpy as np

from ccviz.model.topology import Topology
from ccviz.synth.teccl.epochs import EpochGrid
from ccviz.synth.teccl.time_expanded import INF, Commodity, epoch_distances

BOUND_SHARE = 0.25  # of the time limit, at most, for the lower bound's cuts (the greedy's schedule comes after)


def bound_deadline(started: float, deadline: float) -> float:
    """When the lower bound stops counting cuts: after ``BOUND_SHARE`` of the time limit."""
    return started + BOUND_SHARE * max(0.0, deadline - started)


class EpochLowerBound:
    """Largest of the earliest-arrival bound and every cut bound."""

    def __init__(self, topology: Topology, grid: EpochGrid, commodities: Sequence[Commodity],
                 fractional: bool = False) -> None:
        self.topology = topology
        self.grid = grid
        self.commodities = list(commodities)
        self.fractional = fractional
        self.earliest = [epoch_distances(topology, grid, {n: 0 for n in c.holders}) for c in self.commodities]
        self._dist_from: dict[int, dict[int, float]] = {}
        self.cuts_left = 0  # cuts ``value`` had no time to count

    def value(self, deadline: float | None = None) -> int:
        """The lower bound in epochs; past ``deadline`` (perf_counter) the cuts not yet counted are left out
        (``cuts_left`` says how many): every cut's bound is a bound, so the largest so far still is one, only
        weaker. Two NVL72 racks' 148 cuts took 61 s under the profiler, past a 20 s time limit, before the
        greedy had begun."""
        bound = self.arrival_bound()
        cuts = self.cuts()
        for i, far_side in enumerate(cuts):
            if deadline is not None and time.perf_counter() >= deadline:
                self.cuts_left = len(cuts) - i
                break
            bound = max(bound, self.cut_bound(far_side))
        return bound

    def arrival_bound(self) -> int:
        """No capacity at all: every destination waits at least for its earliest arrival."""
        worst = 0
        for c in self.commodities:
            for d in c.destinations:
                worst = max(worst, self.earliest[c.id][d])
        return int(worst)

    def cuts(self) -> list[frozenset[int]]:
        """Cut families: every GPU alone, and the components left when links slower than a threshold are cut."""
        topo = self.topology
        found = {frozenset([g]) for g in topo.gpus}
        for threshold in sorted({link.bandwidth_GBps for link in topo.links.values()})[1:]:
            g = nx.Graph()
            g.add_nodes_from(topo.nodes)
            g.add_edges_from(k for k, link in topo.links.items() if link.bandwidth_GBps >= threshold)
            parts = [frozenset(p) for p in nx.connected_components(g)]
            if len(parts) > 1:
                found.update(p for p in parts if any(not topo.is_switch(n) for n in p))
        return sorted(found, key=lambda s: sorted(s))

    def cut_bound(self, far_side: frozenset[int]) -> int:
        crossing = [link for key, link in self.grid.links.items() if key[0] not in far_side and key[1] in far_side]
        gpus = [d for d in far_side if not self.topology.is_switch(d)]
        bound = 0
        for d in gpus:
            served = [c for c in self.commodities if not (c.holders & far_side) and d in c.destinations]
            need = sum(n for c in served for dest, n in c.needs if dest == d)
            if need:
                bound = max(bound, self._horizon_for(crossing, served, [d], need))
        # All at once: every chunk crosses at least once (once per destination when nothing copies),
        # and then still has to reach the nearest destination on the far side.
        served = [c for c in self.commodities if not (c.holders & far_side) and c.destinations & far_side]
        if self.fractional:
            need = sum(n for c in served for dest, n in c.needs if dest in far_side)
        else:
            need = sum(c.amount for c in served)
        if need:
            bound = max(bound, self._horizon_for(crossing, served, gpus, need))
        return bound

    def _horizon_for(self, crossing, served: list[Commodity], targets: list[int], need: int) -> int:
        """Smallest horizon K at which the crossing links deliver ``need`` chunks to the nearest target by K."""
        if not crossing:
            return 10**9
        terms = []
        for link in crossing:
            head = min(self.earliest[c.id][link.src] for c in served)
            tail = min(self._dist(link.dst).get(d, INF) for d in targets)
            if head == INF or tail == INF:
                continue
            per_window = link.window_chunks if self.fractional else link.window_slots
            terms.append((int(head + link.offset + tail), link.kappa, per_window))
        if not terms:
            return 10**9
        if not self.fractional:
            return self._whole_chunk_horizon(crossing, served, targets, need)
        k = min(t[0] for t in terms)
        while sum(w * math.ceil(max(0, k - first + 1) / kappa) for first, kappa, w in terms) < need - 1e-9:
            k += 1
        return k

    def _whole_chunk_horizon(self, crossing, served: list[Commodity], targets: list[int], need: int) -> int:
        """Sharper for whole chunks: a link cannot send a chunk before that chunk can reach it.

        Each link alone sends the chunks as early as their arrival at its tail and its windows
        allow (greedy, optimal for every prefix); every send then still needs offset + the distance
        to the nearest target. Letting each link use every chunk relaxes the sharing between links,
        so the need-th earliest delivery over all links bounds the horizon.
        """
        deliveries = []
        for link in crossing:
            tail = min(self._dist(link.dst).get(d, INF) for d in targets)
            ready = self._ready(link.src, served, need)
            if tail == INF or not ready:
                continue
            if link.window_slots == 1:  # t_r = max(ready_r, t_(r-1) + kappa): a running maximum, in numpy
                r = np.arange(len(ready))
                sent = np.maximum.accumulate(np.asarray(ready, dtype=float) - r * link.kappa) + r * link.kappa
                deliveries.extend((sent + (link.offset + tail)).tolist())
                continue
            sent: list[float] = []
            for r, available in enumerate(ready):
                t = max(available, sent[-1] if sent else 0)
                if r >= link.window_slots:
                    t = max(t, sent[r - link.window_slots] + link.kappa)
                sent.append(t)
            deliveries.extend(t + link.offset + tail for t in sent)
        if len(deliveries) < need:
            return 10**9
        return int(sorted(deliveries)[need - 1])

    def _ready(self, node: int, served: list[Commodity], need: int) -> list[float]:
        """The ``need`` earliest epochs at which the served chunks can be at ``node`` (one per chunk), counted per
        commodity rather than listed per chunk: NVL72 AllToAll's 72 single-GPU cuts listed 5,041 chunks for
        each of 18 links twice over (13 million entries, 89 s of teccl-astar's bound under the profiler)."""
        count: dict[float, int] = {}
        for c in served:
            t = self.earliest[c.id][node]
            count[t] = count.get(t, 0) + c.amount
        ready: list[float] = []
        for t in sorted(count):
            if t == INF or len(ready) >= need:
                break
            ready.extend([t] * min(count[t], need - len(ready)))
        return ready

    def _dist(self, node: int) -> dict[int, float]:
        if node not in self._dist_from:
            self._dist_from[node] = epoch_distances(self.topology, self.grid, {node: 0})
        return self._dist_from[node]
