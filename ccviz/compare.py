"""Several algorithms over a size sweep on one topology, as one table.

Each row is one (algorithm, size) judged by the simulator through
``ccviz.pipeline.run``, beside the topology's lower bound and the textbook
alpha-beta formula of the algorithm (evaluated with the slowest link's
bandwidth and the largest alpha, the worst case a textbook derivation
assumes). A failing run becomes a row with its ``error`` instead of
stopping the sweep.

A long sweep can be stopped (``stop`` event, or ``options.stop``) or given a
total ``time_limit`` in seconds: both are looked at between rows, and the
stop event is also handed to the running algorithm (which then returns its
best schedule so far, or fails with a clear error). Rows not run are kept as
rows with ``status`` "skipped" and an ``error`` saying why, so the table
always has every (algorithm, size).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import replace

import pandas as pd

from ccviz import cost
from ccviz.collectives import make_collective
from ccviz.errors import CcvizError
from ccviz.limit import limit_or_none
from ccviz.pipeline import run
from ccviz.synth.registry import SynthOptions
from ccviz.topology import Topology
from ccviz.units import format_size

COLUMNS = (
    "algorithm", "size_bytes", "size", "finish_time_s", "algbw_GBps", "busbw_GBps", "lower_bound_s",
    "bound_algbw_GBps", "bound_ratio", "formula_time_s", "formula_algbw_GBps", "verified", "status",
    "synth_time_s", "error", "limit_s", "limit_fraction",
)


def textbook_link(topology: Topology) -> tuple[float, float]:
    """(alpha_us, bandwidth_GBps) used for textbook formulas: the slowest link and the largest alpha."""
    links = topology.links.values()
    return max(link.alpha_us for link in links), min(link.bandwidth_GBps for link in links)


def textbook_formula(collective: str, algorithm: str, topology: Topology, size_bytes: float):
    """The textbook alpha-beta cost (``ccviz.cost.CostResult``) of ``algorithm``, or None without a closed form."""
    alpha_us, bw = textbook_link(topology)
    try:
        return cost.formula(collective, algorithm, topology.n_gpus, size_bytes, alpha_us, bw)
    except (CcvizError, KeyError, ValueError, NotImplementedError):
        return None


def formula_time(collective: str, algorithm: str, topology: Topology, size_bytes: float) -> float:
    """The textbook alpha-beta time of ``algorithm`` in seconds, or NaN without a closed form."""
    result = textbook_formula(collective, algorithm, topology, size_bytes)
    return math.nan if result is None else float(result.time_s)


def compare(
    topology: Topology,
    collective: str,
    algorithms: Iterable[str],
    sizes: Iterable[float],
    chunks: int = 1,
    root: int | None = None,
    options: SynthOptions | None = None,
    on_row: Callable[[dict], None] | None = None,
    stop: threading.Event | None = None,
    time_limit: float | None = None,
) -> pd.DataFrame:
    """Run every algorithm at every size; ``on_row`` sees each row as it completes (for progress).

    ``stop`` (default ``options.stop``) and ``time_limit`` (seconds for the whole sweep) end the
    sweep between rows; the rows not run are marked skipped (see the module docstring).
    """
    if time_limit is not None and not time_limit > 0:
        raise CcvizError(f"time_limit: the sweep needs a positive number of seconds, got {time_limit!r}", "time_limit")
    options = options or SynthOptions()
    stop = stop if stop is not None else options.stop
    if stop is not None and options.stop is not stop:
        options = replace(options, stop=stop)  # the running algorithm stops too
    algorithms, sizes = list(algorithms), [float(size) for size in sizes]
    deadline = math.inf if time_limit is None else time.perf_counter() + time_limit
    total = len(algorithms) * len(sizes)
    rows: list[dict] = []
    for size in sizes:
        bound = None if _ended(stop, deadline) else size_bound(topology, collective, size, chunks, root)
        for algorithm in algorithms:
            why = _ended(stop, deadline)
            if why:
                row = skipped_row(topology, collective, algorithm, size, not_run_because(why, rows, total),
                                  _seconds(bound))
            else:
                row = _row(topology, collective, algorithm, size, chunks, root, options, bound)
            rows.append(row)
            if on_row is not None:
                on_row(row)
    return pd.DataFrame(rows, columns=list(COLUMNS))


def size_bound(topology: Topology, collective: str, size: float, chunks: int = 1,
               root: int | None = None) -> cost.LowerBound | None:
    """The topology's lower bound for this collective and size (computed once, shared by its rows)."""
    try:
        return cost.lower_bound(topology, make_collective(collective, topology, size, chunks, root))
    except CcvizError:
        return None


