"""Grid sweeps on Dask distributed: an embedded ``LocalCluster`` by default, any Dask cluster when asked.

Each grid point (``ccviz.runs.grid.Point``) is one Dask task that runs
``ccviz.runs.pipeline.run`` on a worker and returns one row: the ``synth --json``
summary plus the grid keys, ``status`` (ok / error / time_limit), ``error``,
``worker`` and ``wall_s`` (the solver's own status is kept as
``solver_status``). The client is the only writer: rows are appended to the
output as they arrive and flushed, so a crash loses no finished row, and a
worker that dies mid-row has its task rerun elsewhere by the scheduler while
its row is still written once. A rerun reads the output and skips the rows
already there. A failing row is a row with its error; it never stops the
others.

Stopping (Ctrl-C, the sweep-wide time limit, or a front end's stop event)
cancels the tasks not finished and tells every worker to stop the solves it
is running (``client.run`` flips a per-sweep flag on each worker: no polling
of the scheduler). Unfinished rows are not written, so a rerun runs them.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import json
import logging
import math
import os
import re
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import pandas as pd

from ccviz.errors import CcvizError
from ccviz.model.topology import Topology
from ccviz.model.units import format_size, format_time
from ccviz.runs.grid import KEY_COLUMNS, Grid, Point, row_key, size_bound
from ccviz.runs.pipeline import SUMMARY_KEYS

OUTCOME_COLUMNS = ("status", "error", "worker", "wall_s")
RESULT_COLUMNS = tuple("solver_status" if k == "status" else k for k in SUMMARY_KEYS if k not in KEY_COLUMNS) + (
    "notes",)
COLUMNS = KEY_COLUMNS + OUTCOME_COLUMNS + RESULT_COLUMNS
POLL_S = 0.25


# ----------------------------------------------------------------------------------------- worker side
_TOPOLOGIES: dict[str, Any] = {}  # topology JSON -> Topology, per worker process
_RUNNING: dict[str, set[threading.Event]] = {}  # sweep id -> stop events of its rows running here
_STOPPED: set[str] = set()  # sweeps told to stop
_LOCK = threading.Lock()


def stop_rows(sweep_id: str) -> int:
    """Run on every worker (``client.run``) to stop a sweep: its running solves return their best."""
    with _LOCK:
        _STOPPED.add(sweep_id)
        events = list(_RUNNING.get(sweep_id, ()))
    for event in events:
        event.set()
    return len(events)


@contextlib.contextmanager
def _registered(sweep_id: str, stop: threading.Event) -> Iterator[None]:
    with _LOCK:
        _RUNNING.setdefault(sweep_id, set()).add(stop)
        if sweep_id in _STOPPED:
            stop.set()
    try:
        yield
    finally:
        with _LOCK:
            _RUNNING.get(sweep_id, set()).discard(stop)


def _topology(text: str | Topology) -> Topology:
    """The row's topology in the worker: the object the sweep was given (its links in their order), or
    one read from JSON text (whose links are sorted: a synthesizer that breaks ties in link order, mcf,
    then gave rows other than ``ccviz synth`` and the Synthesize page on the same fabric)."""
    if not isinstance(text, str):
        return text
    topology = _TOPOLOGIES.get(text)
    if topology is None:
        if len(_TOPOLOGIES) >= 8:
            _TOPOLOGIES.clear()
        topology = _TOPOLOGIES[text] = Topology.from_dict(json.loads(text))
    return topology


def size_bound_task(topology_json: str | Topology, collective: str, size: float, chunks: int, root: int | None,
                    ranks: str | None = None):
    """The lower bound of one (topology, collective, size): one task shared by every algorithm's row."""
    return size_bound(_topology(topology_json), collective, size, chunks, root, ranks)


def _worker_name() -> str:
    try:
        from distributed import get_worker

        return str(get_worker().address)
    except (ImportError, ValueError):
        return f"pid {os.getpid()}"


def _reporter(sweep_id: str, point: Point) -> Callable[[Any], None] | None:
    """The solver's progress as Dask events on topic ``sweep_id`` (at most two a second per row), for a
    front end that subscribed (``sweep(on_solver_progress=...)``)."""
    try:
        from distributed import get_worker

        worker = get_worker()
    except (ImportError, ValueError):
        return None
    last = [0.0]

    def report(progress: Any) -> None:
        now = time.monotonic()
        if now - last[0] >= 0.5:
            last[0] = now
            worker.log_event(sweep_id, {"algorithm": point.algorithm, "size_bytes": point.size_bytes,
                                        "topology_spec": point.topology_spec, "progress": vars(progress)})
    return report


