"""One copy collective end to end: the plan's stages run in order, the fastest schedule kept, notes written.

``copy_schedule`` is where a plan (``plan.choose_plan``) becomes a schedule: the closed form over crossbar
planes, or one ring, or packed trees booked first come then on the slot grid, with shortest-path trees where
alpha rules. Reductions reach it through their mirrored copy (``collectives``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import numpy as np

import ccviz.synth.forestcoll.grid as slot_grid
import ccviz.synth.forestcoll.tuning as tuning
from ccviz.bounds.limit import bandwidth_limit
from ccviz.errors import CcvizError
from ccviz.model.collectives import Collective, make_collective
from ccviz.model.physics import link_costs
from ccviz.model.routing import ring_order
from ccviz.model.schedule import Schedule
from ccviz.model.topology import Topology
from ccviz.model.units import us_text
from ccviz.model.validate import MIN_CHUNK_BYTES
from ccviz.synth.budget import Budget
from ccviz.synth.catalog import ForestcollOptions
from ccviz.synth.forestcoll.booking import Pipelined, _offer, _refined, _roots, ordered_pipeline, pipeline
from ccviz.synth.forestcoll.crossbar import CrossbarPlanes, chunk_count, crossbar_allgather, crossbar_planes
from ccviz.synth.forestcoll.grid import (
    _few_trees_grid_only,
    _grid_first,
    _packed_trees_tight_grid,
    _plan_maker,
    _slot_capacities_differ,
    _slot_grid_fits,
    _slotted,
    _stars_grid,
)
from ccviz.synth.forestcoll.packing import Packing, TreePacker, multicast_congestion
from ccviz.synth.forestcoll.plan import FabricTraits, Plan, choose_plan, explain, fabric_traits, plan_note
from ccviz.synth.forestcoll.rails import boxes_on_rails, rails_allgather, rails_chunk_count
from ccviz.synth.forestcoll.routing import best_packing, crossing_load, spared_limit, spares_crossings
from ccviz.synth.forestcoll.tuning import (
    CROSSBAR_ENOUGH,
    CROSSING_ABOVE,
    CROSSING_LIMIT_COST,
    CROSSING_SHARE,
    LATENCY_ABOVE,
    PIECE_COUNTS,
    RING_BOOKING,
    RING_CONGESTION_SLACK,
    RING_ENOUGH,
    RING_ENOUGH_LARGE,
    RING_MIN_PIECES,
    RING_PIECES,
    SLOTS_ABOVE,
    SPREAD_NOTE,
    STARS_NOTE,
    TIGHT_GRID_BOOKING,
    WIDE_BELOW,
)
from ccviz.synth.registry import SynthOptions
from ccviz.synth.slotted import one_switch_routes


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
    traits = fabric_traits(topology)
    plan, skipped = choose_plan(traits), ()
    if plan.name in CLOSED_FORMS:
        crossbar = _crossbar(topology, collective, settings, refine, pack_on, start_s, limit.limit_s, plan.name)
        if crossbar is not None:
            crossbar[0].notes.extend(_plan_notes(plan, traits, skipped, settings))
            return crossbar
        skipped = (plan.name,) if _crossbar_applies(topology, collective, settings, pack_on) else ()
        plan = choose_plan(traits, skip=CLOSED_FORMS)
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
    enough = RING_ENOUGH if topology.n_gpus <= tuning.EXACT_TREES_UP_TO else RING_ENOUGH_LARGE
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
    congestion = packing.congestion if on_ring else multicast_congestion(fabric, packing, unit_s)
    copied = " (a link a GPU's tree edges share counted once: the switches copy)" \
        if congestion < packing.congestion - 1e-9 else ""
    notes = [f"{shape}, packing congestion {congestion:.4f} x the limit{copied}, "
             f"{max(1, refined.chunks_per_rank // packing.k)} piece(s) per {'path' if on_ring else 'tree'} "
             f"({refined.chunks_per_rank} chunks per rank)", booking,
             *(note for note in packing.notes if note in (STARS_NOTE, SPREAD_NOTE) and note not in booking)]
    notes.extend(_plan_notes(plan, traits, skipped, settings))
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


CLOSED_FORMS = ("crossbar planes", "boxes on rails")  # the plans that book a closed form, no trees packed


def _crossbar(topology: Topology, collective: Collective, settings: ForestcollOptions, refine: bool,
              pack_on: Topology | None, start_s: float, limit_s: float,
              form: str = "crossbar planes") -> tuple[Schedule, Pipelined] | None:
    """The closed-form schedule (``crossbar``: a box of crossbar planes; ``rails``: such boxes joined by rails, as
    ``form`` names) where the collective is an AllGather of every GPU (a ReduceScatter's mirror too), no packing
    or booking option was set, and the closed form ends within ``CROSSBAR_ENOUGH`` x the limit; else None."""
    if not _crossbar_applies(topology, collective, settings, pack_on):
        return None
    shape = crossbar_planes(topology) if form == "crossbar planes" else boxes_on_rails(topology)
    if shape is None or (collective.name != "allgather" and not isinstance(shape, CrossbarPlanes)):
        return None
    per_rank_bytes = collective.chunk_bytes * collective.chunks_per_rank
    if refine and collective.chunks_per_rank == 1:
        chunks = (chunk_count if isinstance(shape, CrossbarPlanes) else rails_chunk_count)(
            topology, shape, per_rank_bytes, tuning.MAX_TRANSFERS)
        if chunks is None:
            return None
        collective = make_collective(collective.name, topology, collective.size_bytes, chunks, collective.root)
    book = crossbar_allgather if isinstance(shape, CrossbarPlanes) else rails_allgather
    transfers, finish = book(topology, shape, collective, start_s)
    if finish - start_s > CROSSBAR_ENOUGH * limit_s:
        return None
    cpr = collective.chunks_per_rank
    if isinstance(shape, CrossbarPlanes):
        notes = [f"one star per root through {len(shape.planes)} crossbar plane(s) (every switch cabled to every "
                 f"GPU and to nothing else), each GPU's shard split over the planes in proportion to their "
                 f"bandwidths ({cpr} chunks per rank); each plane books one shift (GPU i sends to GPU i + r) per slot "
                 "of a chunk's bytes' time, so every GPU link of the plane is busy in every slot: the closed form, "
                 "no trees packed"]
    else:
        notes = [f"{len(shape.gpus)} boxes of {len(shape.gpus[0])} GPUs on {len(shape.rails)} rails: every shard "
                 "crosses its rail to GPU j of the other boxes, which relays it over its box's crossbar planes "
                 "(GPU j + r forwards some chunks of GPU j over its own rail too, sparing those relays, so rails "
                 f"and planes end together); rails and planes book one shift per slot ({cpr} chunks per rank), relayed chunks as they land: "
                 "the closed form, no trees packed"]
    schedule = Schedule(topology, collective, transfers, "forestcoll",
                        {"trees": 1, "chunks_per_rank": cpr, "switch_queue": False, "ring": False,
                         "spare_crossings": False, "stars": True, "crossbar": True},
                        "heuristic", estimated_finish_s=finish, notes=notes)
    return schedule, Pipelined(transfers, finish)


def _crossbar_applies(topology: Topology, collective: Collective, settings: ForestcollOptions,
                      pack_on: Topology | None) -> bool:
    """The closed form serves an AllGather of every GPU (a ReduceScatter's mirror too) where no option shapes
    the trees or their booking, and a ReduceScatter itself over crossbar planes where it is not mirrored (a
    hardware link model's hops cost other than their reverses: each GPU sends its parts straight to their owners),
    alone or as an AllReduce's first half (the AllGather half follows it at ``reversal.handover_s``, not at
    ``schedule_end``, whose down-links are busy a chunk past the last partial's landing: dgxa100 AllReduce 1.075 x
    that way, 1.004 x at the handover, 1.055 x by trees)."""
    own = (pack_on is None and collective.name == "allgather") or \
        (collective.name == "reducescatter" and crossbar_planes(topology) is not None)
    return (own and sorted(collective.ranks) == sorted(topology.gpus)
            and not settings.switch_queue and all(value is None for value in (
                settings.trees, settings.pieces, settings.ring, settings.slots, settings.spare_crossings)))


def _plan_notes(plan: Plan, traits: FabricTraits, skipped: tuple[str, ...], settings: ForestcollOptions) -> list[str]:
    """The plan taken and why, and with ``explain`` the whole table."""
    shaping = [name for name in ("trees", "pieces", "switch_queue", "slots", "ring", "spare_crossings")
               if getattr(settings, name) is not None]
    note = plan_note(plan, traits, skipped)
    if shaping:
        note += f" (the options set, {', '.join(shaping)}, are obeyed on top of it)"
    return [note, *(explain(traits, plan) if settings.explain else [])]


def _switch_queue(topology: Topology, settings: ForestcollOptions) -> bool:
    """Whether chunks may wait in switch queues: as asked (``switch_queue``), by default where every switch has a
    buffer."""
    if settings.switch_queue is not None:
        return settings.switch_queue
    return all(topology.nodes[s].buffer for s in topology.switches)


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
    first_come = ("pieces booked first come, first served on the GPU links (the fabric has no switches)"
                  if not topology.switches else "chunks may wait in a switch's queue for its out-link" if switch_queue
                  else "routes through switches booked cut-through (no switch queues), first come first served")
    spared_note = (f"; trees packed for {CROSSING_SHARE:g} of the bandwidth of links between bufferless switches "
                   "(cut-through routes cannot keep them full)")
    if settings.spare_crossings:
        first_come += spared_note
    booking = first_come
    # beyond SLOTS_AUTO_MAX_GPUS the automatic grid books the balanced few trees alone, and goes first there
    few_only = not settings.slots and topology.n_gpus > tuning.SLOTS_AUTO_MAX_GPUS
    grid_first = (settings.slots is None and few_only and not switch_queue and not settings.spare_crossings
                  and _slot_grid_fits(topology) and _few_trees_grid_only(topology))
    early = None
    if grid_first:
        budget.report("ForestColl: booking balanced few trees per root on a slot grid first", 0.3)
        early = _grid_first(topology, collective, fabric, roots, unit_s, budget, refine, settings.pieces, start_s,
                            packed, settings.trees, limit_s)
    began = time.perf_counter()  # the first packing and its booking: the pace of a second one (``may_spare``)
    if early is not None and early[2].finish_s - start_s <= tuning.GRID_FIRST_ENOUGH * limit_s:
        packing = None  # close enough: the packed trees' first-come booking is not run (nor their packing)
    else:
        packing = best_packing(fabric, roots, unit_s, settings.trees, budget, packed=packed,
                               spare_crossings=bool(settings.spare_crossings))
    # where the slot grid follows first-come booking over SLOTS_ABOVE x the limit, the grid takes such schedules on:
    # deep first far off and more pieces there only cost time (the 32-GPU dragonfly's, near the app's 30 s limit)
    grid_fabric = (topology.n_gpus <= tuning.SLOTS_AUTO_MAX_GPUS or _few_trees_grid_only(topology)
                   or (packing is not None and _stars_grid(topology, packing)))
    grid_follows = settings.slots is None and not switch_queue and _slot_grid_fits(topology) and grid_fabric
    if not settings.slots and packing is not None:
        refined = _refined(topology, collective, packing, settings.pieces) if refine else collective
        run = ordered_pipeline(topology, refined, packing, start_s, switch_queue, limit_s,
                               wide=not _slot_grid_fits(topology),
                               deep_below=WIDE_BELOW if grid_follows else tuning.DEEP_FIRST_BELOW,
                               give_up=budget.superseded)
        _offer(budget.options, topology, packing, refined, run, False)
        finer = None if grid_follows else _more_pieces(topology, collective, packing, refined, run, settings, refine,
                                                       start_s, switch_queue, limit_s, budget)
        if finer is not None:
            refined, run = finer
        first_s = time.perf_counter() - began
        # sparing packs and books again: only where, at the first one's pace, it ends within the time limit
        if (may_spare is not None and not budget.would_pass(1.0, first_s)
                and run.finish_s - start_s > CROSSING_ABOVE * limit_s
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
            and run.finish_s - start_s > tuning.GRID_ENOUGH * limit_s):
        budget.report(f"ForestColl: booking {packing.k} balanced trees per root on the tight slot grid", 0.75)
        balanced = slot_grid._few_trees_slotted(topology, collective, fabric, roots, unit_s, budget, refine,
                                                settings.pieces, start_s, packed, packing.k,
                                                _slot_capacities_differ(fabric), _plan_maker(topology, collective),
                                                tight=True, reuse=True, limit_s=limit_s, orders=(False,))
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
            or not tuning.MORE_PIECES_ABOVE * limit_s < run.finish_s - start_s < LATENCY_ABOVE * limit_s  # alpha rules beyond
            or 2 * pieces not in PIECE_COUNTS or 2 * len(run.transfers) > tuning.MAX_TRANSFERS
            or per_rank_bytes / (packing.k * 2 * pieces) < MIN_CHUNK_BYTES):
        return None
    finer = _refined(topology, collective, packing, 2 * pieces)
    budget.report(f"ForestColl: {2 * pieces} pieces per tree (the transfers made leave room)", 0.7)
    again = ordered_pipeline(topology, finer, packing, start_s, switch_queue, limit_s, wide=not _slot_grid_fits(topology))
    return (finer, again) if again.finish_s < run.finish_s and len(again.transfers) <= tuning.MAX_TRANSFERS else None


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
