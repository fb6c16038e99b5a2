"""TE-CCL in the shared synthesizer frame: the epoch solvers are the copy core.

Reductions are broadcasts run backwards (``ccviz.synth.common``): ReduceScatter (and Reduce) chunk c
must gather one partial from every rank into its owner; reversed in time and direction that is the
owner broadcasting c on ``topology.reversed()``, solved here by the TE-CCL MILP with each reversed
link keeping the epoch timing of the real link it mirrors (``mirrored_from``) and with switches that
cannot copy (a switch cannot add partials, so in the mirror it must not multicast). AllReduce =
ReduceScatter then AllGather (the paper's split), each half with half of the time budget.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from ccviz.model.collectives import Collective
from ccviz.model.schedule import Schedule
from ccviz.model.topology import Topology
from ccviz.synth.common import Forward, ReversalSynthesizer
from ccviz.synth.registry import SynthOptions

ForwardSolver = Callable[..., Schedule]  # solve_copy_or_flow or solve_astar


class Teccl(ReversalSynthesizer):
    """One TE-CCL synthesis: ``solve_forward`` (MILP/LP or A* rounds) solves every copy demand before
    ``deadline``; the first half of an AllReduce must be done by the midpoint."""

    name = "teccl"

    def __init__(self, topology: Topology, collective: Collective, options: SynthOptions,
                 solve_forward: ForwardSolver, replay_mode: str, default_time_limit_s: float) -> None:
        super().__init__(topology, collective, options)
        self.solve_forward = solve_forward
        self.replay_mode = replay_mode
        self.started = time.perf_counter()
        limit = options.time_limit if options.time_limit is not None else default_time_limit_s
        self.final_deadline = self.deadline = self.started + limit

    def copy(self, topology: Topology, collective: Collective, *, mirrored_from: Topology | None = None,
             start_s: float = 0.0) -> Forward:
        """The epoch solver's schedule (untimed unless the solver timed it)."""
        return Forward(self.solve_forward(topology, collective, self.options, self.deadline, self.started,
                                          mirrored_from=mirrored_from))

    def copy_only(self, topology: Topology, collective: Collective) -> Schedule:
        """A copy collective by itself is replayed as ``replay`` asks ('asap' or epoch-synchronous)."""
        schedule = super().copy_only(topology, collective)
        if not schedule.is_timed:
            schedule.release = self.replay_mode
        return schedule

    def replay(self, schedule: Schedule) -> Schedule:
        """The simulator's times (the solvers return only schedules it accepted, or their greedy fallback)."""
        from ccviz.judge.simulate import simulate

        return simulate(schedule).schedule

    def enter_half(self, half: int) -> None:
        """AllReduce: the ReduceScatter half must finish by the midpoint of the time budget."""
        if half == 0 and self.final_deadline > self.started:
            self.deadline = self.started + (self.final_deadline - self.started) / 2
        else:
            self.deadline = self.final_deadline

    def carry(self, reduction: Schedule, forward: Schedule) -> None:
        """Also the solver's own estimate (epochs x tau) and a note on how the reduction was built."""
        super().carry(reduction, forward)
        reduction.estimated_finish_s = forward.estimated_finish_s
        reduction.notes = [*forward.notes, "reduction = TE-CCL broadcast on the reversed topology, reversed in time"]

    def combine(self, allreduce: Schedule, rs: Schedule, ag: Schedule) -> None:
        """Also the estimate: the sum of the halves' solver estimates."""
        super().combine(allreduce, rs, ag)
        allreduce.estimated_finish_s = (rs.estimated_finish_s or 0.0) + (ag.estimated_finish_s or 0.0)
        allreduce.notes.append("allreduce = reducescatter then allgather")
