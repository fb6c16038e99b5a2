"""Strict checks for values crossing a boundary (files, builder specs, CLI flags).

Every reader (topology files, schedule files, builder specs, the CLI) funnels its
numbers through these helpers so that the same rules hold everywhere: a bool is
never a number, 1.5 is never silently an integer, numbers are finite, and sizes
are bounded *before* anything large is laid out in memory. Each failure is a
``CcvizError`` naming the field.
"""

from __future__ import annotations

import difflib
import math
from typing import Any

from ccviz.errors import CcvizError

MAX_NODES = 10_000  # nodes in one topology (a 32-ary fat-tree has 9,472)
MAX_LINKS = 1_000_000  # directed links in one topology
MAX_TRANSFERS = 20_000_000  # entries of a schedule file (what is laid out is bounded by ccviz.model.footprint)
MAX_SIZE_BYTES = 1e15  # 1 PB per-rank buffer
MIN_CHUNK_BYTES = 1.0  # a chunk smaller than a byte is a typo, not a workload


def integer(value: Any, field: str, *, lo: int | None = None, hi: int | None = None) -> int:
    """A whole number: int, or a float with no fractional part (JSON's 2.0); never a bool or 1.5."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise CcvizError(f"{field}: expected a whole number, got {value!r}", short(field))
    if isinstance(value, float):
        if not math.isfinite(value) or not value.is_integer():
            raise CcvizError(f"{field}: expected a whole number, got {value!r}", short(field))
        value = int(value)
    if lo is not None and value < lo:
        raise CcvizError(f"{field}: must be >= {lo}, got {value}", short(field))
    if hi is not None and value > hi:
        raise CcvizError(f"{field}: must be <= {hi}, got {value}", short(field))
    return value


def number(value: Any, field: str, *, positive: bool = False, nonnegative: bool = False,
           hi: float | None = None) -> float:
    """A finite real number (never a bool or a string), optionally > 0 or >= 0 and bounded above."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise CcvizError(f"{field}: expected a number, got {value!r}", short(field))
    value = float(value)
    if not math.isfinite(value):
        raise CcvizError(f"{field}: must be a finite number, got {value!r}", short(field))
    if positive and not value > 0:
        raise CcvizError(f"{field}: must be positive, got {value!r}", short(field))
    if nonnegative and value < 0:
        raise CcvizError(f"{field}: must be zero or positive, got {value!r}", short(field))
    if hi is not None and value > hi:
        raise CcvizError(f"{field}: must be <= {hi:g}, got {value!r}", short(field))
    return value


def optional_number(value: Any, field: str, **kw: Any) -> float | None:
    return None if value is None else number(value, field, **kw)


def boolean(value: Any, field: str) -> bool:
    if not isinstance(value, bool):
        raise CcvizError(f"{field}: expected true or false, got {value!r}", short(field))
    return value


def text(value: Any, field: str) -> str:
    if not isinstance(value, str):
        raise CcvizError(f"{field}: expected a string, got {value!r}", short(field))
    return value


def mapping(value: Any, field: str) -> dict:
    if not isinstance(value, dict):
        raise CcvizError(f"{field}: expected an object, got {type(value).__name__}", short(field))
    return value


def sequence(value: Any, field: str, *, max_len: int | None = None) -> list:
    if not isinstance(value, list):
        raise CcvizError(f"{field}: expected a list, got {type(value).__name__}", short(field))
    if max_len is not None and len(value) > max_len:
        raise CcvizError(f"{field}: {len(value)} entries; the limit is {max_len}", short(field))
    return value


def known_keys(d: dict, allowed: tuple[str, ...], where: str) -> None:
    """Unknown keys are errors that suggest the right name: a misspelled ``bandwith_GBps`` or ``alpha`` for
    ``alpha_us`` would otherwise be dropped and its value silently replaced by a default."""
    for key in d:
        if key not in allowed:
            close = difflib.get_close_matches(str(key), allowed, n=1, cutoff=0.5)
            hint = f"; did you mean '{close[0]}'?" if close else ""
            raise CcvizError(f"{where}.{key}: unknown key{hint} (known: {', '.join(allowed)})", short(f"{where}.{key}"))


def check_node_count(count: float, field: str = "nodes") -> None:
    if count > MAX_NODES:
        raise CcvizError(f"{field}: this would create up to about {count:,.0f} nodes; the limit is {MAX_NODES:,}", short(field))


def short(field: str) -> str:
    """The bare field name of a path such as ``links[3].bandwidth_GBps`` (what front ends highlight)."""
    return field.rsplit(".", 1)[-1].split("[", 1)[0]


def one_line(message: str) -> str:
    """Collapse a parser's multi-line message into one line."""
    return " ".join(part.strip() for part in str(message).splitlines() if part.strip())
