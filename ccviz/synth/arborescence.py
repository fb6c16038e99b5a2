"""Cheapest spanning out-trees (arborescences) over the GPUs, with switches turned into GPU-to-GPU routes.

Two pieces used by tree packing (``ccviz.synth.forestcoll``):

* ``RouteClosure``: for every ordered GPU pair the cheapest route whose interior is switches only (a
  direct link, or GPU -> switch ... switch -> GPU), under per-link lengths. This is what edge
  splitting achieves in ForestColl: a tree edge u -> x runs over a path through switches, and a switch
  never branches (no copy needed), so every tree is a GPU-only arborescence on the closure.
* ``min_arborescence``: Chu-Liu/Edmonds on a dense cost matrix (numpy), contracting every cycle of
  cheapest in-edges at once, so a level costs O(n^2) and fabrics of 256 GPUs stay fast.
"""

from __future__ import annotations

import numpy as np

from ccviz.errors import CcvizError
from ccviz.topology import Topology

INF = np.inf


def min_arborescence(cost: np.ndarray, root: int) -> np.ndarray:
    """Parent of every node in a cheapest spanning out-tree rooted at ``root`` (parent[root] = -1).

    ``cost[u, v]`` is the price of edge u -> v (``inf`` where there is none).
    """
    n = cost.shape[0]
    w = np.array(cost, dtype=float)
    np.fill_diagonal(w, INF)
    w[:, root] = INF
    parent = np.argmin(w, axis=0)
    best = w[parent, np.arange(n)]
    parent[root] = -1
    if np.isinf(np.delete(best, root)).any():
        raise _unreachable(root)
    cycles = _cycles(parent)
    if not cycles:
        return parent
    group = np.full(n, -1)
    for k, cycle in enumerate(cycles):
        group[cycle] = k
    free = np.flatnonzero(group < 0)
    group[free] = len(cycles) + np.arange(len(free))
    m = len(cycles) + len(free)
    # Entering a cycle at v replaces v's cheapest in-edge: its price is the difference.
    in_cycle = np.zeros(n, dtype=bool)
    for cycle in cycles:
        in_cycle[cycle] = True
    adjusted = w - np.where(in_cycle, best, 0.0)[None, :]
    order = np.argsort(group, kind="stable")
    starts = np.searchsorted(group[order], np.arange(m))
    by_row_group = np.minimum.reduceat(adjusted[order], starts, axis=0)  # [g, v]: cheapest edge from group g
    block = np.minimum.reduceat(by_row_group[:, order], starts, axis=1)
    np.fill_diagonal(block, INF)
    contracted = min_arborescence(block, int(group[root]))
    # Expand: each contracted edge a -> b is the cheapest original edge from group a into group b.
    from_group = contracted[group]  # per original v: the group its group is entered from (-1 at the root)
    entered = from_group >= 0
    value = np.where(entered, by_row_group[np.maximum(from_group, 0), np.arange(n)], INF)
    pick = np.lexsort((value, group))  # per group, its cheapest entry column comes first
    first = np.ones(n, dtype=bool)
    first[1:] = group[pick][1:] != group[pick][:-1]
    heads = pick[first & entered[pick]]
    candidates = np.where(group[:, None] == from_group[heads][None, :], adjusted[:, heads], INF)
    parent[heads] = np.argmin(candidates, axis=0)
    return parent


def _unreachable(root: int) -> CcvizError:
    return CcvizError(f"topology: some GPU cannot be reached from GPU index {root}; every GPU must reach every "
                      "other GPU", "topology")


def _cycles(parent: np.ndarray) -> list[list[int]]:
    """Cycles of the parent pointers (each node's cheapest in-edge)."""
    n = len(parent)
    state = np.zeros(n, dtype=np.int8)  # 0 new, 1 on the current walk, 2 done
    cycles = []
    for start in range(n):
        walk = []
        v = start
        while v >= 0 and state[v] == 0:
            state[v] = 1
            walk.append(v)
            v = int(parent[v])
        if v >= 0 and state[v] == 1:
            cycles.append(walk[walk.index(v):])
        for u in walk:
            state[u] = 2
    return cycles


