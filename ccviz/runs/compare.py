"""Several algorithms over a size sweep on one topology, as one table.

Each row is one (algorithm, size) judged by the simulator through
``ccviz.runs.pipeline.run``, beside the topology's lower bound and the textbook
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

One loop serves the library and the app's Compare page: ``compare`` runs
the rows in this process, or as tasks on a Dask cluster when given a
``client`` (the engine of ``ccviz sweep``); either way each size's lower
bound is computed once for all its algorithms, finished runs become rows by
``table_row`` and the rows not run by ``skipped_rest``.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import pandas as pd

from ccviz.bounds import cost
from ccviz.bounds.limit import limit_or_none
from ccviz.errors import CcvizError
from ccviz.model.groups import group_ranks, relay_fabric
from ccviz.model.topology import Topology
from ccviz.model.units import format_size
from ccviz.runs.grid import size_bound
from ccviz.runs.pipeline import run
from ccviz.runs.sweep import SweepProgress
from ccviz.synth.registry import Progress, SynthOptions

COLUMNS = (
    "algorithm", "size_bytes", "size", "finish_time_s", "algbw_GBps", "busbw_GBps", "lower_bound_s",
    "bound_algbw_GBps", "bound_ratio", "formula_time_s", "formula_algbw_GBps", "verified", "status",
    "synth_time_s", "error", "limit_s", "limit_fraction", "limit_without_switch_sums_s", "cut_short",
)


def textbook_link(topology: Topology) -> tuple[float, float]:
    """(alpha_us, bandwidth_GBps) used for textbook formulas: the slowest link and the largest alpha."""
    links = topology.links.values()
    return max(link.alpha_us for link in links), min(link.bandwidth_GBps for link in links)


def textbook_formula(collective: str, algorithm: str, topology: Topology, size_bytes: float):
    """The textbook alpha-beta cost (``ccviz.bounds.cost.CostResult``) of ``algorithm``, or None without a closed form."""
    alpha_us, bw = textbook_link(topology)
    if algorithm in ("dimdecomp", "hierarchical", "pat"):  # the Collectives Explainer's rows, on this fabric
        from ccviz.model.collectives import make_collective
        from ccviz.runs.composed_formula import lesson_formula

        try:
            coll = make_collective(collective, topology, size_bytes)
        except CcvizError:
            return None
        return lesson_formula(topology, coll, algorithm, topology.links)
    try:
        return cost.formula(collective, algorithm, topology.n_gpus, size_bytes, alpha_us, bw)
    except (CcvizError, KeyError, ValueError, NotImplementedError):
        return None


def formula_time(collective: str, algorithm: str, topology: Topology, size_bytes: float) -> float:
    """The textbook alpha-beta time of ``algorithm`` in seconds, or NaN without a closed form."""
    result = textbook_formula(collective, algorithm, topology, size_bytes)
    return math.nan if result is None else float(result.time_s)


Point = tuple[float, str]  # (size in bytes, algorithm): one row of the table


def points(algorithms: Iterable[str], sizes: Iterable[float]) -> list[Point]:
    """The table's rows in order: sizes outermost, algorithms innermost (one size's rows share its bound)."""
    algorithms = list(algorithms)
    return [(float(size), algorithm) for size in sizes for algorithm in algorithms]


def point_of(row: dict) -> Point:
    """The (size, algorithm) a table row answers."""
    return float(row["size_bytes"]), row["algorithm"]


def table(rows: Iterable[dict], algorithms: Iterable[str], sizes: Iterable[float]) -> pd.DataFrame:
    """The rows (in any order, e.g. as a cluster finished them) as the table, in ``points`` order."""
    order = {point: k for k, point in enumerate(points(algorithms, sizes))}
    ordered = sorted(rows, key=lambda row: order.get(point_of(row), len(order)))
    return pd.DataFrame(ordered, columns=list(COLUMNS))


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
    *,
    client: Any = None,
    known: Mapping[Point, dict] | None = None,
    on_progress: Callable[[SweepProgress], None] | None = None,
    on_solver_progress: Callable[[str, float, Progress], None] | None = None,
    ranks: Sequence[int] | str | None = None,
) -> pd.DataFrame:
    """Run every algorithm at every size; ``on_row`` sees each row as it completes (for progress).

    ``stop`` (default ``options.stop``) and ``time_limit`` (seconds for the whole sweep) end the
    sweep; the rows not run are marked skipped (see the module docstring). ``client``: a Dask
    client whose cluster runs the rows as tasks (the engine of ``ccviz sweep``, ``ccviz.runs.sweep``);
    None runs them one by one in this process. ``known`` rows (a front end's cache, keyed by
    ``(size, algorithm)``) go into the table without running. ``on_progress`` sees the counts of
    rows done, failed and running; ``on_solver_progress(algorithm, size, progress)`` the running
    solvers' own reports. ``ranks``: a process group (``0-7,16``) runs the collective, the other GPUs relay;
    the table's limit and formulas are then the group's.
    """
    if time_limit is not None and not time_limit > 0:
        raise CcvizError(f"time_limit: the sweep needs a positive number of seconds, got {time_limit!r}", "time_limit")
    options = options or SynthOptions()
    stop = stop if stop is not None else options.stop
    if stop is not None and options.stop is not stop:
        options = replace(options, stop=stop)  # the running algorithm stops too
    algorithms, sizes = list(algorithms), [float(size) for size in sizes]
    deadline = math.inf if time_limit is None else time.perf_counter() + time_limit
    wanted = points(algorithms, sizes)
    rows: list[dict] = []

    def add(row: dict) -> None:
        rows.append(row)
        if on_row is not None:
            on_row(row)

    known = known or {}
    for point in wanted:
        if point in known:
            add(known[point])
    todo = [point for point in wanted if point not in known]
    runner = _Sweep(topology, collective, chunks, root, options, stop, deadline, add, on_solver_progress, ranks)
    if todo and not runner.ended():
        if client is None:
            runner.run_here(todo, len(wanted), on_progress)
        else:
            runner.run_on(client, algorithms, sizes, set(known), on_progress)
    why = runner.ended() or "the sweep ended early"
    for row in skipped_rest(runner.shown, collective, algorithms, sizes, rows, why, runner.bounds):
        add(row)
    return table(rows, algorithms, sizes)


def skipped_rest(topology: Topology, collective: str, algorithms: Iterable[str], sizes: Iterable[float],
                 rows: list[dict], why: str, bounds: Mapping[float, cost.LowerBound | None] | None = None
                 ) -> list[dict]:
    """The skipped rows of the points ``rows`` has no row for; ``why`` the sweep ended ('the sweep was
    stopped'), each row saying after how many of the table's runs."""
    wanted = points(algorithms, sizes)
    done = {point_of(row) for row in rows}
    because = not_run_because(why, rows, len(wanted))
    return [skipped_row(topology, collective, algorithm, size, because, _seconds((bounds or {}).get(size)))
            for size, algorithm in wanted if (size, algorithm) not in done]


class _Sweep:
    """One sweep's rows being run, here or on a cluster: the stop and the deadline, each size's lower
    bound computed once, each finished run turned into a table row."""

    def __init__(self, topology: Topology, collective: str, chunks: int, root: int | None, options: SynthOptions,
                 stop: threading.Event | None, deadline: float, add: Callable[[dict], None],
                 on_solver_progress: Callable[[str, float, Progress], None] | None,
                 ranks: Sequence[int] | str | None = None) -> None:
        self.topology, self.collective, self.chunks, self.root = topology, collective, chunks, root
        self.ranks = None if ranks is None else group_ranks(topology, ranks)
        self.shown = topology if self.ranks is None else relay_fabric(topology, self.ranks)  # the rows' fabric
        self.options, self.stop, self.deadline, self.add = options, stop, deadline, add
        self.on_solver_progress = on_solver_progress
        self.bounds: dict[float, cost.LowerBound | None] = {}

    def ended(self) -> str | None:
        """Why the sweep must end now ('the sweep was stopped'), None while it may go on."""
        if self.stop is not None and self.stop.is_set():
            return "the sweep was stopped"
        if time.perf_counter() >= self.deadline:
            return "the sweep's time limit was reached"
        return None

    def run_here(self, todo: list[Point], total: int,
                 on_progress: Callable[[SweepProgress], None] | None) -> None:
        """The rows one by one in this process; the stop and the deadline are looked at between rows."""
        started = time.perf_counter()
        progress = SweepProgress(total=total, existing=total - len(todo))
        for size, algorithm in todo:
            if size not in self.bounds and not self.ended():
                self.bounds[size] = size_bound(self.topology, self.collective, size, self.chunks, self.root,
                                               self.ranks)
            if self.ended():
                break
            if on_progress is not None:
                progress.running, progress.elapsed_s = 1, time.perf_counter() - started
                on_progress(progress)
            row = self._row(algorithm, size)
            progress.done += 1
            progress.failed += row["error"] is not None
            self.add(row)
        if on_progress is not None:
            progress.running, progress.elapsed_s = 0, time.perf_counter() - started
            on_progress(progress)

    def _row(self, algorithm: str, size: float) -> dict:
        bound = self.bounds[size]
        options = self.options
        if self.on_solver_progress is not None:
            options = replace(options, progress=self._reporter(algorithm, size))
        try:
            result = run(self.topology, self.collective, algorithm, size, self.chunks, self.root, options, bound,
                         ranks=self.ranks)
        except CcvizError as exc:
            return table_row(self.shown, self.collective, algorithm, size, _seconds(bound), error=str(exc),
                             root=self.root)
        # the run's own bound: a synthesizer that refines the chunks (forestcoll) is bounded at its chunking,
        # and the size's bound (at the requested chunks) does not hold for it
        return table_row(self.shown, self.collective, algorithm, size, _seconds(result.bound), result.summary(),
                         root=self.root)

    def _reporter(self, algorithm: str, size: float) -> Callable[[Progress], None]:
        """The run's progress to the caller's own ``options.progress`` and to ``on_solver_progress``."""
        own, report = self.options.progress, self.on_solver_progress

        def both(progress: Progress) -> None:
            if own is not None:
                own(progress)
            report(algorithm, size, progress)
        return both

    def run_on(self, client: Any, algorithms: list[str], sizes: list[float], known: set[Point],
               on_progress: Callable[[SweepProgress], None] | None) -> None:
        """The rows as tasks on ``client``'s cluster (``ccviz.runs.sweep``: one lower-bound task per size shared
        by its algorithms, the stop reaching the running solvers); each finished row comes back here."""
        from ccviz.runs.grid import Grid
        from ccviz.runs.sweep import sweep

        o = self.options
        local = [name for name, value, default in (("seed", o.seed, None), ("restarts", o.restarts, 1),
                                                   ("epochs", o.epochs, None), ("extra", o.extra, {}))
                 if value != default]
        if local:
            raise CcvizError(f"options: {', '.join(local)} are not sent to a Dask cluster; leave them out or "
                             "run the comparison in this process (client=None)", local[0])
        grid = Grid.make(self.topology, self.collective, algorithms, sizes, self.chunks, time_limit=o.time_limit,
                         epoch=o.epoch, gap=o.gap, root=self.root, ranks=self.ranks)
        skip = {p.key for p in grid.points() if (p.size_bytes, p.algorithm) in known}
        remaining = None if math.isinf(self.deadline) else max(self.deadline - time.perf_counter(), 1e-9)
        solver = None if self.on_solver_progress is None else (
            lambda event: self.on_solver_progress(event["algorithm"], float(event["size_bytes"]),
                                                  Progress(**event["progress"])))
        sweep(grid, client, stop=self.stop, skip=skip, time_limit=remaining, on_progress=on_progress,
              on_row=lambda row: self.add(self._engine_row(row)), on_solver_progress=solver)

    def _engine_row(self, row: dict) -> dict:
        """A row of the sweep engine (``ccviz.runs.sweep.COLUMNS``) as a table row."""
        summary = {**row, "status": row.get("solver_status")}
        bound_s = row.get("lower_bound_s")
        return table_row(self.shown, self.collective, row["algorithm"], float(row["size_bytes"]),
                         math.nan if bound_s is None else float(bound_s), summary,
                         row.get("error") if row.get("status") != "ok" else None, root=self.root)


def _seconds(bound: cost.LowerBound | None) -> float:
    """A bound in seconds for the table (NaN where none could be computed)."""
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


def _base(topology, collective, algorithm, size, bound_s, root: int | None = None) -> dict:
    """The columns every row has, run or not: the bound, the fabric's limit and the textbook formula."""
    formula_s = formula_time(collective, algorithm, topology, size)
    try:
        limit = limit_or_none(topology, collective, size, root)
    except CcvizError:
        limit = None
    return {
        "limit_s": math.nan if limit is None else limit.limit_s,
        # AllReduce on switches that add: the limit for schedules that sum at GPUs (ReduceScatter then AllGather)
        "limit_without_switch_sums_s": math.nan if limit is None or limit.without_switch_sums_s is None
        else limit.without_switch_sums_s,
        "algorithm": algorithm, "size_bytes": size, "size": format_size(size), "lower_bound_s": bound_s,
        "bound_algbw_GBps": size / bound_s / 1e9 if bound_s and bound_s > 0 else math.nan,
        "formula_time_s": formula_s,
        "formula_algbw_GBps": size / formula_s / 1e9 if formula_s and formula_s > 0 else math.nan,
        "error": None, "cut_short": None,
    }


def table_row(topology: Topology, collective: str, algorithm: str, size: float, bound_s: float,
              summary: dict | None = None, error: str | None = None, root: int | None = None) -> dict:
    """A table row from a run's ``synth --json`` summary (or its error): how in-process runs and the
    rows of a Dask sweep (``ccviz.runs.sweep``) become the same table."""
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
        "error": error, "cut_short": summary.get("cut_short"),
    }
