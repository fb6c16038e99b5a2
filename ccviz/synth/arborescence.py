"""Cheapest spanning out-trees (arborescences) over the GPUs, with switches turned into GPU-to-GPU routes.

Two pieces used by tree packing (``ccviz.synth.forestcoll``):

* ``RouteClosure``: for every ordered GPU pair the cheapest route whose interior is switches only (a
  direct link, or GPU -> switch ... switch -> GPU), under per-link lengths. This is what edge
  splitting achieves in ForestColl: a tree edge u -> x runs over a path through switches, and a switch
  never branches (no copy needed), so every tree is a GPU-only arborescence on the closure.
* ``min_arborescence``: Chu-Liu/Edmonds on a dense cost matrix (numpy), contracting every cycle of
  cheapest in-edges at once, so a level costs O(n^2) in a few dozen numpy calls.
"""

from __future__ import annotations

import numpy as np

from ccviz.errors import CcvizError
from ccviz.model.topology import Topology

INF = np.inf


def min_arborescence(cost: np.ndarray, root: int) -> np.ndarray:
    """Parent of every node in a cheapest spanning out-tree rooted at ``root`` (parent[root] = -1).

    ``cost[u, v]`` is the price of edge u -> v (``inf`` where there is none).
    """
    return _arborescence(np.array(cost, dtype=float), root)


def _arborescence(w: np.ndarray, root: int) -> np.ndarray:
    """``min_arborescence`` on a matrix it may overwrite.

    On switched fabrics a level often contracts a single cycle (about n levels per tree), so a level's
    fixed cost is what counts: the few cycles are merged and expanded one by one, the other nodes in bulk.
    Ties go as in the textbook form (contracted cycles numbered first, in the order found, then the other
    nodes in index order; the lowest index wins), which is what fixes the trees.
    """
    n = w.shape[0]
    w.flat[::n + 1] = INF  # the diagonal
    w[:, root] = INF
    parent = w.argmin(axis=0)
    best = w[parent, np.arange(n)]
    parent[root] = -1
    if np.count_nonzero(best == INF) > 1:  # the root's column is all inf; another one cannot be reached
        raise _unreachable(root)
    cycles = [np.array(sorted(c)) for c in _cycles(parent)]
    if not cycles:
        return parent
    k = len(cycles)
    group = np.full(n, -1)  # cycles first, in the order found, then every other node in index order
    for i, cycle in enumerate(cycles):
        group[cycle] = i
    free = np.flatnonzero(group < 0)
    m = k + len(free)
    # Entering a cycle at v replaces v's cheapest in-edge: its price is the difference.
    adjusted = w - np.where(group < 0, 0.0, best)[None, :]
    by_row_group = np.empty((m, n))  # [g, v]: cheapest edge from group g
    by_row_group[k:] = adjusted[free]
    block = np.empty((m, m))
    for i, cycle in enumerate(cycles):
        by_row_group[i] = adjusted[cycle].min(axis=0)
    block[:, k:] = by_row_group[:, free]
    for i, cycle in enumerate(cycles):
        block[:, i] = by_row_group[:, cycle].min(axis=1)
    contracted = _arborescence(block, k + int(np.searchsorted(free, root)))
    # Expand: each contracted edge a -> b is the cheapest original edge from group a into group b.
    source = contracted[k:]  # per free node: the group it is entered from (-1 at the root)
    parent[free] = np.where(source >= k, free[np.maximum(source - k, 0)], -1)
    for i, cycle in enumerate(cycles):
        into = free[source == i]
        if len(into):
            parent[into] = cycle[adjusted[cycle][:, into].argmin(axis=0)]
    for i, cycle in enumerate(cycles):  # a cycle is entered at its cheapest entry; the rest keep their edges
        g = int(contracted[i])
        head = int(cycle[by_row_group[g, cycle].argmin()])
        parent[head] = free[g - k] if g >= k else cycles[g][adjusted[cycles[g], head].argmin()]
    return parent


def _unreachable(root: int) -> CcvizError:
    return CcvizError(f"topology: some GPU cannot be reached from GPU index {root}; every GPU must reach every "
                      "other GPU", "topology")


