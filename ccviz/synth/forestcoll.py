"""ForestColl: spanning-tree packing that reaches the fabric's limit, pipelined in pieces.

Zhao et al., "ForestColl: Throughput-Optimal Collective Communications on Heterogeneous Network
Fabrics" (arXiv 2402.06787). The AllGather limit (``ccviz.bounds.limit``) is reached by k out-trees rooted
at every GPU, each carrying 1/k of its root's shard, packed so that no link carries more than the
limit allows. This module packs them and schedules them:

* Packing. Switches are taken out the way ForestColl's edge splitting does: a tree edge u -> x is a
  GPU-to-GPU route through switches (``RouteClosure``), so a switch never has to copy. Trees are
  added by multiplicative weights: each new tree is the cheapest arborescence (Chu-Liu/Edmonds; beyond
  ``EXACT_TREES_UP_TO`` GPUs grown Prim's way, ``greedy_arborescence``) under link lengths that grow exponentially with the link's load relative to the limit; then every tree is
  ripped up and re-laid eight times with ever steeper lengths. ForestColl builds an exactly optimal
  packing with integer capacities; this is the practical approximation, reported as the packing's
  congestion (1.0 = at the limit). ``--opt trees=k`` fixes k; by default k = 8 and 12 are tried up to
  32 GPUs (fewer beyond) and the less congested kept.
* Pipelining (``pipeline``). Each tree's share is cut into pieces (the collective's chunks: k x pieces
  per rank) and sent down its tree as pieces arrive; a GPU's free out-link sends its most urgent
  waiting piece. A piece reaching a switch whose out-link is busy waits in the switch's queue and
  leaves once, where switches have a buffer (``Node.buffer``); elsewhere, or with
  ``--opt switch_queue=false``, routes are booked cut-through, a free link sending the most urgent
  of its next ``LOOKAHEAD`` waiting pieces that can start soonest, and other tree edges of the same
  piece riding along where they branch off at a copy switch (the sender's link carries it once).
  ``--chunks C`` (C > 1) fixes the chunks per rank; by default as many pieces as keep the schedule
  under ``MAX_TRANSFERS`` (more pieces never hurt in this link model: alpha is paid per hop).

* One ring (``TreePacker.ring``). Where every GPU's one cable is saturated both ways (fat trees,
  leaf-spines), branching trees make streams meet at a GPU's in-link; one path per root along a ring
  through every GPU, pipelined level by level, streams each GPU to one successor. Tried first for the
  collectives of every rank and kept alone where it ends within ``RING_ENOUGH`` x the limit.
* Spread routes and stars (``TreePacker.spread_routes``, ``TreePacker.stars``). Where no switch copies (a
  reduction's mirror) and the packing stays over ``SPREAD_ABOVE`` x the limit, each parent's edges are assigned
  to its parallel switches together instead of all taking the one the closure found cheapest (NVL72: 18 chips),
  and one star per root is tried first; stars go on the tight slot grid up to ``STARS_GRID_MAX_GPUS``.
* Balance (``TreePacker.balance``). Wherever the slot grid runs it also tries ``GRID_TREES`` trees per
  root with tree edges moved off the busiest links down to the limit: a reduction's mirror saturates
  every GPU link, and one up-link a few edges over holds the whole grid back. Between 33 and 64 GPUs,
  where routes cross two switches (a dragonfly), these are the only trees put on the grid by default, and
  they go first (``_grid_first``: packed with a price per link crossed, so routes take the fewest links
  among equally loaded ones, then unpriced in piece waves, then two priced trees per root, while the
  fastest ends over ``GRID_ENOUGH`` x the limit): the packed trees' first-come booking runs only where the
  grid ends over ``GRID_FIRST_ENOUGH`` x the limit or is refused.
* Switch sums (``_with_switch_sums``). Where the fabric's switches reduce (NVLS, SHARP), a ReduceScatter,
  AllReduce or Reduce also books the in-switch schedule ``-a inc`` makes, the faster kept.

ReduceScatter schedules the mirrored AllGather on the reversed fabric and turns it around in time
(``reduction_schedule``; partial sums run up the trees where a switch rule makes that mirror
acausal); AllReduce is ReduceScatter then AllGather (``concatenate``); Broadcast packs 16 or 32
trees of one root; Reduce is the mirror of a Broadcast as ReduceScatter is of an AllGather.
The simulator judges the result like every other algorithm's.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

import numpy as np
from scipy.optimize import linear_sum_assignment

from ccviz.bounds.limit import bandwidth_limit
from ccviz.errors import CcvizError
from ccviz.model.collectives import Collective, make_collective
from ccviz.model.groups import judged_on, relay_fabric
from ccviz.model.physics import link_costs
from ccviz.model.routing import ring_order
from ccviz.model.schedule import Schedule, Transfer
from ccviz.model.topology import Topology
from ccviz.model.units import format_time, us_text
from ccviz.model.validate import MIN_CHUNK_BYTES
from ccviz.synth.arborescence import RouteClosure, greedy_arborescence, min_arborescence, shortest_path_tree
from ccviz.synth.budget import Budget
from ccviz.synth.catalog import ForestcollOptions
from ccviz.synth.common import dispatch
from ccviz.synth.forestcoll_crossbar import chunk_count, crossbar_allgather, crossbar_planes
from ccviz.synth.inc import synthesize_inc
from ccviz.synth.registry import SynthOptions
from ccviz.synth.reversal import (
    concatenate,
    costs_alike_both_ways,
    mirror_collective,
    mirror_fabric,
    reverse_schedule,
    schedule_end,
    split_allreduce,
)
from ccviz.synth.slotted import (
    one_switch_routes,
    slot_capacities,
    slot_eligible,
    slot_overhead,
    slotted_pipeline,
)

LOOKAHEAD = 32  # waiting chunks a free link considers (cut-through): the most urgent that can start soonest
WIDE_LOOKAHEAD = 256  # ... and, where that ends over WIDE_ABOVE x the limit, this many (the faster kept)
WIDE_ABOVE = 1.03  # random two-box fabric (odd3 in bench/limit.py --odd, deep first): 1.064 -> 1.049; rfs3d no better
PIECE_COUNTS = (1, 2, 4, 8, 16, 32)
MIN_PIECES = 2  # even a big fabric pipelines each tree in two pieces
MORE_PIECES_ABOVE = 1.03  # a schedule this far over the limit with transfers to spare tries twice the pieces
ROOTED_TREE_COUNTS = (16, 32)  # one root needs many trees to use all its out-links
_SEPARATION = 1e-9  # s between two partial sums of one chunk at a copy switch (far above the simulator's tolerance)
REROUTE_PASSES = 8
STALE_PASSES = 2  # beyond EXACT_TREES_UP_TO GPUs re-laying stops after this many passes without a better packing
STEEPER = 1.3  # each re-laying pass weighs the busiest links more (annealing)
MAX_TRANSFERS = 200_000  # the automatic piece count keeps a schedule below this many transfers (64-GPU tori: 4 pieces, 1.044 x the limit instead of 2 pieces, 1.069 x)
STEEPNESS = 8.0  # link length = exp(STEEPNESS * load / limit) / bandwidth
SLOTS_ABOVE = 1.03  # first-come booking this far over the limit: the slot grid is tried too
DEEP_FIRST_ABOVE = 1.01  # pipelining by chunk index ends this far over the limit: deep trees first is tried too
DEEP_FIRST_BELOW = 1.25  # ... and no further (railclos ReduceScatter's mirror: by index 1.180, deep first 1.004)
WIDE_BELOW = 1.1  # a wider look-ahead only below this: further off, crossbar conflicts, not the order, hold it back
LATENCY_ABOVE = 1.5  # packed trees this far over the limit (small sizes): shortest-path trees are tried
SLOTS_AUTO_MAX_GPUS = 32  # beyond, the grid runs only when asked: a matching per slot over 64 senders costs
# minutes (8x8 leaf-spine AllGather 1.084 -> 1.073 x, 14 s -> 2 min; dgx2:chassis=4 100 s, not kept)
SLOT_PIECES = (4,)  # pieces per tree on the slot grid (alpha per slot: few, large pieces; 8 rarely better)
SLOT_MAX_OVERHEAD = 0.25  # a slot's alpha over its bytes' time beyond which the grid is not tried
RING_PASSES = 4  # re-laying passes of a ring's routes while a link is over the limit
RING_HOP_COST = 0.1  # a ring route's length per hop, over a link's bandwidth: detours are not free
RING_PIECES = (8, 16, 32, 64)  # pieces of a root's share on a ring (the last piece's trip round it is the overhead)
RING_MIN_PIECES = 4  # even beyond MAX_TRANSFERS: with 2, a piece's trip to the next GPU outlasts a level's sends
# (256-GPU leaf-spine AllGather 1.031 x the limit; 4 pieces, 555,000 transfers: 1.002 x in 11 s)
RING_CONGESTION_SLACK = 0.01  # a ring this far over the limit's bandwidth is not pipelined at all
RING_ENOUGH = 1.01  # a ring ending this close to the limit is kept without packing trees (fat trees, leaf-spines)
RING_ENOUGH_LARGE = 1.05  # beyond EXACT_TREES_UP_TO GPUs (2-4 trees grown Prim's way end 1.07-1.19 x there)
RING_BOOKING = ("one ring through every GPU (each GPU streams to one successor), pipelined level by level: a GPU "
                "sends its own pieces first, then each predecessor's as they arrive")
BALANCE_MOVES = 200  # tree edges moved off the busiest links at most (dragonfly mirror, 4 trees: 22)
GRID_TREES = 4  # the slot grid also tries this few trees per root, balanced to the limit, deep trees first ...
GRID_PIECES = 8  # ... in this many pieces each (dragonfly ReduceScatter 1.080 -> 1.042 x the limit), or fewer ...
GRID_SLOT_ALPHA = 0.03  # ... where alpha would take more of a slot than this (64-GPU dragonfly AllGather: 8 pieces,
# alpha 5 % of a slot, 1.062 x the limit; 4 pieces, 2.6 %, 1.042 x; the 32-GPU one keeps 8 pieces at 2.6 %)
GRID_FEW_TREES_MAX_GPUS = 64  # beyond SLOTS_AUTO_MAX_GPUS and up to this, the automatic choice puts only the
# balanced few trees on the grid, and only where routes cross two switches or more (a dragonfly), not the packed ones
GRID_ENOUGH = 1.05  # balanced few trees ending this close to the limit: the packed trees are not put on the grid
# (and, further from it, the balanced trees are booked again in piece waves, the faster kept)
GRID_HOP_COST = 0.5  # where the grid goes first, the balanced trees are packed with this price per link crossed
# first (over the bandwidth, against 1 for the busiest link): a measured setting, 0.3-2 gave the same routes
GRID_FEWER_TREES = 2  # ... and, where neither 4 priced trees nor 4 unpriced in piece waves end within GRID_ENOUGH, 2
PACKED_GRID_MAX_GPUS = 64  # beyond SLOTS_AUTO_MAX_GPUS and up to this, where every route crosses one switch and
# first-come booking ends over GRID_ENOUGH x the limit, the packed trees' count goes on the tight grid balanced
# (``_packed_trees_tight_grid``; rfs3d:dims=2x4x8 ReduceScatter: first come 1.057 x, 8 balanced trees 1.041 x)
TIGHT_GRID_BOOKING = ("routes through switches booked cut-through on a slot grid of an up-link's bytes' time (every "
                      "route crosses one switch, so hops stay aligned and no slot pays alpha), each slot's senders "
                      "matched together")
GRID_FIRST_ENOUGH = 1.15  # where the balanced few trees go on the grid first (``_few_trees_grid_only``), ending this
# close to the limit they are kept without packing 8 trees for first-come booking (64-GPU dragonflies, 2026-11-27:
# first come 1.12-1.37 x the limit, the grid 1.04-1.13 x; the packing and its booking were a third of the time)
MORE_TREES = 24  # trees per root also tried where 8 and 12 leave the packing over MORE_TREES_ABOVE x the limit ...
MORE_TREES_ABOVE = 1.02  # (shares of 1/8 or 1/12 cannot split a 12.5 GB/s NIC's load exactly: odd2 in bench/limit.py
MORE_TREES_UP_TO = 16  # --odd packs at 1.042 with 8 or 12 trees, 1.007 with 24) on fabrics of this many GPUs at most
CROSSING_SHARE = 0.9  # of a bufferless switch -> switch link's bandwidth the packing may plan on (see spare_crossings)
CROSSING_ABOVE = 1.05  # first-come booking this far over the limit: trees sparing such links are packed too ...
CROSSING_LIMIT_COST = 1.02  # ... where the limit with those links at that share is at most this much higher (the
# MI250 two-box: 1.008; where those links bind, as a dragonfly's global cables do, sparing them cannot help)
STARS_NOTE = "one star per root (every GPU sends to every other itself), routes spread over parallel switches"
SPREAD_NOTE = "each tree's routes spread over parallel switches (the closure alone put a tree's edges on one)"
STARS_GRID_MAX_GPUS = 72  # stars go on the tight slot grid up to this many GPUs (``_stars_grid``; NVL72)
STARS_ENOUGH = 1.02  # stars with spread routes this close to the limit: no spread trees are packed
SPREAD_ABOVE = 1.05  # a packing this far over the limit where no switch copies: trees with spread routes are tried
CROSSBAR_ENOUGH = 1.05  # the closed form over crossbar planes is kept where it ends this close to the limit
EXACT_TREES_UP_TO = 64  # GPUs; beyond, trees are grown Prim's way (within 0.5 % of the cheapest, 10-25 x faster at 256)


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
        grow = min_arborescence if len(self.closure.gpus) <= EXACT_TREES_UP_TO else greedy_arborescence
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
            slots = -(-len(kids) // len(a_sw)) + 1  # edges an up-link may take in this tree
            steps = np.arange(slots)[None, :]
            # the j-th edge's length on each up-link, and per child the cheapest way on from each entry
            up = self._length(local[a_link][:, None] + steps * share, steepness, self.capacity[a_link][:, None], top)
            on = np.empty((len(kids), len(a_sw)))
            exits = np.empty((len(kids), len(a_sw)), dtype=int)
            for i, x in enumerate(kids):
                b_sw, b_link = downs[x]
                total = between[np.ix_(a_sw, b_sw)] + length[b_link][None, :]
                exits[i] = total.argmin(axis=1)
                on[i] = total[np.arange(len(a_sw)), exits[i]]
            cost = (on[:, :, None] + up[None, :, :]).reshape(len(kids), -1)
            rows, cols = linear_sum_assignment(np.where(np.isfinite(cost), cost, 1e300))
            for i, col in zip(rows.tolist(), cols.tolist(), strict=True):
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
        trees = {r: [Tree(t.root, {u: list(ch) for u, ch in t.children.items()}, list(t.links)) for t in ts]
                 for r, ts in packing.trees.items()}
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
            for ts in trees.values():
                for t in ts:
                    for u, kids in t.children.items():
                        for i, (v, old) in enumerate(kids):
                            if worst.isdisjoint(old):
                                continue
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
            if stale >= STALE_PASSES and len(self.closure.gpus) > EXACT_TREES_UP_TO and not self.spread:
                break  # at 256 GPUs a pass costs seconds and steeper lengths after the best rarely find better
                # (spread routes still gain late there: NVL72's mirror 1.141 x after two stale passes, 1.077 x after 8)
        return best if self.capacity is self.bandwidth else self.true_congestion(best)


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


def spares_crossings(topology: Topology) -> bool:
    """Whether ``crossing_shares`` changes anything: the fabric has a link between two bufferless switches."""
    return bool(crossing_shares(topology, sorted(topology.links)).min() < 1.0)


def crossing_load(topology: Topology, packing: Packing, unit_s: float) -> float:
    """The busiest link between two bufferless switches: its load under ``packing`` over what the limit allows
    (0 where there is none). Sparing such links changes nothing where no packed tree loads one above its share."""
    links = sorted(topology.links)
    load = packing.link_load(len(links))
    between = crossing_shares(topology, links) < 1.0
    return float(np.max(load[between] / bandwidths(topology, links)[between] * unit_s, initial=0.0))


def spared_limit(topology: Topology, collective: str, size_bytes: float, root: int | None) -> float:
    """The fabric's limit with its links at ``crossing_shares`` of their bandwidth: the best trees that
    spare those links can do, so sparing is worth a try only where it is barely above the real limit."""
    links = sorted(topology.links)
    shares = crossing_shares(topology, links)
    spared = topology.with_changes(links=[replace(topology.links[key], bandwidth_GBps=topology.links[key].bandwidth_GBps
                                                  * float(share)) for key, share in zip(links, shares, strict=True)])
    return bandwidth_limit(spared, collective, size_bytes, root).limit_s


def tree_counts(n_roots: int) -> tuple[int, ...]:
    """Trees per root tried by default: 8 and 12 (close to optimal in practice) up to 32 roots, fewer
    beyond, so that a schedule of 256 GPUs stays within reach of the simulator."""
    return (8, 12) if n_roots <= 32 else (8,) if n_roots <= 64 else (4,) if n_roots <= 128 else (2,)


def best_packing(topology: Topology, roots: list[int], unit_s: float, trees: int | None,
                 budget: Budget, slotted: bool = False, packed: dict | None = None,
                 spare_crossings: bool = False, hop_cost: float = 0.0) -> Packing:
    """The least congested packing over the tree counts tried (``trees`` fixes k).

    ``packed`` keeps the packings made, keyed by everything a packing depends on (the links' capacities
    included, so slot-grid packings keep their own), so that the two halves of an AllReduce on a fabric
    that equals its reversal (every link as fast both ways) pack once. ``spare_crossings``: pack for
    ``crossing_shares`` of the bufferless switch -> switch links. ``hop_cost``: ``TreePacker``'s.
    """
    packer = TreePacker(topology, roots, unit_s, slotted, spare_crossings, hop_cost=hop_cost)
    counts = (trees,) if trees else tree_counts(len(roots)) if len(roots) > 1 else ROOTED_TREE_COUNTS
    fabric = tuple(sorted((key, float(c)) for key, c in zip(packer.closure.links, packer.capacity, strict=True)))
    best: Packing | None = None
    for i, k in enumerate(counts):
        if best is not None and budget.expired():
            break
        key = (fabric, tuple(topology.gpus), tuple(topology.switches), tuple(roots), unit_s, k) + \
            ((("hop_cost", hop_cost),) if hop_cost else ())
        packing = packed.get(key) if packed is not None else None
        if packing is None:
            packing = packer.pack(k, budget)
            if packed is not None:
                packed[key] = packing
        budget.report(f"ForestColl: {k} tree(s) per root, congestion {packing.congestion:.4f} x the limit",
                      0.5 * (i + 1) / len(counts))
        if best is None or packing.congestion < best.congestion - 1e-6:
            best = packing
        if best.congestion <= 1.0 + 1e-6:
            break
    assert best is not None
    if best.congestion > SPREAD_ABOVE and not budget.expired() and not any(topology.nodes[s].copy
                                                                           for s in topology.switches):
        best = _spread(topology, roots, unit_s, best, slotted, spare_crossings, fabric, budget, packed)
    if (trees is None and len(roots) > 1 and len(topology.gpus) <= MORE_TREES_UP_TO
            and best.congestion > MORE_TREES_ABOVE and not budget.expired()):
        return _more_trees(packer, best, (fabric, tuple(topology.gpus), tuple(topology.switches), tuple(roots),
                                          unit_s, MORE_TREES), budget, packed)
    return best


def _spread(topology: Topology, roots: list[int], unit_s: float, best: Packing, slotted: bool, spare_crossings: bool,
            fabric: tuple, budget: Budget, packed: dict | None) -> Packing:
    """The same number of trees packed again with each tree's edges spread over parallel switch routes
    (``TreePacker.spread_routes``), the less congested kept. Only where no switch copies (a reduction's mirror,
    or switches without multicast): where one does, routes of one tree through one switch are what lets the
    switch send a piece once to many children."""
    key = (fabric, tuple(topology.gpus), tuple(topology.switches), tuple(roots), unit_s, best.k, "spread")
    packing = packed.get(key) if packed is not None else None
    if packing is None:
        packer = TreePacker(topology, roots, unit_s, slotted, spare_crossings, spread=True)
        packing = packer.stars() if len(roots) > 1 else None
        if packing is not None:
            budget.report(f"ForestColl: one star per root with routes spread over parallel switches, congestion "
                          f"{packing.congestion:.4f} x the limit", 0.5)
        if packing is None or packing.congestion > STARS_ENOUGH:
            trees = packer.pack(best.k, budget)
            if trees.congestion > 1.0 + 1e-6 and not budget.expired():
                # the trees' shapes were grown on costs that do not see the tree's own edges: a few GPUs forward
                # more than their links carry (NVL72's mirror: 1.077 x the limit; moved off, 1.014)
                trees = packer.balance(trees, budget)
            if packing is None or trees.congestion < packing.congestion - 1e-6:
                packing = replace(trees, notes=[SPREAD_NOTE])
        if packed is not None:
            packed[key] = packing
    budget.report(f"ForestColl: {packing.k} tree(s) per root with routes spread over parallel switches, congestion "
                  f"{packing.congestion:.4f} x the limit", 0.5)
    return packing if packing.congestion < best.congestion - 1e-6 else best


def _more_trees(packer: TreePacker, best: Packing, key: tuple, budget: Budget, packed: dict | None) -> Packing:
    """``MORE_TREES`` trees per root where the default counts leave the packing well over the limit, the
    less congested kept. Each tree carries 1/k of its root's shard, so a link's load comes in steps of 1/k:
    where the binding links' bandwidths do not divide into those steps (mixed NIC classes), only a finer
    k packs at the limit (ForestColl derives k from the limit's ratio; here a finer k is tried)."""
    packing = packed.get(key) if packed is not None else None
    if packing is None:
        packing = packer.pack(MORE_TREES, budget)
        if packed is not None:
            packed[key] = packing
    budget.report(f"ForestColl: {MORE_TREES} tree(s) per root, congestion {packing.congestion:.4f} x the limit", 0.5)
    return packing if packing.congestion < best.congestion - 1e-6 else best


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


def pipeline(topology: Topology, collective: Collective, packing: Packing, start_s: float = 0.0,
             switch_queue: bool = True, deep_first: bool = False, by_level: bool = False,
             lookahead: int = LOOKAHEAD) -> Pipelined:
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

    while events:
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
                     deep_below: float = DEEP_FIRST_BELOW) -> Pipelined:
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
    run = pipeline(topology, collective, packing, start_s, switch_queue)
    if DEEP_FIRST_ABOVE * limit_s < run.finish_s - start_s < deep_below * limit_s and not packing.stars:
        deep = pipeline(topology, collective, packing, start_s, switch_queue, deep_first=True)
        if deep.finish_s < run.finish_s:
            run = deep
    if (wide and not switch_queue and topology.switches and topology.n_gpus <= SLOTS_AUTO_MAX_GPUS
            and WIDE_ABOVE * limit_s < run.finish_s - start_s < WIDE_BELOW * limit_s):
        for deep_first in (True, False):
            wide = pipeline(topology, collective, packing, start_s, switch_queue, deep_first, lookahead=WIDE_LOOKAHEAD)
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
            if p > pieces and hops_per_piece * p <= MAX_TRANSFERS and per_rank_bytes / (packing.k * p) >= MIN_CHUNK_BYTES:
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


