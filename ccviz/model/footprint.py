"""How much memory a run will need, known before anything large is laid out.

Every transfer a synthesizer emits is a Python tuple that lives through synthesis, timing and
judging; ``BYTES_PER_TRANSFER`` is the peak resident memory per transfer of a whole ``ccviz synth``
run, measured by ``bench/scale.py`` (1,024-GPU rows). A collective needs at least one transfer per
(chunk, rank that must receive it), so ``collectives.min_transfers`` is a floor no algorithm beats; a run whose
floor already exceeds the memory budget is refused up front with the estimate instead of swapping
the machine.
"""

from __future__ import annotations

import os

from ccviz.errors import CcvizError

BYTES_PER_TRANSFER = 520  # measured peak RSS per transfer, whole run (bench/scale.py), with some margin
BASE_BYTES = 250e6  # the interpreter, numpy and the topology before the first transfer
DEFAULT_BUDGET_GB = 8.0  # override with CCVIZ_MEMORY_GB


def standard_min_transfers(name: str, n_ranks: int, chunks_per_rank: int) -> int:
    """``min_transfers`` of a standard collective, known before its chunks are built (one per delivery)."""
    deliveries = {
        "allgather": n_ranks * (n_ranks - 1), "reducescatter": n_ranks * (n_ranks - 1),
        "allreduce": 2 * n_ranks * (n_ranks - 1), "alltoall": n_ranks * (n_ranks - 1),
        "broadcast": n_ranks - 1, "reduce": n_ranks - 1, "gather": n_ranks - 1, "scatter": n_ranks - 1,
        "sendrecv": 1,
    }[name]
    return deliveries * chunks_per_rank


def estimate_bytes(n_transfers: float) -> float:
    """Peak resident memory of a run with ``n_transfers`` transfers."""
    return BASE_BYTES + n_transfers * BYTES_PER_TRANSFER


def budget_bytes() -> float:
    """The memory a run may use: CCVIZ_MEMORY_GB (default 8 GB), never more than the machine has free."""
    text = os.environ.get("CCVIZ_MEMORY_GB", "")
    try:
        budget = float(text) * 1e9 if text else DEFAULT_BUDGET_GB * 1e9
    except ValueError:
        raise CcvizError(f"CCVIZ_MEMORY_GB: {text!r} is not a number of gigabytes", "CCVIZ_MEMORY_GB") from None
    available = _available_bytes()
    return min(budget, available) if available else budget


def check_transfers(n: int, what: str, field: str) -> None:
    """Refuse, before anything is laid out, ``what`` needing at least ``n`` transfers over the memory budget."""
    need, budget = estimate_bytes(n), budget_bytes()
    if need > budget:
        raise CcvizError(
            f"{field}: {what} needs at least {n:,} transfers, about {need / 1e9:.3g} GB "
            f"at {BYTES_PER_TRANSFER} bytes per transfer, over the {budget / 1e9:.3g} GB budget "
            "(CCVIZ_MEMORY_GB, capped by free memory); use fewer chunks or a smaller topology",
            field,
        )


def _available_bytes() -> float | None:
    """MemAvailable from /proc/meminfo (Linux), else None."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return float(line.split()[1]) * 1024
    except OSError:
        return None
    return None
