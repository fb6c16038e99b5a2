"""Runs for the app: background jobs (progress, stop) whose solves run in worker processes, and result caches.

Streamlit reruns the page script on every click; the solve must survive
that, report progress (TE-CCL's incumbent and gap) and stop on request. A
``SynthesisJob`` owns the thread and a ``threading.Event`` for Stop. The
solve itself runs in a worker process of ``ccviz.runs.isolated`` (one
process per solve, at most one per core at a time, the rest in line), so
solves of different users cannot collide in Pyomo's process-wide output
capture, a crash cannot take the server down, Stop can end a solve at once,
and its memory goes back to the system when it ends. Finished runs are
cached process-wide, keyed by topology JSON + collective + options
(``RunRequest``), together with the figures drawn from them, so revisiting a
result is instant; the caches are bounded in bytes (least recently used
dropped first) and ``cache_line`` says so on screen.

A ``SweepJob`` is the same for the Compare page: it calls the library's
``ccviz.runs.compare.compare`` (the loop ``ccviz`` users call) from a background
thread that a Stop button can end, with its rows running in a worker
process, on the Dask sweep engine's embedded cluster (closed when the sweep
ends) or on a Dask scheduler; the stop also reaches the running solvers. Finished rows are cached
process-wide per (topology, collective, algorithm, size, chunks, root, time
limit), so changing the sweep reruns only the new points.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import pickle
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from ccviz.app import orphans
from ccviz.errors import CcvizError
from ccviz.model.groups import group_ranks
from ccviz.model.topology import Topology
from ccviz.model.units import format_size, format_time
from ccviz.runs.compare import Point, compare, point_of, points, skipped_rest, table
from ccviz.runs.isolated import Ticket, compare_task, pool, release_memory, reproduce_task, synthesis_task
from ccviz.runs.pipeline import RunResult, run
from ccviz.runs.sweep import SweepProgress, dask_client
from ccviz.synth.registry import REGISTRY, LazyFunction, Progress, SynthOptions

RUN_CACHE_BYTES = 64e6  # finished runs and their figures (a TE-CCL run on 16 GPUs is ~0.1 MB, figures more)
ROW_CACHE_BYTES = 8e6  # Compare rows (~1 kB each)
REPRODUCED_CACHE_BYTES = 16e6  # the Papers page's rows


# The Synthesize page's shared solver options as it starts (``ccviz.app.ui``): a run made with exactly these is
# the page's default run, which a link (``ccviz.app.url``) can remake from its algorithm alone.
SHARED_OPTION_DEFAULTS: dict[str, Any] = {"epoch": "fastest", "time_limit": 30.0, "gap": 0.0, "seed": 0, "restarts": 1}


def default_options(algorithm: str) -> dict[str, Any]:
    """The shared options ``algorithm`` reads, at the Synthesize page's starting values."""
    used = REGISTRY[algorithm].options_used if algorithm in REGISTRY else ()
    return {name: SHARED_OPTION_DEFAULTS[name] for name in used if name in SHARED_OPTION_DEFAULTS}


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
    dest: int | None = None  # sendrecv's destination
    ranks: tuple[int, ...] | None = None  # a process group (None: every GPU)
    matrix: tuple[tuple[float, ...], ...] | None = None  # alltoallv: bytes from rank i to rank j

    @classmethod
    def make(cls, topology: Topology, collective: str, algorithm: str, size_bytes: float, chunks: int = 1,
             root: int | None = None, ranks: str | None = None, dest: int | None = None, matrix: Any = None,
             **options: Any) -> RunRequest:
        kept = tuple(sorted((k, v) for k, v in options.items() if v is not None))
        group = group_ranks(topology, ranks) if ranks else None  # a bad group is refused before any work
        rows = None if matrix is None else tuple(tuple(float(x) for x in row) for row in matrix)
        return cls(topology.to_json(), collective, algorithm, float(size_bytes), int(chunks), root, kept, dest, group,
                   rows)

    def collective_for(self, topology: Topology) -> Any:
        """The collective by name, or an AllToAllv built from the request's matrix."""
        if self.matrix is None:
            return self.collective
        import numpy as np

        from ccviz.runs.moe import matrix_collective

        return matrix_collective(topology, np.array(self.matrix), self.ranks)

    def synth_options(self, progress: Callable[[Progress], None] | None = None,
                      stop: threading.Event | None = None) -> SynthOptions:
        known = set(SynthOptions.__dataclass_fields__) - {"progress", "stop", "extra", "algorithm_options", "best"}
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
    stopped_at_limit: bool = False  # stopped by the time limit (from outside the solver), not by the user's Stop
    figures: dict[str, Any] = field(default_factory=dict)
    nbytes: int = 0  # the result's size (pickled, as it came from its worker); figures add theirs

    def figure(self, name: str, build: Callable[[], Any]) -> Any:
        """Draw a figure once per run (animations of big schedules take a moment)."""
        if name not in self.figures:
            self.figures[name] = build()
            self.nbytes += size_of(self.figures[name])
            _RUNS.trim()  # the run grew in the cache: keep the cache within its bytes (it read "77 MB of 64 MB")
        return self.figures[name]


