"""Tree packing: k out-trees rooted at every GPU, no link loaded past the limit (the limit's certificate).

ForestColl (Zhao et al., arXiv 2402.06787) proves the AllGather limit is reached by packing spanning out-trees.
This module decides *which trees*: switches are taken out the way ForestColl's edge splitting does (a tree edge
u -> x is a GPU-to-GPU route through switches, ``RouteClosure``), and trees are added by multiplicative weights
(each new tree the cheapest arborescence under link lengths that grow exponentially with the link's load over
the limit), then ripped up and re-laid with ever steeper lengths. The packing's congestion (1.0 = at the limit)
is the largest load over capacity on any link; a switch that copies carries a multicast edge once. Also here:
one ring through every GPU, stars (one per root), shortest-path trees, and balancing edges off busy links.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, replace

import numpy as np
from scipy.optimize import linear_sum_assignment

import ccviz.synth.forestcoll.tuning as tuning
from ccviz.model.topology import Topology
from ccviz.synth.arborescence import RouteClosure, greedy_arborescence, min_arborescence, shortest_path_tree
from ccviz.synth.budget import Budget
from ccviz.synth.forestcoll.tuning import (
    BALANCE_MOVES,
    CROSSING_SHARE,
    REROUTE_PASSES,
    RING_HOP_COST,
    RING_PASSES,
    STALE_PASSES,
    STARS_NOTE,
    STEEPER,
    STEEPNESS,
)
from ccviz.synth.slotted import slot_capacities


# --------------------------------------------------------------------------- packing
@dataclass
class Tree:
    """One out-tree: its root GPU and, per GPU, the routes (link-id lists) to its children."""

    root: int
    children: dict[int, list[tuple[int, list[int]]]]
    links: list[int]  # every link use, with multiplicity (for loads)


@dataclass
class Packing:
    """k trees per root; ``congestion`` = the busiest link's time over the limit (1.0 = optimal)."""

    trees: dict[int, list[Tree]]
    k: int
    congestion: float
    notes: list[str] = field(default_factory=list)
    spared: bool = False  # packed for ``crossing_shares`` of the links between bufferless switches
    stars: bool = False  # one star per root (``TreePacker.stars``)

    def link_load(self, n_links: int) -> np.ndarray:
        """Per link id, the shards crossing it: each tree edge carries 1/k of its root's shard."""
        load = np.zeros(n_links)
        for trees in self.trees.values():
            for tree in trees:
                np.add.at(load, tree.links, 1.0 / self.k)
        return load


def bandwidths(topology: Topology, links: list[tuple[int, int]]) -> np.ndarray:
    """GB/s of each link, all lanes together: the capacities a packing aims at."""
    return np.array([topology.links[key].bandwidth_GBps * topology.links[key].lanes for key in links])


def move_edge(tree: Tree, parent: int, position: int, child: int, new_parent: int, new_route: list[int],
              old_route: list[int], load: np.ndarray, share: float) -> None:
    """Give ``child`` (the ``position``-th child of ``parent`` in ``tree``) the parent ``new_parent`` along
    ``new_route``, and move its ``share`` of load from the old route's links to the new one's."""
    del tree.children[parent][position]
    if not tree.children[parent]:
        del tree.children[parent]
    tree.children.setdefault(new_parent, []).append((child, new_route))
    tree.links = [link for kids in tree.children.values() for _, route in kids for link in route]
    np.add.at(load, old_route, -share)
    np.add.at(load, new_route, share)


