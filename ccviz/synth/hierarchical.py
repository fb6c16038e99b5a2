"""Two-tier hierarchical collectives (Collectives Explainer 03 section 2, 00 section 6).

AllReduce is inner reduce-scatter -> outer sub-AllReduce of the telescoped M L / N between the GPUs of equal local
index -> inner all-gather, so the slow outer tier carries 1/n of the buffer. The other forms follow the reference's
table: AllGather inner -> outer, ReduceScatter outer -> inner, Broadcast outer -> inner, Reduce inner -> outer,
AllToAll inner exchange then outer exchange. Inner groups are the GPUs the fabric's fast links join (see
``infer_groups``) or ``group_size`` consecutive ranks.
"""

from __future__ import annotations

from collections import defaultdict

from ccviz.errors import CcvizError
from ccviz.model.collectives import Collective
from ccviz.model.routing import _hamiltonian_cycle, neighbour_gpus
from ccviz.model.schedule import Schedule
from ccviz.model.topology import Topology
from ccviz.synth.phased import Dimension, phased_schedule
from ccviz.synth.registry import SynthOptions

# (reduce order, gather order) over (inner = 0, outer = 1)
PHASE_ORDER = {
    "allreduce": ([0, 1], [1, 0]),
    "allgather": ([], [0, 1]),
    "reducescatter": ([1, 0], []),
    "broadcast": ([], [1, 0]),
    "reduce": ([0, 1], []),
    "alltoall": ([0, 1], []),
}


def _components(topology: Topology, keep) -> list[list[int]]:
    """GPU sets joined by the links ``keep`` accepts (through switches too)."""
    parent = {n: n for n in topology.nodes}

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for (u, v), link in topology.links.items():
        if keep(link):
            parent[find(u)] = find(v)
    groups: dict[int, list[int]] = defaultdict(list)
    for g in topology.gpus:
        groups[find(g)].append(g)
    return sorted((sorted(m) for m in groups.values()), key=lambda m: m[0])


def _tiered(groups: list[list[int]]) -> bool:
    return len(groups) >= 2 and len({len(m) for m in groups}) == 1 and len(groups[0]) >= 2


def infer_groups(topology: Topology) -> tuple[list[list[int]], str]:
    """Inner groups: the GPUs still joined when the slowest link classes are dropped (NVLink chassis behind NICs),
    else the GPUs under one switch when switch-to-switch links are dropped (leaf-spine, fat-tree), else a
    multidim system's first dimension, else a grid's rows or planes."""
    speeds = sorted({link.bandwidth_GBps for link in topology.links.values()})
    for slow in speeds[:-1]:
        groups = _components(topology, lambda link, slow=slow: link.bandwidth_GBps > slow)
        if _tiered(groups):
            return groups, f"GPUs joined by links faster than {slow:g} GB/s"
    nodes = topology.nodes
    groups = _components(topology, lambda link: not (nodes[link.src].is_switch and nodes[link.dst].is_switch))
    if _tiered(groups):
        return groups, "GPUs under one switch (switch-to-switch links are the outer tier)"
    dims = topology.meta.get("dims")
    gpus = topology.gpus
    if dims and len(dims) >= 2 and dims[0] >= 2 and "kinds" in topology.meta:
        return [gpus[i:i + dims[0]] for i in range(0, len(gpus), dims[0])], "the system's first dimension"
    if dims and len(dims) >= 2 and dims[0] >= 2 and len(gpus) % dims[0] == 0:  # a torus, mesh or hypercube
        size = len(gpus) // dims[0]
        return ([gpus[i:i + size] for i in range(0, len(gpus), size)],
                "the grid's GPUs sharing their first coordinate (a row of a 2D grid, a plane of a 3D one)")
    raise CcvizError(f"topology: hierarchical found no tiers in {topology.name!r} (one link class, no switch "
                     "tiers); give --opt group_size=K", "topology")


def ordered_group(topology: Topology, members: list[int], chunk_bytes: float) -> list[int]:
    """The group's GPUs as a cycle of neighbours when one is found cheaply, else in rank order."""
    adjacency = neighbour_gpus(topology, chunk_bytes)
    inside = set(members)
    adj = {g: {v: t for v, t in adjacency.get(g, {}).items() if v in inside} for g in members}
    return _hamiltonian_cycle(members, adj, 5000) or list(members)


def tiers(topology: Topology, collective: Collective, group_size: int | None, inner: str, outer: str
          ) -> tuple[list[Dimension], str]:
    """(inner dimension, outer dimension) and how the groups were found."""
    gpus = list(collective.ranks)
    if group_size is not None:
        if len(gpus) % group_size or group_size >= len(gpus):
            fits = [k for k in range(2, len(gpus)) if len(gpus) % k == 0]
            raise CcvizError(f"group_size: {group_size} does not split the {len(gpus)} GPUs into 2 or more equal "
                             f"groups; give one of {', '.join(map(str, fits)) or 'none (too few GPUs)'}, or leave "
                             "it automatic (the tiers found from the links)", "group_size")
        groups = [gpus[i:i + group_size] for i in range(0, len(gpus), group_size)]
        how = f"groups of {group_size} consecutive ranks"
    else:
        groups, how = infer_groups(topology)
    for name, method, size in (("inner", inner, len(groups[0])), ("outer", outer, len(groups))):
        if method == "rhd" and size & (size - 1):
            raise CcvizError(f"{name}: rhd needs a power-of-two number of ranks, the {name} tier has {size}; use ring",
                             name)
    lines = [tuple(ordered_group(topology, g, collective.chunk_bytes)) for g in groups]
    outer_lines = tuple(tuple(line[i] for line in lines) for i in range(len(lines[0])))
    return [Dimension("the inner tier", tuple(lines), inner), Dimension("the outer tier", outer_lines, outer)], how


def synthesize(topology: Topology, collective: Collective, options: SynthOptions) -> Schedule:
    from ccviz.synth.composed_catalog import HierarchicalOptions

    settings = options.settings(HierarchicalOptions)
    if tuple(collective.ranks) != tuple(topology.gpus):
        raise CcvizError("ranks: hierarchical runs over every GPU of the fabric", "ranks")
    dims, how = tiers(topology, collective, settings.group_size, settings.inner, settings.outer)
    reduce_order, gather_order = PHASE_ORDER[collective.name]
    n, groups = dims[0].size, dims[1].size
    notes = [f"hierarchical {collective.name}: {groups} groups of {n} ({how}); inner {settings.inner}, "
             f"outer {settings.outer}"]
    return phased_schedule(topology, collective, dims, "hierarchical", notes, reduce_order, gather_order,
                           synchronous=settings.sync)
