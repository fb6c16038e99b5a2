"""Runs for the app: a synthesis in a background thread (progress, stop) and a result cache.

Streamlit reruns the page script on every click; the solve must survive
that, report progress (TE-CCL's incumbent and gap) and stop on request. A
``SynthesisJob`` owns the thread and a ``threading.Event`` passed to the
algorithm as ``SynthOptions.stop``. Finished runs are cached process-wide,
keyed by topology JSON + collective + options (``RunRequest``), together
with the figures drawn from them, so revisiting a result is instant.

A ``SweepJob`` is the same for the Compare page: it calls the library's
``ccviz.compare.compare`` (the loop ``ccviz`` users call) from a background
thread that a Stop button can end, with its rows running on the Dask sweep
engine (in the app process, on an embedded cluster or on a Dask scheduler;
the stop also reaches the running solvers). Finished rows are cached
process-wide per (topology, collective, algorithm, size, chunks, root, time
limit), so changing the sweep reruns only the new points.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from ccviz.compare import Point, compare, point_of, points, skipped_rest, table
from ccviz.errors import CcvizError
from ccviz.model.groups import group_ranks
from ccviz.pipeline import RunResult, run
from ccviz.sweep import SweepProgress, dask_client
from ccviz.synth.registry import REGISTRY, Progress, SynthOptions
from ccviz.topology import Topology
from ccviz.units import format_size, format_time

CACHE_SIZE = 24
ROW_CACHE_SIZE = 4096


@dataclass(frozen=True)
class RunRequest:
    """Everything that determines a run's result (the cache key)."""

    topology_json: str
    collective: str
    algorithm: str
    size_bytes: float
    chunks: int = 1
    root: int | None = None
    options: tuple[tuple[str, Any], ...] = ()
    ranks: tuple[int, ...] | None = None  # a process group (None: every GPU)

    @classmethod
    def make(cls, topology: Topology, collective: str, algorithm: str, size_bytes: float, chunks: int = 1,
             root: int | None = None, ranks: str | None = None, **options: Any) -> RunRequest:
        kept = tuple(sorted((k, v) for k, v in options.items() if v is not None))
        group = group_ranks(topology, ranks) if ranks else None  # a bad group is refused before any work
        return cls(topology.to_json(), collective, algorithm, float(size_bytes), int(chunks), root, kept, group)

    def synth_options(self, progress: Callable[[Progress], None] | None = None,
                      stop: threading.Event | None = None) -> SynthOptions:
        known = set(SynthOptions.__dataclass_fields__) - {"progress", "stop", "extra", "algorithm_options"}
        opts = dict(self.options)
        extra = {k: v for k, v in opts.items() if k not in known}
        return SynthOptions(**{k: v for k, v in opts.items() if k in known}, extra=extra,
                            progress=progress, stop=stop)


@dataclass
class CachedRun:
    """A finished run plus the figures already drawn from it."""

    request: RunRequest
    result: RunResult
    server_time_s: float
    stopped: bool = False
    figures: dict[str, Any] = field(default_factory=dict)

    def figure(self, name: str, build: Callable[[], Any]) -> Any:
        """Draw a figure once per run (animations of big schedules take a moment)."""
        if name not in self.figures:
            self.figures[name] = build()
        return self.figures[name]