def _seconds(bound: cost.LowerBound | None) -> float:
    return math.nan if bound is None else float(bound.time_s)


def skipped_row(topology: Topology, collective: str, algorithm: str, size: float, why: str,
                bound_s: float = math.nan) -> dict:
    """The row of a run the sweep did not make (``why``: e.g. 'the sweep was stopped after 3 of 6 runs')."""
    return {**_base(topology, collective, algorithm, float(size), bound_s), "error": f"skipped: {why}",
            "verified": False, "status": "skipped"}


def ran(rows: Iterable[dict]) -> int:
    """How many of these rows were run (not skipped)."""
    return sum(1 for row in rows if row.get("status") != "skipped")


def not_run_because(why: str, rows: Iterable[dict], total: int) -> str:
    """Why a stopped sweep's remaining rows were skipped: 'the sweep was stopped after 3 of 6 runs'."""
    return f"{why} after {ran(rows)} of {total} runs"


def _ended(stop: threading.Event | None, deadline: float) -> str | None:
    if stop is not None and stop.is_set():
        return "the sweep was stopped"
    if time.perf_counter() >= deadline:
        return "the sweep's time limit was reached"
    return None


def _base(topology, collective, algorithm, size, bound_s, root: int | None = None) -> dict:
    formula_s = formula_time(collective, algorithm, topology, size)
    try:
        limit = limit_or_none(topology, collective, size, root)
    except CcvizError:
        limit = None
    return {
        "limit_s": math.nan if limit is None else limit.limit_s,
        "algorithm": algorithm, "size_bytes": size, "size": format_size(size), "lower_bound_s": bound_s,
        "bound_algbw_GBps": size / bound_s / 1e9 if bound_s and bound_s > 0 else math.nan,
        "formula_time_s": formula_s,
        "formula_algbw_GBps": size / formula_s / 1e9 if formula_s and formula_s > 0 else math.nan,
        "error": None,
    }


def _row(topology, collective, algorithm, size, chunks, root, options, bound: cost.LowerBound | None) -> dict:
    try:
        result = run(topology, collective, algorithm, size, chunks, root, options, bound)
    except CcvizError as exc:
        return table_row(topology, collective, algorithm, size, _seconds(bound), error=str(exc), root=root)
    return table_row(topology, collective, algorithm, size, _seconds(bound), result.summary(), root=root)


def table_row(topology: Topology, collective: str, algorithm: str, size: float, bound_s: float,
              summary: dict | None = None, error: str | None = None, root: int | None = None) -> dict:
    """A table row from a run's ``synth --json`` summary (or its error): how in-process runs and the
    rows of a Dask sweep (``ccviz.sweep``) become the same table."""
    row = _base(topology, collective, algorithm, float(size), bound_s, root)
    if summary is None or summary.get("finish_time_s") is None:
        return {**row, "error": error, "verified": False}
    finish = summary["finish_time_s"]
    return {
        **row,
        "finish_time_s": finish, "algbw_GBps": summary["algbw_GBps"], "busbw_GBps": summary["busbw_GBps"],
        "bound_ratio": finish / bound_s if bound_s and bound_s > 0 else math.nan,
        "limit_fraction": row["limit_s"] / finish if finish > 0 else math.nan,
        "verified": bool(summary["verified"]), "status": summary["status"], "synth_time_s": summary["synth_time_s"],
        "error": error,
    }