def size_of(value: Any) -> int:
    """Bytes a cached value holds, estimated by its pickled size (0 when it cannot be pickled)."""
    try:
        return len(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
    except Exception:  # a figure or row that cannot be pickled is counted as nothing rather than failing
        return 0


class LruCache:
    """A thread-safe least-recently-used map bounded in bytes (results survive reruns; memory stays bounded).

    ``weigh(value)`` is a value's size in bytes, asked once on ``put``, or every time the total is needed
    when ``live`` (a cached run grows as figures are drawn from it, and says so cheaply); on each ``put``
    (and ``trim``) the least recently used entries are dropped until the total fits ``max_bytes``.
    """

    def __init__(self, max_bytes: float, weigh: Callable[[Any], int] = size_of, live: bool = False) -> None:
        self.max_bytes = max_bytes
        self.weigh = weigh
        self.live = live
        self._items: OrderedDict[Any, tuple[Any, int]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Any) -> Any:
        with self._lock:
            hit = self._items.get(key)
            if hit is not None:
                self._items.move_to_end(key)
            return None if hit is None else hit[0]

    def put(self, key: Any, value: Any) -> None:
        nbytes = self.weigh(value)
        with self._lock:
            self._items[key] = (value, nbytes)
            self._items.move_to_end(key)
        self.trim()

    def trim(self) -> None:
        """Drop the least recently used entries until the total fits ``max_bytes`` (the last one stays): on
        ``put``, and when a live entry has grown (figures drawn from a cached run)."""
        with self._lock:
            while len(self._items) > 1 and self._total() > self.max_bytes:
                self._items.popitem(last=False)

    def _total(self) -> int:
        return sum(self.weigh(v) if self.live else n for v, n in self._items.values())

    @property
    def nbytes(self) -> int:
        with self._lock:
            return self._total()

    def __len__(self) -> int:
        return len(self._items)


_RUNS = LruCache(RUN_CACHE_BYTES, lambda entry: entry.nbytes, live=True)
_ROWS = LruCache(ROW_CACHE_BYTES)
_REPRODUCED = LruCache(REPRODUCED_CACHE_BYTES)  # published rows


def cache_line() -> str:
    """What the app keeps for reuse, in words (shown on the pages that fill the caches)."""
    def size(n: float) -> str:
        return f"{n / 1e3:.0f} kB" if n < 1e6 else f"{n / 1e6:.1f} MB" if n < 10e6 else f"{n / 1e6:.0f} MB"

    def count(n: int, what: str) -> str:
        return f"{n} {what}{'' if n == 1 else 's'}"

    return (f"Kept for reuse on this server: {count(len(_RUNS), 'run')} ({size(_RUNS.nbytes)} of "
            f"{size(_RUNS.max_bytes)}, figures included) and {count(len(_ROWS), 'Compare row')} "
            f"({size(_ROWS.nbytes)} of {size(_ROWS.max_bytes)}); the least recently used are dropped first.")


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
        orphans.watch(self)  # closing the tab that started it stops it (its worker process ends too)

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
    """One synthesis followed by a background thread; poll ``done`` and read ``progress``.

    ``isolated`` (the default wherever the algorithm can be sent to a worker process): the solve runs
    in a worker process of ``ccviz.runs.isolated.pool()``, waiting in line when every core is busy
    (``queue_line`` says so). False runs it in this process's thread (the Learn page's textbook
    rounds: milliseconds, no solver; and test algorithms defined inside a function).
    """

    def __init__(self, request: RunRequest, topology: Topology, isolated: bool | None = None) -> None:
        super().__init__()
        self.request = request
        self.progress: list[Progress] = []
        self.best_s: float | None = None  # finish time of the best verified schedule offered so far
        self.entry: CachedRun | None = cached(request)
        self.plugin, sendable = _plugin(request.algorithm)
        self.isolated = sendable if isolated is None else isolated and sendable
        light = REGISTRY[request.algorithm].kind == "classic" and topology.n_gpus <= LIGHT_GPUS \
            if request.algorithm in REGISTRY else False
        self.ticket = Ticket(light=light)
        if self.entry is None:
            self._start("ccviz-synth", topology)

    def latest(self) -> Progress | None:
        return self.progress[-1] if self.progress else None

    def queue_line(self) -> str:
        """'3 solves running on 2 cores: yours is queued, 1st in line' (empty when nothing to say)."""
        return pool().line(self.ticket) if self.isolated and not self.done else ""

    def _message(self, kind: str, payload: Any) -> None:
        if kind == "progress":
            self.progress.append(payload)
        elif kind == "offer":  # a verified schedule is ready in the worker: Stop keeps it whatever the solver does
            self.best_s = payload

    def _work(self, topology: Topology) -> None:
        r = self.request
        note = None
        nbytes = 0
        stopped = False
        try:
            if self.isolated:
                options = dict(r.options)
                outcome = pool().call(synthesis_task, (topology, r.collective_for(topology), r.algorithm, r.size_bytes, r.chunks,
                                                       r.root, options, self.plugin, r.dest, r.ranks),
                                      stop=self.stop_event, on_message=self._message,
                                      time_limit_s=options.get("time_limit"), ticket=self.ticket)
                result, nbytes, note, stopped = outcome.result, outcome.nbytes, outcome.note, outcome.stopped
            else:
                options = r.synth_options(progress=self.progress.append, stop=self.stop_event)
                result = run(topology, r.collective_for(topology), r.algorithm, r.size_bytes, r.chunks, r.root,
                             options, dest=r.dest, ranks=None if r.matrix is not None else r.ranks)
        except CcvizError as exc:
            self.error = str(exc)
            return
        except Exception as exc:  # a bug in an algorithm must not kill the app
            self.error = f"unexpected {type(exc).__name__} in {r.algorithm}: {exc}"
            return
        if note:
            result.schedule.notes.append(note)
        if self.isolated and (shared := shared_note(self.ticket, result.schedule.status, pool().cores)):
            result.schedule.notes.append(shared)
        entry = CachedRun(r, result, time.perf_counter() - self.started,
                          stopped=self.stop_event.is_set() or stopped,
                          stopped_at_limit=stopped and not self.stop_event.is_set(), nbytes=nbytes or size_of(result))
        if not entry.stopped:  # a stopped solve is not the answer to this request
            _RUNS.put(r, entry)
        self.entry = entry


def shared_note(ticket: Ticket, status: str, cores: int) -> str | None:
    """A note for a solve that ended at its time limit while more solves than cores ran: it had less
    solver time than alone (the limit counts wall-clock time), which the result must not hide."""
    if status != "time_limit" or ticket.crowd <= cores:
        return None
    return (f"this solve shared {cores} core{'s' if cores != 1 else ''} with {ticket.crowd - 1} other solve"
            f"{'s' if ticket.crowd != 2 else ''} and its time limit counts wall-clock time, so it ran at about "
            f"{100 * cores / ticket.crowd:.0f} % of its speed alone; alone, or with a longer limit, it may find a "
            "faster schedule")


def _plugin(algorithm: str) -> tuple[Any, bool]:
    """(the Algorithm to register in a worker, or None for a built-in; whether it can go to a worker at all)."""
    alg = REGISTRY.get(algorithm)
    if alg is None or isinstance(alg.synthesize, LazyFunction):
        return None, True
    try:
        pickle.dumps(alg)
    except Exception:  # a function defined inside another cannot be sent; it runs in this process
        return None, False
    return alg, True



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
    """A comparison (``ccviz.runs.compare.compare``) on the Dask sweep engine; poll ``done``, read ``rows``, ``stop()`` it.

    Rows run where ``engine_for`` says: a Dask scheduler when an address is given, else this app's
    embedded cluster (worker processes, closed when no sweep uses them) or, for light sweeps, one
    worker process of ``ccviz.runs.isolated`` running the rows one by one (see ``engine_for``:
    starting a cluster costs more than such a sweep); engine 'in-process' (tests, algorithms that
    cannot be sent to a process) runs them in this process. Stop cancels the rows not started and
    stops the running solvers; their points become skipped rows.
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
        self.ticket = Ticket()
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
        elif self.engine == "worker":
            parts.append(pool().line(self.ticket) or ("waiting" if self.ticket.state != "running" else "running"))
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
            if self.engine == "worker" and len(known) < self.total:
                pool().call(compare_task, (topology, r.collective, r.algorithms, r.sizes, r.chunks, r.root,
                                           r.time_limit, r.epoch, known),
                            stop=self.stop_event, on_message=self._message, ticket=self.ticket)
            else:
                with engine_client(self.engine, self.scheduler) if len(known) < self.total else nullcontext() \
                        as client:
                    compare(topology, r.collective, r.algorithms, r.sizes, r.chunks, r.root, options,
                            on_row=self._add, stop=self.stop_event, client=client, known=known,
                            on_progress=self._on_progress, on_solver_progress=self._on_solver_progress)
        except CcvizError as exc:
            if not (exc.field == "stop" and self.stop_event.is_set()):  # a stopped worker is not an error
                self.error = str(exc)
        except Exception as exc:  # a broken cluster or a bug must not kill the app
            self.error = f"unexpected {type(exc).__name__} in the sweep: {exc}"
        if self.error or len(self.rows) < self.total:
            why = "the sweep was stopped" if self.stop_event.is_set() else "the sweep ended early"
            self.rows.extend(skipped_rest(topology, r.collective, r.algorithms, r.sizes, self.rows, why))
        release_memory()

    def _message(self, kind: str, payload: Any) -> None:
        """A row or a solver's report from the worker process running the sweep."""
        if kind == "row":
            self._add(payload)
        elif kind == "solver":
            self._on_solver_progress(*payload)

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
_CLIENT_USERS: dict[str, int] = {}  # sweeps using each embedded cluster now (closed when none is)
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
    sweep is heavy (an optimal solver, or a fabric over ``LIGHT_GPUS``); else 'worker'.

    Why: starting the embedded cluster's worker processes took 8-13 s on this 2-core machine
    (bench/sweep.py), while a light sweep's rows take 0.01-0.25 s each, so for light sweeps start-up
    would dominate; one worker process of the app's pool (started ahead, solvers imported) runs the
    same rows one by one, isolated from the server. Heavy sweeps gain from a cluster (one process
    per core); it is closed when the last sweep using it ends, so its processes do not stay alive.
    """
    if scheduler and scheduler.strip():
        return "scheduler"
    if "local cluster" in _CLIENTS:
        return "local cluster"
    heavy = topology.n_gpus > LIGHT_GPUS or any(REGISTRY[a].kind == "optimal" for a in request.algorithms
                                                if a in REGISTRY)
    return "local cluster" if heavy else "worker"


def engine_label(engine: str, scheduler: str | None = None) -> str:
    """Where a sweep runs, in words for the status line."""
    if engine == "scheduler":
        return f"on the Dask cluster at {scheduler}"
    if engine == "local cluster":
        return f"on the embedded cluster ({os.cpu_count() or 1} processes, closed when the sweep ends)"
    if engine == "worker":
        return "in a worker process of the app, row by row"
    return "in the app process (one Dask worker thread)"


@contextlib.contextmanager
def engine_client(engine: str, scheduler: str | None = None):
    """A Dask client for ``engine``: a fresh connection to a scheduler (closed after the sweep), or one of
    the app's embedded clusters, started on first use, shared by the sweeps running at the same time
    and closed when the last of them ends (its worker processes and their memory go away)."""
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
        _CLIENT_USERS[engine] = _CLIENT_USERS.get(engine, 0) + 1
    try:
        yield client
    finally:
        with _CLIENTS_LOCK:
            _CLIENT_USERS[engine] -= 1
            ended = _CLIENTS.pop(engine) if _CLIENT_USERS[engine] == 0 else None
        if ended is not None:  # closed in the background: its busy workers can take 10-20 s to shut down,
            # and a Stopped sweep must return at once (Compare's Stop took 13-19 s on dgx2 waiting for it)
            threading.Thread(target=_close_quietly, args=(ended[1],), daemon=True, name="ccviz-close-cluster").start()


def _close_quietly(stack: contextlib.ExitStack) -> None:
    with contextlib.suppress(Exception):
        stack.close()


# ------------------------------------------------------------------ published tables (Papers page)
class ReproduceJob(BackgroundJob):
    """A paper's published rows re-run one by one in a background thread (``ccviz.runs.reproduce``).

    Finished rows are cached process-wide per (row, time limit); Stop ends the running row with its
    best schedule and marks the rest 'not run'.
    """

    def __init__(self, runs: list, time_limit: float) -> None:
        super().__init__()
        self.runs = runs
        self.time_limit = time_limit
        self.rows: list = []  # ccviz.runs.reproduce.Reproduction, in order
        self.current: str | None = None
        self.ticket = Ticket()  # reused row after row: the line says where the current row stands
        self._start("ccviz-reproduce")

    @property
    def fraction(self) -> float:
        return len(self.rows) / len(self.runs) if self.runs else 1.0

    def _work(self) -> None:
        from ccviz.runs.reproduce import Reproduction

        try:
            for run_ in self.runs:
                key = ("reproduce", run_, self.time_limit)
                row = _REPRODUCED.get(key)
                if row is None and self.stop_event.is_set():
                    row = Reproduction(run_)
                elif row is None:
                    self.current = run_.name
                    try:
                        row = pool().call(reproduce_task, (run_, self.time_limit), stop=self.stop_event,
                                          time_limit_s=self.time_limit, ticket=self.ticket).result
                    except CcvizError as exc:
                        row = Reproduction(run_, None, time.perf_counter() - self.started, str(exc))
                    if not self.stop_event.is_set() and row.error is None:  # a stopped row is not the answer
                        _REPRODUCED.put(key, row)
                self.rows.append(row)
        except Exception as exc:  # a bug must not kill the app
            self.error = f"unexpected {type(exc).__name__} while reproducing: {exc}"
        self.current = None