def copy_schedule(topology: Topology, collective: Collective, options: SynthOptions, budget: Budget,
                  start_s: float = 0.0, refine: bool = True, pack_on: Topology | None = None,
                  limit_collective: str | None = None, packed: dict | None = None) -> tuple[Schedule, Pipelined]:
    """Any of the five collectives by packed trees (the name is historical: reductions pass ``pack_on``,
    the reversed fabric, and the mirrored copy's name for the limit the packing aims at).

    ``refine=False`` keeps the collective's chunks as they are (the second half of an AllReduce);
    ``packed``: packings already made (``best_packing``).
    """
    name = limit_collective or collective.name
    fabric = pack_on or topology
    limit = bandwidth_limit(fabric, name, collective.size_bytes, collective.root)
    roots = _roots(collective)
    slots = 1 if name == "broadcast" else int(topology.meta.get("buffer_ranks", topology.n_gpus))
    unit_s = collective.size_bytes / slots / 1e9 / limit.limit_s  # one root's share on 1 GB/s, over the limit
    settings = options.settings(ForestcollOptions)
    trees, pieces = settings.trees, settings.pieces
    buffered = all(topology.nodes[s].buffer for s in topology.switches)
    switch_queue = _switch_queue(topology, settings)
    if switch_queue and not buffered:
        raise CcvizError("switch_queue: this fabric's switches have no buffer, so a chunk cannot wait in one; "
                         "drop --opt switch_queue=true or declare the switches' buffer", "switch_queue")
    queues = switch_queue and bool(topology.switches)
    if settings.ring and (len(roots) < 3 or queues):
        why = "switch queues keep streams apart already" if queues else \
            "it serves collectives of every rank (allgather, reducescatter, allreduce) on three GPUs or more"
        raise CcvizError(f"ring: one ring through every GPU is not tried here: {why}; set ring to auto or false",
                         "ring")
    if settings.spare_crossings and (queues or not spares_crossings(fabric)):
        why = "queues chunks in its switches" if queues else "has no link between two bufferless switches"
        raise CcvizError(f"spare_crossings: trees spare links between bufferless switches, and this fabric {why}; "
                         "set spare_crossings to auto or false", "spare_crossings")
    if settings.slots and (switch_queue or not _slot_grid_fits(topology)):
        why = ("has no switches" if not topology.switches else "queues chunks in its switches" if switch_queue
               else "has GPU -> switch links of different bandwidths or alphas")
        raise CcvizError(f"slots: the slot grid books routes through bufferless switches whose GPU -> switch links "
                         f"are alike (one bandwidth and alpha); this fabric {why}; set slots to auto or false",
                         "slots")
    crossbar = _crossbar(topology, collective, settings, refine, pack_on, start_s, limit.limit_s)
    if crossbar is not None:
        return crossbar
    ring, on_ring = None, False
    if settings.ring or (settings.ring is None and trees is None and not settings.slots and len(roots) > 2):
        budget.report("ForestColl: trying one ring through every GPU", 0.05)
        ring = _ring(topology, collective, fabric, roots, unit_s, refine, pieces, start_s, queues,
                     math.inf if settings.ring else 1.0 + RING_CONGESTION_SLACK)
        if ring is not None:
            _offer(budget.options, topology, ring[0], ring[1], ring[2], True)
        if ring is None and settings.ring:
            raise CcvizError("ring: no cycle through every GPU, each reaching the next by a direct link or through "
                             "switches alone, was found on this fabric; set ring to auto or false", "ring")
    enough = RING_ENOUGH if topology.n_gpus <= EXACT_TREES_UP_TO else RING_ENOUGH_LARGE
    if ring is not None and (settings.ring or ring[2].finish_s - start_s <= enough * limit.limit_s):
        (packing, refined, run), booking, on_ring = ring, RING_BOOKING, True  # close enough: no trees packed
    else:
        def may_spare() -> bool:  # asked only where first-come booking ends over CROSSING_ABOVE x the limit
            return (settings.spare_crossings is None and not switch_queue and spares_crossings(fabric)
                    and spared_limit(fabric, name, collective.size_bytes, collective.root)
                    <= CROSSING_LIMIT_COST * limit.limit_s)

        packing, refined, run, booking = _tree_schedule(topology, collective, fabric, roots, unit_s, settings,
                                                        budget, refine, start_s, switch_queue, limit.limit_s,
                                                        packed, may_spare)
        if ring is not None and ring[2].finish_s < run.finish_s:
            (packing, refined, run), booking, on_ring = ring, RING_BOOKING, True
    budget.report(f"ForestColl: {refined.chunks_per_rank} chunks per rank finish at {us_text(run.finish_s)}", 1.0)
    shape = "one path per root along the ring" if on_ring else f"{packing.k} tree(s) per root"
    notes = [f"{shape}, packing congestion {packing.congestion:.4f} x the limit, "
             f"{max(1, refined.chunks_per_rank // packing.k)} piece(s) per {'path' if on_ring else 'tree'} "
             f"({refined.chunks_per_rank} chunks per rank)", booking,
             *(note for note in packing.notes if note in (STARS_NOTE, SPREAD_NOTE) and note not in booking)]
    cut = budget.reason()
    if cut is not None:  # the bookings not tried (slot grid, balanced trees) may have come closer to the limit
        why = "stopped" if cut == "stopped" else f"time limit of {options.time_limit:g} s reached"
        notes.append(f"{why} during synthesis: the best schedule complete by then is kept, any booking not yet "
                     "tried was skipped"
                     + ("" if cut == "stopped" else " (a larger time limit lets forestcoll try them)"))
    schedule = Schedule(topology, refined, run.transfers, "forestcoll",
                        {"trees": packing.k, "chunks_per_rank": refined.chunks_per_rank, "switch_queue": switch_queue,
                         "ring": on_ring, "spare_crossings": packing.spared, "stars": packing.stars},
                        "heuristic", estimated_finish_s=run.finish_s, notes=notes, cut_short=cut)
    return schedule, run