def _cycles(parent: np.ndarray) -> list[list[int]]:
    """Cycles of the parent pointers (each node's cheapest in-edge), in the order walks from node 0, 1, ...
    first reach them (that order numbers the contracted nodes, so it decides ties). Python lists: a
    numpy element access costs more than the whole walk step."""
    n = len(parent)
    up = parent.tolist()
    state = [0] * n  # 0 new, 1 on the current walk, 2 done
    cycles = []
    for start in range(n):
        walk = []
        v = start
        while v >= 0 and state[v] == 0:
            state[v] = 1
            walk.append(v)
            v = up[v]
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
        # The same switch -> GPU links padded to one row per GPU (in the order above, so ties go alike),
        # and link ids by end points, so that every route of a tree is found at once.
        width = max(1, int(counts.max(initial=0)))
        slot = np.arange(width)[None, :]
        inside = slot < counts[:, None]
        at = np.where(inside, self.down_starts[:, None] + slot, 0)
        self.pad_switch = np.where(inside, self.down_switch[at], 0) if len(self.down_link) else np.zeros_like(at)
        self.pad_link = np.where(inside, self.down_link[at], -1) if len(self.down_link) else np.full_like(at, -1)
        self.gg_link = np.full((len(self.gpus), len(self.gpus)), -1)
        self.gs_link = np.full((len(self.gpus), len(self.switches)), -1)
        for i, j, k in self.gg:
            self.gg_link[i, j] = k
        for i, j, k in self.gs:
            self.gs_link[i, j] = k

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
                      "length": length, "between": d}

    def tree_routes(self, parent: np.ndarray, info: dict) -> list[list[int] | None]:
        """Per GPU index x, the link ids of the cheapest route from ``parent[x]`` to x (None at the root)."""
        children = np.flatnonzero(parent >= 0)
        up = parent[children]
        routes: list[list[int] | None] = [None] * len(parent)
        switched = np.zeros(len(children), dtype=bool)
        if "switched" in info:
            switched = info["direct"][up, children] > info["switched"][up, children]
        for x, link in zip(children[~switched].tolist(), self.gg_link[up[~switched], children[~switched]].tolist(),
                           strict=True):
            routes[x] = [link]
        if not switched.any():
            return routes
        xs, us = children[switched], up[switched]
        ends = info["reach"][us[:, None], self.pad_switch[xs]] + info["length"][self.pad_link[xs]]
        ends[self.pad_link[xs] < 0] = INF
        last = ends.argmin(axis=1)  # the switch -> GPU link a route ends on (first of equals, as before)
        out_sw = self.pad_switch[xs, last]
        in_sw = info["entry"][us, out_sw]
        middles: dict[tuple[int, int], list[int]] = {}
        for x, first, a, b, final in zip(xs.tolist(), self.gs_link[us, in_sw].tolist(), in_sw.tolist(),
                                         out_sw.tolist(), self.pad_link[xs, last].tolist(), strict=True):
            middle = middles.get((a, b))
            if middle is None:
                path = self._switch_path(a, b, info["via"])
                middle = middles[(a, b)] = [self.link_index[hop] for hop in zip(path, path[1:], strict=False)]
            routes[x] = [first, *middle, final]
        return routes

    def middle(self, a: int, b: int, via: np.ndarray) -> list[int]:
        """Link ids of the cheapest switch path from switch index a to switch index b (``costs``'s ``via``)."""
        path = self._switch_path(a, b, via)
        return [self.link_index[hop] for hop in zip(path, path[1:], strict=False)]

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
    return _grow(cost, root, along_paths=False)


def shortest_path_tree(cost: np.ndarray, root: int) -> np.ndarray:
    """Parent of every node on its cheapest path from ``root`` (Dijkstra on a dense cost matrix).

    For small messages, where every hop's alpha dominates, this is the latency-optimal tree: each GPU
    gets the data over its fastest path (the cheapest arborescence minimizes the sum of edges instead
    and may chain every GPU behind the next).
    """
    return _grow(cost, root, along_paths=True)


def _grow(cost: np.ndarray, root: int, along_paths: bool) -> np.ndarray:
    """Grow a tree from ``root`` one node at a time, the node that is cheapest to join next: by its
    edge from the tree (Prim) or, ``along_paths``, by its whole path from the root (Dijkstra)."""
    n = cost.shape[0]
    parent = np.full(n, root)
    parent[root] = -1
    join = np.array(cost[root], dtype=float)  # what each node outside the tree costs to join it
    join[root] = INF
    done = np.zeros(n, dtype=bool)
    done[root] = True
    for _ in range(n - 1):
        v = int(np.argmin(join))
        if not np.isfinite(join[v]):
            raise _unreachable(root)
        done[v] = True
        offer = (join[v] + cost[v]) if along_paths else cost[v]
        join[v] = INF
        better = (offer < join) & ~done
        join[better] = offer[better]
        parent[better] = v
    return parent
