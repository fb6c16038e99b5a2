"""The builder registry and builder specs: ``@builder(name)`` registers a function, ``build(spec)`` reads
``name[:key=value,...]`` against the function's keyword parameters and type hints and calls it."""

from __future__ import annotations

import inspect
import math
import types
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ccviz.errors import CcvizError
from ccviz.model.topology import Topology
from ccviz.model.validate import MAX_NODES, check_node_count


@dataclass(frozen=True)
class Builder:
    """A registered builder: its spec name, function, one-line summary (the docstring's first line), aliases."""

    name: str
    function: Callable[..., Topology]
    summary: str
    aliases: tuple[str, ...] = ()

    @property
    def parameters(self) -> dict[str, inspect.Parameter]:
        """The spec keys the builder takes: its function's keyword parameters."""
        return dict(inspect.signature(self.function).parameters)

    def signature_text(self) -> str:
        """Its keys with their defaults as a spec writes them (``n=8,bw=50,alpha=0.5``), for listings and errors."""
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
    """The builder called ``name`` or one of its aliases (case-insensitive); a CcvizError listing them otherwise."""
    key = ALIASES.get(name.strip().lower(), name.strip().lower())
    if key not in BUILDERS:
        raise CcvizError(
            f"topology: unknown builder {name!r}; choose one of {', '.join(sorted(BUILDERS))} or give a file path",
            "topology",
        )
    return BUILDERS[key]


COMMON_KEYS = "switch_hop=paid|teccl|free"  # accepted by every builder (see ccviz.model.topology.SWITCH_HOPS)


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
    _check_size(spec, kwargs, _node_estimate({**{k: p.default for k, p in params.items()}, **kwargs}))
    try:
        topology = b.function(**kwargs)
    except CcvizError:
        raise
    except (TypeError, ValueError) as exc:
        raise CcvizError(f"topology: {b.name}: {exc}", "topology") from None
    return topology if switch_hop is None else topology.with_changes(switch_hop=switch_hop)


def _convert(value: str, hint: object, key: str, builder_name: str) -> object:
    """Spec text as the parameter's hinted type: none/auto for optionals, ``4x4`` dims, ``50/25`` tuples, flags."""
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
            if any(not p.strip() for p in parts):  # 4x4x, 50//25: a size left out is a typo, not a default
                raise ValueError(value)
            return tuple(_scalar(elem, p) for p in parts)
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


def _check_size(spec: str, given: dict[str, object], estimate: float) -> None:
    """Refuse a spec that would build too many nodes, naming the size parameter to make smaller (the largest
    one given), so a designer who typed gpus=10000 is pointed at gpus, not at "topology"."""
    if estimate <= MAX_NODES:
        return
    sizes = {k: max(v) if isinstance(v, tuple) else v for k, v in given.items()
             if all(isinstance(x, int) and not isinstance(x, bool) for x in (v if isinstance(v, tuple) else (v,)))
             and v != ()}
    if not sizes:
        check_node_count(estimate, "topology")
    field = max(sizes, key=sizes.get)
    raise CcvizError(f"{field}: {spec!r} would build up to about {estimate:,.0f} nodes (an estimate from its "
                     f"sizes); the limit is {MAX_NODES:,} nodes: make {field} smaller", field)


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