class LruCache:
    """A small thread-safe least-recently-used map (results survive reruns; memory stays bounded)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: OrderedDict[Any, Any] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Any) -> Any:
        with self._lock:
            hit = self._items.get(key)
            if hit is not None:
                self._items.move_to_end(key)
            return hit

    def put(self, key: Any, value: Any) -> None:
        with self._lock:
            self._items[key] = value
            while len(self._items) > self.size:
                self._items.popitem(last=False)


_RUNS = LruCache(CACHE_SIZE)
_ROWS = LruCache(ROW_CACHE_SIZE)
_REPRODUCED = LruCache(2 * 66)  # published rows (two time limits' worth of the TE-CCL table)


def cached(request: RunRequest) -> CachedRun | None:
    """The finished run of this request, if one is still in the cache."""
    return _RUNS.get(request)


def cached_row(key: tuple) -> dict | None:
    """A Compare row finished earlier (``SweepRequest.row_key``), if still in the cache."""
    return _ROWS.get(key)


class BackgroundJob:
    """Work in a daemon thread that survives Streamlit reruns; poll ``done``, ``stop()`` it."""

    def __init__(self) -> None:
        self.stop_event = threading.Event()
        self.error: str | None = None
        self.started = time.perf_counter()
        self._thread: threading.Thread | None = None

    def _start(self, name: str, *args: Any) -> None:
        self._thread = threading.Thread(target=self._work, args=args, daemon=True, name=name)
        self._thread.start()

    def _work(self, *args: Any) -> None:
        raise NotImplementedError

    @property
    def done(self) -> bool:
        return self._thread is None or not self._thread.is_alive()

    @property
    def elapsed_s(self) -> float:
        return time.perf_counter() - self.started

    def stop(self) -> None:
        self.stop_event.set()

    def wait(self, timeout_s: float) -> bool:
        if self._thread is not None:
            self._thread.join(timeout_s)
        return self.done


class SynthesisJob(BackgroundJob):
    """One synthesis running in a background thread; poll ``done`` and read ``progress``."""

    def __init__(self, request: RunRequest, topology: Topology) -> None:
        super().__init__()
        self.request = request
        self.progress: list[Progress] = []
        self.entry: CachedRun | None = cached(request)
        if self.entry is None:
            self._start("ccviz-synth", topology)

    def latest(self) -> Progress | None:
        return self.progress[-1] if self.progress else None

    def _work(self, topology: Topology) -> None:
        r = self.request
        try:
            options = r.synth_options(progress=self.progress.append, stop=self.stop_event)
            result = run(topology, r.collective, r.algorithm, r.size_bytes, r.chunks, r.root, options, ranks=r.ranks)
        except CcvizError as exc:
            self.error = str(exc)
            return
        except Exception as exc:  # a bug in an algorithm must not kill the app
            self.error = f"unexpected {type(exc).__name__} in {r.algorithm}: {exc}"
            return
        entry = CachedRun(r, result, time.perf_counter() - self.started, stopped=self.stop_event.is_set())
        if not entry.stopped:  # a stopped solve is not the answer to this request
            _RUNS.put(r, entry)
        self.entry = entry



# ----------------------------------------------------------------------------- sweeps (Compare page)
@dataclass(frozen=True)
class SweepRequest:
    """Everything that determines a comparison table; its points are (size, algorithm), sizes outer."""

    topology_json: str
    collective: str
    algorithms: tuple[str, ...]
    sizes: tuple[float, ...]
    chunks: int = 1
    root: int | None = None
    time_limit: float | None = None  # per run, seconds
    epoch: str | float = "fastest"  # TE-CCL's epoch (the other algorithms ignore it)

    def points(self) -> list[Point]:
        """(size, algorithm) of every row, in table order."""
        return points(self.algorithms, self.sizes)

    def row_key(self, size: float, algorithm: str) -> tuple:
        """What one row's result depends on: its cache key."""
        return (self.topology_json, self.collective, algorithm, float(size), self.chunks, self.root, self.time_limit,
                self.epoch)


