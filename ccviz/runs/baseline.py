"""What NCCL would do here: the baseline every schedule on a system preset is compared with ("x NCCL").

Why: "forestcoll finishes in 1.2 ms" means little to a designer; "1.31x NCCL" says what it buys over the
library their jobs already run. On a fabric that declares the hardware link model (the system presets
dgxa100, dgxh100, hgxh200, hgxb200, nvl72, mi300x and fabric files saved from them) the baseline is ``-a nccl``
on the same collective, judged by the same simulator. ``x NCCL`` = NCCL's finish time / the schedule's
(above 1: faster than NCCL; 1.00: NCCL itself).
"""

from __future__ import annotations

import math

import pandas as pd

from ccviz.errors import CcvizError
from ccviz.model.collectives import Collective
from ccviz.model.link_model import declared
from ccviz.model.topology import Topology

ALGORITHM = "nccl"


def applies(topology: Topology) -> bool:
    """Whether this fabric gets an NCCL baseline: it declares the hardware link model NCCL is modelled on."""
    from ccviz.synth.registry import REGISTRY

    return ALGORITHM in REGISTRY and declared(topology) is not None


def nccl_result(topology: Topology, collective: Collective):
    """``-a nccl`` on the same collective (ranks, root, size), judged by the simulator (a RunResult)."""
    from ccviz.runs.pipeline import run

    if collective.name not in _collectives():
        raise CcvizError(f"nccl: NCCL's model covers {', '.join(sorted(_collectives()))}, not {collective.name}",
                         "collective")
    return run(topology, collective, ALGORITHM)


def _collectives() -> frozenset[str]:
    from ccviz.synth.registry import REGISTRY

    return frozenset(REGISTRY[ALGORITHM].collectives)


def times_nccl(finish_s: float | None, nccl_s: float | None) -> float | None:
    """NCCL's finish over this one's: 1.3 = this schedule finishes in 1/1.3 of NCCL's time."""
    if not finish_s or not nccl_s or not math.isfinite(finish_s) or not math.isfinite(nccl_s):
        return None
    return nccl_s / finish_s


def words(x: float | None) -> str:
    """'1.31x NCCL' (or '-' where there is no baseline)."""
    return "-" if x is None else f"{x:.2f}x NCCL"


def times_nccl_column(table: pd.DataFrame) -> pd.Series:
    """For a Compare table that holds nccl rows: each row's ``x NCCL`` at its size (NaN where none)."""
    if "algorithm" not in table or not (table["algorithm"] == ALGORITHM).any():
        return pd.Series([float("nan")] * len(table), index=table.index, dtype=float)
    ok = table[(table["algorithm"] == ALGORITHM) & table["error"].isna()]
    nccl_at = dict(zip(ok["size_bytes"], ok["finish_time_s"], strict=True))
    return pd.Series([times_nccl(f, nccl_at.get(s)) if e is None or (isinstance(e, float) and math.isnan(e))
                      else None for s, f, e in zip(table["size_bytes"], table["finish_time_s"], table["error"],
                                                   strict=True)], index=table.index, dtype=float)
