"""Topology builders: plain functions returning a ``Topology`` (networkx style).

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
"""

from __future__ import annotations

import inspect
import itertools
import math
import types
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ccviz.errors import CcvizError
from ccviz.topology import Link, Node, Topology
from ccviz.validate import MAX_LINKS, check_node_count

DEFAULT_BW = 50.0
DEFAULT_ALPHA = 0.5

Position = tuple[float, float]


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
        return ",".join(f"{name}={_format_default(name, p.default)}" for name, p in self.parameters.items())


def _format_default(name: str, default: object) -> str:
    """A default written the way a spec would write it (dims 4x4, bw 200/100/50, flags true/false)."""
    if isinstance(default, tuple):
        sep = "x" if name == "dims" else "/"
        return sep.join(f"{d:g}" if isinstance(d, float) else str(d) for d in default)
    if isinstance(default, bool) or default is None:
        return str(default).lower()
    if isinstance(default, float):
        return f"{default:g}"
    return str(default)


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


COMMON_KEYS = "switch_hop=paid|teccl|free"  # accepted by every builder (see ccviz.topology.SWITCH_HOPS)


def build(spec: str) -> Topology:
    """Build a topology from ``name[:key=value,...]``; ``switch_hop=`` works with every builder."""
    name, _, arg_text = spec.partition(":")
    b = get_builder(name)
    params = b.parameters
    hints = typing.get_type_hints(b.function)
    kwargs: dict[str, object] = {}
    switch_hop: str | None = None
    for item in filter(None, (s.strip() for s in arg_text.split(","))):
        key, eq, value = item.partition("=")
        key = key.strip()
        if not eq:
            raise CcvizError(f"topology: {item!r} in {spec!r} should be key=value", "topology")
        if key == "switch_hop":
            switch_hop = value.strip().lower()
            continue
        if key not in params:
            raise CcvizError(
                f"topology: builder {b.name!r} has no parameter {key!r}; it takes {b.signature_text()} "
                f"and {COMMON_KEYS}", "topology"
            )
        if key in kwargs:
            raise CcvizError(f"{key}: given twice in {spec!r}; keep one value", key)
        kwargs[key] = _convert(value.strip(), hints.get(key, str), key, b.name)
    check_node_count(_node_estimate({**{k: p.default for k, p in params.items()}, **kwargs}), "topology")
    try:
        topology = b.function(**kwargs)
    except CcvizError:
        raise
    except (TypeError, ValueError) as exc:
        raise CcvizError(f"topology: {b.name}: {exc}", "topology") from None
    return topology if switch_hop is None else topology.with_changes(switch_hop=switch_hop)


def _convert(value: str, hint: object, key: str, builder_name: str) -> object:
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    try:
        if origin in (typing.Union, types.UnionType):
            if type(None) in args and value.lower() in ("none", "auto", ""):
                return None
            hint = next(a for a in args if a is not type(None))
            origin, args = typing.get_origin(hint), typing.get_args(hint)
        if origin is tuple:
            elem = args[0] if args else float
            parts = value.replace("/", "x").split("x") if key == "dims" else value.split("/")
            return tuple(_scalar(elem, p) for p in parts if p)
        if hint is bool:
            if value.lower() in ("1", "true", "yes", "on"):
                return True
            if value.lower() in ("0", "false", "no", "off"):
                return False
            raise ValueError(value)
        if hint in (int, float, str):
            return _scalar(hint, value)
        return value
    except (ValueError, StopIteration, OverflowError):
        raise CcvizError(f"topology: {builder_name}: cannot read {key}={value!r}", "topology") from None


def _scalar(kind: type, value: str) -> object:
    """int/float/str from spec text; floats must be finite (bw=inf, alpha=nan are typos)."""
    out = kind(value)
    if kind is float and not math.isfinite(out):
        raise ValueError(value)
    return out


def _node_estimate(kwargs: dict[str, object]) -> float:
    """An upper estimate of a builder's node count from its parameters, computed before building.

    Each size parameter multiplies the estimate by (value + 1), which bounds every builder's count
    (ring n, dims, leaves x hosts x spines, ...); a fat-tree grows as k^3 and a chassis holds 16 nodes.
    """
    estimate = 1.0
    for key, value in kwargs.items():
        values = value if isinstance(value, tuple) else (value,)
        for x in values:
            if isinstance(x, bool) or not isinstance(x, int):
                continue
            x = max(x, 0)
            estimate *= (x + 1) ** 3 if key == "k" else 16 * (x + 1) if key == "chassis" else x + 1
    return estimate


# ------------------------------------------------------------ shared helpers
def per_dim(value: float | Sequence[float], ndims: int, key: str, what: str = "dimensions") -> tuple[float, ...]:
    """Broadcast a scalar to every dimension (or link class), or check a tuple has the right length."""
    if isinstance(value, (int, float)):
        return (float(value),) * ndims
    values = tuple(float(v) for v in value)
    if len(values) == 1:
        return values * ndims
    if len(values) != ndims:
        raise CcvizError(f"topology: {key} has {len(values)} values for {ndims} {what}", key)
    return values