def _crossbar(topology: Topology, collective: Collective, settings: ForestcollOptions, refine: bool,
              pack_on: Topology | None, start_s: float, limit_s: float) -> tuple[Schedule, Pipelined] | None:
    """The closed-form schedule over crossbar planes (``forestcoll_crossbar``) where the fabric is nothing but
    such planes, the collective an AllGather of every GPU (a ReduceScatter's mirror too), no packing or booking
    option was set, and the closed form ends within ``CROSSBAR_ENOUGH`` x the limit; else None."""
    if (pack_on is not None or collective.name != "allgather" or sorted(collective.ranks) != sorted(topology.gpus)
            or settings.switch_queue or any(value is not None for value in (settings.trees, settings.pieces,
                                                                             settings.ring, settings.slots,
                                                                             settings.spare_crossings))):
        return None
    planes = crossbar_planes(topology)
    if planes is None:
        return None
    per_rank_bytes = collective.chunk_bytes * collective.chunks_per_rank
    if refine and collective.chunks_per_rank == 1:
        chunks = chunk_count(topology, planes, per_rank_bytes, MAX_TRANSFERS)
        if chunks is None:
            return None
        collective = make_collective(collective.name, topology, collective.size_bytes, chunks, collective.root)
    transfers, finish = crossbar_allgather(topology, planes, collective, start_s)
    if finish - start_s > CROSSBAR_ENOUGH * limit_s:
        return None
    cpr = collective.chunks_per_rank
    notes = [f"one star per root through {len(planes.planes)} crossbar plane(s) (every switch cabled to every GPU "
             f"and to nothing else), each GPU's shard split over the planes in proportion to their bandwidths "
             f"({cpr} chunks per rank); each plane books one shift (GPU i sends to GPU i + r) per slot of a chunk's "
             "bytes' time, so every GPU link of the plane is busy in every slot: the closed form, no trees packed"]
    schedule = Schedule(topology, collective, transfers, "forestcoll",
                        {"trees": 1, "chunks_per_rank": cpr, "switch_queue": False, "ring": False,
                         "spare_crossings": False, "stars": True, "crossbar": True},
                        "heuristic", estimated_finish_s=finish, notes=notes)
    return schedule, Pipelined(transfers, finish)