def run_point(point: Point, topology_json: str | Topology, sweep_id: str, keep_schedule: bool = False,
              bound: Any = None) -> dict[str, Any]:
    """One row, computed where the task runs; never raises (a failure is a row with its error).

    ``bound`` is the size's ``LowerBound`` when the caller has it (None: computed here)."""
    from ccviz.interop.export import schedule_json
    from ccviz.runs.pipeline import run
    from ccviz.synth.registry import SynthOptions

    started = time.perf_counter()
    options = dict(point.options)
    limit = options.get("time_limit")
    stop = threading.Event()
    hit_limit = threading.Event()
    timer = None
    if limit:  # the solver has the limit too; this also ends heuristics' restarts on time
        timer = threading.Timer(limit, lambda: (hit_limit.set(), stop.set()))
        timer.daemon = True
        timer.start()
    row: dict[str, Any] = {**point.as_row(), "worker": _worker_name()}
    schedule = None
    try:
        with _registered(sweep_id, stop):
            synth_options = SynthOptions(epoch=options.get("epoch", "fastest"), time_limit=limit,
                                         gap=options.get("gap"), stop=stop, progress=_reporter(sweep_id, point))
            topology = _topology(topology_json)
            result = run(topology, point.collective, point.algorithm, point.size_bytes, point.chunks,
                         options.get("root"), synth_options, bound, ranks=options.get("ranks"))
        summary = result.summary()
        row.update({("solver_status" if k == "status" else k): v for k, v in summary.items()
                    if k not in KEY_COLUMNS})
        if hit_limit.is_set() and summary["cut_short"]:  # the row's timer stops the solver at its limit
            row["cut_short"] = "time_limit"
        if not summary["verified"]:
            first = summary["violations"][0]["message"] if summary["violations"] else "no detail"
            row.update(status="error", error=f"the simulator rejects the schedule "
                                             f"({len(summary['violations'])} violations; first: {first})")
        elif summary["status"] == "time_limit" or summary["cut_short"] == "time_limit" or hit_limit.is_set():
            row.update(status="time_limit", error=None)
        else:
            row.update(status="ok", error=None)
        if keep_schedule:
            schedule = schedule_json(result.timeline)
    except CcvizError as exc:
        row.update(status="time_limit" if hit_limit.is_set() else "error", error=str(exc))
    except Exception as exc:  # a bug in one algorithm is one failed row, never a stopped sweep
        row.update(status="error", error=f"{type(exc).__name__}: {exc}")
    finally:
        if timer is not None:
            timer.cancel()
    row["wall_s"] = time.perf_counter() - started
    return {"row": _flat(row), "schedule": schedule}


def _same(value: Any) -> Any:
    return value


def _flat(row: dict[str, Any]) -> dict[str, Any]:
    """Lists and dicts (violations, notes) as JSON text, so CSV and parquet hold the same thing."""
    return {k: json.dumps(v) if isinstance(v, (list, dict)) else v for k, v in row.items()}


