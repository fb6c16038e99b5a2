"""Size and time units (nccl-tests conventions: decimal by default).

Bandwidth is GB/s (1e9 B/s) and alpha is microseconds in topologies; every
computed time inside ccviz is in seconds.
"""

from __future__ import annotations

import math
import re

from ccviz.errors import CcvizError
from ccviz.model.validate import MAX_SIZE_BYTES

_UNITS = {
    "": 1, "B": 1,
    "K": 1e3, "KB": 1e3, "M": 1e6, "MB": 1e6, "G": 1e9, "GB": 1e9, "T": 1e12, "TB": 1e12,
    "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40,
}
_SIZE_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([A-Za-z]*)\s*$")

BYTES_PER_GB = 1e9  # bandwidths are GB/s, decimal (nccl-tests)
SECONDS_PER_US = 1e-6  # alphas are microseconds
US_PER_SECOND = 1e6


def us_text(seconds: float) -> str:
    """A time for messages and notes: microseconds to 6 significant digits, e.g. '12.5 us'."""
    return f"{seconds * US_PER_SECOND:.6g} us"


def parse_size(text: str | float | int, field: str = "size") -> float:
    """Parse '1GB', '64KiB', '1e6' or a number of bytes into bytes (float)."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        value = float(text)
    else:
        match = _SIZE_RE.match(str(text))
        unit = match.group(2).upper() if match else None
        if not match or unit not in _UNITS:
            raise CcvizError(
                f"{field}: cannot read {text!r} as a size; write a number with an optional unit "
                "such as 1KB, 64MB, 1GB (decimal) or 64KiB, 1GiB (binary)",
                field,
            )
        value = float(match.group(1)) * _UNITS[unit]
    if not value > 0 or not math.isfinite(value):
        raise CcvizError(f"{field}: size must be a positive finite number of bytes, got {text!r}", field)
    if value > MAX_SIZE_BYTES:
        raise CcvizError(f"{field}: {text!r} is more than the limit of {format_size(MAX_SIZE_BYTES)}", field)
    return value


def format_size(nbytes: float) -> str:
    """Short decimal label such as '1GB' or '256KB' (binary sizes keep their unit)."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= scale and nbytes % scale == 0 and nbytes % 1000 != 0:
            return f"{nbytes / scale:g}{unit}"
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if nbytes >= scale:
            return f"{nbytes / scale:g}{unit}"
    return f"{nbytes:g}B"


def format_time(seconds: float | None) -> str:
    """Human label in the most readable unit (us, ms or s)."""
    if seconds is None:
        return "n/a"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.4g} us"
    if seconds < 1:
        return f"{seconds * 1e3:.4g} ms"
    return f"{seconds:.4g} s"


def size_sweep(lo: float = 1e3, hi: float = 1e9) -> list[float]:
    """The papers' sweep: 1, 4, 16, 64, 256 times each of KB, MB, GB, clipped to [lo, hi]."""
    sizes = [m * 10.0 ** (3 * k) for k in range(1, 5) for m in (1, 4, 16, 64, 256)]
    return [s for s in sizes if lo * (1 - 1e-12) <= s <= hi * (1 + 1e-12)]


def parse_epoch(text: str | float) -> str | float:
    """'fastest', 'slowest', seconds ('1.25e-3') or a time with a unit ('1250us', '1.25ms')."""
    key, scale = str(text).strip().lower(), 1.0
    if key in ("fastest", "slowest"):
        return key
    for suffix, factor in (("us", 1e-6), ("ms", 1e-3), ("ns", 1e-9), ("s", 1.0)):
        if key.endswith(suffix):
            key, scale = key[: -len(suffix)], factor
            break
    try:
        value = float(key) * scale
    except ValueError:
        raise CcvizError(f"--epoch: {text!r} is not 'fastest', 'slowest' or a duration such as 1.25e-3 or 1250us",
                         "epoch") from None
    if not value > 0:
        raise CcvizError(f"--epoch: the epoch must be positive, got {text!r}", "epoch")
    if not MIN_EPOCH_S <= value <= MAX_EPOCH_S:
        raise CcvizError(f"--epoch: {text!r} is {value:.3g} s; an epoch is about one chunk's transfer time, between "
                         f"{MIN_EPOCH_S:g} s (1 ps) and {MAX_EPOCH_S:g} s (e.g. 1250us)", "epoch")
    return value


MIN_EPOCH_S = 1e-12  # shorter epochs would need more than ~1e12 of them for a microsecond transfer
MAX_EPOCH_S = 1e3