def _switch_queue(topology: Topology, settings: ForestcollOptions) -> bool:
    """Whether chunks may wait in switch queues: as asked (``switch_queue``), by default where every switch has a
    buffer."""
    if settings.switch_queue is not None:
        return settings.switch_queue
    return all(topology.nodes[s].buffer for s in topology.switches)


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


def _fastest_trees(topology: Topology, collective: Collective, fabric: Topology, roots: list[int], unit_s: float,
                   refine: bool, pieces: int | None, start_s: float,
                   switch_queue: bool) -> tuple[Packing, Collective, Pipelined]:
    """Shortest-path trees (one per root, lengths = a hop's delay for one rank's whole share), in one
    piece unless pieces are given: where the packed trees finish far above the limit, alpha rules."""
    per_rank_bytes = collective.chunk_bytes * collective.chunks_per_rank
    delay = link_costs(fabric, per_rank_bytes)
    packer = TreePacker(fabric, roots, unit_s)
    packing = packer.fastest_trees(np.array([delay[key].delay for key in packer.closure.links]))
    refined = _refined(topology, collective, packing, pieces or 1) if refine else collective
    return packing, refined, pipeline(topology, refined, packing, start_s, switch_queue)


def _tree_schedule(topology: Topology, collective: Collective, fabric: Topology, roots: list[int], unit_s: float,
                   settings: ForestcollOptions, budget: Budget, refine: bool, start_s: float, switch_queue: bool,
                   limit_s: float, packed: dict | None,
                   may_spare: Callable[[], bool] | None = None) -> tuple[Packing, Collective, Pipelined, str]:
    """Packed trees pipelined first come first served, with the slot grid and shortest-path trees tried
    where they may be faster; the packing, the collective scheduled, the run and how it was booked.
    ``may_spare``: whether trees sparing the links between bufferless switches may be tried (``spare_crossings``;
    asked last, as it computes a limit)."""
    run: Pipelined | None = None
    first_come = "chunks may wait in a switch's queue for its out-link" if switch_queue and topology.switches else \
        "routes through switches booked cut-through (no switch queues), first come first served"
    spared_note = (f"; trees packed for {CROSSING_SHARE:g} of the bandwidth of links between bufferless switches "
                   "(cut-through routes cannot keep them full)")
    if settings.spare_crossings:
        first_come += spared_note
    booking = first_come
    # beyond SLOTS_AUTO_MAX_GPUS the automatic grid books the balanced few trees alone, and goes first there
    few_only = not settings.slots and topology.n_gpus > SLOTS_AUTO_MAX_GPUS
    grid_first = (settings.slots is None and few_only and not switch_queue and not settings.spare_crossings
                  and _slot_grid_fits(topology) and _few_trees_grid_only(topology))
    early = None
    if grid_first:
        budget.report("ForestColl: booking balanced few trees per root on a slot grid first", 0.3)
        early = _grid_first(topology, collective, fabric, roots, unit_s, budget, refine, settings.pieces, start_s,
                            packed, settings.trees, limit_s)
    if early is not None and early[2].finish_s - start_s <= GRID_FIRST_ENOUGH * limit_s:
        packing = None  # close enough: the packed trees' first-come booking is not run (nor their packing)
    else:
        packing = best_packing(fabric, roots, unit_s, settings.trees, budget, packed=packed,
                               spare_crossings=bool(settings.spare_crossings))
    # where the slot grid follows first-come booking over SLOTS_ABOVE x the limit, the grid takes such schedules on:
    # deep first far off and more pieces there only cost time (the 32-GPU dragonfly's, near the app's 30 s limit)
    grid_fabric = (topology.n_gpus <= SLOTS_AUTO_MAX_GPUS or _few_trees_grid_only(topology)
                   or (packing is not None and _stars_grid(topology, packing)))
    grid_follows = settings.slots is None and not switch_queue and _slot_grid_fits(topology) and grid_fabric
    if not settings.slots and packing is not None:
        refined = _refined(topology, collective, packing, settings.pieces) if refine else collective
        run = ordered_pipeline(topology, refined, packing, start_s, switch_queue, limit_s,
                               wide=not _slot_grid_fits(topology),
                               deep_below=WIDE_BELOW if grid_follows else DEEP_FIRST_BELOW)
        _offer(budget.options, topology, packing, refined, run, False)
        finer = None if grid_follows else _more_pieces(topology, collective, packing, refined, run, settings, refine,
                                                       start_s, switch_queue, limit_s, budget)
        if finer is not None:
            refined, run = finer
        if (may_spare is not None and not budget.expired() and run.finish_s - start_s > CROSSING_ABOVE * limit_s
                and crossing_load(fabric, packing, unit_s) > CROSSING_SHARE and may_spare()):
            budget.report("ForestColl: packing trees that spare the links between bufferless switches", 0.7)
            spare = best_packing(fabric, roots, unit_s, settings.trees, budget, packed=packed, spare_crossings=True)
            spare_refined = _refined(topology, collective, spare, settings.pieces) if refine else collective
            spared = ordered_pipeline(topology, spare_refined, spare, start_s, switch_queue, limit_s,
                                      wide=not _slot_grid_fits(topology))
            if spared.finish_s < run.finish_s:
                packing, refined, run = spare, spare_refined, spared
                first_come = booking = first_come + spared_note
    if (settings.slots is None and not switch_queue and packing is not None and run is not None
            and not packing.stars and _packed_trees_tight_grid(topology) and not budget.expired()
            and run.finish_s - start_s > GRID_ENOUGH * limit_s):
        budget.report(f"ForestColl: booking {packing.k} balanced trees per root on the tight slot grid", 0.75)
        balanced = _few_trees_slotted(topology, collective, fabric, roots, unit_s, budget, refine, settings.pieces,
                                      start_s, packed, packing.k, _slot_capacities_differ(fabric),
                                      _plan_maker(topology, collective), tight=True, reuse=True, limit_s=limit_s,
                                      orders=(False,))
        if balanced is not None and balanced[2].finish_s < run.finish_s:
            packing, refined, run = balanced
            booking = "; ".join([TIGHT_GRID_BOOKING, *packing.notes])
    # auto: the grid is tried where first-come booking ends well over the limit, and the faster kept
    try_grid = settings.slots or (settings.slots is None and not switch_queue
                                  and _slot_grid_fits(topology)
                                  and grid_fabric
                                  and (run is None or run.finish_s - start_s > SLOTS_ABOVE * limit_s))
    if try_grid:
        if grid_first:  # booked already
            slotted = early
        else:
            budget.report("ForestColl: booking routes on a slot grid", 0.75)
            slotted = _slotted(topology, collective, fabric, packing, roots, unit_s, budget, refine, settings.pieces,
                               start_s, limit_s, packed, settings.trees, few_only=few_only)
        if slotted is not None and (run is None or slotted[2].finish_s < run.finish_s):
            packing, refined, run = slotted
            grid = TIGHT_GRID_BOOKING if one_switch_routes(topology) else \
                "routes through switches booked cut-through on a slot grid, each slot's senders matched together"
            booking = "; ".join([grid, *packing.notes])
    if run is not None and settings.trees in (None, 1) and run.finish_s - start_s > LATENCY_ABOVE * limit_s:
        fastest = _fastest_trees(topology, collective, fabric, roots, unit_s, refine, settings.pieces, start_s, switch_queue)
        if fastest[2].finish_s < run.finish_s:
            packing, refined, run = fastest  # pipelined first come, first served, whatever won before
            booking = first_come + "; one shortest-path tree per root (at this size alpha per tree level outweighs bandwidth)"
    if run is None:  # slots asked for, but pieces would be too small for the grid
        refined = _refined(topology, collective, packing, settings.pieces) if refine else collective
        run = pipeline(topology, refined, packing, start_s, switch_queue)
        booking += " (pieces too small for the slot grid: alpha would take over a fifth of each slot)"
    return packing, refined, run, booking