class SweepJob(BackgroundJob):
    """A comparison (``ccviz.compare.compare``) on the Dask sweep engine; poll ``done``, read ``rows``, ``stop()`` it.

    Rows run where ``engine_for`` says: a Dask scheduler when an address is given, else this app's
    embedded cluster (worker processes, started once and kept) or, for light sweeps, a one-thread
    Dask worker inside the app process (see ``engine_for``: starting processes costs more than such
    a sweep). Stop cancels the rows not started and stops the running solvers; their points become
    skipped rows.
    """

    def __init__(self, request: SweepRequest, topology: Topology, scheduler: str | None = None,
                 engine: str | None = None) -> None:
        super().__init__()
        self.request = request
        self.rows: list[dict] = []
        self.engine = engine or engine_for(request, topology, scheduler)
        self.scheduler = scheduler.strip() if scheduler else None
        self.sweep_progress: SweepProgress | None = None
        self.current: tuple[str, float] | None = None  # (algorithm, size) of the latest solver report
        self.progress: Progress | None = None  # that report
        self._start("ccviz-sweep", topology)

    @property
    def total(self) -> int:
        return len(self.request.algorithms) * len(self.request.sizes)

    @property
    def fraction(self) -> float:
        return len(self.rows) / self.total if self.total else 1.0

    @property
    def stopped(self) -> bool:
        return any(row.get("status") == "skipped" for row in self.rows)

    def table(self) -> pd.DataFrame:
        """The rows so far as the Compare table, in table order."""
        return table(self.rows, self.request.algorithms, self.request.sizes)

    def status_line(self) -> str:
        """'12/48 runs, 1 failed, 2 running, ETA 5 s, on the embedded cluster (2 processes)'."""
        p = self.sweep_progress
        parts = [f"{len(self.rows)}/{self.total} runs"]
        if p is not None:
            parts += [f"{p.failed} failed", f"{p.running} running"]
            if p.eta_s is not None:
                parts.append(f"ETA {format_time(p.eta_s)}")
        else:
            parts.append("starting the engine" if self.engine != "in-process" else "starting")
        if self.current is not None and self.progress is not None and self.progress.message:
            algorithm, size = self.current
            parts.append(f"{algorithm} at {format_size(size)}: {self.progress.text()}")
        text = ", ".join(parts) + f" — {engine_label(self.engine, self.scheduler)}"
        return text + (" (stopping…)" if self.stop_event.is_set() else "")

    def _on_progress(self, progress: SweepProgress) -> None:
        self.sweep_progress = progress

    def _on_solver_progress(self, algorithm: str, size: float, progress: Progress) -> None:
        self.current, self.progress = (algorithm, size), progress

    def _work(self, topology: Topology) -> None:
        r = self.request
        known = {point: row for point in r.points() if (row := cached_row(r.row_key(*point))) is not None}
        options = SynthOptions(time_limit=r.time_limit, epoch=r.epoch)
        try:  # the engine is started only when some point is not cached
            with engine_client(self.engine, self.scheduler) if len(known) < self.total else nullcontext() as client:
                compare(topology, r.collective, r.algorithms, r.sizes, r.chunks, r.root, options, on_row=self._add,
                        stop=self.stop_event, client=client, known=known, on_progress=self._on_progress,
                        on_solver_progress=self._on_solver_progress)
        except CcvizError as exc:
            self.error = str(exc)
        except Exception as exc:  # a broken cluster or a bug must not kill the app
            self.error = f"unexpected {type(exc).__name__} in the sweep: {exc}"
        if self.error:
            why = "the sweep was stopped" if self.stop_event.is_set() else "the sweep ended early"
            self.rows.extend(skipped_rest(topology, r.collective, r.algorithms, r.sizes, self.rows, why))

    def _add(self, row: dict) -> None:
        """A row of the table as it arrives, cached unless it was skipped or the sweep stopped."""
        point = point_of(row)
        if row.get("status") != "skipped" and not self.stop_event.is_set():
            _ROWS.put(self.request.row_key(*point), row)
        if self.current == (row["algorithm"], point[0]):
            self.current = self.progress = None
        self.rows.append(row)


# ----------------------------------------------------------------------------- where sweeps run
LIGHT_GPUS = 64  # measured (bench/sweep.py): heuristic rows on <= 64 GPUs take 0.01-0.25 s each
_CLIENTS: dict[str, tuple[Any, contextlib.ExitStack]] = {}
_CLIENTS_LOCK = threading.Lock()


