"""The frame every timed synthesizer shares: one copy-collective core, the rest built from it.

TACOS, MTEG and TE-CCL each know how to move *copies* (AllGather, Broadcast, ...). Everything
else is the same for all three and lives here:

- ``dispatch``: AllReduce, a reduction, or a copy collective, chosen by the collective.
- reductions by time reversal (``ReversalSynthesizer.reduction``): the mirrored copy demand is
  solved on the reversed fabric and reversed in time (``ccviz.synth.reversal``);
- AllReduce = ReduceScatter then AllGather (``ReversalSynthesizer.allreduce``), the one split
  being ``reversal.split_allreduce``;
- best of seeded restarts under the synthesis ``Budget`` (``best_of_restarts``).

A synthesizer subclasses ``ReversalSynthesizer`` and supplies ``copy`` (its core) and, where its
budget is not a ``Budget``, ``enter_half``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from ccviz.errors import CcvizError
from ccviz.model.collectives import Collective
from ccviz.model.schedule import Schedule, gc_paused
from ccviz.model.topology import Topology
from ccviz.synth.budget import Budget
from ccviz.synth.registry import SynthOptions
from ccviz.synth.reversal import (
    concatenate,
    mirror_collective,
    mirror_fabric,
    reverse_schedule,
    schedule_end,
    split_allreduce,
)

S = TypeVar("S")
R = TypeVar("R")
STATUS_RANK = {"optimal": 0, "feasible": 1, "time_limit": 2, "heuristic": 3, "infeasible": 4}


def dispatch(collective: Collective, copy: Callable[[], S], reduction: Callable[[], S],
             allreduce: Callable[[], S]) -> S:
    """Run the builder the collective calls for: AllReduce, a reduction (any reducing demand), or a copy."""
    if collective.name == "allreduce":
        return allreduce()
    if collective.is_reducing:
        return reduction()
    return copy()


Check = Callable[[float, str, str], bool]  # (fraction of this run, progress detail, how far for an error) -> end now?


def check_restarts(restarts: object) -> None:
    """Refuse a restart count below one run (the best of no runs is no schedule)."""
    if isinstance(restarts, bool) or not isinstance(restarts, int) or restarts < 1:
        raise CcvizError(f"restarts: need at least 1 run, got {restarts!r}", "restarts")


def best_of_restarts(budget: Budget, algorithm: str, unit: str, restarts: int,
                     attempt: Callable[[int, Check], R | None], finish_s: Callable[[R], float],
                     not_started: str) -> tuple[R, int]:
    """The best of ``restarts`` runs of ``attempt(k, check)`` and how many completed.

    ``attempt`` calls ``check(fraction, detail, reached)`` now and then; it reports progress and returns
    True when a stop or the time limit should end the run, which then returns None. The best complete
    run wins (ties to the earliest); with none complete, ``Budget.exhausted`` names how far it got.
    """
    check_restarts(restarts)
    best: R | None = None
    reached = [not_started]
    done = 0
    for k in range(restarts):
        if budget.ends(done):
            break
        incumbent = None if best is None else finish_s(best)

        def check(fraction: float, detail: str, how_far: str, k: int = k, incumbent: float | None = incumbent,
                  done: int = done) -> bool:
            reached[0] = how_far
            budget.report(f"{algorithm} {unit} {k + 1}/{restarts}: {detail}", (k + fraction) / restarts,
                          incumbent_s=incumbent)
            return budget.ends(done)

        run = attempt(k, check)
        if run is None:
            break
        done += 1
        if best is None or finish_s(run) < finish_s(best):
            best = run
        budget.report(f"{algorithm} {unit} {k + 1}/{restarts} done", (k + 1) / restarts,
                      incumbent_s=finish_s(best), force=True)
    if best is None:
        raise budget.exhausted(algorithm, reached[0])
    return best, done


def same_copy_problem(fabric: Topology, other: Topology, demand: Collective, other_demand: Collective) -> bool:
    """True when two copy problems are one: the same nodes, links (costs, lanes) and switch rule, and
    chunks of the same size with the same (source, index), holders and receivers."""
    if (fabric.switch_hop != other.switch_hop or fabric.nodes != other.nodes or fabric.links != other.links
            or demand.chunk_bytes != other_demand.chunk_bytes or len(demand.chunks) != len(other_demand.chunks)):
        return False
    return ({(c.source, c.index, c.pre, c.post, c.reduce) for c in demand.chunks}
            == {(c.source, c.index, c.pre, c.post, c.reduce) for c in other_demand.chunks})


@dataclass
class Forward:
    """What a copy core returns: the schedule, and for timed paths through switches which arrival each
    hop out of a switch forwards (``reverse_schedule`` needs it when times alone are ambiguous)."""

    schedule: Schedule
    feeders: dict[int, int] | None = None


class ReversalSynthesizer:
    """One synthesis: a copy core plus reductions by reversal and AllReduce = ReduceScatter + AllGather.

    Subclasses implement ``copy``; ``mirror_topology`` (which fabric the mirrored copy runs on),
    ``replay`` (how a forward schedule gets trusted times) and ``enter_half`` (how the budget is shared
    by AllReduce's halves) have defaults that suit most.
    """

    name = ""

    def __init__(self, topology: Topology, collective: Collective, options: SynthOptions) -> None:
        self.topology = topology
        self.collective = collective
        self.options = options
        self.budget = Budget(options)

    def copy(self, topology: Topology, collective: Collective, *, mirrored_from: Topology | None = None,
             start_s: float = 0.0) -> Forward:
        """The core: a schedule of a copy collective. ``mirrored_from``: the real fabric when ``topology``
        is its reversal (a reduction's mirror); ``start_s``: when the AllGather half of an AllReduce may start."""
        raise NotImplementedError

    def synthesize(self) -> Schedule:
        """Registry entry: copies by the core, reductions by reversal, AllReduce as RS then AG."""
        return dispatch(self.collective, lambda: self.copy_only(self.topology, self.collective),
                        lambda: self.reduction(self.topology, self.collective),
                        lambda: self.allreduce(self.topology, self.collective))

    def copy_only(self, topology: Topology, collective: Collective) -> Schedule:
        """A copy collective asked for by itself."""
        return self.copy(topology, collective).schedule

    def mirror_topology(self, topology: Topology) -> Topology:
        """The fabric the mirrored copy demand runs on: every link reversed, no switch multicasting
        (``reversal.mirror_fabric``)."""
        return mirror_fabric(topology)

    def replay(self, schedule: Schedule) -> Schedule:
        """The forward schedule timed and checked by the simulator (the core's own output must replay)."""
        from ccviz.judge.simulate import simulate  # numpy loads on first use: `ccviz list` stays instant

        timeline = simulate(schedule)
        if not timeline.verified:
            raise CcvizError(f"{self.name}: forward schedule failed verification: {timeline.violations[0].message}",
                             self.name)
        return timeline.schedule

    def enter_half(self, half: int) -> None:
        """Share the budget: AllReduce's ReduceScatter half gets progress 0..0.5, the AllGather half
        0.5..1 and always completes its first run (see ``ccviz.synth.budget``)."""
        self.budget.phase(0.5 * half, 0.5 * (half + 1), finish_first=half == 1)

    def reduction(self, topology: Topology, collective: Collective) -> Schedule:
        """ReduceScatter / Reduce: the mirrored copy demand on the reversed fabric, reversed in time."""
        return self.reduction_and_forward(topology, collective, self.mirror_topology(topology))[0]

    def reduction_and_forward(self, topology: Topology, collective: Collective,
                              mirror: Topology) -> tuple[Schedule, Schedule]:
        """The reduction and the timed copy schedule on ``mirror`` (the reversed fabric) it reverses."""
        forward = self.copy(mirror, mirror_collective(collective), mirrored_from=topology)
        timed = self.replay(forward.schedule)
        with gc_paused():
            schedule = reverse_schedule(timed, topology, collective, forward.feeders)
        self.carry(schedule, forward.schedule)
        return schedule, timed

    def mirror_solves_gather(self, topology: Topology) -> bool:
        """Whether ``copy`` asked for the mirror of a reduction (``mirrored_from`` set) solves the same
        problem as asked for the copy itself, when the fabrics and demands are the same. Off by default:
        a core may treat the mirror differently (TE-CCL times it by the real links, MTEG forbids
        multicast at switches there)."""
        return False

    def carry(self, reduction: Schedule, forward: Schedule) -> None:
        """What a reduction keeps of its forward schedule: the solver's gap and epoch grid."""
        reduction.mip_gap = forward.mip_gap
        reduction.epoch_s, reduction.epochs = forward.epoch_s, forward.epochs

    def allreduce(self, topology: Topology, collective: Collective,
                  split: Callable[[Collective], tuple[Collective, Collective]] = split_allreduce) -> Schedule:
        """AllReduce = ReduceScatter into each chunk's owner, then AllGather from it once the first half ends.
        (``split``: ``reversal.split_demand`` runs a workload's union the same way, its copies in the second half.)

        On a fabric that is its own reversal (every link's twin has the same cost: tori, meshes, most
        clusters) the ReduceScatter's mirror *is* the AllGather: same fabric, same demand. A core that
        solves the two alike (``mirror_solves_gather``) then solves it once, and the AllGather half is
        that forward schedule, started after the first half (``concatenate`` shifts it).
        """
        reduce_part, gather_part = split(collective)
        mirror = self.mirror_topology(topology)
        self.enter_half(0)
        rs, forward = self.reduction_and_forward(topology, reduce_part, mirror)
        self.enter_half(1)
        if self.mirror_solves_gather(topology) and same_copy_problem(mirror, topology, forward.collective,
                                                                      gather_part):
            ag = forward
            self.budget.report(f"{self.name}: the AllGather half is the ReduceScatter's mirror, already solved", 1.0,
                               force=True)
        else:
            ag = self.replay(self.copy(topology, gather_part, start_s=schedule_end(rs)).schedule)
        schedule = concatenate(rs, ag, collective)
        self.combine(schedule, rs, ag)
        return schedule

    def combine(self, allreduce: Schedule, rs: Schedule, ag: Schedule) -> None:
        """The AllReduce's notes, status (the worse half's), gap and epochs from its two halves."""
        allreduce.notes = list(dict.fromkeys([*allreduce.notes, *ag.notes]))
        allreduce.status = max(rs.status, ag.status, key=STATUS_RANK.__getitem__)
        gaps = [g for g in (rs.mip_gap, ag.mip_gap) if g is not None]
        allreduce.mip_gap = max(gaps) if gaps else None
        allreduce.epoch_s = ag.epoch_s
        if rs.epochs is not None or ag.epochs is not None:
            allreduce.epochs = (rs.epochs or 0) + (ag.epochs or 0)