def _more_pieces(topology: Topology, collective: Collective, packing: Packing, refined: Collective, run: Pipelined,
                 settings: ForestcollOptions, refine: bool, start_s: float, switch_queue: bool, limit_s: float,
                 budget: Budget) -> tuple[Collective, Pipelined] | None:
    """Twice the automatic pieces, where the schedule made ends over ``MORE_PIECES_ABOVE`` x the limit and its
    transfers, doubled, stay within ``MAX_TRANSFERS``; the faster kept where its transfers stay within it too,
    None where not tried or not kept.

    Why: the automatic piece count budgets every hop of every tree edge, but where a switch copies, a piece
    rides to several children on one send, so far fewer transfers are made (``railclos`` AllGather: 8 pieces
    per tree, 1.054 x the limit, the last pieces draining down deep trees; 16 pieces: 189,421 transfers, 1.018 x)."""
    pieces = refined.chunks_per_rank // packing.k
    per_rank_bytes = collective.chunk_bytes * collective.chunks_per_rank
    if (not refine or settings.pieces is not None or collective.chunks_per_rank > 1 or budget.expired()
            or not MORE_PIECES_ABOVE * limit_s < run.finish_s - start_s < LATENCY_ABOVE * limit_s  # alpha rules beyond
            or 2 * pieces not in PIECE_COUNTS or 2 * len(run.transfers) > MAX_TRANSFERS
            or per_rank_bytes / (packing.k * 2 * pieces) < MIN_CHUNK_BYTES):
        return None
    finer = _refined(topology, collective, packing, 2 * pieces)
    budget.report(f"ForestColl: {2 * pieces} pieces per tree (the transfers made leave room)", 0.7)
    again = ordered_pipeline(topology, finer, packing, start_s, switch_queue, limit_s, wide=not _slot_grid_fits(topology))
    return (finer, again) if again.finish_s < run.finish_s and len(again.transfers) <= MAX_TRANSFERS else None


def _ring(topology: Topology, collective: Collective, fabric: Topology, roots: list[int], unit_s: float,
          refine: bool, pieces: int | None, start_s: float, queues: bool,
          congestion_bound: float) -> tuple[Packing, Collective, Pipelined] | None:
    """One ring through every GPU (``TreePacker.ring``) pipelined level by level, or None where the fabric
    offers no ring as little congested as ``congestion_bound`` (a torus: a ring uses one of four links)."""
    if collective.is_reducing or queues or sorted(roots) != sorted(fabric.gpus):
        return None  # partial sums run up trees; switch queues keep streams apart already; a rooted collective
    order, physical = ring_order(fabric)
    if not physical:  # no cycle of GPUs each reaching the next directly or through switches alone
        return None
    packing = TreePacker(fabric, roots, unit_s).ring(order)
    if packing.congestion > congestion_bound:
        return None
    refined = _refined(topology, collective, packing, pieces, RING_PIECES, RING_MIN_PIECES) if refine else collective
    return packing, refined, pipeline(topology, refined, packing, start_s, queues, by_level=True)


