"""Dimension-decomposed collectives on tori, meshes, hypercubes and multi-dimensional systems.

Chan et al.'s dimension-ordered schedule (Collectives Explainer 02 section 3, App. A): AllReduce is a
reduce-scatter along each dimension in turn (the data shrinks by d_i each time), then all-gathers in the opposite
order, so the rounds are 2 sum(d_i - 1) instead of 2(N - 1) while every byte still crosses 2(N-1)/N M. The grid is
read from the fabric the builder made (``dims`` of a torus/mesh/hypercube, ``dims``/``kinds`` of ``multidim``).
"""

from __future__ import annotations

import itertools
import math

from ccviz.errors import CcvizError
from ccviz.model.collectives import Collective
from ccviz.model.schedule import Schedule
from ccviz.model.topology import Topology
from ccviz.synth.phased import Dimension, phased_schedule
from ccviz.synth.registry import SynthOptions


def grid_coordinates(topology: Topology) -> tuple[list[int], dict[int, tuple[int, ...]]]:
    """(dims, GPU -> coordinates) of a fabric built on a grid, or a one-line refusal."""
    dims = topology.meta.get("dims") if isinstance(topology.meta, dict) else None
    gpus = topology.gpus
    if not dims and (topology.layout == "ring" or topology.name == f"line{len(gpus)}"):
        dims = [len(gpus)]  # a ring or a line is a one-dimensional torus or mesh
    if not dims or math.prod(dims) != len(gpus):
        raise CcvizError(f"topology: dimdecomp needs a grid fabric (torus, mesh, hypercube or multidim); "
                         f"{topology.name!r} has no grid dimensions; use ring, hierarchical or pat", "topology")
    dims = [int(d) for d in dims]
    if "kinds" in topology.meta:  # multidim: dimension 1 counts fastest
        strides = [math.prod(dims[:a]) for a in range(len(dims))]
        coords = {g: tuple((i // s) % d for s, d in zip(strides, dims, strict=True)) for i, g in enumerate(gpus)}
    else:  # grid builders and the hypercube: itertools.product order, the last dimension fastest
        coords = dict(zip(gpus, itertools.product(*(range(d) for d in dims)), strict=True))
    return dims, coords


def grid_dimensions(topology: Topology, method: str) -> list[Dimension]:
    """One ``Dimension`` per grid axis longer than 1, its lines in coordinate order."""
    dims, coords = grid_coordinates(topology)
    at = {c: g for g, c in coords.items()}
    out = []
    for axis, size in enumerate(dims):
        if size < 2:
            continue
        lines = []
        for base in itertools.product(*(range(d) if a != axis else range(1) for a, d in enumerate(dims))):
            lines.append(tuple(at[base[:axis] + (i,) + base[axis + 1:]] for i in range(size)))
        out.append(Dimension(f"dimension {axis + 1}", tuple(lines), method))
    return out


def synthesize(topology: Topology, collective: Collective, options: SynthOptions) -> Schedule:
    from ccviz.synth.composed_catalog import DimdecompOptions

    settings = options.settings(DimdecompOptions)
    if tuple(collective.ranks) != tuple(topology.gpus):
        raise CcvizError("ranks: dimdecomp runs over every GPU of the grid", "ranks")
    dims = grid_dimensions(topology, settings.per_dim)
    notes = [f"dimension-decomposed {collective.name}: {' x '.join(str(d.size) for d in dims)} grid, "
             f"{settings.per_dim} in every line"]
    halves = [d for d in dims if d.method == "ring" and d.size > 2 and d.size % 2 == 0]
    if collective.name == "alltoall" and halves and collective.chunks_per_rank * collective.n_ranks // \
            halves[0].size % 2:
        notes.append("an odd number of blocks goes half-way round each ring: they cannot split evenly between the "
                     "two directions in lockstep rounds, so this runs above sum(d_i/8) M/BW (--chunks 2 splits them)")
    return phased_schedule(topology, collective, dims, "dimdecomp", notes, synchronous=settings.sync)
