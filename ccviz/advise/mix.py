"""The workload a fabric is bought for: a mix of collectives at sizes with weights that sum to 1.

The advisor scores a fabric by the mix's weighted time, each collective at the fabric's exact limit
(``ccviz.bounds.limit``: bandwidth alone, alpha ignored), so an upgrade is worth what it takes off that sum.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ccviz.bounds.limit import LIMITED
from ccviz.errors import CcvizError
from ccviz.model.collectives import normalize_name
from ccviz.model.units import format_size, parse_size

WEIGHT_TOLERANCE = 1e-6
MAX_MIX_ITEMS = 16


@dataclass(frozen=True)
class MixItem:
    """One collective of the workload: how big, and what share of the time it stands for."""

    collective: str
    size_bytes: float
    weight: float

    @property
    def label(self) -> str:
        return f"{self.collective} {format_size(self.size_bytes)}"


def parse_mix(text: str) -> tuple[MixItem, ...]:
    """``"allreduce:1GB:0.5,alltoall:256MB:0.3,allgather:64MB:0.2"`` as mix items, checked.

    Each item is collective:size:weight; the weights must sum to 1 (a share of the workload each)."""
    if not isinstance(text, str) or not text.strip():
        raise CcvizError("mix: give collective:size:weight items, e.g. allreduce:1GB:0.5,alltoall:256MB:0.5", "mix")
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if len(parts) > MAX_MIX_ITEMS:
        raise CcvizError(f"mix: at most {MAX_MIX_ITEMS} items, got {len(parts)}", "mix")
    items = []
    for part in parts:
        fields = part.split(":")
        if len(fields) != 3:
            raise CcvizError(f"mix: {part!r} should be collective:size:weight, e.g. allreduce:1GB:0.5", "mix")
        name, size, weight = (f.strip() for f in fields)
        items.append(make_item(name, size, weight, where=f"mix item {part!r}"))
    return check_mix(items)


def make_item(collective: str, size: str | float, weight: str | float, where: str = "mix") -> MixItem:
    """One checked item: a collective with a defined limit, a positive size, a weight in (0, 1]."""
    name = normalize_name(collective)
    if name not in LIMITED:
        raise CcvizError(f"mix: {where}: {name} has no fabric limit to score; use one of {', '.join(LIMITED)}", "mix")
    nbytes = parse_size(size, field="mix")
    try:
        share = float(weight)
    except (TypeError, ValueError):
        raise CcvizError(f"mix: {where}: weight {weight!r} is not a number (a share such as 0.5)", "mix") from None
    if not (math.isfinite(share) and 0 < share <= 1):
        raise CcvizError(f"mix: {where}: weight must be in (0, 1], got {weight}", "mix")
    return MixItem(name, nbytes, share)


def check_mix(items: list[MixItem]) -> tuple[MixItem, ...]:
    """Refuse an empty mix, a repeated item, or weights that do not sum to 1."""
    if not items:
        raise CcvizError("mix: the mix is empty; give at least one collective:size:weight", "mix")
    seen = set()
    for item in items:
        key = (item.collective, item.size_bytes)
        if key in seen:
            raise CcvizError(f"mix: {item.label} appears twice; give it once with the weights added", "mix")
        seen.add(key)
    total = sum(item.weight for item in items)
    if abs(total - 1.0) > WEIGHT_TOLERANCE:
        raise CcvizError(f"mix: the weights sum to {total:g}; they must sum to 1 (each is a share of the workload)",
                         "mix")
    return tuple(items)


def mix_text(items: tuple[MixItem, ...]) -> str:
    """The mix back as the text ``parse_mix`` reads (for links and notes)."""
    return ",".join(f"{i.collective}:{format_size(i.size_bytes).replace(' ', '')}:{i.weight:g}" for i in items)
