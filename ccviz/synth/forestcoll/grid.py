"""The slot grid: routes through bufferless switches booked in slots, every slot's senders matched together.

Decides *when the grid is used and with which trees*: where first-come booking leaves a saturated crossbar's
links idle, ``ccviz.synth.slotted`` matches every free sender at once per slot. Here: which fabrics qualify
(alike up-links, by size and route depth), the balanced few trees per root tried first, the packed trees after,
pieces per tree, piece waves, and a booking kept for the AllGather half of an AllReduce.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

import numpy as np

import ccviz.synth.forestcoll.tuning as tuning
from ccviz.model.collectives import Collective
from ccviz.model.schedule import Transfer
from ccviz.model.topology import Topology
from ccviz.model.validate import MIN_CHUNK_BYTES
from ccviz.synth.budget import Budget
from ccviz.synth.forestcoll.booking import Pipelined, _InTrees, _offer, _OutTrees, _refined
from ccviz.synth.forestcoll.packing import Packing, TreePacker, bandwidths
from ccviz.synth.forestcoll.routing import best_packing
from ccviz.synth.forestcoll.tuning import (
    GRID_FEW_TREES_MAX_GPUS,
    GRID_FEWER_TREES,
    GRID_HOP_COST,
    GRID_PIECES,
    GRID_SLOT_ALPHA,
    GRID_TREES,
    PACKED_GRID_MAX_GPUS,
    SLOT_MAX_OVERHEAD,
    SLOT_PIECES,
    STARS_GRID_MAX_GPUS,
    STARS_NOTE,
)
from ccviz.synth.slotted import (
    one_switch_routes,
    slot_capacities,
    slot_eligible,
    slot_overhead,
    slotted_pipeline,
)


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
    return (tuning.SLOTS_AUTO_MAX_GPUS < topology.n_gpus <= PACKED_GRID_MAX_GPUS and one_switch_routes(topology)
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
    if few_only or budget.expired() or (best is not None and best[2].finish_s - start_s <= tuning.GRID_ENOUGH * limit_s):
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
        if budget.expired() or (best is not None and best[2].finish_s - start_s <= tuning.GRID_ENOUGH * limit_s):
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
        if booked is not None and (booked[1] - start_s <= tuning.GRID_ENOUGH * limit_s or budget.expired()):
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
