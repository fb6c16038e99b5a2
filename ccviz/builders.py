"""Topology builders: plain functions returning a ``Topology`` (networkx style).

Each builder is registered under the name used in a builder spec
(``torus2d:dims=4x4,bw=50,alpha=0.5``); its keyword parameters, with their
type hints, define what the spec accepts. Per-dimension values are written
with ``/`` (``bw=200/100/50``). Paper defaults: alpha 0.5 us, 50 GB/s (TACOS).
"""

from __future__ import annotations

import inspect
import itertools
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ccviz.errors import CcvizError
from ccviz.topology import Link, Node, Topology

DEFAULT_BW = 50.0
DEFAULT_ALPHA = 0.5


@dataclass(frozen=True)
class Builder:
    name: str
    function: Callable[..., Topology]
    summary: str
    aliases: tuple[str, ...] = ()

    @property
    def parameters(self) -> dict[str, inspect.Parameter]:
        return dict(inspect.signature(self.function).parameters)

    def signature_text(self) -> str:
        parts = []
        for name, p in self.parameters.items():
            default = p.default
            if isinstance(default, tuple):
                default = "x".join(str(d) for d in default) if name == "dims" else "/".join(f"{d:g}" for d in default)
            parts.append(f"{name}={default}")
        return ",".join(parts)


BUILDERS: dict[str, Builder] = {}
ALIASES: dict[str, str] = {}


def builder(name: str, aliases: Sequence[str] = ()) -> Callable[[Callable[..., Topology]], Callable[..., Topology]]:
    """Register a builder function under ``name`` (and aliases) for specs, listings and the app."""

    def wrap(fn: Callable[..., Topology]) -> Callable[..., Topology]:
        summary = (fn.__doc__ or "").strip().splitlines()[0] if fn.__doc__ else name
        BUILDERS[name] = Builder(name, fn, summary, tuple(aliases))
        for alias in aliases:
            ALIASES[alias] = name
        return fn

    return wrap


def get_builder(name: str) -> Builder:
    key = ALIASES.get(name.strip().lower(), name.strip().lower())
    if key not in BUILDERS:
        raise CcvizError(
            f"topology: unknown builder {name!r}; choose one of {', '.join(sorted(BUILDERS))} or give a file path",
            "topology",
        )
    return BUILDERS[key]


def build(spec: str) -> Topology:
    """Build a topology from ``name[:key=value,...]``."""
    name, _, arg_text = spec.partition(":")
    b = get_builder(name)
    params = b.parameters
    hints = typing.get_type_hints(b.function)
    kwargs: dict[str, object] = {}
    for item in filter(None, (s.strip() for s in arg_text.split(","))):
        key, eq, value = item.partition("=")
        key = key.strip()
        if not eq:
            raise CcvizError(f"topology: {item!r} in {spec!r} should be key=value", "topology")
        if key not in params:
            raise CcvizError(
                f"topology: builder {b.name!r} has no parameter {key!r}; it takes {b.signature_text()}", "topology"
            )
        kwargs[key] = _convert(value.strip(), hints.get(key, str), key, b.name)
    try:
        return b.function(**kwargs)
    except CcvizError:
        raise
    except (TypeError, ValueError) as exc:
        raise CcvizError(f"topology: {b.name}: {exc}", "topology") from None


def _convert(value: str, hint: object, key: str, builder_name: str) -> object:
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    try:
        if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
            hint = next(a for a in args if a is not type(None))
            origin, args = typing.get_origin(hint), typing.get_args(hint)
        if origin is tuple:
            elem = args[0] if args else float
            parts = value.replace("/", "x").split("x") if key == "dims" else value.split("/")
            return tuple(elem(p) for p in parts if p)
        if hint is bool:
            if value.lower() in ("1", "true", "yes", "on"):
                return True
            if value.lower() in ("0", "false", "no", "off"):
                return False
            raise ValueError(value)
        if hint in (int, float, str):
            return hint(value)
        return value
    except (ValueError, StopIteration):
        raise CcvizError(f"topology: {builder_name}: cannot read {key}={value!r}", "topology") from None