def link_classes(value: float | Sequence[float], classes: Sequence[str], key: str) -> tuple[float, ...]:
    """Per-link-class values (``bw=50/25/12.5``), naming the classes in the error when the count is wrong."""
    return per_dim(value, len(classes), key, what=f"link classes ({'/'.join(classes)})")


def bidirectional(u: int, v: int, bw: float, alpha: float) -> list[Link]:
    """A full-duplex cable: one link each way."""
    return [Link(u, v, bw, alpha), Link(v, u, bw, alpha)]


def gpu_nodes(n: int, start: int = 0, group: str | None = None, positions=None) -> list[Node]:
    return [
        Node(start + i, "gpu", group=group, pos=_rounded(positions[i]) if positions else None)
        for i in range(n)
    ]


def require(condition: bool, field: str, message: str) -> None:
    """Raise the user-facing error for a bad builder parameter."""
    if not condition:
        raise CcvizError(f"{field}: {message}", field)


class Fabric:
    """A builder's scratchpad: add GPUs, switches and cables, then freeze it into a validated Topology.

    Ids are given explicitly where a reference file fixes them, otherwise the next free id is used.
    """

    def __init__(self) -> None:
        self.nodes: dict[int, Node] = {}
        self.links: list[Link] = []

    @property
    def next_id(self) -> int:
        return max(self.nodes, default=-1) + 1

    def add_gpu(self, node_id: int | None = None, group: str | None = None, pos: Position | None = None) -> int:
        node_id = self.next_id if node_id is None else node_id
        self.nodes[node_id] = Node(node_id, "gpu", group=group, pos=_rounded(pos))
        return node_id

    def add_switch(self, node_id: int | None = None, group: str | None = None, pos: Position | None = None,
                   copy: bool = True, label: str | None = None, buffer: bool = False) -> int:
        node_id = self.next_id if node_id is None else node_id
        self.nodes[node_id] = Node(node_id, "switch", label=label or "", group=group, pos=_rounded(pos),
                                   copy=copy, buffer=buffer)
        return node_id

    def cable(self, u: int, v: int, bw: float, alpha: float) -> None:
        """A full-duplex cable (two directed links)."""
        self.links.extend(bidirectional(u, v, bw, alpha))

    def one_way(self, u: int, v: int, bw: float, alpha: float) -> None:
        """A single directed link (the reference systems have a few)."""
        self.links.append(Link(u, v, bw, alpha))

    def topology(self, name: str, description: str, layout: str, meta: dict | None = None) -> Topology:
        return Topology(name, sorted(self.nodes.values(), key=lambda n: n.id), self.links,
                        description=description, layout=layout, meta=meta)


def _rounded(pos: Position | None) -> Position | None:
    """Drawing positions rounded so saved files stay tidy and deterministic."""
    return None if pos is None else (round(float(pos[0]), 4) + 0.0, round(float(pos[1]), 4) + 0.0)


def circle_positions(n: int, radius: float = 1.0, center: Position = (0.0, 0.0)) -> list[Position]:
    """n points evenly on a circle, the first at the top, going clockwise (reads like a clock face)."""
    return [
        (center[0] + radius * math.sin(2 * math.pi * i / n), center[1] + radius * math.cos(2 * math.pi * i / n))
        for i in range(n)
    ]


def spread(count: int, width: float, center: float = 0.0) -> list[float]:
    """``count`` x-coordinates spaced evenly over ``width`` around ``center`` (one row of a tree drawing)."""
    if count == 1:
        return [center]
    return [center - width / 2 + width * i / (count - 1) for i in range(count)]


# ------------------------------------------------------- GPU-only regular fabrics
@builder("ring")
def ring(n: int = 8, bw: float = DEFAULT_BW, alpha: float = DEFAULT_ALPHA, bidirectional: bool = True) -> Topology:
    """Ring of n GPUs (bidirectional by default; bidirectional=false for a one-way ring)."""
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


@builder("fully_connected", aliases=("fc", "clique"))
def fully_connected(n: int = 8, bw: float = DEFAULT_BW, alpha: float = DEFAULT_ALPHA) -> Topology:
    """n GPUs, a direct cable between every pair (the ideal all-to-all fabric)."""
    require(n >= 2, "n", f"fully_connected needs n >= 2 GPUs, got {n}")
    require(n * (n - 1) <= MAX_LINKS, "n", f"fully_connected:n={n} would need {n * (n - 1):.3g} links; "
            f"the limit is {MAX_LINKS:.3g}")
    fabric = Fabric()
    for pos in circle_positions(n):
        fabric.add_gpu(pos=pos)
    for u, v in itertools.combinations(range(n), 2):
        fabric.cable(u, v, bw, alpha)
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
    for i in range(n):
        fabric.add_gpu(pos=_hypercube_pos(i, k))
    for i in range(n):
        for bit in range(k):
            j = i ^ (1 << bit)
            if i < j:
                fabric.cable(i, j, bws[bit], alphas[bit])
    return fabric.topology(f"hypercube{n}", f"{k}-dimensional binary hypercube of {n} GPUs", "hypercube",
                           meta={"dims": [2] * k})


