"""Workloads: every process group of a parallel job runs its collective at the same time on one fabric.

A job with ``tp=8,dp=4`` on 32 GPUs has 4 tensor-parallel groups of 8 and 8 data-parallel groups of 4;
each group runs its collective (``tp:allreduce:64MB,dp:allreduce:256MB``) while all the others run
theirs, so groups contend for links. ``place_groups`` lays the groups on the GPUs (``--order tp-dp``:
the first kind's ranks are consecutive GPUs; ``random``: the same on shuffled GPUs, an off-prefix
layout). ``run_workload`` synthesizes each group's schedule alone (the others' GPUs relay; a group that a
symmetry of the fabric maps from one already synthesized gets that schedule relabeled, ``ccviz.model.relabel``),
judges it alone, then puts every group's schedule on the fabric at once and has the simulator judge them
together: one timeline, links shared, transfers timed in the order their groups sent them alone, each
keeping what it waited for (``_Retimer``). It reports each group's finish alone and together, and their ratio, the measured
eta_beta of the collectives explainer's chapter on contention (alone / together: 1 = no contention).

``synthesis`` chooses how the job's schedule is made. ``composed`` (the default): each group's schedule
alone, timed together as above. ``joint``: every group's chunks as one demand
(``model.workload_demand.union_collective``) synthesized in one run (``synth.joint``: TACOS on one set of
link calendars, MTEG on one set of slot calendars, TE-CCL as one multi-commodity problem), replayed with
each transfer as soon as its inputs and its link allow, and judged in one timeline; each group is still
synthesized alone for its finish alone. The report says which in ``synthesis``.
"""

from __future__ import annotations

import math
import random
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ccviz.errors import CcvizError
from ccviz.model.collectives import Chunk, Collective, make_collective, normalize_name
from ccviz.model.groups import group_ranks, span_text
from ccviz.model.schedule import Schedule, Transfer
from ccviz.model.topology import Topology
from ccviz.model.units import parse_size
from ccviz.runs.members_only import members_only
from ccviz.synth.registry import SynthOptions, get_algorithm, synthesize

KINDS = ("tp", "cp", "ep", "pp", "dp")  # tensor, context, expert, pipeline, data parallel
COMPOSED = ("composed: each group synthesized alone over the whole fabric (the other GPUs relay), then all "
            "groups timed together on shared links, each transfer in the order its group sent it alone and "
            "waiting for what it waited for alone, and judged together by the simulator")
JOINT = ("joint: every group's chunks synthesized in one run of the algorithm (reductions summed into their owners "
         "first, then every copy), each transfer then replayed as soon as its inputs and its link allow (where that "
         "ends no later), and judged together by the simulator")
SYNTHESES = ("composed", "joint")


@dataclass(frozen=True)
class Step:
    """One kind's collective: ``tp:allreduce:64MB``."""

    kind: str
    collective: str
    size_bytes: float
    moe: str | None = None  # ``ep:moe:experts=64,topk=8,...``: the dispatch AllToAllv of the MoE generator


def parse_parallel(text: str | Mapping[str, int]) -> dict[str, int]:
    """``tp=8,dp=4`` -> {"tp": 8, "dp": 4} (kinds from ``KINDS``, each a whole number >= 1)."""
    items = text.items() if isinstance(text, Mapping) else (
        part.partition("=")[::2] for part in str(text).split(",") if part.strip())
    out: dict[str, int] = {}
    for key, value in items:
        kind = str(key).strip().lower()
        if kind not in KINDS:
            raise CcvizError(f"parallel: unknown kind {key!r}; use {', '.join(KINDS)} as in tp=8,dp=4", "parallel")
        if kind in out:
            raise CcvizError(f"parallel: {kind} is given twice", "parallel")
        try:
            size = int(str(value).strip())
        except ValueError:
            raise CcvizError(f"parallel: {kind}={value!r} is not a whole number (write e.g. tp=8,dp=4)",
                             "parallel") from None
        if size < 1:
            raise CcvizError(f"parallel: {kind}={size} must be at least 1", "parallel")
        out[kind] = size
    if not out:
        raise CcvizError("parallel: give the group sizes, e.g. tp=8,dp=4", "parallel")
    return out


def parse_run(text: str | Sequence[Any]) -> list[Step]:
    """``tp:allreduce:64MB,dp:allreduce:256MB`` (or a list of {kind, collective, size}) -> steps."""
    if isinstance(text, str):
        from ccviz.runs.moe import split_run_entries

        raw: list[Any] = split_run_entries(text)  # an MoE entry's keys are comma-separated too
    elif isinstance(text, Sequence):
        raw = list(text)
    else:
        raise CcvizError(f"run: expected text like tp:allreduce:64MB,dp:allreduce:256MB or a list of "
                         f"{{kind, collective, size}}, got {text!r:.60}", "run")
    steps: list[Step] = []
    for item in raw:
        if isinstance(item, Mapping):
            unknown = set(item) - {"kind", "collective", "size"}
            if unknown:
                raise CcvizError(f"run: unknown key(s) {sorted(unknown)}; each entry has kind, collective, size", "run")
            parts = [str(item.get("kind", "")), str(item.get("collective", "")), str(item.get("size", ""))]
        else:
            parts = str(item).split(":", 2)
        if len(parts) != 3 or not all(p.strip() for p in parts):
            raise CcvizError(f"run: {item!r} should be KIND:COLLECTIVE:SIZE, e.g. tp:allreduce:64MB", "run")
        kind = parts[0].strip().lower()
        if kind not in KINDS:
            raise CcvizError(f"run: unknown kind {parts[0]!r} in {item!r}; use {', '.join(KINDS)}", "run")
        if any(s.kind == kind for s in steps):
            raise CcvizError(f"run: {kind} is given twice; one collective per kind", "run")
        if parts[1].strip().lower() == "moe":  # the dispatch of an MoE layer: a skewed AllToAllv in each group
            from ccviz.model.traffic import parse_moe

            parse_moe(parts[2])  # refused here, before any work
            steps.append(Step(kind, "moe", 0.0, parts[2].strip()))
            continue
        name = normalize_name(parts[1])
        if name not in ("allgather", "reducescatter", "allreduce", "alltoall"):
            raise CcvizError(f"run: {name} has a root; a workload runs allgather, reducescatter, allreduce or "
                             "alltoall in every group", "run")
        steps.append(Step(kind, name, parse_size(parts[2].strip())))
    if not steps:
        raise CcvizError("run: give at least one collective, e.g. tp:allreduce:64MB", "run")
    return steps