def _few_trees_grid_only(topology: Topology) -> bool:
    """Beyond ``SLOTS_AUTO_MAX_GPUS``, up to ``GRID_FEW_TREES_MAX_GPUS``, where routes cross two switches or
    more: there the balanced few trees on the grid are tried automatically (64-GPU dragonfly AllGather:
    first come 1.123 x the limit, balanced 4 trees x 4 pieces on the grid 1.042 x, about 20 s of CPU), but
    not the packed trees, whose matching over 64 senders costs minutes."""
    return topology.n_gpus <= GRID_FEW_TREES_MAX_GPUS and not one_switch_routes(topology)


def _packed_trees_tight_grid(topology: Topology) -> bool:
    """Beyond ``SLOTS_AUTO_MAX_GPUS``, up to ``PACKED_GRID_MAX_GPUS``, where every route crosses one switch and
    the slot grid fits: there, where first-come booking ends over ``GRID_ENOUGH`` x the limit, the packed trees'
    count is balanced to the limit and booked on the tight grid, the faster kept. Balancing is what helps:
    rfs3d:dims=2x4x8's 8 packed trees reach congestion 1.000 balanced, 4 stay at 1.036 (1.071 x the limit)."""
    return (SLOTS_AUTO_MAX_GPUS < topology.n_gpus <= PACKED_GRID_MAX_GPUS and one_switch_routes(topology)
            and _slot_grid_fits(topology))


def _stars_grid(topology: Topology, packing: Packing) -> bool:
    """Beyond ``SLOTS_AUTO_MAX_GPUS``, stars (``TreePacker.stars``) where every route crosses one switch go on
    the tight grid too: every edge leaves its root at once, so each slot matches crossbars saturated both ways
    (NVL72's ReduceScatter: first come 1.189 x the limit, on the grid 1.078 x, about 30 s of CPU in all)."""
    return packing.stars and topology.n_gpus <= STARS_GRID_MAX_GPUS and one_switch_routes(topology)


def _grid_pieces(topology: Topology, per_rank_bytes: float, k: int) -> int:
    """Pieces per balanced tree on the grid: ``GRID_PIECES``, halved (to 2 at least) while alpha would take
    over ``GRID_SLOT_ALPHA`` of a slot: pieces shrink as GPUs grow, and every slot pays alpha."""
    p = GRID_PIECES
    while p > 2 and slot_overhead(topology, per_rank_bytes / (k * p)) > GRID_SLOT_ALPHA:
        p //= 2
    return p


def _slot_grid_fits(topology: Topology) -> bool:
    """Bufferless switches whose up-links are alike (``slotted.slot_eligible``)."""
    return bool(topology.switches) and slot_eligible(topology)


def _slotted(topology: Topology, collective: Collective, fabric: Topology, packing: Packing, roots: list[int],
             unit_s: float, budget: Budget, refine: bool, pieces: int | None, start_s: float, limit_s: float,
             packed: dict | None = None, trees: int | None = None,
             few_only: bool = False) -> tuple[Packing, Collective, Pipelined] | None:
    """The fastest slot-grid schedule, or None where pieces would be too small for the grid (a slot costs
    alpha on top of a piece's bytes). ``few_only``: the balanced few trees alone (``_few_trees_grid_only``).

    Balanced few trees (``_few_trees_slotted``) go first: they were the faster on every fabric measured
    (dragonfly, switch2d), and under a time limit (the app's default 30 s) the better candidate should not
    be the one cut off. Unless they end within ``GRID_ENOUGH`` x the limit, the packed trees follow over
    ``SLOT_PIECES``, the faster kept. Trees are packed again for the links' slot capacities where those
    differ from their bandwidths (a 100 GB/s spine behind 50 GB/s up-links carries one hop per slot, not two).
    """
    slotted = _slot_capacities_differ(fabric)
    tight = one_switch_routes(topology)  # slots of the bytes' time: no alpha per slot, so many small pieces
    plan_of = _plan_maker(topology, collective)
    best = _few_trees_slotted(topology, collective, fabric, roots, unit_s, budget, refine, pieces, start_s,
                              packed, trees or GRID_TREES, slotted, plan_of, tight, limit_s=limit_s)
    if few_only or budget.expired() or (best is not None and best[2].finish_s - start_s <= GRID_ENOUGH * limit_s):
        return best
    if slotted:
        packing = best_packing(fabric, roots, unit_s, packing.k, budget, slotted=True, packed=packed)
    per_rank_bytes = collective.chunk_bytes * collective.chunks_per_rank
    chosen = pieces or not refine or collective.chunks_per_rank > 1
    for p in ((pieces,) if chosen else (None,) if tight else SLOT_PIECES):
        refined = _refined(topology, collective, packing, p) if refine else collective
        chunk_bytes = refined.chunk_bytes if tight else \
            collective.chunk_bytes if not refine or p is None else per_rank_bytes / (packing.k * p)
        if chunk_bytes < MIN_CHUNK_BYTES or slot_overhead(topology, chunk_bytes) > SLOT_MAX_OVERHEAD:
            continue  # alpha would outweigh a piece's bytes (small sizes): first-come booking serves them
        booked = slotted_pipeline(topology, refined, plan_of(refined, packing), start_s, budget.expired, tight=tight)
        if booked is None:
            return best
        transfers, finish = booked
        if best is None or finish < best[2].finish_s:
            best = (packing, refined, Pipelined(transfers, finish))
        if budget.expired():
            break
    return best


def _slot_capacities_differ(fabric: Topology) -> bool:
    """Whether some link gives slotted routes less than its bandwidth (``slot_capacities``): trees for the
    grid are then packed for those capacities."""
    links = sorted(fabric.links)
    return not np.allclose(slot_capacities(fabric, links), bandwidths(fabric, links))


def _plan_maker(topology: Topology, collective: Collective) -> Callable[[Collective, Packing], _InTrees | _OutTrees]:
    """How chunks of a (re-chunked) collective flow along a packing: down out-trees, or up in-trees."""
    def plan_of(c: Collective, trees: Packing) -> _InTrees | _OutTrees:
        return _InTrees(trees, topology, c.chunks) if collective.is_reducing else _OutTrees(trees)
    return plan_of


def _grid_first(topology: Topology, collective: Collective, fabric: Topology, roots: list[int], unit_s: float,
                budget: Budget, refine: bool, pieces: int | None, start_s: float, packed: dict | None,
                trees: int | None, limit_s: float) -> tuple[Packing, Collective, Pipelined] | None:
    """The balanced few trees on the slot grid where it goes first (``_few_trees_grid_only``), candidates in
    turn while the fastest so far ends over ``GRID_ENOUGH`` x the limit, each complete schedule offered as it is
    found: ``GRID_TREES`` trees per root packed with a price per hop (``GRID_HOP_COST``) booked by chunk index;
    the same count unpriced booked in piece waves; ``GRID_FEWER_TREES`` priced by chunk index (unless ``trees``
    fixes the count). The order keeps the best of each 64-GPU dragonfly measured (2026-11-27) and runs the
    third only where the first two miss: the priced trees gained nothing in piece waves, unpriced trees by
    chunk index won on one dragonfly of six, where priced ones were faster still, and 2 priced trees end
    within 1.05 x where 4 do not on a 36-GPU dragonfly of one GPU a router (1.058 -> 1.049).

    Why: among equally loaded links the packing took any route, and on a dragonfly a GPU -> GPU route may
    cross five links where three do (3.0 links per tree edge on average, 2.5 priced). Every link a route
    crosses must be free in the same slots, so long routes collide at the grid's receivers and global cables
    (64-GPU dragonfly ReduceScatter, groups=8,routers=4,gpus=2: 1.083 x the limit unpriced, 1.044 priced, and
    the shorter routes book in half the time)."""
    slotted, plan_of = _slot_capacities_differ(fabric), _plan_maker(topology, collective)
    candidates = [(GRID_HOP_COST, trees or GRID_TREES, False), (0.0, trees or GRID_TREES, True)]
    if trees is None:
        candidates.append((GRID_HOP_COST, GRID_FEWER_TREES, False))
    best = None
    for hop_cost, k, piece_waves in candidates:
        booked = _few_trees_slotted(topology, collective, fabric, roots, unit_s, budget, refine, pieces, start_s,
                                    packed, k, slotted, plan_of, reuse=True, limit_s=limit_s, hop_cost=hop_cost,
                                    orders=(piece_waves,))
        if booked is not None:
            _offer(budget.options, topology, *booked, False)
            if best is None or booked[2].finish_s < best[2].finish_s:
                best = booked
        if budget.expired() or (best is not None and best[2].finish_s - start_s <= GRID_ENOUGH * limit_s):
            break
    return best


