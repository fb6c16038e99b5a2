"""Multi-dimensional NPU systems (TACOS, ASTRA-sim): each dimension a ring, fully connected, switch or mesh;
the 2D Switch and 3D Ring-FullyConnected-Switch systems are two of them."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

from ccviz.builders.fabric import DEFAULT_ALPHA, DEFAULT_BW, Fabric, exact_dims, per_dim, require
from ccviz.builders.layout import Position, tiled_grid_position, tiled_switch_position
from ccviz.builders.registry import builder
from ccviz.model.topology import Topology

DIMENSION_KINDS = ("ring", "fc", "switch", "mesh")


@builder("multidim")
def multidim(dims: tuple[int, ...] = (4, 4), kinds: tuple[str, ...] = ("ring", "switch"),
             bw: tuple[float, ...] = (DEFAULT_BW,), alpha: tuple[float, ...] = (DEFAULT_ALPHA,),
             copy: bool = True) -> Topology:
    """Multi-dimensional NPU system: each dimension a ring, fc (fully connected), switch or mesh.

    NPU ids count dimension 1 fastest (ASTRA-sim/TACOS convention); one switch joins the NPUs of
    each line along a ``switch`` dimension. kinds, bw and alpha are per dimension (one value: all).
    """
    dims = tuple(int(d) for d in dims)
    require(len(dims) >= 1 and all(d >= 1 for d in dims), "dims", f"dims must be positive sizes, got {dims}")
    require(math.prod(dims) >= 2, "dims", "the system needs at least two NPUs")
    kinds = tuple(kinds) * len(dims) if len(kinds) == 1 else tuple(kinds)
    require(len(kinds) == len(dims), "kinds",
            f"give one kind per dimension ({len(dims)}), e.g. kinds={'/'.join(DIMENSION_KINDS[:len(dims)])}")
    bad = [k for k in kinds if k not in DIMENSION_KINDS]
    require(not bad, "kinds", f"unknown dimension kind {bad[0] if bad else ''!r}; use {', '.join(DIMENSION_KINDS)}")
    system = DimensionalSystem(dims, per_dim(bw, len(dims), "bw"), per_dim(alpha, len(dims), "alpha"), copy)
    for axis, kind in enumerate(kinds):
        system.connect_dimension(axis, kind)
    system.fabric.place(system.positions())
    shape = "x".join(map(str, dims))
    return system.fabric.topology(f"multidim_{shape}", f"{len(dims)}D {'/'.join(kinds)} system {shape}", "multidim",
                                  meta={"dims": list(dims), "kinds": list(kinds)})


class DimensionalSystem:
    """NPUs on a multi-dimensional grid, wired one dimension at a time (ring, fc, switch or mesh)."""

    def __init__(self, dims: tuple[int, ...], bws: tuple[float, ...], alphas: tuple[float, ...], copy: bool) -> None:
        self.dims, self.bws, self.alphas, self.copy = dims, bws, alphas, copy
        self.fabric = Fabric()
        self.strides = [math.prod(dims[:a]) for a in range(len(dims))]
        self.hubs: list[tuple[int, int, int]] = []  # (switch, axis, first NPU of its line), for the drawing
        for _ in range(math.prod(dims)):
            self.fabric.add_gpu()

    def positions(self) -> dict[int, Position]:
        """NPUs tiled by their coordinates; each line's switch beside the line's first NPU."""
        positions = {npu: tiled_grid_position(self.dims, self.coords(npu)) for npu in range(math.prod(self.dims))}
        positions.update({hub: tiled_switch_position(self.dims, axis, self.coords(first))
                          for hub, axis, first in self.hubs})
        return positions

    def coords(self, npu: int) -> tuple[int, ...]:
        """The grid coordinates of NPU ``npu`` (dimension 1 counts fastest)."""
        return tuple((npu // s) % d for s, d in zip(self.strides, self.dims, strict=True))

    def npu(self, coords: Sequence[int]) -> int:
        """The NPU id at grid coordinates ``coords`` (the inverse of ``coords``)."""
        return sum(c * s for c, s in zip(coords, self.strides, strict=True))

    def lines(self, axis: int) -> list[list[int]]:
        """Every line of NPUs along ``axis`` (all other coordinates fixed), in coordinate order."""
        others = [range(d) if a != axis else range(1) for a, d in enumerate(self.dims)]
        result = []
        for base in itertools.product(*others):
            coords = list(base)
            result.append([self.npu(coords[:axis] + [i] + coords[axis + 1:]) for i in range(self.dims[axis])])
        return result

    def connect_dimension(self, axis: int, kind: str) -> None:
        """Wire every line along ``axis`` with the dimension's kind of fabric."""
        bw, alpha = self.bws[axis], self.alphas[axis]
        for members in self.lines(axis):
            if len(members) < 2:
                continue
            if kind == "switch":
                hub = self.fabric.add_switch(group=f"dim{axis + 1}", copy=self.copy)
                self.hubs.append((hub, axis, members[0]))
                for npu in members:
                    self.fabric.cable(npu, hub, bw, alpha)
            else:
                for u, v in self.pairs(kind, members):
                    self.fabric.cable(u, v, bw, alpha)

    @staticmethod
    def pairs(kind: str, members: list[int]) -> list[tuple[int, int]]:
        """The NPU pairs cabled along one line: neighbours (mesh), plus wrap-around (ring), or all (fc)."""
        if kind == "fc":
            return list(itertools.combinations(members, 2))
        chain = list(itertools.pairwise(members))
        if kind == "ring" and len(members) > 2:
            chain.append((members[-1], members[0]))
        return chain



@builder("switch2d")
def switch2d(dims: tuple[int, ...] = (4, 4), bw: tuple[float, ...] = (DEFAULT_BW,),
             alpha: tuple[float, ...] = (DEFAULT_ALPHA,), copy: bool = True) -> Topology:
    """TACOS 2D Switch: NPUs on a grid, one switch per row and one per column."""
    topo = multidim(exact_dims(dims, 2, "switch2d"), ("switch", "switch"), bw, alpha, copy)
    return _renamed(topo, f"switch2d_{'x'.join(map(str, dims))}",
                    f"2D switch {'x'.join(map(str, dims))}: a switch per row and per column")


@builder("rfs3d")
def rfs3d(dims: tuple[int, ...] = (2, 4, 16), bw: tuple[float, ...] = (200.0, 100.0, 50.0),
          alpha: tuple[float, ...] = (DEFAULT_ALPHA,), copy: bool = True) -> Topology:
    """TACOS 3D Ring-FullyConnected-Switch (default 2x4x16, 200/100/50 GB/s per dimension)."""
    topo = multidim(exact_dims(dims, 3, "rfs3d"), ("ring", "fc", "switch"), bw, alpha, copy)
    return _renamed(topo, f"rfs3d_{'x'.join(map(str, dims))}",
                    f"3D Ring-FullyConnected-Switch {'x'.join(map(str, dims))}")


def _renamed(topo: Topology, name: str, description: str) -> Topology:
    """A built system under the name and description of the family it is an instance of."""
    return Topology(name, topo.nodes.values(), topo.links.values(), description=description, layout=topo.layout,
                    meta=topo.meta, validate=False)
