"""From a collective to copies: reductions mirrored, AllReduce composed, switch sums weighed.

ReduceScatter and Reduce are the mirrored copy on the reversed fabric turned around in time (``reversal``);
AllReduce is ReduceScatter then AllGather, the first half choosing trees and chunks the second reuses; where
switches reduce (NVLS, SHARP) the in-switch schedule ``-a inc`` books is weighed beside the trees.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace

from ccviz.bounds.limit import bandwidth_limit
from ccviz.errors import CcvizError
from ccviz.model.collectives import Collective, make_collective
from ccviz.model.groups import judged_on, relay_fabric
from ccviz.model.schedule import Schedule
from ccviz.model.topology import Topology
from ccviz.model.units import format_time
from ccviz.synth.budget import Budget
from ccviz.synth.catalog import ForestcollOptions
from ccviz.synth.common import dispatch
from ccviz.synth.forestcoll.booking import Superseded, _as_fabric_ranks, _over
from ccviz.synth.forestcoll.copies import _crossbar, _plan_notes, _switch_queue, copy_schedule
from ccviz.synth.forestcoll.grid import _packed_trees_tight_grid
from ccviz.synth.forestcoll.plan import choose_plan, fabric_traits
from ccviz.synth.forestcoll.rails import boxes_on_rails
from ccviz.synth.forestcoll.tuning import CROSSBAR_ENOUGH, DEEP_FIRST_ABOVE, TIGHT_GRID_BOOKING
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
        rails = _rails_mirrored(topology, collective, options)
        if rails is not None:
            return rails
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


def _rails_mirrored(topology: Topology, collective: Collective, options: SynthOptions) -> Schedule | None:
    """A ReduceScatter over NVSwitch boxes on rails where hops cost other than their reverses (a hardware link
    model's cut-through switches): the rails' closed-form AllGather on the reversed fabric, turned around and
    replayed in that order by the simulator (``reverse_schedule``; a mirror exact in time needs hops alike both
    ways); None where the fabric is not boxes on rails, an option shapes trees or bookings, or it ends over
    ``CROSSBAR_ENOUGH`` x the limit. Partial sums sent up packed trees ended at 1.054 x on ``dgxh100:boxes=2``."""
    if collective.name != "reducescatter" or boxes_on_rails(topology) is None:
        return None
    fabric, copy = mirror_fabric(topology), mirror_collective(collective)
    limit_s = bandwidth_limit(topology, collective.name, collective.size_bytes).limit_s
    closed = _crossbar(fabric, copy, options.settings(ForestcollOptions), collective.chunks_per_rank == 1, None, 0.0,
                       limit_s, form="boxes on rails")
    if closed is None:
        return None
    forward = closed[0]
    cpr = forward.collective.chunks_per_rank
    target = collective if cpr == collective.chunks_per_rank else make_collective(
        collective.name, _over(topology, collective), collective.size_bytes, cpr, collective.root)
    turned = reverse_schedule(forward, topology, target)
    if schedule_end(turned) > CROSSBAR_ENOUGH * limit_s:
        return None
    traits = fabric_traits(topology)
    turned.notes = [*forward.notes, "the reduction is that AllGather on the reversed fabric turned around in time, "
                    "partial sums summed where the copies branched, replayed in that order (hops here cost other "
                    "than their reverses)", *_plan_notes(choose_plan(traits), traits, (),
                                                         options.settings(ForestcollOptions))]
    return turned


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
        with _offers_turned(budget, lambda half: concatenate(rs, half, whole, tight=True)):
            ag, run = copy_schedule(topology, gather_part, same_trees, phase, start_s=0.0, refine=False,
                                    packed=packed)
            ag_limit = bandwidth_limit(topology, gather_part.name, gather_part.size_bytes, gather_part.root).limit_s
            if run.finish_s > DEEP_FIRST_ABOVE * ag_limit and not phase.expired() and not grid_half:
                rs_end = schedule_end(rs)
                later, other = copy_schedule(topology, gather_part, same_trees, phase, start_s=rs_end,
                                             refine=False, packed=packed)
                if other.finish_s - rs_end < run.finish_s:
                    ag = later
        schedule = concatenate(rs, ag, whole, tight=True)
        schedule.notes = list(dict.fromkeys([*rs.notes, *ag.notes, *schedule.notes]))
        return schedule

    def reduction() -> Schedule:
        return reduction_schedule(topology, collective, options, budget)

    if collective.is_reducing:
        return _with_switch_sums(topology, collective, options, budget, allreduce if collective.name == "allreduce"
                                 else reduction)
    return dispatch(collective, lambda: copy_schedule(topology, collective, options, budget)[0], reduction, allreduce)


def _with_switch_sums(topology: Topology, collective: Collective, options: SynthOptions, budget: Budget,
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
    budget.answered = True  # past the limit, the trees' booking gives up (``Superseded``): this one is kept
    try:
        summed_at_gpus = trees()
    except Superseded:
        in_switch.notes.append(f"time limit of {options.time_limit:g} s reached before trees summing at GPUs were "
                               "booked (they may end sooner: raise the limit to try them)"
                               if budget.reason() == "time_limit" else
                               "stopped before trees summing at GPUs were booked")
        in_switch.cut_short = budget.reason()
        return in_switch
    at_gpus_end, in_switch_end = schedule_end(summed_at_gpus), schedule_end(in_switch)
    if at_gpus_end <= in_switch_end:
        return summed_at_gpus
    in_switch.notes.append(f"trees summing at GPUs were booked too and ended later ({format_time(at_gpus_end)})")
    return in_switch