def _few_trees_slotted(topology: Topology, collective: Collective, fabric: Topology, roots: list[int],
                       unit_s: float, budget: Budget, refine: bool, pieces: int | None, start_s: float,
                       packed: dict | None, k: int, slotted: bool,
                       plan_of, tight: bool = False, reuse: bool = False,
                       limit_s: float = math.inf, hop_cost: float = 0.0,
                       orders: tuple[bool, ...] = (False, True)) -> tuple[Packing, Collective, Pipelined] | None:
    """``k`` trees per root balanced to the limit (``TreePacker.balance``), ``_grid_pieces`` pieces each, on
    the slot grid with deep trees first; None where pieces would be too small for the grid. ``orders``: the
    bookings tried, in turn while the best so far ends over ``GRID_ENOUGH`` x ``limit_s`` (False: by chunk
    index, True: in piece waves). By default, where chunk order ends over it, the same trees are booked again
    in piece waves (``slotted_pipeline(piece_waves=True)``: every tree's piece p equally urgent, ties scrambled)
    and the faster kept (64-GPU dragonfly ReduceScatter, groups=8,routers=4,gpus=2: 1.128 -> 1.092 x the limit;
    groups=4,routers=4,gpus=4: 1.070 -> 1.055). Chunk order stays first: it is the setting measured on every
    fabric the grid serves, piece waves only on dragonflies.

    Where every GPU link is saturated both ways (a reduction's mirror: no switch copies), a GPU's up-link
    even one child edge over the limit holds the whole grid back, and few large pieces pay alpha per slot
    least (dragonfly ReduceScatter: 12 trees of 4 pieces 1.080 x the limit; 4 trees balanced from
    congestion 1.024 to 1.0, 8 pieces, deep first 1.042; by chunk index 1.073; unbalanced 1.058)."""
    per_rank_bytes = collective.chunk_bytes * collective.chunks_per_rank
    fixed = not refine or (collective.chunks_per_rank > 1 and pieces is None)
    # tight slots pay no alpha per slot: as many pieces as the transfer budget allows (``_refined``)
    p = None if fixed else pieces or (None if tight else _grid_pieces(topology, per_rank_bytes, k))
    chunk_bytes = collective.chunk_bytes if fixed or p is None else per_rank_bytes / (k * p)
    if chunk_bytes < MIN_CHUNK_BYTES or slot_overhead(topology, chunk_bytes) > SLOT_MAX_OVERHEAD:
        return None  # alpha would outweigh a piece's bytes (small sizes): first-come booking serves them
    packing = best_packing(fabric, roots, unit_s, k, budget, slotted=slotted, packed=packed, hop_cost=hop_cost)
    key = ("balanced", id(packing))
    balanced = packing if packing.stars else packed.get(key) if packed is not None else None  # stars stay stars
    if balanced is None:
        budget.report(f"ForestColl: moving tree edges of {k} trees per root off the busiest links "
                      f"(congestion {packing.congestion:.4f} x the limit)", 0.8)
        balanced = TreePacker(fabric, roots, unit_s, slotted, hop_cost=hop_cost).balance(packing, budget)
        if packed is not None:
            packed[key] = balanced
    refined = _refined(topology, collective, balanced, p) if refine else collective
    if slot_overhead(topology, refined.chunk_bytes) > SLOT_MAX_OVERHEAD:
        return None  # the transfer budget's pieces (tight slots) would be mostly alpha
    note = STARS_NOTE if balanced.stars else \
        f"{balanced.k} trees per root with edges moved off the busiest links to the limit, deep trees first" + \
        (", packed with a price per hop (the shortest routes among equally loaded ones)" if hop_cost else "")
    booked = None
    for piece_waves in orders:
        if booked is not None and (booked[1] - start_s <= GRID_ENOUGH * limit_s or budget.expired()):
            break
        budget.report(f"ForestColl: booking {balanced.k} balanced trees per root on a slot grid"
                      + (" in piece waves" if piece_waves else "")
                      + f" (congestion {balanced.congestion:.4f} x the limit)", 0.9 if booked else 0.85)
        again = _deep_first_grid(topology, refined, balanced, plan_of, start_s, budget, tight, packed, reuse,
                                 piece_waves=piece_waves)
        if again is None:
            if booked is None:
                return None
            continue
        if booked is None or again[1] < booked[1]:
            booked = again
            if piece_waves:
                note += (", every tree's piece p equally urgent (piece waves), a sender's equally urgent edges in a "
                         "scrambled order")
    return replace(balanced, notes=[note]), refined, Pipelined(*booked)


def _deep_first_grid(topology: Topology, collective: Collective, trees: Packing, plan_of, start_s: float,
                     budget: Budget, tight: bool, packed: dict | None,
                     reuse: bool = False, piece_waves: bool = False) -> tuple[list[Transfer], float] | None:
    """``slotted_pipeline`` of ``trees``, deep trees first (in piece waves where asked); with ``reuse``, booked
    from time 0 and moved to ``start_s`` (else booked from ``start_s``).

    The grid decides in slots counted from its start, so a booking from another time origin differs only
    where float rounding breaks a tie at a slot's edge the other way (64-GPU dragonflies' AllGather half:
    1.0398 x its limit from 0, 1.0368 from the ReduceScatter's end; 1.0419 / 1.0429 on the other, 2026-11-27).
    With ``reuse`` (where the grid goes first, 33-64 GPUs) a booking is kept in ``packed`` (with the objects
    it was made of, so that no other packing or collective can take their ids) and the AllGather half of an
    AllReduce, booked again from the ReduceScatter's end, takes it moved instead of matching every slot again
    (about 15 s at 64 GPUs). Up to 32 GPUs, where that costs a few seconds, the half is booked anew, as it
    picked the better origin there (32-GPU dragonfly AllReduce 1.0380 x, 1.0385 with the moved booking).
    """
    if not reuse:
        return slotted_pipeline(topology, collective, plan_of(collective, trees), start_s, budget.expired,
                                deep_first=True, tight=tight, piece_waves=piece_waves)
    key = ("grid", id(trees), id(collective), tight, piece_waves)
    kept = packed.get(key) if packed is not None else None
    if kept is not None and kept[0] is trees and kept[1] is collective:
        transfers, finish = kept[2], kept[3]
    else:
        booked = slotted_pipeline(topology, collective, plan_of(collective, trees), 0.0, budget.expired,
                                  deep_first=True, tight=tight, piece_waves=piece_waves)
        if booked is None:
            return None
        transfers, finish = booked
        if packed is not None:
            packed[key] = (trees, collective, transfers, finish)
    if start_s == 0.0:
        return transfers, finish
    new = tuple.__new__
    return [new(Transfer, (t[0], t[1], t[2], t[3] + start_s, t[4] + start_s, t[5], t[6])) for t in transfers], \
        finish + start_s


def reduction_schedule(topology: Topology, collective: Collective, options: SynthOptions, budget: Budget,
                       packed: dict | None = None) -> Schedule:
    """ReduceScatter / Reduce by trees packed for the mirrored copy on the reversed fabric.

    Where every hop costs what its reverse costs, the copy is scheduled on the reversed fabric (no
    switch multicasting) and turned around in time (``reverse_schedule``, exact): a reduction's natural
    order runs backwards in time (everything waits for the last partial), and mirrored, the copy's
    pipelining carries over whole (rfs3d: 1.03 x the limit, against 1.22 x for partial sums sent up the
    trees as they arrive). Elsewhere (a switch rule that discounts hops out of switches) partial sums
    run up the trees, first come first served.

    Running both and keeping the faster gains a little on few fabrics (fat tree: 1.057 against 1.078 x)
    and doubles the time on all (dragonfly: 54 s against 28 s), so only one runs.
    """
    if not costs_alike_both_ways(topology):
        return copy_schedule(topology, collective, options, budget, pack_on=topology.reversed(),
                             limit_collective=mirror_collective(collective).name, packed=packed)[0]
    asked = options.settings(ForestcollOptions).switch_queue
    buffered = bool(topology.switches) and all(topology.nodes[s].buffer for s in topology.switches)
    if buffered and asked is not False:
        # the mirror is booked cut-through: turned around in time, two routes of one chunk that met in a switch's
        # queue would hand their partial sums on in other pairs than they came in, and count one twice
        options = options.with_extra(switch_queue=False)
    def turned(forward: Schedule) -> Schedule:  # the mirrored copy back on the fabric, in the copy's chunks
        cpr = forward.collective.chunks_per_rank
        target = collective if cpr == collective.chunks_per_rank else make_collective(
            collective.name, _over(topology, collective), collective.size_bytes, cpr, collective.root)
        return reverse_schedule(forward, topology, target)

    with _offers_turned(budget, turned):
        forward, _ = copy_schedule(mirror_fabric(topology), mirror_collective(collective), options, budget,
                                   packed=packed)
    return turned(forward)


