"""Routing through switches: which packing is kept, and which switch paths its tree edges take.

Decides, for a fabric with switches, how tree edges cross them: all on the closure's cheapest switch, or
spread over parallel switches (NVL72's 18 chips), or sparing the links between two bufferless switches that
cut-through routes cannot keep full (``spare_crossings``); and how many trees per root (``tree_counts``,
``_more_trees``). ``best_packing`` packs the candidates and keeps the least congested (cached per fabric).
"""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np

from ccviz.bounds.limit import bandwidth_limit
from ccviz.model.topology import Topology
from ccviz.synth.budget import Budget
from ccviz.synth.forestcoll.packing import Packing, TreePacker, bandwidths, crossing_shares
from ccviz.synth.forestcoll.tuning import (
    MORE_TREES,
    MORE_TREES_ABOVE,
    MORE_TREES_UP_TO,
    PACKING_SHARE,
    ROOTED_TREE_COUNTS,
    SPREAD_ABOVE,
    SPREAD_NOTE,
    STARS_ENOUGH,
)


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
    last_k, last_s = 0, 0.0  # the tree count packed last and the seconds it took: the pace of the next one
    for i, k in enumerate(counts):
        # a further count only where, at the last one's pace, it ends within half the limit: the other half books
        # the first schedule (the 32-GPU dragonfly's 12 trees took the whole of a 6 s limit before any schedule)
        if best is not None and (budget.expired() or budget.would_pass(PACKING_SHARE, last_s * k / last_k)):
            break
        began = time.perf_counter()
        key = (fabric, tuple(topology.gpus), tuple(topology.switches), tuple(roots), unit_s, k) + \
            ((("hop_cost", hop_cost),) if hop_cost else ())
        packing = packed.get(key) if packed is not None else None
        if packing is None:
            packing = packer.pack(k, budget)
            if packed is not None:
                packed[key] = packing
        last_k, last_s = k, time.perf_counter() - began
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