@atexit.register
def _close_clients() -> None:
    """Close the embedded clusters before Dask's own exit hooks run (registered later, run earlier)."""
    while _CLIENTS:
        _, (_, stack) = _CLIENTS.popitem()
        with contextlib.suppress(Exception):
            stack.close()


def engine_for(request: SweepRequest, topology: Topology, scheduler: str | None = None) -> str:
    """'scheduler' when an address is given; else 'local cluster' when it is already running or the
    sweep is heavy (an optimal solver, or a fabric over ``LIGHT_GPUS``); else 'in-process'.

    Why: starting the embedded cluster's worker processes took 8-13 s on this 2-core machine
    (bench/sweep.py), while a light sweep's rows take 0.01-0.25 s each, so for light sweeps start-up
    would dominate; a one-thread Dask worker in the app process starts in well under a second and
    runs the same tasks. Heavy sweeps gain from processes (one per core, a solver crash cannot take
    the app down), and once started the cluster is kept for every later sweep.
    """
    if scheduler and scheduler.strip():
        return "scheduler"
    if "local cluster" in _CLIENTS:
        return "local cluster"
    heavy = topology.n_gpus > LIGHT_GPUS or any(REGISTRY[a].kind == "optimal" for a in request.algorithms
                                                if a in REGISTRY)
    return "local cluster" if heavy else "in-process"


def engine_label(engine: str, scheduler: str | None = None) -> str:
    """Where a sweep runs, in words for the status line."""
    if engine == "scheduler":
        return f"on the Dask cluster at {scheduler}"
    if engine == "local cluster":
        return f"on the embedded cluster ({os.cpu_count() or 1} processes)"
    return "in the app process (one Dask worker thread)"


@contextlib.contextmanager
def engine_client(engine: str, scheduler: str | None = None):
    """A Dask client for ``engine``: a fresh connection to a scheduler (closed after the sweep), or one of
    the app's embedded clusters, started on first use and kept for later sweeps."""
    if engine == "scheduler":
        with dask_client(scheduler=scheduler) as client:
            yield client
        return
    with _CLIENTS_LOCK:
        if engine not in _CLIENTS:
            stack = contextlib.ExitStack()
            client = stack.enter_context(dask_client(workers=None if engine == "local cluster" else 1,
                                                     processes=engine == "local cluster"))
            _CLIENTS[engine] = (client, stack)
        client = _CLIENTS[engine][0]
    yield client


# ------------------------------------------------------------------ published tables (Papers page)
class ReproduceJob(BackgroundJob):
    """A paper's published rows re-run one by one in a background thread (``ccviz.reproduce``).

    Finished rows are cached process-wide per (row, time limit); Stop ends the running row with its
    best schedule and marks the rest 'not run'.
    """

    def __init__(self, runs: list, time_limit: float) -> None:
        super().__init__()
        self.runs = runs
        self.time_limit = time_limit
        self.rows: list = []  # ccviz.reproduce.Reproduction, in order
        self.current: str | None = None
        self._start("ccviz-reproduce")

    @property
    def fraction(self) -> float:
        return len(self.rows) / len(self.runs) if self.runs else 1.0

    def _work(self) -> None:
        from ccviz.reproduce import Reproduction, reproduce_run

        try:
            for run_ in self.runs:
                key = ("reproduce", run_, self.time_limit)
                row = _REPRODUCED.get(key)
                if row is None and self.stop_event.is_set():
                    row = Reproduction(run_)
                elif row is None:
                    self.current = run_.name
                    row = reproduce_run(run_, self.time_limit, self.stop_event)
                    if not self.stop_event.is_set():  # a stopped row is not the answer to this run
                        _REPRODUCED.put(key, row)
                self.rows.append(row)
        except Exception as exc:  # a bug must not kill the app
            self.error = f"unexpected {type(exc).__name__} while reproducing: {exc}"
        self.current = None
