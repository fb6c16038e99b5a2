"""GPU-only regular fabrics: ring, line, fully connected, hypercube, meshes and tori of any dimension."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from ccviz.builders.fabric import (
    DEFAULT_ALPHA,
    DEFAULT_BW,
    Fabric,
    bidirectional,
    exact_dims,
    gpu_nodes,
    per_dim,
    require,
)
from ccviz.builders.layout import circle_positions, grid_position, hypercube_position, ring_positions
from ccviz.builders.registry import builder
from ccviz.errors import CcvizError
from ccviz.model.topology import Link, Topology
from ccviz.model.validate import MAX_LINKS


@builder("ring")
def ring(n: int = 8, bw: float = DEFAULT_BW, alpha: float = DEFAULT_ALPHA, bidirectional: bool = True) -> Topology:
    """Ring of n GPUs (bidirectional by default; bidirectional=false for a one-way ring)."""
    if n < 2:
        raise CcvizError("topology: ring needs n >= 2", "n")
    pos = ring_positions(n)
    links = []
    for i in range(n):
        j = (i + 1) % n
        if n == 2 and i == 1 and bidirectional:
            break
        links.append(Link(i, j, bw, alpha))
        if bidirectional:
            links.append(Link(j, i, bw, alpha))
    kind = "bidirectional" if bidirectional else "unidirectional"
    return Topology(f"ring{n}", gpu_nodes(n, positions=pos), links, description=f"{kind} ring of {n} GPUs",
                    layout="ring")


@builder("line")
def line(n: int = 8, bw: float = DEFAULT_BW, alpha: float = DEFAULT_ALPHA) -> Topology:
    """A chain of n GPUs (bidirectional links, no wrap-around)."""
    links = [lk for i in range(n - 1) for lk in bidirectional(i, i + 1, bw, alpha)]
    return Topology(f"line{n}", gpu_nodes(n, positions=[(i, 0) for i in range(n)]), links,
                    description=f"line of {n} GPUs", layout="grid")


@builder("fully_connected", aliases=("fc", "clique"))
def fully_connected(n: int = 8, bw: float = DEFAULT_BW, alpha: float = DEFAULT_ALPHA) -> Topology:
    """n GPUs, a direct cable between every pair (the ideal all-to-all fabric)."""
    require(n >= 2, "n", f"fully_connected needs n >= 2 GPUs, got {n}")
    require(n * (n - 1) <= MAX_LINKS, "n", f"fully_connected:n={n} would need {n * (n - 1):.3g} links; "
            f"the limit is {MAX_LINKS:.3g}")
    fabric = Fabric()
    gpus = [fabric.add_gpu() for _ in range(n)]
    for u, v in itertools.combinations(gpus, 2):
        fabric.cable(u, v, bw, alpha)
    fabric.place(dict(zip(gpus, circle_positions(n), strict=True)))
    return fabric.topology(f"fully_connected{n}", f"{n} GPUs, every pair cabled directly", "circle")


@builder("hypercube")
def hypercube(n: int = 8, bw: tuple[float, ...] = (DEFAULT_BW,),
              alpha: tuple[float, ...] = (DEFAULT_ALPHA,)) -> Topology:
    """Binary hypercube of n = 2^k GPUs: i and j cabled when they differ in one bit (bw/alpha per bit)."""
    require(n >= 2 and n & (n - 1) == 0, "n", f"hypercube needs n = 2^k GPUs (2, 4, 8, 16, ...), got {n}")
    k = n.bit_length() - 1
    bws = per_dim(bw, k, "bw")
    alphas = per_dim(alpha, k, "alpha")
    fabric = Fabric()
    for _ in range(n):
        fabric.add_gpu()
    for i in range(n):
        for bit in range(k):
            j = i ^ (1 << bit)
            if i < j:
                fabric.cable(i, j, bws[bit], alphas[bit])
    fabric.place({i: hypercube_position(i, k) for i in range(n)})
    return fabric.topology(f"hypercube{n}", f"{k}-dimensional binary hypercube of {n} GPUs", "hypercube",
                           meta={"dims": [2] * k})


def grid(dims: Sequence[int], wrap: bool, bw: float | Sequence[float], alpha: float | Sequence[float],
         name: str) -> Topology:
    """Mesh (wrap=False) or torus (wrap=True) of any dimension, one GPU per grid point."""
    dims = tuple(int(d) for d in dims)
    if any(d < 1 for d in dims) or len(dims) == 0:
        raise CcvizError(f"topology: dims must be positive, got {'x'.join(map(str, dims))}", "dims")
    bws = per_dim(bw, len(dims), "bw")
    alphas = per_dim(alpha, len(dims), "alpha")
    coords = list(itertools.product(*(range(d) for d in dims)))
    index = {c: i for i, c in enumerate(coords)}
    links: dict[tuple[int, int], Link] = {}
    for c in coords:
        for axis, size in enumerate(dims):
            if size < 2:
                continue
            nxt = list(c)
            nxt[axis] += 1
            if nxt[axis] == size:
                if not wrap or size == 2:
                    continue
                nxt[axis] = 0
            u, v = index[c], index[tuple(nxt)]
            for lk in bidirectional(u, v, bws[axis], alphas[axis]):
                links[(lk.src, lk.dst)] = lk
    positions = [grid_position(c) for c in coords]
    nodes = gpu_nodes(len(coords), positions=positions)
    shape = "x".join(map(str, dims))
    kind = "torus" if wrap else "mesh"
    return Topology(f"{name}_{shape}", nodes, links.values(), description=f"{len(dims)}D {kind} {shape}",
                    layout=f"grid{len(dims)}d", meta={"dims": list(dims), "wrap": wrap})


@builder("mesh2d")
def mesh2d(dims: tuple[int, ...] = (4, 4), bw: tuple[float, ...] = (DEFAULT_BW,),
           alpha: tuple[float, ...] = (DEFAULT_ALPHA,)) -> Topology:
    """2D mesh (no wrap-around)."""
    return grid(exact_dims(dims, 2, "mesh2d"), False, bw, alpha, "mesh2d")


@builder("mesh3d", aliases=("hypercube3d",))
def mesh3d(dims: tuple[int, ...] = (4, 4, 4), bw: tuple[float, ...] = (DEFAULT_BW,),
           alpha: tuple[float, ...] = (DEFAULT_ALPHA,)) -> Topology:
    """3D mesh (no wrap-around); TACOS's '3D hypercube'."""
    return grid(exact_dims(dims, 3, "mesh3d"), False, bw, alpha, "mesh3d")


@builder("torus2d")
def torus2d(dims: tuple[int, ...] = (4, 4), bw: tuple[float, ...] = (DEFAULT_BW,),
            alpha: tuple[float, ...] = (DEFAULT_ALPHA,)) -> Topology:
    """2D torus (wrap-around in both dimensions)."""
    return grid(exact_dims(dims, 2, "torus2d"), True, bw, alpha, "torus2d")


@builder("torus3d")
def torus3d(dims: tuple[int, ...] = (4, 4, 4), bw: tuple[float, ...] = (DEFAULT_BW,),
            alpha: tuple[float, ...] = (DEFAULT_ALPHA,)) -> Topology:
    """3D torus (wrap-around in all three dimensions)."""
    return grid(exact_dims(dims, 3, "torus3d"), True, bw, alpha, "torus3d")
