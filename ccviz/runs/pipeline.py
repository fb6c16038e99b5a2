"""One call from inputs to a judged result: synthesize, simulate, bound, summarize.

The CLI, the app and notebooks all go through ``run`` so that the numbers
they show are computed one way only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ccviz.bounds.cost import LowerBound, lower_bound
from ccviz.bounds.limit import BandwidthLimit, limit_or_none
from ccviz.errors import CcvizError
from ccviz.judge.simulate import Timeline, simulate
from ccviz.model.collectives import Collective, check_fits, make_collective
from ccviz.model.groups import group_ranks, is_whole, relay_fabric
from ccviz.model.link_model import declared as declared_link_model
from ccviz.model.link_model import model_name as link_model_name
from ccviz.model.schedule import Schedule
from ccviz.model.topology import Topology
from ccviz.model.units import format_time
from ccviz.runs.members_only import members_only
from ccviz.synth.registry import SynthOptions, synthesize

SUMMARY_KEYS = (
    "algorithm", "topology", "collective", "size_bytes", "chunk_bytes", "n_gpus", "finish_time_s", "algbw_GBps",
    "busbw_GBps", "lower_bound_s", "synth_time_s", "status", "mip_gap", "epochs", "epoch_s", "transfers",
    "verified", "violations", "limit_s", "cut_short",
)


@dataclass
class RunResult:
    """A schedule together with its verdict from the simulator and the topology's lower bound."""

    topology: Topology
    collective: Collective
    schedule: Schedule  # as the synthesizer returned it
    timeline: Timeline  # the simulator's replay (timeline.schedule carries real times)
    bound: LowerBound
    limit: BandwidthLimit | None = None  # the fabric's limit (None for custom demands)

    @property
    def lower_bound_s(self) -> float:
        return self.bound.time_s

    @property
    def finish_time_s(self) -> float:
        return self.timeline.finish_time_s

    @property
    def bound_ratio(self) -> float | None:
        """Finish time over the lower bound (1.0 = provably optimal)."""
        if not self.bound.time_s:
            return None
        return self.timeline.finish_time_s / self.bound.time_s

    @property
    def limit_s(self) -> float | None:
        return None if self.limit is None else self.limit.limit_s

    @property
    def limit_fraction(self) -> float | None:
        """The fabric's limit over the finish time: 1.0 = the schedule runs at the limit."""
        if self.limit is None or not self.timeline.finish_time_s:
            return None
        return self.limit.limit_s / self.timeline.finish_time_s

    def summary(self) -> dict[str, Any]:
        """The ``ccviz synth --json`` object (a contract: keys never change); simulator values, never estimates."""
        s, t = self.schedule, self.timeline
        return {
            "algorithm": s.algorithm,
            "topology": self.topology.name,
            "collective": self.collective.name,
            "size_bytes": self.collective.size_bytes,
            "chunk_bytes": self.collective.chunk_bytes,
            "n_gpus": self.topology.n_gpus,
            "finish_time_s": t.finish_time_s,
            "algbw_GBps": t.algbw_GBps,
            "busbw_GBps": t.busbw_GBps,
            "lower_bound_s": self.bound.time_s or None,  # 0: the bound could not be computed
            "synth_time_s": s.synth_time_s,
            "status": s.status,
            "mip_gap": s.mip_gap,
            "epochs": s.epochs,
            "epoch_s": s.epoch_s,
            "transfers": len(s.transfers),
            "verified": t.verified,
            "violations": [v.to_dict() for v in t.violations],
            "limit_s": self.limit_s,
            "limit_fraction": self.limit_fraction,
            "limit_without_switch_sums_s": None if self.limit is None else self.limit.without_switch_sums_s,
            "estimated_finish_s": s.estimated_finish_s,
            "chunks_per_rank": self.collective.chunks_per_rank,
            "notes": s.notes,
            "model_finish_s": model_finish_s(s),
            "bound_epochs": s.bound_epochs,
            "status_meaning": status_meaning(s, t.finish_time_s),
            "cut_short": s.cut_short,
            **formula_fields(s),
            "link_model": link_model_name(self.topology),
        }


def formula_fields(schedule: Schedule) -> dict[str, Any]:
    """``formula_s``/``formula``: the closed form of the schedule that ran (``ccviz.runs.composed_formula``)."""
    from ccviz.runs.composed_formula import formula_fields as fields

    return fields(schedule)


def model_finish_s(schedule: Schedule) -> float | None:
    """The epoch model's own finish (epochs x epoch length), shown beside the simulated finish."""
    if schedule.epochs is None or schedule.epoch_s is None:
        return None
    return schedule.epochs * schedule.epoch_s


# ``Schedule.cut_short`` in words, one phrase for the CLI's status line and the app's pages
CUT_SHORT_WORDS = {"time_limit": "cut short by its time limit", "stopped": "cut short by Stop"}