def place_groups(topology: Topology, parallel: Mapping[str, int], order: str | None = None,
                 seed: int = 0) -> dict[str, list[tuple[int, ...]]]:
    """The groups of every kind: GPUs sharing every coordinate but that kind's.

    ``order`` lists kinds innermost first (``tp-dp``: a tp group is consecutive GPUs); kinds it leaves out
    follow in the order ``parallel`` gives them (None: ``parallel``'s order). ``random`` shuffles the GPUs
    (with ``seed``) first and then lays them out in ``parallel``'s order: an off-prefix layout.
    """
    gpus = list(topology.gpus)
    total = 1
    for size in parallel.values():
        total *= size
    if total != len(gpus):
        sizes = " x ".join(f"{k}={v}" for k, v in parallel.items())
        raise CcvizError(f"parallel: {sizes} = {total} GPUs, but {topology.name!r} has {len(gpus)}; the product "
                         "of the group sizes must equal the number of GPUs", "parallel")
    if order is None or order == "random":
        if order == "random":
            random.Random(seed).shuffle(gpus)
        kinds = list(parallel)
    else:
        named = [k.strip().lower() for k in str(order).split("-") if k.strip()]
        bad = [k for k in named if k not in parallel]
        if bad or len(set(named)) != len(named):
            raise CcvizError(f"order: {order!r} should list kinds of --parallel ({', '.join(parallel)}) innermost "
                             f"first, e.g. {'-'.join(parallel)}, or be random", "order")
        kinds = named + [k for k in parallel if k not in named]
    stride: dict[str, int] = {}
    step = 1
    for k in kinds:
        stride[k] = step
        step *= parallel[k]
    groups: dict[str, list[tuple[int, ...]]] = {}
    for k in kinds:
        if parallel[k] < 2:
            continue
        seen: dict[int, None] = {}
        members: list[tuple[int, ...]] = []
        for i in range(len(gpus)):
            base = i - ((i // stride[k]) % parallel[k]) * stride[k]
            if base in seen:
                continue
            seen[base] = None
            members.append(tuple(gpus[base + j * stride[k]] for j in range(parallel[k])))
        groups[k] = members
    return {k: groups[k] for k in parallel if k in groups}


def check_groups(topology: Topology, groups: Mapping[str, Sequence[Sequence[int]]]) -> dict[str, list[tuple[int, ...]]]:
    """An explicit rank map checked: every rank a GPU of the fabric, no GPU in two groups of one kind."""
    out: dict[str, list[tuple[int, ...]]] = {}
    if not isinstance(groups, Mapping):
        raise CcvizError(f"groups: expected a mapping of kind to its groups, e.g. {{tp: [[0, 1], [2, 3]]}}, got "
                         f"{type(groups).__name__} (name the kind each list of groups belongs to)", "groups")
    for kind, members in groups.items():
        if kind not in KINDS:
            raise CcvizError(f"groups: unknown kind {kind!r}; use {', '.join(KINDS)}", "groups")
        if isinstance(members, (str, bytes)) or not isinstance(members, Sequence) or not members:
            raise CcvizError(f"groups.{kind}: expected a list of groups, each a list of ranks, e.g. [[0, 1], [2, 3]], "
                             f"got {members!r}", "groups")
        owner: dict[int, int] = {}
        checked = []
        for i, ranks in enumerate(members):
            ranks = group_ranks(topology, ranks, f"groups.{kind}[{i}]")
            for r in ranks:
                if r in owner:
                    raise CcvizError(f"groups.{kind}: GPU {r} is in group {owner[r]} and group {i}; groups of one "
                                     "kind must not overlap", "groups")
                owner[r] = i
            checked.append(ranks)
        out[kind] = checked
    return out


@dataclass
class GroupRun:
    """One group's collective, judged alone and together with every other group."""

    kind: str
    index: int
    ranks: tuple[int, ...]
    collective: Collective
    schedule: Schedule  # alone, as judged (timed)
    finish_alone_s: float
    synth_time_s: float
    limit_s: float | None
    finish_together_s: float = 0.0
    finish_synthesized_s: float = 0.0  # the schedule as its synthesizer timed it, judged alone
    relabeled_from: str | None = None  # the group whose schedule a fabric symmetry carried here (None: synthesized)
    synth_cpu_s: float = 0.0  # CPU time of this process spent synthesizing (or relabeling) it; read on a busy machine

    @property
    def label(self) -> str:
        return f"{self.kind}{self.index}"

    @property
    def eta_beta(self) -> float | None:
        """Measured contention: finish alone over finish together (1 = the others cost it nothing)."""
        return self.finish_alone_s / self.finish_together_s if self.finish_together_s else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind, "index": self.index, "ranks": list(self.ranks), "collective": self.collective.name,
            "size_bytes": self.collective.size_bytes, "chunks_per_rank": self.collective.chunks_per_rank,
            "finish_alone_s": self.finish_alone_s, "finish_together_s": self.finish_together_s,
            "finish_synthesized_s": self.finish_synthesized_s,
            "eta_beta": self.eta_beta, "limit_s": self.limit_s,
            "alone_over_limit": self.finish_alone_s / self.limit_s if self.limit_s else None,
            "synth_time_s": self.synth_time_s, "synth_cpu_s": self.synth_cpu_s,
            "relabeled_from": self.relabeled_from,
        }


@dataclass
class WorkloadResult:
    """Every group alone and together; ``timeline`` is the simulator's one timeline of the whole job."""

    topology: Topology
    algorithm: str
    parallel: dict[str, int]
    order: str
    groups: list[GroupRun]
    schedule: Schedule
    timeline: Any
    synthesis: str = COMPOSED
    notes: list[str] = field(default_factory=list)
    joint_synth_time_s: float | None = None  # the one synthesis of every group, wall clock (joint only)
    joint_synth_cpu_s: float | None = None  # the same in CPU seconds of this process

    @property
    def finish_s(self) -> float:
        return self.timeline.finish_time_s

    def group_of_chunk(self) -> list[int]:
        """Chunk id of the joint schedule -> index into ``groups``."""
        unit = self.schedule.collective.chunk_bytes
        out: list[int] = []
        for i, g in enumerate(self.groups):
            out.extend([i] * (len(g.collective.chunks) * round(g.collective.chunk_bytes / unit)))
        return out

    def link_groups(self) -> dict[tuple[int, int], set[int]]:
        """Link -> the groups whose transfers cross it."""
        owner = self.group_of_chunk()
        out: dict[tuple[int, int], set[int]] = defaultdict(set)
        for t in self.schedule.transfers:
            out[(t.src, t.dst)].add(owner[t.chunk])
        return out

    def busiest_links(self, count: int = 8) -> list[dict[str, Any]]:
        """The links busy longest in the joint timeline, with the groups sharing each."""
        busy: dict[tuple[int, int], float] = {}
        for key, intervals in self.timeline.link_busy.items():
            busy[key] = sum(e - s for s, e, _ in intervals)
        users = self.link_groups()
        finish = self.finish_s or 1.0
        top = sorted(busy.items(), key=lambda kv: (-kv[1], kv[0]))[:count]
        return [{"src": u, "dst": v, "busy_s": b, "utilization": b / finish,
                 "groups": [self.groups[i].label for i in sorted(users.get((u, v), ()))]} for (u, v), b in top]

    def contended_links(self) -> int:
        """How many links carry transfers of two or more groups."""
        return sum(1 for users in self.link_groups().values() if len(users) > 1)

    def to_dict(self) -> dict[str, Any]:
        return {
            "topology": self.topology.name, "algorithm": self.algorithm, "parallel": self.parallel,
            "order": self.order, "n_gpus": self.topology.n_gpus, "verified": self.timeline.verified,
            "violations": [v.to_dict() for v in self.timeline.violations[:20]],
            "finish_s": self.finish_s, "finish_alone_max_s": max(g.finish_alone_s for g in self.groups),
            "synth_time_s": sum(g.synth_time_s for g in self.groups), "synthesis": self.synthesis,
            "joint_synth_time_s": self.joint_synth_time_s, "joint_synth_cpu_s": self.joint_synth_cpu_s,
            "groups": [g.to_dict() for g in self.groups], "busiest_links": self.busiest_links(),
            "contended_links": self.contended_links(), "transfers": len(self.schedule.transfers),
            "notes": self.notes,
        }


def _chunking(steps: Sequence[Step], groups: Mapping[str, list[tuple[int, ...]]], chunks: int = 1) -> dict[str, int]:
    """Chunks per rank for every kind so that all groups' chunks have one size (the judge has one): the kind
    with the smallest chunks gets ``chunks`` per rank, the others as many as make theirs that size."""
    plain = {}
    for s in steps:
        if s.moe is None:
            plain[s.kind] = make_collective(s.collective, groups[s.kind][0], s.size_bytes).chunk_bytes
    for s in steps:
        if s.moe is not None:
            from ccviz.runs.moe import workload_chunk

            plain[s.kind] = workload_chunk(s.moe, len(groups[s.kind][0]), [b for k, b in plain.items()
                                                                             if k != s.kind])
    smallest = min(plain.values())
    out = {}
    for kind, b in plain.items():
        ratio = b / smallest
        whole = round(ratio)
        if abs(ratio - whole) > 1e-6 * ratio:
            text = ", ".join(f"{k}: {v:g} B" for k, v in plain.items())
            raise CcvizError(f"run: the groups' chunks must be whole multiples of one size to share one timeline "
                             f"({text}); choose sizes whose per-rank chunks divide each other", "run")
        out[kind] = whole * chunks
    return out


def _step_collective(step: Step, ranks: Sequence[int], cpr: Mapping[str, int], group: int,
                     moe_chunks: Mapping[str, float]) -> Collective:
    """A group's collective: a standard one, or an MoE dispatch (its own matrix, in chunks of ``moe_chunks``)."""
    if step.moe is None:
        return make_collective(step.collective, ranks, step.size_bytes, cpr[step.kind])
    from ccviz.model.collectives import alltoallv_collective
    from ccviz.runs.moe import group_matrix

    return alltoallv_collective(ranks, group_matrix(step.moe, len(ranks), group), moe_chunks[step.kind])


def _moe_chunks(steps: Sequence[Step], groups: Mapping[str, list[tuple[int, ...]]], chunks: int) -> dict[str, float]:
    """The MoE kinds' chunk size: a whole divisor or multiple of the other kinds' chunks, cut ``chunks`` times."""
    from ccviz.runs.moe import workload_chunk

    others = [make_collective(s.collective, groups[s.kind][0], s.size_bytes).chunk_bytes for s in steps
              if s.moe is None]
    return {s.kind: workload_chunk(s.moe, len(groups[s.kind][0]), others) / chunks for s in steps if s.moe}


def run_workload(topology: Topology, parallel: Mapping[str, int] | str, steps: Sequence[Step] | str,
                 algorithm: str, order: str | None = None, seed: int = 0, options: SynthOptions | None = None,
                 groups: Mapping[str, Sequence[Sequence[int]]] | None = None,
                 progress: Callable[[str], None] | None = None, chunks: int = 1,
                 synthesis: str = "composed", relabel: bool = True) -> WorkloadResult:
    """Synthesize and judge every group alone, then the whole job together in one timeline (``synthesis``:
    ``composed`` from the groups' own schedules, ``joint`` from one synthesis of every group's chunks).

    With ``relabel`` a group that a fabric symmetry maps from an already synthesized group of its kind gets
    that group's schedule relabeled (judged alone like any other; synthesized when no symmetry is found)."""
    from ccviz.judge.simulate import simulate
    from ccviz.runs.pipeline import group_limit

    sizes = parse_parallel(parallel)
    plan = list(steps) if not isinstance(steps, str) and all(isinstance(s, Step) for s in steps) else parse_run(steps)
    placed = check_groups(topology, groups) if groups else place_groups(topology, sizes, order, seed)
    for s in plan:
        if s.kind not in sizes:
            raise CcvizError(f"run: {s.kind} runs a collective but --parallel has no {s.kind}", "run")
        if s.kind not in placed:
            raise CcvizError(f"run: {s.kind}={sizes[s.kind]} has no group of two or more GPUs to run "
                             f"{s.collective}", "run")
    if isinstance(chunks, bool) or not isinstance(chunks, int) or chunks < 1:
        raise CcvizError(f"chunks: a whole number >= 1 of chunks per rank for the smallest buffer, got {chunks!r}",
                         "chunks")
    if synthesis not in SYNTHESES:
        raise CcvizError(f"synthesis: {synthesis!r} is not one of {', '.join(SYNTHESES)} (joint: every group in one "
                         "synthesis; composed: each group alone, then timed together)", "synthesis")
    if synthesis == "joint":
        from ccviz.synth.joint import check_joint_algorithm

        check_joint_algorithm(algorithm)
        cpr = _joint_chunking(plan, placed, chunks)
    else:
        cpr = _chunking(plan, placed, chunks)
    moe_chunks = _moe_chunks(plan, placed, chunks)
    runs: list[GroupRun] = []
    total = sum(len(placed[s.kind]) for s in plan)
    for s in plan:
        representatives: list[GroupRun] = []  # this kind's synthesized groups, images of which serve the others
        for i, ranks in enumerate(placed[s.kind]):
            if options is not None and options.stop is not None and options.stop.is_set():
                raise CcvizError("workload: stopped before every group was synthesized", "workload")
            coll = _step_collective(s, ranks, cpr, i, moe_chunks)
            # an MoE group routes its own tokens (its own matrix): another group's schedule does not carry over
            run, wall, cpu = _relabeled(topology, s.kind, i, tuple(ranks), representatives) if relabel \
                and s.moe is None else (
                None, 0.0, 0.0)
            if run is None:
                if progress is not None:
                    progress(f"synthesizing {s.kind} group {i} ({len(runs) + 1} of {total}): {s.collective} over "
                             f"GPUs {span_text(ranks)}")
                run = _synthesized(topology, s.kind, i, tuple(ranks), coll, algorithm, options, synthesis)
                run.synth_time_s += wall  # the search that found no symmetry was spent on this group too
                run.synth_cpu_s += cpu
                representatives.append(run)
            elif progress is not None:
                progress(f"{s.kind} group {i} ({len(runs) + 1} of {total}): {run.relabeled_from}'s schedule carried "
                         f"over GPUs {span_text(ranks)} by a fabric symmetry, verified")
            limit = group_limit(topology, run.collective)
            run.limit_s = None if limit is None else limit.limit_s
            runs.append(run)
    unit = common_chunk(runs)
    for run in runs:
        # alone under the same rule and pieces as together (each hop as soon as its inputs and its link allow),
        # so the ratio of the two is the contention only
        solo = simulate(compose(topology, [run], algorithm, unit))
        if not solo.verified:
            raise CcvizError(f"workload: {run.label}'s schedule, cut into pieces of {unit:g} B, does not verify "
                             f"({solo.violations[0].message})", "workload")
        # when its members hold what they need (as together, as the job): a later relay or spare copy not counted
        run.finish_alone_s = max(solo.completion_s.values(), default=solo.finish_time_s)
    joint_time = joint_cpu = None
    if synthesis == "joint":
        joint, joint_time, joint_cpu = _synthesize_together(topology, runs, algorithm, options, progress)
    else:
        if progress is not None:
            progress(f"judging {len(runs)} groups together")
        joint = compose(topology, runs, algorithm, unit)
    timeline = simulate(joint)
    owner = [i for i, g in enumerate(runs) for _ in range(len(g.collective.chunks) * round(g.collective.chunk_bytes
                                                                                            / unit))]
    ends: dict[int, float] = defaultdict(float)
    # a group ends when its last member holds what it needs (the job's finish is the last of these, so no group
    # ends after the job): a transfer landing later (a relay fed, a copy no member needed) does not count
    for (chunk, _), when in timeline.completion_s.items():
        ends[owner[chunk]] = max(ends[owner[chunk]], when)
    for i, g in enumerate(runs):
        g.finish_together_s = ends[i]
    label = "explicit" if groups else order or "-".join(sizes)
    return WorkloadResult(topology, algorithm, sizes, label, runs, joint, timeline,
                          JOINT if synthesis == "joint" else COMPOSED, joint_synth_time_s=joint_time,
                          joint_synth_cpu_s=joint_cpu)


def _alone_as_union(topology: Topology, collective: Collective, algorithm: str,
                    options: SynthOptions | None) -> Schedule:
    """A group alone by the joint machinery, for a collective the algorithm has no entry for (TACOS moves an
    AllToAll group's chunks as plain copies there): the union of one group, whose chunk ids are the group's."""
    from dataclasses import replace

    from ccviz.model.workload_demand import union_collective
    from ccviz.synth.joint import synthesize_joint

    schedule = synthesize_joint(topology, union_collective([collective]), algorithm, options)
    return replace(schedule, collective=collective)


def _joint_chunking(steps: Sequence[Step], groups: Mapping[str, list[tuple[int, ...]]], chunks: int = 1
                    ) -> dict[str, int]:
    """Chunks per rank for every kind so that all groups' chunks have one size: the largest size dividing
    every kind's chunk (``common_chunk_bytes``), cut ``chunks`` times finer."""
    from ccviz.model.workload_demand import common_chunk_bytes

    plain = {s.kind: make_collective(s.collective, groups[s.kind][0], s.size_bytes).chunk_bytes for s in steps}
    _, pieces = common_chunk_bytes(plain)
    return {kind: n * chunks for kind, n in pieces.items()}


def _synthesize_together(topology: Topology, runs: Sequence[GroupRun], algorithm: str,
                         options: SynthOptions | None, progress: Callable[[str], None] | None
                         ) -> tuple[Schedule, float, float]:
    """Every group's chunks in one synthesis, replayed as soon as inputs and links allow (``_Retimer``, with
    the synthesized times as the order to keep; kept where the judge finds it no slower than the schedule as
    synthesized), and its synthesis time (wall clock, CPU)."""
    from ccviz.judge.simulate import simulate
    from ccviz.model.workload_demand import union_collective
    from ccviz.synth.joint import synthesize_joint

    union = union_collective([g.collective for g in runs], [g.label for g in runs])
    if progress is not None:
        progress(f"synthesizing all {len(runs)} groups together: {len(union.chunks)} chunks of "
                 f"{union.chunk_bytes:g} B with {algorithm}")
    cpu = time.process_time()
    schedule = synthesize_joint(topology, union, algorithm, options)
    cpu = time.process_time() - cpu
    spent = schedule.synth_time_s or 0.0
    timed = simulate(schedule)
    if not timed.verified:
        raise CcvizError(f"algorithm: {algorithm}'s schedule of every group together does not verify "
                         f"({timed.violations[0].message})", "algorithm")
    if progress is not None:
        progress(f"judging {len(runs)} groups together")
    synthesized = timed.schedule.transfers
    untimed = Schedule(topology, union, [Transfer(t.chunk, t.src, t.dst, None, None, t.op, t.start_s)
                                         for t in synthesized], f"{algorithm} (workload, joint)",
                       status="heuristic", notes=[*schedule.notes, JOINT])
    replayed = untimed.with_transfers(_together_times(untimed, synthesized))
    again = simulate(replayed)
    if again.verified and again.finish_time_s <= timed.finish_time_s:
        return replayed, spent, cpu
    return timed.schedule, spent, cpu  # the replay did not help: the schedule as synthesized


def _synthesized(topology: Topology, kind: str, index: int, ranks: tuple[int, ...], collective: Collective,
                 algorithm: str, options: SynthOptions | None, synthesis: str = "composed") -> GroupRun:
    """One group synthesized by ``algorithm`` over the whole fabric and judged alone (in a joint workload, a
    collective the algorithm has no entry for goes through the joint machinery, ``_alone_as_union``)."""
    from ccviz.judge.simulate import simulate

    started, cpu = time.perf_counter(), time.process_time()
    if synthesis == "joint" and not get_algorithm(algorithm).supports(collective.name):
        schedule = _alone_as_union(topology, collective, algorithm, options)
    else:
        schedule = synthesize(topology, collective, algorithm, options)
    spent = schedule.synth_time_s if schedule.synth_time_s is not None else time.perf_counter() - started
    cpu = time.process_time() - cpu
    alone = simulate(schedule)
    schedule, alone = members_only(schedule, alone)  # no data delivered where no member needs it
    if not alone.verified:
        raise CcvizError(f"algorithm: {algorithm}'s schedule for {kind} group {index} does not verify alone "
                         f"({alone.violations[0].message})", "algorithm")
    return GroupRun(kind, index, ranks, schedule.collective, alone.schedule, 0.0, spent, None,
                    finish_synthesized_s=_last_arrival(alone.schedule.transfers), synth_cpu_s=cpu)


def _relabeled(topology: Topology, kind: str, index: int, ranks: tuple[int, ...],
               representatives: Sequence[GroupRun]) -> tuple[GroupRun | None, float, float]:
    """The group's schedule as the image of a synthesized group's under a fabric symmetry taking that group's
    i-th rank to this group's i-th rank, judged alone by the simulator; None when no representative maps
    onto it or the judge refuses the image (the caller then synthesizes). Also the wall and CPU seconds
    spent searching and relabeling (counted as synthesis; the judging is not)."""
    from ccviz.judge.simulate import simulate
    from ccviz.model.relabel import group_automorphism, relabel_schedule

    wall = cpu = 0.0
    for rep in representatives:
        started, began = time.perf_counter(), time.process_time()
        mapping = group_automorphism(topology, rep.ranks, ranks)
        schedule = None if mapping is None else relabel_schedule(rep.schedule, mapping,
                                                                  f"relabeled from {rep.label} by a fabric symmetry")
        wall, cpu = wall + time.perf_counter() - started, cpu + time.process_time() - began
        if schedule is None:
            continue
        alone = simulate(schedule)
        if alone.verified:
            return GroupRun(kind, index, ranks, schedule.collective, alone.schedule, 0.0, wall, None,
                            finish_synthesized_s=_last_arrival(alone.schedule.transfers), relabeled_from=rep.label,
                            synth_cpu_s=cpu), wall, cpu
    return None, wall, cpu


def _last_arrival(transfers: Sequence[Transfer]) -> float:
    return max((t.end_s or 0.0 for t in transfers), default=0.0)


def common_chunk(runs: Sequence[GroupRun]) -> float:
    """The chunk size every group's chunks are cut into for one timeline (the smallest; the others must be
    whole multiples of it)."""
    unit = min(g.collective.chunk_bytes for g in runs)
    for g in runs:
        ratio = g.collective.chunk_bytes / unit
        if abs(ratio - round(ratio)) > 1e-6 * ratio:
            raise CcvizError(f"run: {g.label}'s chunks of {g.collective.chunk_bytes:g} B are not a whole number of "
                             f"the smallest group's {unit:g} B, so they cannot share one timeline; choose sizes "
                             "whose chunks divide each other", "run")
    return unit


def compose(topology: Topology, runs: Sequence[GroupRun], algorithm: str, unit: float | None = None) -> Schedule:
    """All groups' schedules as one schedule timed together (``_Retimer``; the simulator judges it).

    Chunk ids are shifted per group. A group whose chunks are k times ``unit`` (default: the smallest) has
    each chunk cut into k pieces of ``unit`` bytes that follow the chunk's hops one behind the other, as the
    chunk's bytes did alone; each link then serves pieces in the order their groups sent them alone.
    """
    unit = common_chunk(runs) if unit is None else unit
    from ccviz.model import footprint

    pieces = sum(len(g.schedule.transfers) * round(g.collective.chunk_bytes / unit) for g in runs)
    footprint.check_transfers(pieces, f"{len(runs)} group(s) cut into pieces of {unit:g} B (the smallest group's "
                                      "chunk) to share one timeline", "run")
    chunks: list[Chunk] = []
    transfers: list[Transfer] = []
    alone: list[Transfer] = []
    for g in runs:
        offset = len(chunks)
        k = round(g.collective.chunk_bytes / unit)
        for c in g.collective.chunks:
            chunks.extend(Chunk(offset + c.id * k + i, c.pre, c.post, c.reduce, c.source, c.index)
                          for i in range(k))
        pieces = _piece_times(topology, g.schedule.transfers, k, unit)
        for run in _relay_runs(g.schedule.transfers):
            for i in range(k):
                for j in run:
                    t = g.schedule.transfers[j]
                    start, end = pieces[j][i]
                    piece = offset + t.chunk * k + i
                    transfers.append(Transfer(piece, t.src, t.dst, None, None, t.op, start))
                    alone.append(Transfer(piece, t.src, t.dst, start, end, t.op, start))
    ranks = sorted({r for g in runs for r in g.ranks})
    collective = Collective("custom", tuple(ranks), tuple(chunks), unit,
                            max(g.collective.size_bytes for g in runs), 1, None,
                            {"workload": [g.label for g in runs]})
    untimed = Schedule(topology, collective, transfers, f"{algorithm} (workload)", status="heuristic",
                       notes=[COMPOSED])
    return untimed.with_transfers(_together_times(untimed, alone))


def _relay_runs(transfers: Sequence[Transfer]) -> list[list[int]]:
    """Transfer indices in list order, a relay kept with the transfers that carry its value on (the judge
    pairs a relay with the very next transfer, so each piece's relay and continuation stay adjacent)."""
    out: list[list[int]] = []
    j = 0
    while j < len(transfers):
        run = [j]
        while transfers[run[-1]].op == "relay" and run[-1] + 1 < len(transfers):
            run.append(run[-1] + 1)
        out.append(run)
        j = run[-1] + 1
    return out


def _piece_times(topology: Topology, transfers: Sequence[Transfer], k: int, unit: float
                 ) -> list[list[tuple[float, float]]]:
    """Alone times of each transfer's k pieces: one behind the other on its link from the transfer's start;
    out of a bufferless switch each piece leaves as its own piece lands (the switch rule)."""
    if k == 1:
        return [[(t.start_s or 0.0, t.end_s or 0.0)] for t in transfers]
    forwards = _switch_forwards(topology, transfers, transfers)
    feeder = {j: i for i, js in forwards.items() for j in js}
    out: list[list[tuple[float, float]]] = [[] for _ in transfers]
    for j in sorted(range(len(transfers)), key=lambda j: (transfers[j].start_s or 0.0, j)):
        t = transfers[j]
        busy = topology.occupancy(t.src, t.dst, unit)
        delay = topology.arrival_delay(t.src, t.dst, unit)
        if j in feeder and out[feeder[j]]:
            starts = [end for _, end in out[feeder[j]]]
        else:
            starts = [(t.start_s or 0.0) + i * busy for i in range(k)]
        out[j] = [(s, s + delay) for s in starts]
    return out


def _together_times(schedule: Schedule, alone: Sequence[Transfer]) -> list[Transfer]:
    """Times for every group at once (the simulator then judges them); see ``_Retimer``."""
    return _Retimer(schedule, alone).run()


TIE_S = 1e-12  # two alone times this close are one instant
AFTER_S = 1e-9  # how much later a value lands than a send it must miss


class _Retimer:
    """Every group's transfers, timed together on shared links, each keeping what it meant alone.

    A transfer is timed with the hops a bufferless switch forwards on arrival (one chain, as in
    ``ccviz.judge.simulate``) once everything it waited for alone is timed: its chunk's arrivals at its
    source that had landed when it started alone, and the relay it carries on. What it did *not* wait
    for alone must still miss it: a value landing at its source after it started alone (a partial sum,
    or a finished sum that would overwrite the partial it sends) is made to land after it starts
    together. Chains are timed in the order the groups start them alone, each in the first gap of its
    links that fits it.
    """

    def __init__(self, schedule: Schedule, alone: Sequence[Transfer]) -> None:
        from ccviz.judge.simulate import _chain, relay_continuations
        from ccviz.model.physics import link_costs

        self.transfers = transfers = schedule.transfers
        self.schedule_topology = schedule.topology
        self.alone = alone
        self.costs = link_costs(schedule.topology, schedule.chunk_bytes)
        self.forwards = _switch_forwards(schedule.topology, transfers, alone)
        fed = {j for js in self.forwards.values() for j in js}
        self.heads = [i for i in range(len(transfers)) if i not in fed]
        self.chain = {h: _chain(h, self.forwards, transfers, self.costs) for h in self.heads}
        self.head_of = {j: h for h in self.heads for j, _ in self.chain[h]}
        self.relayed_from = relay_continuations(transfers)
        reducing = {c.id for c in schedule.collective.chunks if c.reduce}
        gpus = set(schedule.topology.gpus)
        self.inbound: dict[tuple[int, int], list[int]] = defaultdict(list)
        outbound: dict[tuple[int, int], list[int]] = defaultdict(list)
        for j, t in enumerate(transfers):
            if t.op != "relay":
                self.inbound[(t.dst, t.chunk)].append(j)
            if t.src in gpus:
                outbound[(t.src, t.chunk)].append(j)
        self.misses: dict[int, list[tuple[int, float]]] = defaultdict(list)  # head -> (send, hop's offset+delay)
        for h in self.heads:
            for k, offset in self.chain[h]:
                t = transfers[k]
                if t.chunk not in reducing or t.op == "relay" or t.dst not in gpus:
                    continue
                landed = alone[k].end_s or 0.0
                for i in outbound.get((t.dst, t.chunk), ()):
                    if (alone[i].start_s or 0.0) < landed - TIE_S:
                        self.misses[h].append((i, offset + self.costs[(t.src, t.dst)].delay))

    def _fit(self, calendar, earliest: float, hops: list[tuple[tuple[int, int], float]]) -> float:
        """The first start from ``earliest`` at which every hop (link, offset from the chain's start) finds a
        lane free for its bytes (a gap left earlier will do)."""
        first, moved = earliest, True
        while moved:
            moved = False
            for key, offset in hops:
                lane, when = calendar.lane_free(key, first + offset, first + offset + self.costs[key].busy)
                if lane is None:
                    first, moved = when - offset, True
                    break
        return first

    def waits(self, h: int) -> set[int]:
        """Heads of the chains that must be timed before chain ``h``."""
        t, began = self.transfers[h], self.alone[h].start_s or 0.0
        out = {self.head_of[j] for j in self.inbound.get((t.src, t.chunk), ())
               if (self.alone[j].end_s or 0.0) <= began + TIE_S}
        if h in self.relayed_from:
            out.add(self.head_of[self.relayed_from[h]])
        out.update(self.head_of[i] for i, _ in self.misses.get(h, ()))
        out.discard(h)
        return out

    def run(self) -> list[Transfer]:
        import heapq

        from ccviz.judge.simulate import _parent
        from ccviz.model.paths import Calendar

        transfers, alone = self.transfers, self.alone
        waits = {h: self.waits(h) for h in self.heads}
        waiting_on: dict[int, list[int]] = defaultdict(list)
        for h, ws in waits.items():
            for w in ws:
                waiting_on[w].append(h)
        left = {h: len(ws) for h, ws in waits.items()}
        key = {h: (alone[h].start_s or 0.0, h) for h in self.heads}
        ready = [key[h] for h in self.heads if not left[h]]
        heapq.heapify(ready)
        pending = sorted(key[h] for h in self.heads if left[h])
        done: set[int] = set()
        calendar = Calendar(self.schedule_topology)
        start = [0.0] * len(transfers)
        arrival = [0.0] * len(transfers)
        while len(done) < len(self.heads):
            if ready:
                _, h = heapq.heappop(ready)
            else:  # a cycle of waits (not seen on real schedules): time the earliest alone and let the judge say
                h = next(k for _, k in pending if k not in done)
            if h in done:
                continue
            done.add(h)
            t = transfers[h]
            began = alone[h].start_s or 0.0
            earliest = max((arrival[j] for j in self.inbound.get((t.src, t.chunk), ())
                            if (alone[j].end_s or 0.0) <= began + TIE_S and self.head_of[j] in done), default=0.0)
            if h in self.relayed_from:
                earliest = max(earliest, arrival[self.relayed_from[h]])
            for i, lands_after in self.misses.get(h, ()):
                if self.head_of[i] in done:
                    earliest = max(earliest, start[i] - lands_after + AFTER_S)
            chain = self.chain[h]
            first = self._fit(calendar, earliest, [((transfers[j].src, transfers[j].dst), off) for j, off in chain])
            for j, _ in chain:
                u = transfers[j]
                s_j = first if j == h else arrival[_parent(j, chain, self.forwards)]
                cost = self.costs[(u.src, u.dst)]
                calendar.book((u.src, u.dst), s_j, s_j + cost.busy)
                start[j], arrival[j] = s_j, s_j + cost.delay
            for other in waiting_on.get(h, ()):
                left[other] -= 1
                if not left[other] and other not in done:
                    heapq.heappush(ready, key[other])
        return [Transfer(t.chunk, t.src, t.dst, start[j], arrival[j], t.op, t.step) for j, t in enumerate(transfers)]


def _switch_forwards(topology: Topology, transfers: Sequence[Transfer], alone: Sequence[Transfer]
                     ) -> dict[int, list[int]]:
    """Hop into a bufferless switch -> the hops forwarding it: alone, each left the moment it landed
    (``transfers`` the joint schedule's, ``alone`` the same transfers as timed alone)."""
    from ccviz.model.physics import tol

    bufferless = {n for n, node in topology.nodes.items() if node.is_switch and not node.buffer}
    landed: dict[tuple[int, int], list[int]] = defaultdict(list)
    for i, t in enumerate(transfers):
        if t.dst in bufferless:
            landed[(t.dst, t.chunk)].append(i)
    forwards: dict[int, list[int]] = defaultdict(list)
    used: set[int] = set()
    for j, t in enumerate(transfers):
        if t.src not in bufferless:
            continue
        left = alone[j].start_s or 0.0
        now = [i for i in landed.get((t.src, t.chunk), ()) if abs((alone[i].end_s or 0.0) - left) <= tol(left)]
        # the judge's rule: an arrival of this instant not forwarded yet, else (a copy) the latest of them
        feeder = next((i for i in now if i not in used), now[-1] if now and topology.nodes[t.src].copy else None)
        if feeder is not None:
            forwards[feeder].append(j)
            used.add(feeder)
    return forwards


# ------------------------------------------------------------------------- the YAML form
YAML_KEYS = ("topology", "parallel", "order", "run", "algorithm", "seed", "groups", "time_limit", "opt", "chunks",
             "synthesis", "relabel")


def read_workload_file(path: str | Path) -> dict[str, Any]:
    """A workload as YAML: the CLI's flags as keys (``groups``: an explicit rank map per kind), each of its type
    (a value of the wrong kind is one line naming the key, never ignored or an internal error)."""
    from ccviz.model.files import check_readable_file, parse_yaml, read_text_file

    p = Path(path)
    check_readable_file(p, "config")
    data = parse_yaml(read_text_file(p, "config"), p.name, "config")
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise CcvizError(f"config: {p.name} should hold a mapping of {', '.join(YAML_KEYS)}, got "
                         f"{type(data).__name__}", "config")
    unknown = sorted(set(map(str, data)) - set(YAML_KEYS))
    if unknown:
        raise CcvizError(f"config: unknown key(s) {unknown}; a workload file has {', '.join(YAML_KEYS)}", "config")
    for key, value in data.items():
        if value is not None:
            _check_config_value(key, value)
    return data


_CONFIG_TYPES: dict[str, tuple[tuple[type, ...], str]] = {
    "topology": ((str,), "a topology file or builder spec, e.g. ring:n=8"),
    "parallel": ((str, dict), "group sizes, e.g. tp=8,dp=4 or {tp: 8, dp: 4}"),
    "order": ((str,), "kinds innermost first, e.g. tp-dp, or random"),
    "run": ((str, list), "each kind's collective, e.g. tp:allreduce:64MB,dp:allreduce:256MB, or a list"),
    "algorithm": ((str,), "an algorithm name (see `ccviz list`)"),
    "seed": ((int,), "a whole number"),
    "groups": ((dict,), "a mapping of kind to its groups, e.g. {tp: [[0, 1], [2, 3]]}"),
    "time_limit": ((int, float), "seconds, a positive number"),
    "opt": ((dict,), "a mapping of an algorithm's own options, e.g. {restarts: 4}"),
    "chunks": ((int,), "a whole number >= 1"),
    "synthesis": ((str,), "composed or joint"),
    "relabel": ((bool,), "true or false"),
}


def _check_config_value(key: str, value: Any) -> None:
    if key not in _CONFIG_TYPES:  # a key added to YAML_KEYS without a type here is checked where it is used
        return
    types, what = _CONFIG_TYPES[key]
    wrong = not isinstance(value, types) or (isinstance(value, bool) and bool not in types)
    if not wrong and key == "time_limit" and not (math.isfinite(value) and value > 0):
        wrong = True
    if not wrong and key == "chunks" and value < 1:
        wrong = True
    if wrong:
        raise CcvizError(f"config: {key} should be {what}, got {value!r}", "config")