# ------------------------------------------------------------------------------------------ output
class RowWriter:
    """The output file (.csv or .parquet): the rows already there, and appends that survive a crash.

    CSV rows are appended and flushed one by one. Parquet cannot be appended to, so the whole file
    is rewritten to a temporary name and renamed over the old one after each batch of rows: the
    file on disk is always complete.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        suffix = self.path.suffix.lower()
        if suffix not in (".csv", ".parquet"):
            raise CcvizError(f"--out: {self.path.name!r} should end in .csv or .parquet", "out")
        self.parquet = suffix == ".parquet"
        if self.parquet:
            try:
                import pyarrow  # noqa: F401
            except ImportError:
                raise CcvizError("--out: writing .parquet needs pyarrow (pip install pyarrow); or write a .csv file",
                                 "out") from None
        if self.path.exists() and self.path.is_dir():
            raise CcvizError(f"--out: {self.path} is a directory; give a file name", "out")
        if not self.path.parent.exists():
            raise CcvizError(f"--out: folder {str(self.path.parent)!r} does not exist", "out")
        self.rows: list[dict[str, Any]] = self._read()
        self.columns = list(self.rows[0]) if self.rows else list(COLUMNS)
        self._file: TextIO | None = None

    def _read(self) -> list[dict[str, Any]]:
        if not self.path.exists() or self.path.stat().st_size == 0:
            return []
        try:
            if self.parquet:
                frame = pd.read_parquet(self.path)
            else:
                self._drop_partial_line()
                frame = pd.read_csv(self.path, dtype={"topology_spec": str, "options": str, "error": str})
        except Exception as exc:
            raise CcvizError(f"--out: cannot read the existing {self.path.name} to resume ({exc}); "
                             "move it away or choose another file", "out") from None
        missing = [c for c in KEY_COLUMNS if c not in frame.columns]
        if missing:
            raise CcvizError(f"--out: {self.path.name} is not a ccviz sweep output (no {', '.join(missing)} "
                             "column); choose another file", "out")
        frame = frame.astype(object).where(frame.notna(), None)
        return frame.to_dict("records")

    def _drop_partial_line(self) -> None:
        """A crash mid-write can leave half a row; cut it so the next append starts on a fresh line."""
        with open(self.path, "rb+") as f:
            data = f.read()
            if data and not data.endswith(b"\n"):
                f.truncate(data.rfind(b"\n") + 1)

    def keys(self) -> set[tuple[str, ...]]:
        return {row_key(row) for row in self.rows}

    def append(self, rows: list[dict[str, Any]]) -> None:
        if not rows:
            return
        self.rows.extend(rows)
        if self.parquet:
            tmp = self.path.with_name(self.path.name + ".tmp")
            pd.DataFrame(self.rows, columns=self.columns).to_parquet(tmp, index=False)
            os.replace(tmp, self.path)
            return
        if self._file is None:
            new = not self.path.exists() or self.path.stat().st_size == 0
            self._file = open(self.path, "a", newline="")
            self._writer = csv.DictWriter(self._file, fieldnames=self.columns, extrasaction="ignore")
            if new:
                self._writer.writeheader()
        for row in rows:
            self._writer.writerow(row)
        self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


# ------------------------------------------------------------------------------------------ client side
@contextlib.contextmanager
def dask_client(workers: int | None = None, scheduler: str | None = None, processes: bool = True):
    """A Dask client: on the cluster at ``scheduler``, or on an embedded ``LocalCluster`` of ``workers``
    single-threaded processes (default: the machine's cores) that closes with the block."""
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise CcvizError("sweep: needs Dask distributed (pip install 'dask[distributed]')", "workers") from None
    if scheduler:
        if not re.match(r"^(tcp|tls|inproc|ucx|ws|wss)://", scheduler):
            raise CcvizError(f"--scheduler: {scheduler!r} should be an address such as tcp://HOST:8786", "scheduler")
        try:
            _reachable(scheduler)
            client = Client(scheduler, timeout=10, set_as_default=False)
        except (OSError, TimeoutError) as exc:
            raise CcvizError(f"--scheduler: cannot reach a Dask scheduler at {scheduler} ({exc}); start one with "
                             "`dask scheduler` or leave --scheduler out to run on this machine", "scheduler") from None
        with client:
            yield client
        return
    n = workers if workers is not None else (os.cpu_count() or 1)
    if n < 1:
        raise CcvizError(f"--workers: needs at least one worker process, got {n}", "workers")
    with LocalCluster(n_workers=n, threads_per_worker=1, processes=processes, dashboard_address=":0",
                      silence_logs=logging.ERROR) as cluster, Client(cluster, set_as_default=False) as client:
        yield client


def _reachable(address: str, timeout_s: float = 3.0) -> None:
    """Fail fast (connection refused, unknown host) before Dask's own retrying connect."""
    import socket

    scheme, _, rest = address.partition("://")
    host, _, port = rest.rpartition(":")
    if scheme != "tcp" or not port.isdigit():
        return
    with socket.create_connection((host.strip("[]") or "127.0.0.1", int(port)), timeout=timeout_s):
        pass


@dataclass
class SweepProgress:
    """What a progress display needs, reported at least every ``POLL_S`` seconds."""

    total: int  # rows of the grid
    existing: int  # rows found in the output before this run
    done: int = 0  # rows finished in this run (ok or not)
    failed: int = 0
    running: int = 0
    elapsed_s: float = 0.0
    stopping: str | None = None

    @property
    def remaining(self) -> int:
        return self.total - self.existing - self.done

    @property
    def eta_s(self) -> float | None:
        if not self.done or not self.remaining:
            return None
        return self.elapsed_s / self.done * self.remaining


@dataclass
class SweepReport:
    """The outcome: every row of the grid found in the output (old and new) and how the run ended."""

    rows: list[dict[str, Any]]
    new: int
    wall_s: float
    total: int
    stopped: str | None = None  # why the sweep ended early, None when it ran to the end
    out: str | None = None
    workers: int = 0
    unsupported: list[tuple[str, str]] = field(default_factory=list)

    @property
    def ok(self) -> int:
        return sum(1 for r in self.rows if r.get("status") == "ok")

    @property
    def failed(self) -> int:
        return sum(1 for r in self.rows if r.get("status") == "error")

    @property
    def time_limited(self) -> int:
        return sum(1 for r in self.rows if r.get("status") == "time_limit")

    def summary(self) -> dict[str, Any]:
        """The ``ccviz sweep --json`` object."""
        return {"rows": len(self.rows), "ok": self.ok, "failed": self.failed, "time_limit": self.time_limited,
                "wall_s": self.wall_s, "new": self.new, "resumed": len(self.rows) - self.new, "grid": self.total,
                "stopped": self.stopped, "out": self.out, "workers": self.workers,
                "not_implemented": [f"{a} {c}" for a, c in self.unsupported]}


def sweep(grid: Grid, client, out: RowWriter | None = None, *, time_limit: float | None = None,
          schedules: str | Path | None = None, stop: threading.Event | None = None,
          on_progress: Callable[[SweepProgress], None] | None = None,
          on_row: Callable[[dict[str, Any]], None] | None = None,
          skip: set[tuple[str, ...]] | None = None,
          on_solver_progress: Callable[[dict[str, Any]], None] | None = None) -> SweepReport:
    """Run the grid's rows not already in ``out`` on ``client``'s cluster (see the module docstring).

    ``time_limit`` bounds the whole sweep in seconds; ``stop`` ends it early; Ctrl-C (KeyboardInterrupt)
    does the same and the report says so. ``on_row`` sees each finished row; points whose key is in
    ``skip`` are not run (a front end's cache has them). ``on_solver_progress`` receives the running
    solvers' reports: ``{"algorithm", "size_bytes", "topology_spec", "progress": Progress fields}``.
    """
    if time_limit is not None and not (time_limit > 0 and math.isfinite(time_limit)):
        raise CcvizError(f"--sweep-time-limit: must be a positive number of seconds, got {time_limit}",
                         "sweep-time-limit")
    started = time.perf_counter()
    points = grid.points()
    wanted = {p.key for p in points}
    done_keys = (out.keys() if out is not None else set()) | (skip or set())
    kept = [row for row in (out.rows if out is not None else []) if row_key(row) in wanted]
    todo = [p for p in points if p.key not in done_keys]
    schedule_dir = Path(schedules) if schedules else None
    if schedule_dir is not None:
        schedule_dir.mkdir(parents=True, exist_ok=True)
    progress = SweepProgress(total=len(points), existing=len(points) - len(todo),
                             failed=sum(1 for row in kept if row.get("status") == "error"))
    sweep_id = f"ccviz-sweep-{uuid.uuid4().hex[:12]}"
    # A topology is a task, not scattered data: if the worker holding it dies the scheduler recomputes it.
    # The object itself travels (pickled, links in their order), not its JSON (links sorted): a row on a
    # worker is then the row of the same run in this process (mcf, 4x4 torus, 1 GB: 10.31 ms on a worker from
    # JSON, 10 ms here and in `ccviz synth`).
    topologies = {spec: client.submit(_same, grid.loaded[spec], key=f"{sweep_id}-topology-{k}")
                  for k, spec in enumerate(dict.fromkeys(p.topology_spec for p in todo))}
    bounds = {}  # one lower-bound task per (topology, collective, size, chunks, root), shared by algorithms
    for p in todo:
        if p.bound_key not in bounds:
            bounds[p.bound_key] = client.submit(size_bound_task, topologies[p.topology_spec], p.collective,
                                                p.size_bytes, p.chunks, dict(p.options).get("root"),
                                                dict(p.options).get("ranks"),
                                                key=f"{sweep_id}-bound-{len(bounds)}")
    futures = {client.submit(run_point, p, topologies[p.topology_spec], sweep_id, schedule_dir is not None,
                             bounds[p.bound_key], key=f"{sweep_id}-{i}", pure=False): p
               for i, p in enumerate(todo)}
    pending = set(futures)
    if on_solver_progress is not None:
        client.subscribe_topic(sweep_id, lambda event: on_solver_progress(event[1]))
    arrived = threading.Event()  # set by any finishing task: rows are written as soon as they arrive
    for future in futures:
        future.add_done_callback(lambda _: arrived.set())
    new: list[dict[str, Any]] = []
    deadline = math.inf if time_limit is None else started + time_limit
    slots = _Slots(client)
    try:
        while pending:
            why = None  # decided before harvesting: every row finished by then is kept
            if stop is not None and stop.is_set():
                why = "stopped"
            elif time.perf_counter() >= deadline:
                why = f"the sweep's time limit of {time_limit:g} s was reached"
            batch = []
            for future in [f for f in pending if f.done()]:
                pending.discard(future)
                point = futures.pop(future)  # dropping the future frees its result on the worker
                row, schedule = _outcome(future, point)
                if row is None:
                    continue
                if schedule is not None and schedule_dir is not None:
                    (schedule_dir / schedule_name(point)).write_text(schedule)
                batch.append(row)
                progress.done += 1
                progress.failed += row.get("status") == "error"
            if out is not None:
                out.append(batch)
            new.extend(batch)
            if on_row is not None:
                for row in batch:
                    on_row(row)
            if on_progress is not None:
                progress.running = min(len(pending), slots.count())
                progress.elapsed_s = time.perf_counter() - started
                on_progress(progress)
            if why:
                progress.stopping = why
                break
            arrived.wait(POLL_S)
            arrived.clear()
    except KeyboardInterrupt:
        progress.stopping = "interrupted"
    finally:
        if pending:
            _cancel(client, list(pending), sweep_id)
        if on_solver_progress is not None:
            with contextlib.suppress(Exception):
                client.unsubscribe_topic(sweep_id)
        if out is not None:
            out.close()
    if on_progress is not None:
        progress.running, progress.elapsed_s = 0, time.perf_counter() - started
        on_progress(progress)
    return SweepReport(kept + new, len(new), time.perf_counter() - started, len(points), progress.stopping,
                       str(out.path) if out is not None else None, slots.threads, grid.unsupported)


def _outcome(future, point: Point) -> tuple[dict[str, Any] | None, str | None]:
    """The row of a finished task; a task Dask itself failed (e.g. its workers kept dying) is an error row."""
    if future.status == "cancelled":
        return None, None
    if future.status == "error":
        exc = future.exception()
        return _flat({**point.as_row(), "status": "error", "error": f"{type(exc).__name__}: {exc}",
                      "worker": None, "wall_s": None}), None
    result = future.result()
    return result["row"], result["schedule"]


def _cancel(client, futures: list, sweep_id: str) -> None:
    """Cancel what is queued and stop what is running (the solvers return early; their rows are dropped)."""
    with contextlib.suppress(Exception):
        client.cancel(futures)
    with contextlib.suppress(Exception):
        client.run(stop_rows, sweep_id)


class _Slots:
    """How many rows can run at once (the cluster's threads) and how many do, asked at most once a second."""

    def __init__(self, client) -> None:
        self.client = client
        self.threads = sum(client.nthreads().values())
        self._asked = 0.0
        self._count = 0

    def count(self) -> int:
        if time.perf_counter() - self._asked > 1.0:
            self._asked = time.perf_counter()
            with contextlib.suppress(Exception):
                nthreads = self.client.nthreads()
                self.threads = sum(nthreads.values())
                self._count = sum(min(len(tasks), nthreads.get(w, 1))
                                  for w, tasks in self.client.processing().items())
        return self._count


def schedule_name(point: Point) -> str:
    """A file name per row for ``--schedules DIR``: readable, and unique per grid key."""
    digest = hashlib.sha1("|".join(point.key).encode()).hexdigest()[:8]
    topo = re.sub(r"[^A-Za-z0-9=.-]+", "_", Path(point.topology_spec).stem if "/" in point.topology_spec
                  else point.topology_spec).strip("_")
    return f"{topo}__{point.collective}__{point.algorithm}__{format_size(point.size_bytes)}__c{point.chunks}__{digest}.json"


# ------------------------------------------------------------------------------------------ display
class ProgressBar:
    """One line on stderr: a bar, rows done / failed / running, elapsed and ETA (redrawn in place on a
    terminal; a line every few seconds otherwise)."""

    def __init__(self, stream: TextIO | None = None, width: int = 28) -> None:
        self.stream = stream or sys.stderr
        self.width = width
        self.tty = self.stream.isatty()
        self._last = 0.0
        self._ended = False

    def __call__(self, p: SweepProgress) -> None:
        final = p.running == 0 and (p.remaining == 0 or p.stopping is not None)
        now = time.perf_counter()
        if self._ended or (not self.tty and not final and now - self._last < 5):
            return
        self._ended = final
        self._last = now
        finished = p.existing + p.done
        filled = int(self.width * finished / p.total) if p.total else self.width
        eta = f"ETA {format_time(p.eta_s)}" if p.eta_s is not None else ""
        line = (f"[{'#' * filled}{'.' * (self.width - filled)}] {finished}/{p.total} done, {p.failed} failed, "
                f"{p.running} running, {format_time(p.elapsed_s)} {eta}").rstrip()
        if p.stopping:
            line += f" ({p.stopping})"
        if self.tty:
            self.stream.write("\r" + line.ljust(100) + ("\n" if final else ""))
        else:
            self.stream.write(line + "\n")
        self.stream.flush()


def best_table(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Per topology and collective: the algorithm with the highest busbw at each size (ok rows only)."""
    frame = pd.DataFrame(rows)
    if frame.empty or "status" not in frame:
        return pd.DataFrame()
    ok = frame[frame["status"].isin(["ok", "time_limit"]) & frame["busbw_GBps"].notna()].copy()
    if ok.empty:
        return pd.DataFrame()
    ok["busbw_GBps"] = ok["busbw_GBps"].astype(float)
    best = ok.loc[ok.groupby(["topology_spec", "collective", "size_bytes", "chunks"])["busbw_GBps"].idxmax()]
    best = best.assign(best=best["algorithm"] + " " + best["busbw_GBps"].map(lambda v: f"{v:.3g}"))
    table = best.pivot_table(index=["size_bytes", "chunks"], columns=["topology_spec", "collective"],
                             values="best", aggfunc="first")
    table.index = [f"{format_size(s)}" + (f" x{int(c)}" if len(ok["chunks"].unique()) > 1 else "")
                   for s, c in table.index]
    return table


def summary_text(report: SweepReport) -> str:
    """The one-screen summary printed at the end of ``ccviz sweep``."""
    lines = [f"{len(report.rows)}/{report.total} rows in {report.out or 'memory'} ({report.new} new, "
             f"{len(report.rows) - report.new} resumed): {report.ok} ok, {report.failed} failed, "
             f"{report.time_limited} at their time limit; {format_time(report.wall_s)} on {report.workers} "
             f"worker thread(s)"]
    if report.stopped:
        lines.append(f"stopped early ({report.stopped}); run the same command again to finish the rest")
    if report.unsupported:
        lines.append("not implemented (their rows are errors): "
                     + ", ".join(f"{a} {c}" for a, c in report.unsupported))
    table = best_table(report.rows)
    if not table.empty:
        lines.append("best algorithm per size, busbw GB/s:")
        lines.append(table.fillna("-").to_string())
    errors: dict[tuple, list[float]] = {}  # one line per (where, message), with the sizes it hit
    for row in report.rows:
        if row.get("status") == "error":
            where = (row["algorithm"], row["collective"], row["topology_spec"], row["error"])
            errors.setdefault(where, []).append(float(row["size_bytes"]))
    for (algorithm, collective, spec, message), sizes in list(errors.items())[:6]:
        at = ", ".join(format_size(s) for s in sorted(sizes)[:4]) + (", ..." if len(sizes) > 4 else "")
        lines.append(f"  error: {algorithm} {collective} on {spec} at {at}: {message}")
    if len(errors) > 6:
        lines.append(f"  ... and {len(errors) - 6} more kinds of error (see the status and error columns)")
    return "\n".join(lines)