def _hypercube_pos(i: int, k: int) -> Position:
    """Classic hypercube drawing: even bits step right, odd bits step down, each pair of bits twice as far
    as the previous with a slight skew so that no edge passes through a node."""
    x = y = 0.0
    for bit in range(k):
        if not (i >> bit) & 1:
            continue
        scale = 2.2 ** (bit // 2)
        skew = 0.3 * (bit // 2)
        if bit % 2 == 0:
            x, y = x + scale, y - skew
        else:
            x, y = x + skew, y - scale
    return (x, y)


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


# ------------------------------------------------------------ switched fabrics
@builder("star")
def star(n: int = 8, bw: float = DEFAULT_BW, alpha: float = DEFAULT_ALPHA, copy: bool = True) -> Topology:
    """n GPUs around one switch (copy=false for a switch without multicast)."""
    require(n >= 2, "n", f"star needs n >= 2 GPUs, got {n}")
    fabric = Fabric()
    for pos in circle_positions(n):
        fabric.add_gpu(group="gpus", pos=pos)
    hub = fabric.add_switch(pos=(0.0, 0.0), copy=copy, label="switch")
    for gpu in range(n):
        fabric.cable(gpu, hub, bw, alpha)
    kind = "multicast" if copy else "non-copying"
    return fabric.topology(f"star{n}", f"{n} GPUs on one {kind} switch", "star")


@builder("fattree")
def fattree(k: int = 4, bw: tuple[float, ...] = (DEFAULT_BW,), alpha: tuple[float, ...] = (DEFAULT_ALPHA,),
            copy: bool = True) -> Topology:
    """k-ary fat-tree: k pods of k/2 edge + k/2 aggregation switches, (k/2)^2 cores, k^3/4 GPUs.

    bw/alpha are per tier: host-edge / edge-aggregation / aggregation-core.
    """
    require(k >= 2 and k % 2 == 0, "k", f"fattree needs an even k >= 2 (4 gives 16 GPUs), got {k}")
    tiers = ("host-edge", "edge-agg", "agg-core")
    tree = FatTree(k, link_classes(bw, tiers, "bw"), link_classes(alpha, tiers, "alpha"), copy)
    tree.add_gpus()
    for pod in range(k):
        tree.add_pod(pod)
    tree.add_core()
    return tree.fabric.topology(f"fattree_k{k}", f"{k}-ary fat-tree: {tree.n_gpus} GPUs, {k} pods, "
                                f"{tree.half ** 2} core switches", "tree", meta={"k": k})


class FatTree:
    """The k-ary fat-tree (Al-Fares et al.), drawn bottom-up: GPUs, edge, aggregation, core rows."""

    def __init__(self, k: int, bws: tuple[float, ...], alphas: tuple[float, ...], copy: bool) -> None:
        self.k, self.half = k, k // 2
        self.pod_size = self.half * self.half  # GPUs per pod
        self.n_gpus = k * self.pod_size
        self.bws, self.alphas, self.copy = bws, alphas, copy
        self.fabric = Fabric()
        self.aggregation: list[list[int]] = []  # per pod, filled by add_pod

    def gpu_id(self, pod: int, edge: int, port: int) -> int:
        return pod * self.pod_size + edge * self.half + port

    def add_gpus(self) -> None:
        """All GPUs first (ids 0..k^3/4-1, so ranks are contiguous), one pod after another."""
        for gpu in range(self.n_gpus):
            self.fabric.add_gpu(group=f"pod{gpu // self.pod_size}", pos=(float(gpu), 0.0))

    def add_pod(self, pod: int) -> None:
        """Edge switches above their k/2 GPUs, aggregation switches above the pod, edge x aggregation cabled."""
        left = pod * self.pod_size
        edges = [self.fabric.add_switch(group=f"pod{pod}", copy=self.copy, label=f"edge{pod}.{e}",
                                        pos=(left + e * self.half + (self.half - 1) / 2, 1.5))
                 for e in range(self.half)]
        aggs = [self.fabric.add_switch(group=f"pod{pod}", copy=self.copy, label=f"agg{pod}.{a}", pos=(x, 3.0))
                for a, x in enumerate(spread(self.half, self.pod_size - 1, left + (self.pod_size - 1) / 2))]
        for e, edge in enumerate(edges):
            for port in range(self.half):
                self.fabric.cable(self.gpu_id(pod, e, port), edge, self.bws[0], self.alphas[0])
            for agg in aggs:
                self.fabric.cable(edge, agg, self.bws[1], self.alphas[1])
        self.aggregation.append(aggs)

    def add_core(self) -> None:
        """(k/2)^2 core switches; aggregation switch a of every pod reaches cores a*k/2 .. a*k/2 + k/2 - 1."""
        cores = [self.fabric.add_switch(group="core", copy=self.copy, label=f"core{c}", pos=(x, 4.5))
                 for c, x in enumerate(spread(self.half ** 2, self.n_gpus - 1, (self.n_gpus - 1) / 2))]
        for aggs in self.aggregation:
            for a, agg in enumerate(aggs):
                for core in cores[a * self.half:(a + 1) * self.half]:
                    self.fabric.cable(agg, core, self.bws[2], self.alphas[2])


@builder("leafspine")
def leafspine(leaves: int = 4, hosts: int = 4, spines: int = 2, bw: float = DEFAULT_BW,
              alpha: float = DEFAULT_ALPHA, oversub: float | None = None, uplink_bw: float | None = None,
              copy: bool = True) -> Topology:
    """Two-tier leaf-spine: leaves x hosts GPUs, every leaf cabled to every spine.

    The leaf->spine cable bandwidth is ``uplink_bw``, or derived from the oversubscription
    ratio (host bandwidth into a leaf / its uplink bandwidth; 1 = non-blocking, the default).
    """
    require(leaves >= 1 and hosts >= 1 and spines >= 1, "leaves",
            f"leafspine needs leaves, hosts and spines >= 1, got {leaves}, {hosts}, {spines}")
    require(leaves * hosts >= 2, "hosts", "leafspine needs at least two GPUs (leaves x hosts >= 2)")
    require(oversub is None or uplink_bw is None, "oversub", "give either oversub or uplink_bw, not both")
    require(oversub is None or oversub > 0, "oversub", f"oversub must be positive, got {oversub}")
    require(uplink_bw is None or uplink_bw > 0, "uplink_bw", f"uplink_bw must be positive GB/s, got {uplink_bw}")
    if uplink_bw is None:
        uplink_bw = hosts * bw / (spines * (oversub or 1.0))
    ratio = hosts * bw / (spines * uplink_bw)
    n_gpus = leaves * hosts
    fabric = Fabric()
    for gpu in range(n_gpus):
        fabric.add_gpu(group=f"leaf{gpu // hosts}", pos=(float(gpu), 0.0))
    leaf_ids = [fabric.add_switch(group=f"leaf{i}", copy=copy, label=f"leaf{i}", pos=(i * hosts + (hosts - 1) / 2, 1.5))
                for i in range(leaves)]
    spine_ids = [fabric.add_switch(group="spine", copy=copy, label=f"spine{s}", pos=(x, 3.0))
                 for s, x in enumerate(spread(spines, n_gpus - 1, (n_gpus - 1) / 2))]
    for gpu in range(n_gpus):
        fabric.cable(gpu, leaf_ids[gpu // hosts], bw, alpha)
    for leaf in leaf_ids:
        for spine in spine_ids:
            fabric.cable(leaf, spine, uplink_bw, alpha)
    return fabric.topology(
        f"leafspine_{leaves}x{hosts}_s{spines}",
        f"leaf-spine: {leaves} leaves x {hosts} GPUs, {spines} spines, {uplink_bw:g} GB/s uplinks "
        f"(oversubscription {ratio:g}:1)",
        "tree", meta={"oversubscription": ratio},
    )


@builder("dragonfly")
def dragonfly(groups: int = 4, routers: int = 4, gpus: int = 2, bw: tuple[float, ...] = (50.0, 50.0, 25.0),
              alpha: tuple[float, ...] = (0.5, 0.5, 1.0), copy: bool = True) -> Topology:
    """Dragonfly: routers (switches) all-to-all inside a group, one global cable per pair of groups.

    bw/alpha per link class: GPU-router / local (router-router in a group) / global (between groups).
    Global cables leave a group round-robin over its routers (the "consecutive" arrangement).
    """
    require(groups >= 1 and routers >= 1 and gpus >= 1, "groups",
            f"dragonfly needs groups, routers and gpus >= 1, got {groups}, {routers}, {gpus}")
    require(groups * routers * gpus >= 2, "gpus", "dragonfly needs at least two GPUs")
    classes = ("terminal", "local", "global")
    bws, alphas = link_classes(bw, classes, "bw"), link_classes(alpha, classes, "alpha")
    n_gpus = groups * routers * gpus
    group_centers = circle_positions(groups, radius=3.0 * routers ** 0.5 if groups > 1 else 0.0)
    router_pos = [circle_positions(routers, radius=0.8 if routers > 1 else 0.0, center=c) for c in group_centers]
    fabric = Fabric()
    for gpu in range(n_gpus):
        g, r = divmod(gpu // gpus, routers)
        pos = _fan_out(router_pos[g][r], group_centers[g], gpu % gpus, gpus)
        fabric.add_gpu(group=f"group{g}", pos=pos)
    router_ids = [[fabric.add_switch(group=f"group{g}", copy=copy, label=f"R{g}.{r}", pos=router_pos[g][r])
                   for r in range(routers)] for g in range(groups)]
    for gpu in range(n_gpus):
        g, r = divmod(gpu // gpus, routers)
        fabric.cable(gpu, router_ids[g][r], bws[0], alphas[0])
    for g in range(groups):
        for a, b in itertools.combinations(router_ids[g], 2):
            fabric.cable(a, b, bws[1], alphas[1])
    for g, h in itertools.combinations(range(groups), 2):
        fabric.cable(router_ids[g][_global_port(g, h, routers)], router_ids[h][_global_port(h, g, routers)],
                     bws[2], alphas[2])
    return fabric.topology(f"dragonfly_{groups}x{routers}x{gpus}",
                           f"dragonfly: {groups} groups x {routers} routers x {gpus} GPUs", "dragonfly")


def _fan_out(router: Position, center: Position, index: int, count: int) -> Position:
    """Place GPU ``index`` of ``count`` near its router, fanned out on the side away from ``center``."""
    away = math.atan2(router[1] - center[1], router[0] - center[0]) if router != center else math.pi / 2
    angle = away + (index - (count - 1) / 2) * 0.5
    return (router[0] + 0.7 * math.cos(angle), router[1] + 0.7 * math.sin(angle))


def _global_port(group: int, other: int, routers: int) -> int:
    """Router of ``group`` that holds its global cable to ``other``: ports dealt round-robin."""
    port = other if other < group else other - 1
    return port % routers


# ------------------------------------------------ multi-dimensional (TACOS)
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
    shape = "x".join(map(str, dims))
    return system.fabric.topology(f"multidim_{shape}", f"{len(dims)}D {'/'.join(kinds)} system {shape}", "multidim",
                                  meta={"dims": list(dims), "kinds": list(kinds)})


class DimensionalSystem:
    """NPUs on a multi-dimensional grid, wired one dimension at a time (ring, fc, switch or mesh)."""

    def __init__(self, dims: tuple[int, ...], bws: tuple[float, ...], alphas: tuple[float, ...], copy: bool) -> None:
        self.dims, self.bws, self.alphas, self.copy = dims, bws, alphas, copy
        self.fabric = Fabric()
        self.strides = [math.prod(dims[:a]) for a in range(len(dims))]
        self.blocks_per_row = math.ceil(math.sqrt(math.prod(dims[2:])))
        for npu in range(math.prod(dims)):
            self.fabric.add_gpu(pos=self.position(self.coords(npu)))

    def coords(self, npu: int) -> tuple[int, ...]:
        return tuple((npu // s) % d for s, d in zip(self.strides, self.dims, strict=True))

    def npu(self, coords: Sequence[int]) -> int:
        return sum(c * s for c, s in zip(coords, self.strides, strict=True))

    def position(self, coords: Sequence[int]) -> Position:
        """Axis 1 -> x, axis 2 -> y; higher axes tile the 2D slices in a near-square grid of blocks."""
        width = self.dims[0] + 1
        height = (self.dims[1] if len(self.dims) > 1 else 1) + 1
        block = sum(c * math.prod(self.dims[2:2 + i]) for i, c in enumerate(coords[2:]))
        bx, by = block % self.blocks_per_row, block // self.blocks_per_row
        return (coords[0] + bx * width, -((coords[1] if len(coords) > 1 else 0) + by * height))

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
                hub = self.fabric.add_switch(group=f"dim{axis + 1}", copy=self.copy,
                                             pos=self.switch_position(axis, members))
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

    def switch_position(self, axis: int, members: list[int]) -> Position:
        """Row switches left of their row, column switches above their column, higher ones in a side panel."""
        first = list(self.coords(members[0]))
        if axis < 2:
            first[axis] = -1
            return self.position(first)
        x0 = self.blocks_per_row * (self.dims[0] + 1) + 1 + (axis - 2) * (self.dims[0] + 1)
        return (x0 + first[0], -float(first[1] if len(first) > 1 else 0))


@builder("switch2d")
def switch2d(dims: tuple[int, ...] = (4, 4), bw: tuple[float, ...] = (DEFAULT_BW,),
             alpha: tuple[float, ...] = (DEFAULT_ALPHA,), copy: bool = True) -> Topology:
    """TACOS 2D Switch: NPUs on a grid, one switch per row and one per column."""
    topo = multidim(_ndims(dims, 2, "switch2d"), ("switch", "switch"), bw, alpha, copy)
    return _renamed(topo, f"switch2d_{'x'.join(map(str, dims))}",
                    f"2D switch {'x'.join(map(str, dims))}: a switch per row and per column")


@builder("rfs3d")
def rfs3d(dims: tuple[int, ...] = (2, 4, 16), bw: tuple[float, ...] = (200.0, 100.0, 50.0),
          alpha: tuple[float, ...] = (DEFAULT_ALPHA,), copy: bool = True) -> Topology:
    """TACOS 3D Ring-FullyConnected-Switch (default 2x4x16, 200/100/50 GB/s per dimension)."""
    topo = multidim(_ndims(dims, 3, "rfs3d"), ("ring", "fc", "switch"), bw, alpha, copy)
    return _renamed(topo, f"rfs3d_{'x'.join(map(str, dims))}",
                    f"3D Ring-FullyConnected-Switch {'x'.join(map(str, dims))}")


def _renamed(topo: Topology, name: str, description: str) -> Topology:
    return Topology(name, topo.nodes.values(), topo.links.values(), description=description, layout=topo.layout,
                    meta=topo.meta, validate=False)


# ----------------------------------------- vendor systems (TE-CCL reference files)
# DGX-1 hybrid cube-mesh, local GPU ids: (u, v, class) with class 0 = double NVLink, 1 = single NVLink.
DGX1_CABLES = (
    (0, 1, 0), (0, 2, 1), (0, 3, 1), (0, 4, 0), (1, 2, 1), (1, 3, 0), (1, 5, 1), (2, 3, 0),
    (2, 6, 0), (3, 7, 1), (4, 5, 0), (4, 6, 1), (4, 7, 1), (5, 6, 1), (5, 7, 0), (6, 7, 0),
)
# Cube drawing: GPUs 0-3 an inner square, 4-7 the outer square.
DGX1_POSITIONS = ((-0.5, 0.5), (0.5, 0.5), (-0.5, -0.5), (0.5, -0.5),
                  (-1.2, 1.2), (1.2, 1.2), (-1.2, -1.2), (1.2, -1.2))
CHASSIS_SPACING = 3.6


def _add_dgx1_chassis(fabric: Fabric, base: int, group: str, x_offset: float, bws: Sequence[float],
                      alphas: Sequence[float]) -> list[int]:
    """Eight GPUs with ids base..base+7 wired as a DGX-1 hybrid cube-mesh; returns their ids."""
    ids = [fabric.add_gpu(base + i, group=group, pos=(x + x_offset, y)) for i, (x, y) in enumerate(DGX1_POSITIONS)]
    for u, v, cls in DGX1_CABLES:
        fabric.cable(base + u, base + v, bws[cls], alphas[cls])
    return ids


@builder("dgx1")
def dgx1(bw: tuple[float, ...] = (50.0, 25.0), alpha: tuple[float, ...] = (0.7,)) -> Topology:
    """NVIDIA DGX-1 (V100): 8 GPUs, hybrid cube-mesh NVLink; bw per class double/single NVLink."""
    classes = ("double", "single")
    fabric = Fabric()
    _add_dgx1_chassis(fabric, 0, "chassis0", 0.0, link_classes(bw, classes, "bw"), link_classes(alpha, classes, "alpha"))
    return fabric.topology("dgx1", "NVIDIA DGX-1: 8 GPUs, hybrid cube-mesh NVLink (TE-CCL values)", "chassis")


@builder("ndv2")
def ndv2(chassis: int = 2, bw: tuple[float, ...] = (50.0, 25.0, 12.5),
         alpha: tuple[float, ...] = (0.7, 0.7, 1.3), as_run: bool = False) -> Topology:
    """Azure NDv2: DGX-1-like chassis joined by 12.5 GB/s NICs; bw/alpha per class double/single/NIC.

    As in TE-CCL: with 2 chassis, GPU 0 of each chassis sends straight to GPU 1 of the other (no
    switch); otherwise a switch (node 0) receives from GPU 0 of every chassis and sends to GPU 1 of
    every chassis, and chassis c holds GPUs 1+8c..8+8c. ``as_run=true`` (2 chassis only) is the
    fabric as TE-CCL's published runs modelled it: node 0 marked a switch (no buffer, no demand) but
    still counted in the buffer split (chunk = size / 16), switch hops charged by the 'teccl' rule.
    """
    require(chassis >= 1, "chassis", f"ndv2 needs chassis >= 1, got {chassis}")
    require(not as_run or chassis == 2, "as_run", f"the published runs used 2 chassis; as_run needs chassis=2, "
                                                  f"got {chassis}")
    classes = ("double", "single", "nic")
    bws, alphas = link_classes(bw, classes, "bw"), link_classes(alpha, classes, "alpha")
    direct = chassis == 2
    fabric = Fabric()
    first = 0 if direct else 1
    boxes = [_add_dgx1_chassis(fabric, first + 8 * c, f"chassis{c}", c * CHASSIS_SPACING, bws, alphas)
             for c in range(chassis)]
    if direct:
        for c in range(chassis):
            fabric.one_way(boxes[c][0], boxes[(c + 1) % chassis][1], bws[2], alphas[2])
        how = "GPU 0 of each chassis sends directly to GPU 1 of the other"
    else:
        hub = fabric.add_switch(0, group="network", pos=((chassis - 1) * CHASSIS_SPACING / 2, 2.4), label="NIC switch")
        for box in boxes:
            fabric.one_way(box[0], hub, bws[2], alphas[2])
            fabric.one_way(hub, box[1], bws[2], alphas[2])
        how = "GPU 0 of each chassis sends to a switch that sends to GPU 1 of every chassis"
    if as_run:
        fabric.nodes[0] = Node(0, "switch", group=fabric.nodes[0].group, pos=fabric.nodes[0].pos)
        topology = fabric.topology("ndv2_2chassis_teccl_as_run", "Azure NDv2, 2 chassis, as TE-CCL's published "
                                   "runs modelled it: node 0 marked a switch, chunk = size / 16", "chassis",
                                   meta={"chassis": 2, "buffer_ranks": 16})
        return topology.with_changes(switch_hop="teccl")
    return fabric.topology(f"ndv2_{chassis}chassis", f"Azure NDv2, {chassis} chassis of 8 GPUs; {how} (TE-CCL)",
                           "chassis", meta={"chassis": chassis})


@builder("dgx2")
def dgx2(chassis: int = 2, bw: tuple[float, ...] = (125.0, 12.5), alpha: tuple[float, ...] = (0.35, 2.6)) -> Topology:
    """NVIDIA DGX-2: 16 GPUs on an NVSwitch per chassis; bw/alpha per class nvswitch/nic.

    As in TE-CCL: chassis c is switch 17c with GPUs 17c+1..17c+16; each odd local GPU k sends to
    local GPU k-1 of the next chassis (a ring of chassis; with 2 chassis, both ways).
    """
    require(chassis >= 1, "chassis", f"dgx2 needs chassis >= 1, got {chassis}")
    classes = ("nvswitch", "nic")
    bws, alphas = link_classes(bw, classes, "bw"), link_classes(alpha, classes, "alpha")
    fabric = Fabric()
    gpus_per_box = 16
    for c in range(chassis):
        base = c * (gpus_per_box + 1)
        center = (c * CHASSIS_SPACING * 1.2, 0.0)
        hub = fabric.add_switch(base, group=f"chassis{c}", pos=center, label=f"NVSwitch{c}")
        for local, pos in enumerate(circle_positions(gpus_per_box, radius=1.6, center=center)):
            fabric.add_gpu(base + 1 + local, group=f"chassis{c}", pos=pos)
            fabric.cable(base + 1 + local, hub, bws[0], alphas[0])
    if chassis > 1:
        for c in range(chassis):
            here, there = c * (gpus_per_box + 1) + 1, (c + 1) % chassis * (gpus_per_box + 1) + 1
            for local in range(1, gpus_per_box, 2):
                fabric.one_way(here + local, there + local - 1, bws[1], alphas[1])
    return fabric.topology(f"dgx2_{chassis}chassis", f"NVIDIA DGX-2, {chassis} chassis of 16 GPUs (TE-CCL)",
                           "chassis", meta={"chassis": chassis})


@builder("a100")
def a100(boxes: int = 2, bw: tuple[float, ...] = (300.0, 25.0), alpha: tuple[float, ...] = (0.7, 1.3),
         copy: bool = False, buffer: bool = True) -> Topology:
    """ForestColl's A100 cluster: 8 GPUs per box on an NVSwitch, one NIC per GPU, two IB switches.

    bw/alpha per class nvswitch/ib. Each GPU is cabled to its box's NVSwitch and to its own NIC; the
    NICs of even-numbered GPUs meet on one IB switch, odd-numbered on the other. No switch copies
    (ForestColl, arXiv 2402.06787, its 2 x 8 A100 testbed). Its switches buffer (packet switches queue
    a chunk for a busy port, as ForestColl's flow model assumes); ``buffer=false`` makes them forward
    each arrival at once.
    """
    require(boxes >= 1, "boxes", f"a100 needs boxes >= 1, got {boxes}")
    classes = ("nvswitch", "ib")
    bws, alphas = link_classes(bw, classes, "bw"), link_classes(alpha, classes, "alpha")
    fabric = Fabric()
    per_box = 8
    spacing = CHASSIS_SPACING * 1.2
    for b in range(boxes):
        center = (b * spacing, 0.0)
        hub = fabric.add_switch(group=f"box{b}", pos=center, copy=copy, label=f"NVSwitch{b}", buffer=buffer)
        for local, pos in enumerate(circle_positions(per_box, radius=1.2, center=center)):
            gpu = fabric.add_gpu(group=f"box{b}", pos=pos)
            fabric.cable(gpu, hub, bws[0], alphas[0])
            x = center[0] - 1.4 + local * 0.4
            nic = fabric.add_switch(group=f"box{b}", pos=(x, -2.2), copy=copy, label=f"NIC{b}.{local}",
                                    buffer=buffer)
            fabric.cable(gpu, nic, bws[1], alphas[1])
    width = (boxes - 1) * spacing
    ib = [fabric.add_switch(group="network", pos=(width / 2 + dx, -3.6), copy=copy, label=f"IB{k}",
                            buffer=buffer)
          for k, dx in enumerate((-0.8, 0.8))]
    for node in list(fabric.nodes.values()):
        if node.label.startswith("NIC"):
            local = int(node.label.split(".")[1])
            fabric.cable(node.id, ib[local % 2], bws[1], alphas[1])
    return fabric.topology(f"a100_{boxes}x8", f"{boxes} x 8 A100 (ForestColl): NVSwitch per box, a NIC per GPU, "
                           "even/odd NICs on two IB switches, no switch copies"
                           + (", buffering switches" if buffer else ""), "chassis", meta={"boxes": boxes})


# AMD MI250 chassis, local GPU ids: (u, v, class) with class 0/1/2 = 200/100/50 GB/s (TE-CCL).
AMD_CABLES = (
    (0, 1, 0), (0, 4, 1), (0, 8, 2), (1, 5, 2), (1, 9, 2), (1, 10, 2), (2, 3, 0), (2, 6, 2), (2, 9, 2),
    (2, 10, 2), (3, 7, 1), (3, 11, 2), (4, 5, 0), (4, 6, 2), (5, 6, 2), (5, 7, 2), (6, 7, 0), (8, 9, 0),
    (8, 12, 1), (9, 13, 2), (10, 11, 0), (10, 14, 2), (11, 15, 1), (12, 13, 0), (12, 14, 2), (13, 14, 2),
    (13, 15, 2), (14, 15, 0),
)
AMD_GPUS, AMD_NICS = 16, 8


@builder("amd")
def amd(chassis: int = 1, bw: tuple[float, ...] = (200.0, 100.0, 50.0, 25.0),
        alpha: tuple[float, ...] = (0.7, 0.7, 0.7, 1.3), as_published: bool = True) -> Topology:
    """AMD MI250: 16 GPUs per chassis; several chassis meet through per-GPU-pair NICs and a switch.

    bw/alpha per class 200/100/50/nic. Chassis c is GPUs 1+24c..16+24c, NICs 17+24c..24+24c, central
    switch 0; GPUs 2k, 2k+1 share NIC k (NIC 0 at the 50 GB/s class, as in TE-CCL). TE-CCL's code
    labels ids 16+24c..23+24c as the switches and cables *those* to node 0, so the last GPU of a
    chassis is a switch and its last NIC a GPU; ``as_published=true`` (default) keeps that, to match
    its published runs and the reference file; ``as_published=false`` labels and cables the real NICs.
    """
    require(chassis >= 1, "chassis", f"amd needs chassis >= 1, got {chassis}")
    classes = ("200", "100", "50", "nic")
    bws, alphas = link_classes(bw, classes, "bw"), link_classes(alpha, classes, "alpha")
    fabric = Fabric()
    if chassis == 1:
        _add_amd_chassis(fabric, 0, 0, bws, alphas, switch_ids=set())
        return fabric.topology("amd_1chassis", "AMD MI250, 1 chassis of 16 GPUs (TE-CCL)", "chassis",
                               meta={"chassis": 1})
    stride = AMD_GPUS + AMD_NICS
    shift = 0 if as_published else 1  # TE-CCL's off-by-one: NIC k is declared at 16+24c+k, built at 17+24c+k
    switch_ids = {stride * c + AMD_GPUS + shift + k for c in range(chassis) for k in range(AMD_NICS)}
    hub = fabric.add_switch(0, group="network", copy=True, label="NIC switch",
                            pos=((chassis - 1) * CHASSIS_SPACING * 1.4 / 2, 2.0))
    for c in range(chassis):
        _add_amd_chassis(fabric, 1 + stride * c, c, bws, alphas, switch_ids)
    for nic in sorted(switch_ids):
        fabric.cable(nic, hub, bws[3], alphas[3])
    note = "as TE-CCL's code labels it" if as_published else "NIC labels corrected"
    return fabric.topology(f"amd_{chassis}chassis", f"AMD MI250, {chassis} chassis of 16 GPUs, {note} (TE-CCL)",
                           "chassis", meta={"chassis": chassis, "as_published": as_published})


def _add_amd_chassis(fabric: Fabric, base: int, c: int, bws: Sequence[float], alphas: Sequence[float],
                     switch_ids: set[int]) -> None:
    """One MI250 chassis at ids base.. (GPUs as a 4x4 grid, NICs in a row below when switch_ids is set)."""
    group, x0 = f"chassis{c}", c * CHASSIS_SPACING * 1.4
    positions = {base + g: (x0 + (g % 4) * 0.8, -(g // 4) * 0.8) for g in range(AMD_GPUS)}
    nics = [base + AMD_GPUS + k for k in range(AMD_NICS)] if switch_ids else []
    positions.update({nic: (x0 - 0.4 + k * 0.4, -3.4) for k, nic in enumerate(nics)})
    for node_id, pos in positions.items():
        if node_id in switch_ids:
            fabric.add_switch(node_id, group=group, pos=pos)
        else:
            fabric.add_gpu(node_id, group=group, pos=pos)
    for u, v, cls in AMD_CABLES:
        fabric.cable(base + u, base + v, bws[cls], alphas[cls])
    for k, nic in enumerate(nics):
        cls = 2 if k == 0 else 3
        for gpu in (base + 2 * k, base + 2 * k + 1):
            fabric.cable(gpu, nic, bws[cls], alphas[cls])