class RouteClosure:
    """Cheapest GPU -> GPU routes through switches under per-link lengths (min-plus products)."""

    def __init__(self, topology: Topology) -> None:
        self.topology = topology
        self.gpus = topology.gpus
        self.switches = topology.switches
        self.links = sorted(topology.links)
        index = {n: i for i, n in enumerate(self.gpus)}
        sw_index = {n: i for i, n in enumerate(self.switches)}
        self.gg = [(index[u], index[v], k) for k, (u, v) in enumerate(self.links) if u in index and v in index]
        self.gs = [(index[u], sw_index[v], k) for k, (u, v) in enumerate(self.links) if u in index and v in sw_index]
        self.ss = [(sw_index[u], sw_index[v], k) for k, (u, v) in enumerate(self.links)
                   if u in sw_index and v in sw_index]
        self.sg = [(sw_index[u], index[v], k) for k, (u, v) in enumerate(self.links) if u in sw_index and v in index]
        self.link_index = {key: k for k, key in enumerate(self.links)}
        into = sorted((v, u, k) for u, v, k in self.sg)  # switch -> GPU links grouped by GPU
        self.down_switch = np.array([u for _, u, _ in into], dtype=int)
        self.down_link = np.array([k for *_, k in into], dtype=int)
        counts = np.bincount([v for v, _, _ in into], minlength=len(self.gpus))
        self.down_ends = np.cumsum(counts)
        self.down_starts = self.down_ends - counts
        self.down_from_switch = np.flatnonzero(counts)  # GPUs some switch is cabled to

    def _matrix(self, entries, rows: int, cols: int, length: np.ndarray) -> np.ndarray:
        m = np.full((rows, cols), INF)
        for i, j, k in entries:
            m[i, j] = length[k]
        return m

    def costs(self, length: np.ndarray) -> tuple[np.ndarray, dict]:
        """GPU x GPU route costs and what is needed to recover the routes."""
        n, s = len(self.gpus), len(self.switches)
        direct = self._matrix(self.gg, n, n, length)
        if not s:
            return direct, {"direct": direct}
        d = self._matrix(self.ss, s, s, length)
        np.fill_diagonal(d, 0.0)
        via = np.full((s, s), -1)
        for k in range(s):  # Floyd-Warshall over the switches
            through = d[:, k, None] + d[None, k, :]
            better = through < d
            d = np.where(better, through, d)
            via = np.where(better, k, via)
        up = self._matrix(self.gs, n, s, length)
        to_switch = up[:, :, None] + d[None, :, :]  # gpu, entry switch, exit switch
        entry = np.argmin(to_switch, axis=1)
        reach = np.take_along_axis(to_switch, entry[:, None, :], axis=1)[:, 0, :]  # gpu x exit switch
        # Last hops: one column per switch -> GPU link (a GPU has few), the cheapest per GPU kept.
        ends = reach[:, self.down_switch] + length[self.down_link][None, :]
        switched = np.full((n, n), INF)
        if len(self.down_link):
            switched[:, self.down_from_switch] = np.minimum.reduceat(
                ends, self.down_starts[self.down_from_switch], axis=1)
        cost = np.minimum(direct, switched)
        return cost, {"direct": direct, "switched": switched, "entry": entry, "via": via, "reach": reach,
                      "length": length}

    def route(self, u: int, x: int, info: dict) -> list[int]:
        """Link ids of the cheapest route from GPU index u to GPU index x."""
        direct = info["direct"]
        gu, gx = self.gpus[u], self.gpus[x]
        if "switched" not in info or direct[u, x] <= info["switched"][u, x]:
            return [self.link_index[(gu, gx)]]
        lo, hi = self.down_starts[x], self.down_ends[x]
        last = lo + int(np.argmin(info["reach"][u, self.down_switch[lo:hi]] + info["length"][self.down_link[lo:hi]]))
        out_sw = int(self.down_switch[last])
        in_sw = int(info["entry"][u, out_sw])
        nodes = [gu, *self._switch_path(in_sw, out_sw, info["via"]), gx]
        return [self.link_index[(a, b)] for a, b in zip(nodes, nodes[1:], strict=False)]

    def _switch_path(self, a: int, b: int, via: np.ndarray) -> list[int]:
        if a == b:
            return [self.switches[a]]
        k = int(via[a, b])
        if k < 0:
            return [self.switches[a], self.switches[b]]
        return self._switch_path(a, k, via)[:-1] + self._switch_path(k, b, via)


def greedy_arborescence(cost: np.ndarray, root: int) -> np.ndarray:
    """A cheap spanning out-tree grown from ``root`` Prim's way: the cheapest edge from the tree to a GPU
    not yet in it, n times (O(n^2) in numpy, no contraction levels).

    Exact where costs are symmetric (then the cheapest arborescence is the minimum spanning tree);
    on directed costs a close approximation. Chu-Liu/Edmonds needs a level per batch of cycles, and on
    switched fabrics, where every GPU behind a switch prefers the same cheapest uplink, a level contracts
    only a cycle or two per switch: about a hundred levels per tree at 256 GPUs.
    """
    n = cost.shape[0]
    parent = np.full(n, -1)
    best = np.array(cost[root], dtype=float)
    source = np.full(n, root)
    done = np.zeros(n, dtype=bool)
    done[root] = True
    best[root] = INF
    for _ in range(n - 1):
        v = int(np.argmin(best))
        if not np.isfinite(best[v]):
            raise _unreachable(root)
        parent[v] = source[v]
        done[v] = True
        best[v] = INF
        better = (cost[v] < best) & ~done
        best[better] = cost[v][better]
        source[better] = v
    return parent


def shortest_path_tree(cost: np.ndarray, root: int) -> np.ndarray:
    """Parent of every node on its cheapest path from ``root`` (Dijkstra on a dense cost matrix).

    For small messages, where every hop's alpha dominates, this is the latency-optimal tree: each GPU
    gets the data over its fastest path (the cheapest arborescence minimizes the sum of edges instead
    and may chain every GPU behind the next).
    """
    n = cost.shape[0]
    parent = np.full(n, root)
    parent[root] = -1
    dist = np.array(cost[root], dtype=float)
    dist[root] = 0.0
    done = np.zeros(n, dtype=bool)
    done[root] = True
    for _ in range(n - 1):
        v = int(np.argmin(np.where(done, INF, dist)))
        if not np.isfinite(dist[v]):
            raise _unreachable(root)
        done[v] = True
        through = dist[v] + cost[v]
        better = (through < dist) & ~done
        dist[better] = through[better]
        parent[better] = v
    return parent
