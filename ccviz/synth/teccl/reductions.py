"""Reductions in TE-CCL: a reduction is a broadcast run backwards.

ReduceScatter (and Reduce) chunk c must gather one partial from every rank
into its owner. Reversed in time and direction, that is the owner
broadcasting c to every rank on ``topology.reversed()``: we solve that copy
problem with the TE-CCL MILP on the reversed topology (each reversed link
keeps the epoch timing of the real link it mirrors), with switches that
cannot copy (a switch cannot add partials, so in the mirror it must not
multicast), then ``ccviz.synth.reversal.reverse_schedule`` turns the
broadcast tree into a reduction tree with ``op="reduce"`` transfers: each
rank sends its partial, summed with its subtree's, once, so the simulator
sees every contribution reduced exactly once. AllReduce = ReduceScatter
then AllGather (the paper's split), concatenated in time.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from ccviz.collectives import Collective
from ccviz.schedule import Schedule
from ccviz.simulate import simulate
from ccviz.synth.registry import SynthOptions
from ccviz.synth.reversal import concatenate, mirror_collective, reverse_schedule, split_allreduce
from ccviz.synth.teccl.synthesizer import solve_copy_or_flow
from ccviz.topology import Topology

ForwardSolver = Callable[..., Schedule]  # solve_copy_or_flow or solve_astar
STATUS_RANK = {"optimal": 0, "feasible": 1, "time_limit": 2, "heuristic": 3, "infeasible": 4}


def reduce_by_reversal(topology: Topology, collective: Collective, options: SynthOptions, deadline: float,
                       started: float, solve_forward: ForwardSolver = solve_copy_or_flow) -> Schedule:
    """ReduceScatter / Reduce: solve the mirrored broadcast, then reverse it (timed, op='reduce')."""
    mirror = mirror_collective(collective)
    reversed_topology = topology.reversed()
    no_copy = [replace(n, copy=False) if n.is_switch else n for n in reversed_topology.nodes.values()]
    reversed_topology = reversed_topology.with_changes(nodes=no_copy)
    forward = solve_forward(reversed_topology, mirror, options, deadline, started, mirrored_from=topology)
    timed_forward = simulate(forward).schedule
    schedule = reverse_schedule(timed_forward, topology, collective)
    _carry_metadata(schedule, forward)
    schedule.notes = [*forward.notes, "reduction = TE-CCL broadcast on the reversed topology, reversed in time"]
    return schedule


def allreduce(topology: Topology, collective: Collective, options: SynthOptions, deadline: float,
              started: float, solve_forward: ForwardSolver = solve_copy_or_flow) -> Schedule:
    """AllReduce = ReduceScatter then AllGather, each solved by TE-CCL (time budget split in two)."""
    rs, ag = split_allreduce(collective)
    middle = started + (deadline - started) / 2 if deadline > started else deadline
    first = reduce_by_reversal(topology, rs, options, middle, started, solve_forward)
    second = solve_forward(topology, ag, options, deadline, started)
    schedule = concatenate(first, simulate(second).schedule, collective)
    schedule.status = max(first.status, second.status, key=STATUS_RANK.__getitem__)
    gaps = [g for g in (first.mip_gap, second.mip_gap) if g is not None]
    schedule.mip_gap = max(gaps) if gaps else None
    schedule.epoch_s = second.epoch_s
    schedule.epochs = (first.epochs or 0) + (second.epochs or 0)
    schedule.estimated_finish_s = (first.estimated_finish_s or 0.0) + (second.estimated_finish_s or 0.0)
    schedule.notes = [*first.notes, *second.notes, "allreduce = reducescatter then allgather"]
    return schedule


def _carry_metadata(schedule: Schedule, forward: Schedule) -> None:
    schedule.status = forward.status
    schedule.mip_gap = forward.mip_gap
    schedule.epoch_s = forward.epoch_s
    schedule.epochs = forward.epochs
    schedule.estimated_finish_s = forward.estimated_finish_s