@contextmanager
def _offers_turned(budget: Budget, turn: Callable[[Schedule], Schedule] | None) -> Iterator[None]:
    """While a part is synthesized, each complete schedule it offers (``_offer``) is turned into the one the
    caller was asked for first (a reduction's mirrored copy turned around in time; an AllReduce's AllGather
    half after its ReduceScatter), or, with ``turn`` None, not offered (a ReduceScatter half alone is no
    AllReduce). Without it the app, ending a solve at its time limit or Stop, had only offers of another
    collective and showed nothing (64-GPU dragonfly AllReduce at the app's default 30 s)."""
    options = budget.options
    if options.best is None:
        yield
        return
    outer = options.best
    budget.options = replace(options, best=None if turn is None else lambda schedule: outer(turn(schedule)))
    try:
        yield
    finally:
        budget.options = options


def synthesize_forestcoll(topology: Topology, collective: Collective, options: SynthOptions) -> Schedule:
    """Registry entry point: copies down packed trees, reductions up them, AllReduce = RS then AG.

    AllReduce: the ReduceScatter half chooses the tree and chunk counts, the AllGather half reuses them (a
    ReduceScatter on the ring lets the AllGather half choose again, ring first, with the same chunks).
    This is why it is composed here and not by ``common.ReversalSynthesizer.allreduce``: that frame
    splits the AllReduce before the first half runs and solves the halves independently, while here
    the first half may refine the chunk count and decides the trees the second half must pack.
    """
    if collective.is_reducing and tuple(collective.ranks) != tuple(topology.gpus):
        # A reduction over a process group: trees packed on the fabric with the other GPUs as relays (reversed,
        # a partial sum crossing one would otherwise be added into it), then put back on the real fabric.
        fabric = relay_fabric(topology, collective.ranks)
        return judged_on(topology, synthesize_forestcoll(fabric, _as_fabric_ranks(fabric, collective), options))
    budget = Budget(options)

    def allreduce() -> Schedule:
        packed: dict = {}  # a fabric as fast both ways packs the AllGather half's trees as the ReduceScatter's
        with _offers_turned(budget, None):
            rs = reduction_schedule(topology, make_collective("reducescatter", _over(topology, collective),
                                                              collective.size_bytes, collective.chunks_per_rank),
                                    options, budget.phase(0.0, 0.5), packed=packed)
        cpr = rs.collective.chunks_per_rank
        whole = collective if cpr == collective.chunks_per_rank else make_collective(
            "allreduce", _over(topology, collective), collective.size_bytes, cpr)
        gather_part = split_allreduce(whole)[1]
        # a ring's half is tried as a ring again (auto: trees where this way round has no ring as good)
        # (and, where the ReduceScatter's trees spare the links between bufferless switches, so do its trees)
        spared = {"spare_crossings": True} if rs.options.get("spare_crossings") else {}
        # (and after stars, which a fabric whose switches copy does not need, the AllGather half chooses again)
        same_trees = options if rs.options.get("ring") or rs.options.get("stars") else options.with_extra(trees=int(rs.options["trees"]),
                                                                                ring=False, **spared)
        # (and where the ReduceScatter's packed trees won balanced on the tight grid beyond 32 GPUs, the half goes
        # there at once: first-come booking, which lost, and the grid again would take a 64-GPU AllReduce past 30 s)
        # (not where the half would queue chunks in switches: the ReduceScatter's mirror is booked cut-through there)
        asked = options.settings(ForestcollOptions)
        grid_half = (_packed_trees_tight_grid(topology) and asked.slots is None and not _switch_queue(topology, asked)
                     and any(note.startswith(TIGHT_GRID_BOOKING) for note in rs.notes))
        if grid_half:
            same_trees = same_trees.with_extra(slots=True)
        # the AllGather half is booked from time 0 and shifted after the ReduceScatter (``concatenate``), and,
        # where that ends over DEEP_FIRST_ABOVE x its limit, from the ReduceScatter's end too, the faster kept:
        # at another time origin float ties in the bookings fall otherwise, and the same trees and chunks
        # ended at 1.049 x (from 0, as alone) or 1.083 x (from the end) on bench/limit.py's odd3, 1.054 / 1.03x
        # the other way round on railclos
        phase = budget.phase(0.5, 1.0)
        with _offers_turned(budget, lambda half: concatenate(rs, half, whole)):
            ag, run = copy_schedule(topology, gather_part, same_trees, phase, start_s=0.0, refine=False,
                                    packed=packed)
            ag_limit = bandwidth_limit(topology, gather_part.name, gather_part.size_bytes, gather_part.root).limit_s
            if run.finish_s > DEEP_FIRST_ABOVE * ag_limit and not phase.expired() and not grid_half:
                rs_end = schedule_end(rs)
                later, other = copy_schedule(topology, gather_part, same_trees, phase, start_s=rs_end,
                                             refine=False, packed=packed)
                if other.finish_s - rs_end < run.finish_s:
                    ag = later
        schedule = concatenate(rs, ag, whole)
        schedule.notes = list(dict.fromkeys([*rs.notes, *ag.notes, *schedule.notes]))
        return schedule

    def reduction() -> Schedule:
        return reduction_schedule(topology, collective, options, budget)

    if collective.is_reducing:
        return _with_switch_sums(topology, collective, options, allreduce if collective.name == "allreduce"
                                 else reduction)
    return dispatch(collective, lambda: copy_schedule(topology, collective, options, budget)[0], reduction, allreduce)


def _with_switch_sums(topology: Topology, collective: Collective, options: SynthOptions,
                      trees: Callable[[], Schedule]) -> Schedule:
    """A reduction where the fabric's switches may sum (``switch_sums``): the in-switch schedule ``-a inc``
    books, the trees summing at GPUs (``trees``), or the faster of the two.

    Why: where switches reduce (NVLS, SHARP), the fabric's AllReduce limit counts sums made in them, which
    ReduceScatter then AllGather at GPUs cannot reach (``nvl72`` 2.09 x, ``dgxh100`` 1.80 x that limit;
    in the switches 1.02 x). The trees are skipped where the in-switch schedule already ends below
    ``limit_without_switch_sums_s``, a bound on every schedule summing at GPUs."""
    switch_sums = options.settings(ForestcollOptions).switch_sums
    if switch_sums is False or (switch_sums is None and not topology.reducing_switches):
        return trees()
    if not topology.reducing_switches:
        raise CcvizError("switch_sums: no switch of this fabric reduces (Node.reduce); set switch_sums to auto or "
                         "false", "switch_sums")
    try:
        in_switch = synthesize_inc(topology, collective, replace(options, extra={}, algorithm_options=None))
    except CcvizError as err:
        if switch_sums:
            raise CcvizError(f"switch_sums: {err}", "switch_sums") from err
        return trees()
    in_switch = replace(in_switch, algorithm="forestcoll",
                        options={"switch_sums": True, "chunks_per_rank": in_switch.collective.chunks_per_rank},
                        notes=["summed in the fabric's reducing switches and multicast back (the schedule -a inc "
                               "books)", *in_switch.notes])
    options.offer(in_switch)
    if switch_sums:
        return in_switch
    limit = bandwidth_limit(topology, collective.name, collective.size_bytes, collective.root)
    at_gpus = limit.without_switch_sums_s
    if at_gpus is not None and schedule_end(in_switch) < at_gpus:
        in_switch.notes.append(f"no schedule summing at GPUs can beat it (their bound is {format_time(at_gpus)}), "
                               "so no trees were packed")
        return in_switch
    summed_at_gpus = trees()
    at_gpus_end, in_switch_end = schedule_end(summed_at_gpus), schedule_end(in_switch)
    if at_gpus_end <= in_switch_end:
        return summed_at_gpus
    in_switch.notes.append(f"trees summing at GPUs were booked too and ended later ({format_time(at_gpus_end)})")
    return in_switch