def per_dim(value: float | Sequence[float], ndims: int, key: str) -> tuple[float, ...]:
    """Broadcast a scalar to every dimension, or check a per-dimension tuple has the right length."""
    if isinstance(value, (int, float)):
        return (float(value),) * ndims
    values = tuple(float(v) for v in value)
    if len(values) == 1:
        return values * ndims
    if len(values) != ndims:
        raise CcvizError(f"topology: {key} has {len(values)} values for {ndims} dimensions", key)
    return values


def bidirectional(u: int, v: int, bw: float, alpha: float) -> list[Link]:
    """A full-duplex cable: one link each way."""
    return [Link(u, v, bw, alpha), Link(v, u, bw, alpha)]


def gpu_nodes(n: int, start: int = 0, group: str | None = None, positions=None) -> list[Node]:
    return [
        Node(start + i, "gpu", label=f"GPU{start + i}", group=group, pos=positions[i] if positions else None)
        for i in range(n)
    ]


# ------------------------------------------------------------------- builders
@builder("ring")
def ring(n: int = 8, bw: float = DEFAULT_BW, alpha: float = DEFAULT_ALPHA, bidirectional: bool = True) -> Topology:
    """Ring of n GPUs (bidirectional by default; bidirectional=false for a one-way ring)."""
    import math

    if n < 2:
        raise CcvizError("topology: ring needs n >= 2", "n")
    pos = [(math.cos(2 * math.pi * i / n), math.sin(2 * math.pi * i / n)) for i in range(n)]
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
    positions = [_grid_pos(c) for c in coords]
    nodes = gpu_nodes(len(coords), positions=positions)
    shape = "x".join(map(str, dims))
    kind = "torus" if wrap else "mesh"
    return Topology(f"{name}_{shape}", nodes, links.values(), description=f"{len(dims)}D {kind} {shape}",
                    layout=f"grid{len(dims)}d", meta={"dims": list(dims), "wrap": wrap})


def _grid_pos(c: tuple[int, ...]) -> tuple[float, float]:
    """2D drawing position from the first two axes; a third axis becomes an oblique offset."""
    x = float(c[0])
    y = float(c[1]) if len(c) > 1 else 0.0
    if len(c) > 2:
        x += 0.3 * c[2]
        y += 0.2 * c[2]
    return (x, -y)


@builder("mesh2d")
def mesh2d(dims: tuple[int, ...] = (4, 4), bw: tuple[float, ...] = (DEFAULT_BW,),
           alpha: tuple[float, ...] = (DEFAULT_ALPHA,)) -> Topology:
    """2D mesh (no wrap-around)."""
    return grid(_ndims(dims, 2, "mesh2d"), False, bw, alpha, "mesh2d")


@builder("mesh3d", aliases=("hypercube3d",))
def mesh3d(dims: tuple[int, ...] = (4, 4, 4), bw: tuple[float, ...] = (DEFAULT_BW,),
           alpha: tuple[float, ...] = (DEFAULT_ALPHA,)) -> Topology:
    """3D mesh (no wrap-around); TACOS's '3D hypercube'."""
    return grid(_ndims(dims, 3, "mesh3d"), False, bw, alpha, "mesh3d")


@builder("torus2d")
def torus2d(dims: tuple[int, ...] = (4, 4), bw: tuple[float, ...] = (DEFAULT_BW,),
            alpha: tuple[float, ...] = (DEFAULT_ALPHA,)) -> Topology:
    """2D torus (wrap-around in both dimensions)."""
    return grid(_ndims(dims, 2, "torus2d"), True, bw, alpha, "torus2d")


@builder("torus3d")
def torus3d(dims: tuple[int, ...] = (4, 4, 4), bw: tuple[float, ...] = (DEFAULT_BW,),
            alpha: tuple[float, ...] = (DEFAULT_ALPHA,)) -> Topology:
    """3D torus (wrap-around in all three dimensions)."""
    return grid(_ndims(dims, 3, "torus3d"), True, bw, alpha, "torus3d")


def _ndims(dims: Sequence[int], n: int, name: str) -> tuple[int, ...]:
    if len(dims) != n:
        raise CcvizError(f"topology: {name} needs dims with {n} sizes such as {'x'.join(['4'] * n)}", "dims")
    return tuple(dims)
