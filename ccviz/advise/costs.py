"""What each upgrade costs: a documented default table, or the user's own ``costs.yaml``.

The default prices a cable by the bandwidth it carries, from one public estimate of an InfiniBand NDR
build (yobitel.com/knowledge-base/infiniband-ndr, "Sizing rule", read 2026-11): a 1,024-GPU NDR fat-tree
of 48 Quantum-2 switches (64 ports of 400 Gb/s) costs about $0.55-0.75M in switches plus $1.2-1.6M of
optics. Taking the midpoints: 2,048 cables (1,024 GPU-leaf + 1,024 leaf-spine) at $1.4M is $684 of optics
per 400 Gb/s (50 GB/s) cable, and each cable takes two switch ports at $0.65M / 3,072 = $212 each, so
about $1,100 per 50 GB/s cable: $22 per GB/s. A switch is $0.65M / 48 = $13,500. These are a third party's
estimates of one fabric generation, not quotes: give your own prices in ``costs.yaml``.

Assumptions the source does not cover, stated so they can be replaced: a GPU-GPU or GPU-switch cable
(NVLink inside a box) is priced per GB/s like a network cable; raising a cable's bandwidth costs the
added GB/s at the same rate; a NIC costs as much as the cable that leaves it; a switch that reduces
(SHARP, NVLS) is bought as a new switch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from ccviz.errors import CcvizError

SOURCE = ("yobitel.com/knowledge-base/infiniband-ndr (1,024-GPU NDR fat-tree: 48 switches $0.55-0.75M, optics "
          "$1.2-1.6M; midpoints, per GB/s of one direction); NVLink and NIC prices assumed alike")
MAX_COST_FILE_BYTES = 64_000


@dataclass(frozen=True)
class CostTable:
    """Prices of the four kinds of upgrade, in ``currency``."""

    currency: str = "USD"
    cable_per_GBps: float = 22.0  # a new cable, per GB/s it carries each way
    bandwidth_per_GBps: float = 22.0  # more bandwidth on existing cables, per GB/s added per cable
    nic: float = 1_100.0  # a NIC (and its cable) added to a box's GPU
    reduce_switch: float = 13_500.0  # a switch replaced by one that reduces in the network
    source: str = SOURCE

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


PRICES = ("cable_per_GBps", "bandwidth_per_GBps", "nic", "reduce_switch")


def load_costs(path: str | Path | None) -> CostTable:
    """The default table, or the YAML file's keys over it (unknown keys and negative prices refused)."""
    if path is None:
        return CostTable()
    import yaml

    p = Path(path)
    if not p.is_file():
        raise CcvizError(f"costs: {str(path)!r} is not a file; give a YAML file such as costs.yaml", "costs")
    if p.stat().st_size > MAX_COST_FILE_BYTES:
        raise CcvizError(f"costs: {str(path)!r} is over {MAX_COST_FILE_BYTES // 1000} KB; a cost table is a few lines",
                         "costs")
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise CcvizError(f"costs: {str(path)!r} is not readable YAML ({str(exc).splitlines()[0]})", "costs") from None
    return cost_table(data or {})


def cost_table(data: Any) -> CostTable:
    """A table from a mapping such as ``{"cable_per_GBps": 30, "currency": "EUR"}``."""
    if not isinstance(data, dict):
        raise CcvizError("costs: the file must be a mapping of price names to numbers, e.g. cable_per_GBps: 22",
                         "costs")
    known = {f.name for f in fields(CostTable)}
    unknown = sorted(set(map(str, data)) - known)
    if unknown:
        raise CcvizError(f"costs: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}", "costs")
    values: dict[str, Any] = {}
    for key, value in data.items():
        if key in PRICES:
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise CcvizError(f"costs: {key} must be a number, got {value!r}", "costs")
            if value < 0:
                raise CcvizError(f"costs: {key} is negative ({value}); a price is >= 0", "costs")
            values[key] = float(value)
        else:
            values[key] = str(value)
    if "source" not in values and values:
        values["source"] = "the user's cost file"
    return CostTable(**values)
