"""Topology builders: plain functions returning a ``Topology`` (networkx style), one module per family.

Each builder is registered under the name used in a builder spec
(``torus2d:dims=4x4,bw=50,alpha=0.5``); its keyword parameters, with their
type hints, define what the spec accepts. Per-dimension (or per link class)
values are written with ``/`` (``bw=200/100/50``); a single value applies to
every dimension or class. Paper defaults: alpha 0.5 us, 50 GB/s (TACOS); the
vendor systems (``dgx1``, ``ndv2``, ``dgx2``, ``amd``) use the TE-CCL values
and are link-for-link equal to the TE-CCL paper's published files (copies in ``tests/fixtures/reference_topologies/``).

Every builder sets node ``group`` (chassis, pod, ...), ``pos`` (a 2D drawing
position) and a ``layout`` hint (``ring``, ``circle``, ``grid``, ``grid2d``,
``grid3d``, ``star``, ``hypercube``, ``tree``, ``dragonfly``, ``multidim``,
``chassis``) so that front ends can draw any built topology without guessing.

Where things are: ``registry`` (``@builder``, ``build(spec)``), ``fabric`` (``Fabric`` and the shared
parameter helpers), ``layout`` (drawing positions), and the families ``grids`` (ring, line, fully
connected, hypercube, meshes, tori), ``switched`` (star, fat-tree, leaf-spine, dragonfly),
``dimensional`` (TACOS's multi-dimensional systems), ``systems`` (DGX-1, NDv2, DGX-2, A100, AMD) and
``modern`` (DGX H100, GB200 NVL72, rail-optimized Clos, with switches that reduce in the network).
The families are imported here in that order, which is the order ``ccviz list`` shows.
"""

from ccviz.builders.registry import ALIASES, BUILDERS, COMMON_KEYS, Builder, build, builder, get_builder  # isort: split

from ccviz.builders.grids import (  # isort: split
    fully_connected,
    grid,
    hypercube,
    line,
    mesh2d,
    mesh3d,
    ring,
    torus2d,
    torus3d,
)

from ccviz.builders.switched import dragonfly, fattree, leafspine, star  # isort: split

from ccviz.builders.dimensional import multidim, rfs3d, switch2d  # isort: split

from ccviz.builders.systems import a100, amd, dgx1, dgx2, ndv2  # isort: split

from ccviz.builders.modern import railclos  # isort: split

from ccviz.builders.presets import dgxa100, dgxh100, hgxb200, hgxh200, mi300x, nvl72
from ccviz.builders.teaching_clos import leiserson, superpod  # isort: split

__all__ = [
    "ALIASES", "BUILDERS", "COMMON_KEYS", "Builder", "a100", "amd", "build", "builder", "dgx1", "dgx2", "dragonfly",
    "dgxa100", "dgxh100", "hgxb200", "hgxh200", "mi300x", "fattree", "fully_connected", "get_builder", "grid",
    "hypercube", "leafspine", "leiserson", "line", "mesh2d", "mesh3d", "multidim", "ndv2", "nvl72", "railclos",
    "rfs3d", "ring", "star", "superpod", "switch2d", "torus2d", "torus3d",
]