class TreePacker:
    """Multiplicative-weights packing of cheapest arborescences on the switch-free route closure."""

    def __init__(self, topology: Topology, roots: list[int], unit_s: float, slotted: bool = False,
                 spare_crossings: bool = False, spread: bool = False, hop_cost: float = 0.0) -> None:
        self.topology = topology
        self.spread = spread  # a tree's own edges spread over parallel switch routes (``spread_routes``)
        self.hop_cost = hop_cost  # a link's length also counts this much over its bandwidth (``GRID_HOP_COST``)
        self.closure = RouteClosure(topology)
        self.roots = roots
        links = self.closure.links
        # On the slot grid a link touching a switch carries one hop per slot: pack for that
        self.bandwidth = slot_capacities(topology, links) if slotted else bandwidths(topology, links)
        self.capacity = self.bandwidth * crossing_shares(topology, links) if spare_crossings else self.bandwidth
        self.unit_s = unit_s  # seconds a link of 1 GB/s needs for one root's whole share, over the limit
        self.index = {g: i for i, g in enumerate(self.closure.gpus)}

    def lengths(self, load: np.ndarray, steepness: float = STEEPNESS) -> np.ndarray:
        exponent = self._exponent(load, steepness, self.capacity)
        return (np.exp(exponent - exponent.max()) + self.hop_cost) / self.capacity

    def _exponent(self, load: np.ndarray, steepness: float, capacity: np.ndarray) -> np.ndarray:
        """A link length's exponent: steepness x the load's time over the limit (capped against overflow)."""
        return np.minimum(steepness * load / capacity * self.unit_s, 600.0)

    def _length(self, load: np.ndarray, steepness: float, capacity: np.ndarray, top: float) -> np.ndarray:
        """``lengths`` of some links (or of one link at several loads), shifted by ``top``, the exponent that
        ``lengths`` took as its largest, so that they compare with lengths made before."""
        return np.exp(self._exponent(load, steepness, capacity) - top) / capacity

    def cheapest_tree(self, root: int, load: np.ndarray, steepness: float = STEEPNESS, share: float = 1.0) -> Tree:
        cost, info = self.closure.costs(self.lengths(load, steepness))
        grow = min_arborescence if len(self.closure.gpus) <= tuning.EXACT_TREES_UP_TO else greedy_arborescence
        parent = grow(cost, self.index[root])
        routes = self.spread_routes(parent, info, load, steepness, share) if self.spread and "between" in info \
            else None
        return self.tree(root, parent, info, routes)

    def spread_routes(self, parent: np.ndarray, info: dict, load: np.ndarray, steepness: float,
                      share: float) -> list[list[int] | None]:
        """Per GPU index, the route from its parent, the edges through switches of each parent assigned together
        to its entry switches (an assignment problem: the j-th edge on an up-link costs that link's length with
        j edges more on it), each exit switch the cheapest for that entry (the switch path between them as the
        closure found it).

        Why: the closure prices every edge of one tree under the load before the tree, so where a GPU reaches
        the others over many parallel switches (GB200 NVL72: 18 NVSwitch chips, one link each) every edge of a
        star takes the same cheapest chip: 71 edges on one of the root's 18 links, congestion 4.5 x the limit
        (the ReduceScatter's mirror, where no switch copies). Spread, each link carries 3-4 of them.
        """
        closure = self.closure
        top = float(self._exponent(load, steepness, self.capacity).max())
        length = self._length(load, steepness, self.capacity, top)
        local = np.array(load, dtype=float)
        routes = closure.tree_routes(parent, info)
        between = info["between"]
        ups, downs = self._switch_links()
        groups: dict[int, list[int]] = {}
        for x, route in enumerate(routes):
            if route is not None and len(route) > 1:  # through switches
                groups.setdefault(int(parent[x]), []).append(x)
        for u, kids in groups.items():
            a_sw, a_link = ups[u]
            on = np.empty((len(kids), len(a_sw)))  # per child the cheapest way on from each entry
            exits = np.empty((len(kids), len(a_sw)), dtype=int)
            for i, x in enumerate(kids):
                b_sw, b_link = downs[x]
                total = between[np.ix_(a_sw, b_sw)] + length[b_link][None, :]
                exits[i] = total.argmin(axis=1)
                on[i] = total[np.arange(len(a_sw)), exits[i]]
            slots = -(-len(kids) // len(a_sw)) + 1  # edges an up-link may take in this tree
            while True:  # the j-th edge's length on each up-link
                steps = np.arange(slots)[None, :]
                up = self._length(local[a_link][:, None] + steps * share, steepness, self.capacity[a_link][:, None],
                                  top)
                cost = (on[:, :, None] + up[None, :, :]).reshape(len(kids), -1)
                rows, cols = linear_sum_assignment(np.where(np.isfinite(cost), cost, 1e300))
                if np.isfinite(cost[rows, cols]).all() or slots >= len(kids):
                    break
                # some child reaches the others from few entries (a rail leaf, where the NVLink switches stop at
                # the rack: superpod): more edges on those up-links rather than a route that does not exist
                slots = min(len(kids), 2 * slots)
            for i, col in zip(rows.tolist(), cols.tolist(), strict=True):
                if not np.isfinite(cost[i, col]):
                    continue  # no switch path from any entry with room: the closure's route
                x, e = kids[i], col // slots
                b_sw, b_link = downs[x]
                f = int(exits[i, e])
                routes[x] = [int(a_link[e]), *closure.middle(int(a_sw[e]), int(b_sw[f]), info["via"]), int(b_link[f])]
            touched = [link for x in kids for link in routes[x]]
            np.add.at(local, touched, share)  # the lengths as this tree loads them, for the parents assigned next
            touched = np.unique(touched)
            length[touched] = self._length(local[touched], steepness, self.capacity[touched], top)
        return routes

    def stars(self) -> Packing | None:
        """One star per root (the root sends to every GPU itself), each edge's route through switches spread
        (``spread_routes``), re-laid a few times under steeper lengths: where every GPU reaches every other
        over many parallel switches and no switch copies (NVL72's mirror), a star packs at the limit and a
        pipeline of depth one has no fill or drain. None where some GPU is not reached through switches alone."""
        n = len(self.closure.gpus)
        load = np.zeros(len(self.capacity))
        trees: dict[int, list[Tree]] = {}
        best: Packing | None = None
        for rerun in range(RING_PASSES):
            steepness = STEEPNESS * STEEPER ** rerun
            for r in self.roots:
                if r in trees:
                    np.add.at(load, trees[r][0].links, -1.0)
                parent = np.full(n, self.index[r])
                parent[self.index[r]] = -1
                cost, info = self.closure.costs(self.lengths(load, steepness))
                if not np.all(np.isfinite(np.delete(cost[self.index[r]], self.index[r]))):
                    return None  # some GPU is reached only through other GPUs (a torus, a ring)
                routes = self.spread_routes(parent, info, load, steepness, 1.0) if "between" in info else None
                trees[r] = [self.tree(r, parent, info, routes)]
                np.add.at(load, trees[r][0].links, 1.0)
            congestion = self.congestion(load)
            if best is None or congestion < best.congestion:
                best = Packing({r: list(ts) for r, ts in trees.items()}, 1, congestion,
                               [STARS_NOTE], stars=True)
            if best.congestion <= 1.0 + 1e-9:
                break
        assert best is not None
        return best if self.capacity is self.bandwidth else self.true_congestion(best)

    def _switch_links(self) -> tuple[list[tuple[np.ndarray, np.ndarray]], list[tuple[np.ndarray, np.ndarray]]]:
        """Per GPU index, its (switch indices, link ids) up to switches and down from them (cached)."""
        if not hasattr(self, "_ups"):
            n = len(self.closure.gpus)
            ups: list[list[tuple[int, int]]] = [[] for _ in range(n)]
            downs: list[list[tuple[int, int]]] = [[] for _ in range(n)]
            for g, sw, k in self.closure.gs:
                ups[g].append((sw, k))
            for sw, g, k in self.closure.sg:
                downs[g].append((sw, k))

            def as_arrays(pairs: list[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
                switches, links = zip(*pairs, strict=True) if pairs else ((), ())
                return np.array(switches, dtype=int), np.array(links, dtype=int)

            self._ups = [as_arrays(pairs) for pairs in ups]
            self._downs = [as_arrays(pairs) for pairs in downs]
        return self._ups, self._downs

    def tree(self, root: int, parent: np.ndarray, info: dict, routes: list[list[int] | None] | None = None) -> Tree:
        """The tree of GPU-index parents, each edge on its route through switches (``RouteClosure.costs``'s info,
        or ``routes`` where given)."""
        gpus = self.closure.gpus
        children: dict[int, list[tuple[int, list[int]]]] = {}
        used: list[int] = []
        if routes is None:
            routes = self.closure.tree_routes(parent, info)
        for v, (u, route) in enumerate(zip(parent.tolist(), routes, strict=True)):
            if u < 0:
                continue
            children.setdefault(gpus[u], []).append((gpus[v], route))
            used.extend(route)
        return Tree(root, children, used)

    def congestion(self, load: np.ndarray) -> float:
        return float(np.max(load / self.capacity) * self.unit_s)

    def true_congestion(self, packing: Packing) -> Packing:
        """The packing with its congestion over the links' real bandwidths (not the shares packed for)."""
        load = packing.link_load(len(self.bandwidth))
        return replace(packing, congestion=float(np.max(load / self.bandwidth) * self.unit_s),
                       spared=self.capacity is not self.bandwidth)

    def fastest_trees(self, length: np.ndarray) -> Packing:
        """One shortest-path tree per root under per-link ``length`` (a hop's alpha + bytes): for small
        sizes, where a deep tree pays alpha at every level and congestion hardly matters."""
        cost, info = self.closure.costs(length)
        load = np.zeros(len(self.capacity))
        trees: dict[int, list[Tree]] = {}
        for r in self.roots:
            tree = self.tree(r, shortest_path_tree(cost, self.index[r]), info)
            trees[r] = [tree]
            np.add.at(load, tree.links, 1.0)
        return Packing(trees, 1, self.congestion(load), ["shortest-path trees (small size: alpha per level)"])

    def ring(self, order: list[int]) -> Packing:
        """One path per root along a ring through every GPU (``order``): the ring algorithm as a packing.

        Each ring edge u -> v is one route through switches shared by every root's path, so every GPU
        streams to one successor and hears from one predecessor: where the GPUs' own links are the
        bottleneck (a fat tree, a leaf-spine) no two streams meet at a GPU link, which trees with
        branching cannot promise. Routes are chosen edge by edge under load-aware lengths (plus a hop
        cost, so a lightly loaded detour is not taken for free) and re-laid while a link is over the limit.
        """
        n = len(order)
        at = [self.index[g] for g in order]
        edges = [(at[i], at[(i + 1) % n]) for i in range(n)]
        share = float(n - 1)  # every edge but the one into the root carries each root's whole share
        load = np.zeros(len(self.capacity))
        routes: list[list[int]] = [[] for _ in edges]
        for rerun in range(RING_PASSES):
            for i, (u, v) in enumerate(edges):
                np.add.at(load, routes[i], -share)
                cost, info = self.closure.costs(self.lengths(load, STEEPNESS * STEEPER ** rerun)
                                                + RING_HOP_COST / self.capacity)
                parent = np.full(n, -1)
                parent[v] = u
                routes[i] = self.closure.tree_routes(parent, info)[v]
                np.add.at(load, routes[i], share)
            if self.congestion(load) <= 1.0 + 1e-9:
                break
        gpus = self.closure.gpus
        trees: dict[int, list[Tree]] = {}
        for p, root in enumerate(order):
            path = [(p + s) % n for s in range(n - 1)]  # the ring edges from the root on, all but the last
            trees[root] = [Tree(root, {gpus[edges[i][0]]: [(gpus[edges[i][1]], routes[i])] for i in path},
                                [link for i in path for link in routes[i]])]
        return Packing(trees, 1, self.congestion(load), ["one ring through every GPU (a path per root)"])

    def balance(self, packing: Packing, budget: Budget | None = None) -> Packing:
        """The packing with tree edges moved off its busiest links one at a time, down to the limit.

        A move gives a GPU another parent in one tree (a GPU not below it, reached by the cheapest route
        under load-aware lengths) where every link the new route loads stays under the busiest link's
        load; the move that leaves the new route's busiest link least loaded goes first. Multiplicative
        weights leave a few GPUs' up-links some child edges over (dragonfly mirror, 4 trees per root:
        127 child edges on an up-link where 124 fit, congestion 1.024); 22 moves make it 1.0.
        """
        share = 1.0 / packing.k
        n = len(self.closure.gpus)
        trees = copied_trees(packing)
        load = packing.link_load(len(self.capacity))
        scale = self.unit_s / self.capacity  # load -> time over the limit
        for _ in range(BALANCE_MOVES):
            ratio = load * scale
            top = float(ratio.max())
            if top <= 1.0 + 1e-9 or (budget is not None and budget.expired()):
                break
            worst = set(np.flatnonzero(ratio >= top - 1e-9).tolist())
            cost, info = self.closure.costs(self.lengths(load))
            reachable = np.isfinite(cost)
            # a link's time over the limit with one more edge on it; padding (-1) reads -inf
            after = np.append((load + share) * scale, -np.inf)
            routes = _all_routes(self.closure, info, n)  # w x v -> link ids of the cheapest route (-1 padded)
            hops = (routes >= 0).sum(axis=2)
            best = None
            for t, u, i, v, old in edges_crossing(trees, worst):
                # every new parent w at once: not u, not below v, reaching v; the links of its route
                # to v that the old route does not share take one more edge (shared ones keep theirs)
                column = self.index[v]
                allowed = reachable[:, column].copy()
                allowed[self.index[u]] = False
                allowed[[self.index[x] for x in _below(t, v)]] = False
                shared = after[old]
                after[old] = -np.inf  # for the moment: the old route's links keep their load
                peak = after[routes[:, column, :]].max(axis=1)
                after[old] = shared
                allowed &= peak < top - 1e-9
                if not allowed.any():
                    continue
                low = peak[allowed].min()
                allowed &= peak == low
                shortest = hops[allowed, column].min()
                x = int(np.flatnonzero(allowed & (hops[:, column] == shortest))[0])  # the first of equals
                if best is None or (float(low), int(shortest)) < best[0]:
                    new = routes[x, column, :shortest].tolist()
                    best = ((float(low), int(shortest)), t, u, i, v, self.closure.gpus[x], new, old)
            if best is None:
                break
            move_edge(*best[1:], load, share)
        return Packing(trees, packing.k, self.congestion(load), list(packing.notes))

    def pack(self, k: int, budget: Budget | None = None) -> Packing:
        load = np.zeros(len(self.capacity))
        share = 1.0 / k
        trees: dict[int, list[Tree]] = {r: [] for r in self.roots}
        for _ in range(k):
            for r in self.roots:
                tree = self.cheapest_tree(r, load, STEEPNESS, share)
                np.add.at(load, tree.links, share)
                trees[r].append(tree)
        best = Packing({r: list(ts) for r, ts in trees.items()}, k, self.congestion(load))
        stale = 0
        for rerun in range(REROUTE_PASSES):
            if best.congestion <= 1.0 + 1e-9 or (budget is not None and budget.expired()):
                break
            steepness = STEEPNESS * STEEPER ** rerun  # later passes care more about the busiest links
            for r in self.roots:
                for j, old in enumerate(trees[r]):
                    np.add.at(load, old.links, -share)
                    tree = self.cheapest_tree(r, load, steepness, share)
                    np.add.at(load, tree.links, share)
                    trees[r][j] = tree
            congestion = self.congestion(load)
            if congestion < best.congestion:
                best, stale = Packing({r: list(ts) for r, ts in trees.items()}, k, congestion), 0
            else:
                stale += 1
            if stale >= STALE_PASSES and len(self.closure.gpus) > tuning.EXACT_TREES_UP_TO and not self.spread:
                break  # at 256 GPUs a pass costs seconds and steeper lengths after the best rarely find better
                # (spread routes still gain late there: NVL72's mirror 1.141 x after two stale passes, 1.077 x after 8)
        return best if self.capacity is self.bandwidth else self.true_congestion(best)


def multicast_congestion(topology: Topology, packing: Packing, unit_s: float) -> float:
    """The packing's congestion over the links' bandwidths with a link that several tree edges out of one GPU
    share counted once, where every switch copies (one send rides to every branch); elsewhere its own figure.

    Why: the packing counts every tree edge's route on its own, so on NVL72 a GPU's seven edges through one
    switch loaded its up-link seven times and the notes read "packing congestion 4.5000 x the limit" for a
    schedule at 1.030 x. The packing's choices are unchanged; this is the figure its notes report."""
    if not topology.switches or not all(topology.nodes[s].copy for s in topology.switches):
        return packing.congestion
    links = sorted(topology.links)
    load = np.zeros(len(links))
    for trees in packing.trees.values():
        for tree in trees:
            for routes in tree.children.values():
                np.add.at(load, sorted({link for _, route in routes for link in route}), 1.0 / packing.k)
    return float(np.max(load / bandwidths(topology, links)) * unit_s)


def _all_routes(closure: RouteClosure, info: dict, n: int) -> np.ndarray:
    """The cheapest route from every GPU to every other (``RouteClosure.tree_routes`` of a star at each GPU)
    as link ids, padded with -1 to the longest: [w, v, hop]."""
    per_source = []
    for w in range(n):
        parent = np.full(n, w)
        parent[w] = -1
        per_source.append(closure.tree_routes(parent, info))
    width = max(len(route) for routes in per_source for route in routes if route is not None)
    out = np.full((n, n, width), -1, dtype=np.int64)
    for w, routes in enumerate(per_source):
        for v, route in enumerate(routes):
            if route is not None:
                out[w, v, :len(route)] = route
    return out


def copied_trees(packing: Packing) -> dict[int, list[Tree]]:
    """Each root's trees copied, so edges can move on them and leave ``packing`` as it was."""
    return {r: [Tree(t.root, {u: list(ch) for u, ch in t.children.items()}, list(t.links)) for t in ts]
            for r, ts in packing.trees.items()}


def edges_crossing(trees: dict[int, list[Tree]], links: set[int]) -> Iterator[tuple[Tree, int, int, int, list[int]]]:
    """Every tree edge whose route loads one of ``links``: (tree, parent u, index among u's children, child v,
    the route's link ids), in the trees' order."""
    for ts in trees.values():
        for t in ts:
            for u, kids in t.children.items():
                for i, (v, route) in enumerate(kids):
                    if not links.isdisjoint(route):
                        yield t, u, i, v, route


def crossing_shares(topology: Topology, links: list[tuple[int, int]]) -> np.ndarray:
    """Per link, the share of its bandwidth a packing for cut-through booking may plan on:
    ``CROSSING_SHARE`` on links between two bufferless switches, 1 elsewhere.

    Why: a route crossing such a link (GPU -> NIC -> hub -> NIC -> GPU) must find every hop free at the same
    instant; with no buffer to wait in, first-come booking keeps those links only 84-96 % busy (the two-box
    MI250-like ``amd:chassis=2``). Packed at full bandwidth, the trees route some box-internal edges through
    the hub (432 crossings where 384 suffice) and the schedule ends at 1.13 x the limit; planned on 0.9 of it,
    every tree crosses once and the same booking ends at 1.04 x.
    """
    bufferless = [topology.is_switch(u) and topology.is_switch(v) and not topology.nodes[u].buffer
                  and not topology.nodes[v].buffer for u, v in links]
    return np.where(bufferless, CROSSING_SHARE, 1.0)


def _top_down(tree: Tree, node: int) -> list[int]:
    """``node`` and every GPU under it in ``tree``, parents before children."""
    order = [node]
    for u in order:
        order.extend(x for x, _ in tree.children.get(u, ()))
    return order


def _below(tree: Tree, node: int) -> set[int]:
    """``node`` and every GPU under it in ``tree``."""
    return set(_top_down(tree, node))


def _depths(tree: Tree) -> dict[int, int]:
    """Tree levels from the root down to each GPU."""
    depth = {tree.root: 0}
    for u in _top_down(tree, tree.root):
        for x, _ in tree.children.get(u, ()):
            depth[x] = depth[u] + 1
    return depth


def _heights(tree: Tree) -> dict[int, int]:
    """Hops from each GPU of a tree down to its deepest leaf."""
    height: dict[int, int] = {}
    for u in reversed(_top_down(tree, tree.root)):
        height[u] = 1 + max((height[x] for x, _ in tree.children.get(u, ())), default=-1)
    return height