def status_meaning(schedule: Schedule, simulated_s: float) -> str:
    """The status in words: what a claim of optimality covers and what it does not."""
    model = model_finish_s(schedule)
    if schedule.status == "optimal" and model is not None:
        bound = f" (proven lower bound {schedule.bound_epochs} epochs)" if schedule.bound_epochs else ""
        return (f"optimal in TE-CCL's epoch model: {schedule.epochs} epochs of {format_time(schedule.epoch_s)} = "
                f"{format_time(model)}, and no schedule in that model needs fewer{bound}. Epochs round alpha and "
                f"serialization up to whole epochs, so in continuous time this schedule replays in "
                f"{format_time(simulated_s)} and another algorithm's can finish earlier")
    if schedule.status == "optimal":
        return "optimal: no valid schedule finishes sooner under the algorithm's model"
    if schedule.status == "time_limit":
        gap = "" if schedule.mip_gap is None else f" (solver gap {schedule.mip_gap:.1%})"
        bound = (f"; the epoch model proves >= {schedule.bound_epochs} epochs, this has {schedule.epochs}"
                 if schedule.bound_epochs and schedule.epochs else "")
        return f"stopped by the time limit or Stop: the best schedule found so far, not proven optimal{gap}{bound}"
    if schedule.status == "feasible":
        bound = (f"; the epoch model proves >= {schedule.bound_epochs} epochs, this has {schedule.epochs}"
                 if schedule.bound_epochs and schedule.epochs else "")
        return f"feasible: a valid schedule, optimality not proven{bound}"
    return "heuristic: a valid schedule with no claim of optimality"


def synthesizer_bug(algorithm: str, timeline: Timeline) -> str:
    """The one line that blames a synthesizer (not the user's input) for a schedule the judge refutes."""
    first = timeline.violations[0]
    return (f"synthesizer bug: {algorithm} produced a schedule the simulator refutes ({len(timeline.violations)} "
            f"violation(s); first [{first.rule}] {first.message}); the result is not usable, please report it")


def run(
    topology: Topology,
    collective: str | Collective,
    algorithm: str = "ring",
    size_bytes: float | None = None,
    chunks: int = 1,
    root: int | None = None,
    options: SynthOptions | None = None,
    bound: LowerBound | None = None,
    ranks: Sequence[int] | str | None = None,
    dest: int | None = None,
) -> RunResult:
    """Synthesize with a registered algorithm and judge the result with the simulator.

    ``bound`` is the topology's lower bound for this collective when the caller has it already
    (sweeps run several algorithms on one collective; the bound costs seconds on big fabrics).
    ``ranks`` makes it a collective over a process group (``0-7,16`` or a list); the other GPUs relay.
    """
    from ccviz.model.arguments import expect_collective, expect_topology

    expect_topology(topology)
    if isinstance(collective, str):
        if size_bytes is None:
            raise CcvizError("size: run() needs size_bytes when the collective is given by name", "size")
        over = topology if ranks is None else group_ranks(topology, ranks)
        collective = make_collective(collective, over, size_bytes, chunks, root, dest)
    expect_collective(collective)
    check_fits(collective, topology.n_gpus)  # refuse up front what could not fit in memory
    schedule = synthesize(topology, collective, algorithm, options)
    if schedule.collective is not collective:  # a synthesizer that refines the chunks (forestcoll) says so
        collective = schedule.collective
        bound = bound if bound is not None and bound.any_chunking else None  # else bound at its own chunking
    timeline = simulate(schedule)
    schedule, timeline = members_only(schedule, timeline)  # a group's data only where a member needs it
    judged_by = declared_link_model(topology)
    if judged_by is not None:  # say which physics judged it (the pages show the notes)
        schedule.notes.append(f"judged under the fabric's {judged_by.describe()} (docs/link_model.md)")
    if not timeline.verified:  # a synthesizer must never hand the judge an invalid schedule: say whose bug it is
        schedule.notes.append(synthesizer_bug(schedule.algorithm, timeline))
    limit = _or_unknown(lambda: group_limit(topology, collective), "fabric limit", schedule)
    bound = bound or _or_unknown(lambda: lower_bound(topology, collective), "lower bound", schedule)
    return RunResult(topology, collective, schedule, timeline, bound or unknown_bound(), limit)


def unknown_bound(why: str = "not computed") -> LowerBound:
    """A bound that could not be computed: ``time_s`` 0 (no claim), shown and printed as unknown (null)."""
    return LowerBound(0.0, 0.0, 0.0, f"unknown ({why})")


def _or_unknown(compute, what: str, schedule: Schedule):  # noqa: ANN001, ANN202 - a thunk and its value
    """A bound's value, or None with a note on the schedule: a judged run is never lost to its bound (the
    AllToAll flow LP on a large fabric could end without an answer)."""
    try:
        return compute()
    except CcvizError as exc:
        schedule.notes.append(f"{what} unknown: {str(exc).split(': ', 1)[-1]}")
        return None


def group_limit(topology: Topology, collective: Collective) -> BandwidthLimit | None:
    """The limit of a collective over all GPUs or over a process group (the others relay), where defined."""
    if collective.name == "custom":
        return None
    if "matrix" in collective.meta:  # AllToAllv: its matrix's own concurrent flow, the other GPUs relay
        from ccviz.bounds.demand_flow import alltoallv_limit

        return alltoallv_limit(topology, collective)
    fabric = topology if is_whole(topology, collective.ranks) else relay_fabric(topology, collective.ranks)
    return limit_or_none(fabric, collective.name, collective.size_bytes, collective.root)
