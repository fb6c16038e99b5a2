"""One synthesis of a whole workload: every process group's chunks in one run of one algorithm.

The demand is ``model.workload_demand.union_collective`` (every group's chunks with their own pre- and
postconditions). It is built the way the shared frame builds an AllReduce (``synth/common.py``): the
reducing chunks are summed into their owners first (a ReduceScatter-union: the mirrored copy demand on
the reversed fabric, reversed in time), then every copy runs (the AllGather-union: the sums out to their
groups, and the copy groups' chunks: AllGather, AllToAll). So TACOS matches all groups' chunks on one set
of link calendars, MTEG grows all groups' trees on one set of slot calendars, and TE-CCL solves all groups
as one multi-commodity problem per half. Copy groups of a workload that also reduces start with the
second half (the reversal cannot interleave a copy with a reduction).
"""

from __future__ import annotations

import time
from dataclasses import replace

from ccviz.bounds.solver_output import solver_output_to_stderr
from ccviz.errors import CcvizError
from ccviz.model.collectives import Collective
from ccviz.model.groups import needs_relays
from ccviz.model.routing import earliest_arrivals
from ccviz.model.schedule import Schedule
from ccviz.model.topology import Topology
from ccviz.synth.common import Forward, ReversalSynthesizer
from ccviz.synth.registry import Algorithm, SynthOptions, get_algorithm
from ccviz.synth.reversal import onto, split_demand
from ccviz.synth.tacos import Tacos

JOINT_ALGORITHMS = ("tacos", "mteg", "teccl", "teccl-astar")
RELAY_PENALTY = 1000.0  # hops a route would rather take than cross one more GPU outside the group


class RelayingTacos(Tacos):
    """TACOS over a union whose groups reach their own members only through other groups' GPUs.

    TACOS moves a chunk only through ranks that want it (one group alone runs on a fabric whose other GPUs
    are relays, ``model.groups.relay_fabric``; in a union every GPU is some group's member). So each chunk
    is also asked of the GPUs its group's routes cross (``relay_gpus``): a copy there is harmless, and a
    reduction's reversal drops the branches ending there (``reversal._without_dead_ends``).
    """

    def copy(self, topology: Topology, collective: Collective, *, mirrored_from: Topology | None = None,
             start_s: float = 0.0) -> Forward:
        return super().copy(topology, with_relays(topology, collective), mirrored_from=mirrored_from,
                            start_s=start_s)


def relay_gpus(topology: Topology, sources: frozenset[int], targets: frozenset[int]) -> frozenset[int]:
    """GPUs outside ``sources`` and ``targets`` that the fewest-relay routes from the sources to the targets
    cross (none when the ranks reach each other through switches and themselves)."""
    members = sources | targets
    if not needs_relays(topology, sorted(members)):
        return frozenset()
    outside = set(topology.gpus) - members
    weight = {(u, v): 1.0 + (RELAY_PENALTY if v in outside else 0.0) for u, v in topology.links}
    out: set[int] = set()
    for a in sources:
        parents: dict[int, int] = {}
        earliest_arrivals(topology, {a: 0.0}, weight, parents=parents)
        for b in targets - sources:
            n = b
            while n in parents and n != a:
                n = parents[n]
                if n in outside:
                    out.add(n)
    return frozenset(out)


def with_relays(topology: Topology, collective: Collective) -> Collective:
    """The copy demand with each chunk also asked of the relays on its routes from its holders."""
    relays: dict[tuple[frozenset[int], frozenset[int]], frozenset[int]] = {}
    chunks = []
    for c in collective.chunks:
        key = (c.pre, c.post)
        if key not in relays:
            relays[key] = relay_gpus(topology, c.pre, c.post)
        chunks.append(replace(c, post=c.post | relays[key]) if relays[key] else c)
    if not any(relays.values()):
        return collective
    return replace(collective, chunks=tuple(chunks))


def joint_synthesizer(topology: Topology, union: Collective, algorithm: str,
                      options: SynthOptions) -> ReversalSynthesizer:
    """The algorithm's copy core in the shared frame, set up for the union (its options already typed)."""
    if algorithm == "tacos":
        return RelayingTacos(topology, union, options)
    if algorithm == "mteg":
        from ccviz.synth.mteg import Mteg

        return Mteg(topology, union, options)
    from ccviz.synth.catalog import TecclAstarOptions, TecclOptions
    from ccviz.synth.teccl.frame import Teccl
    from ccviz.synth.teccl.synthesizer import DEFAULT_TIME_LIMIT_S

    if algorithm == "teccl-astar":
        from ccviz.synth.teccl.astar import solve_astar as solver
        kind: type[TecclOptions] = TecclAstarOptions
    else:
        from ccviz.synth.teccl.synthesizer import solve_copy_or_flow as solver
        kind = TecclOptions
    settings = options.settings(kind)
    return Teccl(topology, union, replace(options, algorithm_options=settings), solver, settings.replay,
                 DEFAULT_TIME_LIMIT_S)


def check_joint_algorithm(algorithm: str) -> Algorithm:
    """The registered algorithm, if it can synthesize a union of groups; else one line naming those that can."""
    alg = get_algorithm(algorithm)
    if alg.name not in JOINT_ALGORITHMS:
        raise CcvizError(f"algorithm: {alg.name} synthesizes one collective at a time; groups synthesized together "
                         f"(--synthesis joint) take {', '.join(JOINT_ALGORITHMS)}, or use --synthesis composed",
                         "algorithm")
    return alg


def synthesize_joint(topology: Topology, union: Collective, algorithm: str,
                     options: SynthOptions | None = None) -> Schedule:
    """Every group's chunks synthesized in one run of ``algorithm`` (one of ``JOINT_ALGORITHMS``)."""
    alg = check_joint_algorithm(algorithm)
    options = options or SynthOptions()
    extra = alg.options.checked(options.extra, alg.name)
    options = replace(options, extra=extra, algorithm_options=alg.options(**extra))
    started = time.perf_counter()
    with solver_output_to_stderr():
        syn = joint_synthesizer(topology, union, alg.name, options)
        reductions, copies = split_demand(union)
        if not reductions.chunks:
            schedule = onto(syn.copy_only(topology, union), union)  # judged on the union's own demand
        elif not copies.chunks:
            schedule = onto(syn.reduction(topology, reductions), union)
        else:
            schedule = syn.allreduce(topology, union, split=split_demand)
    schedule.synth_time_s = time.perf_counter() - started
    schedule.algorithm = alg.name
    schedule.options = {**options.public(), **schedule.options}
    schedule.notes.append(f"{alg.name} over every group's chunks at once: reductions into their owners first "
                          "(one reversed copy problem), then every copy (one copy problem)")
    return schedule
