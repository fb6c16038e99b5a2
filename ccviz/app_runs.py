"""Runs for the app: a synthesis in a background thread (progress, stop) and a result cache.

Streamlit reruns the page script on every click; the solve must survive
that, report progress (TE-CCL's incumbent and gap) and stop on request. A
``SynthesisJob`` owns the thread and a ``threading.Event`` passed to the
algorithm as ``SynthOptions.stop``. Finished runs are cached process-wide,
keyed by topology JSON + collective + options (``RunRequest``), together
with the figures drawn from them, so revisiting a result is instant.

A ``SweepJob`` is the same for the Compare page: ``ccviz.compare`` rows run
one by one in a background thread that a Stop button can end between rows
(the stop also reaches the running algorithm). Finished rows are cached
process-wide per (topology, collective, algorithm, size, chunks, root, time
limit), so changing the sweep reruns only the new points.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from ccviz.compare import COLUMNS, ran, skipped_row, sweep_row
from ccviz.errors import CcvizError
from ccviz.pipeline import RunResult, run
from ccviz.synth.registry import Progress, SynthOptions
from ccviz.topology import Topology

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

    @classmethod
    def make(cls, topology: Topology, collective: str, algorithm: str, size_bytes: float, chunks: int = 1,
             root: int | None = None, **options: Any) -> RunRequest:
        kept = tuple(sorted((k, v) for k, v in options.items() if v is not None))
        return cls(topology.to_json(), collective, algorithm, float(size_bytes), int(chunks), root, kept)

    def synth_options(self, progress: Callable[[Progress], None] | None = None,
                      stop: threading.Event | None = None) -> SynthOptions:
        known = set(SynthOptions.__dataclass_fields__) - {"progress", "stop", "extra"}
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
    return _RUNS.get(request)


def cached_row(key: tuple) -> dict | None:
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
            result = run(topology, r.collective, r.algorithm, r.size_bytes, r.chunks, r.root, options)
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

    def points(self) -> list[tuple[float, str]]:
        return [(float(size), algorithm) for size in self.sizes for algorithm in self.algorithms]

    def row_key(self, size: float, algorithm: str) -> tuple:
        return (self.topology_json, self.collective, algorithm, float(size), self.chunks, self.root, self.time_limit,
                self.epoch)


class SweepJob(BackgroundJob):
    """A comparison sweep running in a background thread; poll ``done``, read ``rows``, ``stop()`` it."""

    def __init__(self, request: SweepRequest, topology: Topology) -> None:
        super().__init__()
        self.request = request
        self.rows: list[dict] = []
        self.current: tuple[str, float] | None = None  # (algorithm, size) being run
        self.progress: Progress | None = None  # the running algorithm's latest report
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
        return pd.DataFrame(list(self.rows), columns=list(COLUMNS))

    def _set_progress(self, progress: Progress) -> None:
        self.progress = progress

    def _work(self, topology: Topology) -> None:
        r = self.request
        options = SynthOptions(epoch=r.epoch, time_limit=r.time_limit, stop=self.stop_event,
                               progress=self._set_progress)
        try:
            for size, algorithm in r.points():
                key = r.row_key(size, algorithm)
                row = cached_row(key)
                if row is None and self.stop_event.is_set():
                    row = skipped_row(topology, r.collective, algorithm, size,
                                      f"the sweep was stopped after {ran(self.rows)} of {self.total} runs")
                elif row is None:
                    self.current, self.progress = (algorithm, size), None
                    row = sweep_row(topology, r.collective, algorithm, size, r.chunks, r.root, options)
                    if not self.stop_event.is_set():  # a stopped run is not the answer to this point
                        _ROWS.put(key, row)
                self.rows.append(row)
        except Exception as exc:  # a bug in an algorithm must not kill the app (CcvizErrors become rows)
            self.error = f"unexpected {type(exc).__name__} in the sweep: {exc}"


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
