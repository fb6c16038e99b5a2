"""Solves in worker processes: many users on one server without collisions, with a Stop that ends them.

Why processes: Pyomo's HiGHS wrapper captures output for the whole process around every solve,
so two solves running as threads of one process collide there (two TE-CCL solves started a second
apart hung 2 minutes, then both failed with "TeeStream: deadlock observed" and left the server's
stdout and stderr pointing at pipes nothing reads). A solve in its own process cannot collide with
another, cannot take the server down when it crashes, can be ended at once, and gives its memory
back to the system when it ends.

``WorkerPool.call(function, args, ...)`` runs a module-level ``function(channel, *args)`` in a fresh
process of the ``forkserver`` context (one task per process; ``spares`` processes are started ahead, so a
solve does not wait). The fork server imports the solver libraries once and every worker is forked from
it: a worker costs about 0.6 CPU-s instead of the 1.5 CPU-s a spawned one spent importing them again
(8 small solves: 8 CPU-s of the machine instead of 15), and it is still a process of its own that a Stop
can end and whose memory goes back to the system. At most ``size`` heavy tasks
run at once; the rest wait in line, first come first served, and ``line(ticket)`` says so in words
("3 solves running on 2 cores: yours is queued, 1st in line").

Fair sharing: ``size`` is 1.5 solves per core (3 on 2 cores), each solver pinned to its share of
the cores (HiGHS with one thread on 2 cores, ``CCVIZ_SOLVER_THREADS``), so a third student's solve
starts at once at about 1.5x its solo time instead of waiting a whole solve in line; beyond that
they queue (more at once would only slow every one of them). A solve's time limit counts
wall-clock time from when it starts running, never from when it was queued; a solve that shared
the cores and ended at its limit says so on its result (``Ticket.crowd``), and the page says
"sharing 2 cores with 2 other solves" while it runs. A light task (a textbook algorithm on a small
fabric, milliseconds of work) does not wait in line.

What the worker sends back goes through ``Channel.send`` (progress reports, table rows, a best
schedule so far) and its return value is the result. The worker's own stdout and stderr are
/dev/null from its first instruction: solver output never reaches the server's streams.

Stop and time limits: Stop sets the worker's stop event, which the synthesizers already poll (the
``SynthOptions.stop`` contract: return the best schedule so far). A solver that has not handed back
its result ``GRACE_S`` after Stop is ended (SIGKILL) and the best schedule it offered so far
(``Channel.send("best", result)``), if any, is the answer. A solve that runs ``LIMIT_GRACE_S`` past
its own time limit is stopped the same way, but given ``LIMIT_FINISH_SHARE`` of its limit to hand
back the schedule it kept (a Stop pressed meanwhile ends it ``GRACE_S`` later), so a limit is
honoured in wall-clock time whatever the solver does.
"""

from __future__ import annotations

import contextlib
import copy
import ctypes
import importlib
import itertools
import math
import multiprocessing as mp
import multiprocessing.spawn as mp_spawn
import os
import pickle
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ccviz.errors import CcvizError

GRACE_S = 1.5  # after Stop, how long a solver has to hand back its best schedule before its process is ended
LIMIT_GRACE_S = 5.0  # a solve still running this long past its own time limit is stopped from outside
# once stopped at its time limit, a solver has this share of its limit (at least GRACE_S) to hand back its result:
# forestcoll keeps the best schedule complete at its limit, then mirrors and judges it (a 60-GPU dragonfly
# AllReduce at 8 s: its result at 14.4 s, where the app ended its process at 14.5 s and showed nothing)
LIMIT_FINISH_SHARE = 0.5
READY_TIMEOUT_S = 120.0  # a worker that cannot import ccviz in this time is broken (a loaded machine takes ~3 s)
SPARE_IDLE_S = 300.0  # a spare worker nobody used in this time exits (its memory goes back to the system)
SOLVES_PER_CORE = 1.5  # heavy solves admitted at once per core (see "Fair sharing" above)
SOLVER_THREADS_ENV = "CCVIZ_SOLVER_THREADS"  # read by ccviz.synth.teccl.solve.highs_threads in the worker
WARM_MODULES = ("ccviz.runs.pipeline", "ccviz.runs.compare", "ccviz.runs.reproduce", "ccviz.synth.teccl.solve")

_CTX = mp.get_context("forkserver")
_CTX.set_forkserver_preload(list(WARM_MODULES))  # imported once, in the fork server
WORKER_NAME = "ccviz-solve"
_preparation_data = mp_spawn.get_preparation_data


def _without_main(name: str) -> dict:
    """Spawn's preparation data, minus the parent's main script for our workers and the fork server.

    Under Streamlit the main module is the app script (``app.py``), which a spawned child would run
    again as ``__mp_main__``: the whole page, in bare mode, with its warnings on the server's stderr
    (the fork server asks under the name ``'ignore'``).
    Our workers need nothing from it (their task is a module-level function imported by name), nor
    do the worker processes of Compare's embedded Dask cluster ("Dask Worker process (from Nanny)").
    """
    data = _preparation_data(name)
    if name in (WORKER_NAME, "ignore") or name.startswith("Dask "):
        data.pop("init_main_from_path", None)
        data.pop("init_main_from_name", None)
    return data


mp_spawn.get_preparation_data = _without_main


# ----------------------------------------------------------------------------- the worker's side
class Channel:
    """What a task sees in its worker: the stop event (pass it as ``SynthOptions.stop``) and ``send``."""

    def __init__(self, conn: Any, stop: Any) -> None:
        self.stop = stop
        self._conn = conn
        self._lock = threading.Lock()

    def send(self, kind: str, payload: Any) -> None:
        """Send ``(kind, payload)`` to the app ('progress', 'row', 'solver', 'best', ...); never raises."""
        data = pickle.dumps((kind, payload), protocol=pickle.HIGHEST_PROTOCOL)
        with self._lock, contextlib.suppress(OSError, ValueError):
            self._conn.send_bytes(data)


def _silence() -> None:
    """Point this process's stdout and stderr (the file descriptors, so C libraries too) at /dev/null."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    os.close(devnull)


def _worker_main(conn: Any, stop: Any, warm: tuple[str, ...], threads: int = 1) -> None:
    """A worker: import the solver libraries, say ready, run one task, send its result and exit.

    ``threads``: the solver threads this task may use (its share of the cores).
    """
    _silence()
    os.environ[SOLVER_THREADS_ENV] = str(threads)
    for module in warm:
        with contextlib.suppress(Exception):
            importlib.import_module(module)
    channel = Channel(conn, stop)
    channel.send("ready", os.getpid())
    try:
        if not conn.poll(SPARE_IDLE_S):
            return
        data = conn.recv_bytes()
    except (EOFError, OSError):
        return
    try:
        task = pickle.loads(data)
        if task is None:
            return
        function, args = task
        result = function(channel, *args)
    except CcvizError as exc:
        channel.send("error", (str(exc), exc.field))
    except BaseException as exc:  # noqa: BLE001 - whatever the solver raised, the app gets one line
        channel.send("error", (f"unexpected {type(exc).__name__}: {exc}", None))
    else:
        channel.send("result", result)


# ----------------------------------------------------------------------------- the app's side
@dataclass
class Ticket:
    """One task's place: 'queued', 'starting' (waiting for a process), 'running', or 'done'."""

    light: bool = False
    state: str = "queued"
    number: int = field(default_factory=itertools.count().__next__)
    queued_at: float = field(default_factory=time.perf_counter)
    started_at: float | None = None
    crowd: int = 0  # the most heavy solves running at once while this one ran (itself included)


@dataclass
class Outcome:
    """A task's result, its size as received (bytes), and whether Stop or the limit cut it short."""

    result: Any
    nbytes: int
    stopped: bool = False
    note: str | None = None  # set when the worker had to be ended and its best-so-far offer is the result


@dataclass(eq=False)
class _Worker:
    process: Any
    conn: Any
    stop: Any


class WorkerPool:
    """At most ``size`` heavy tasks at once on ``cores`` cores, each in its own fresh process; the rest wait in line.

    ``size`` defaults to ``CCVIZ_SOLVE_WORKERS`` or 1.5 per core (rounded up); each task's solver gets
    ``cores // size`` threads (at least 1).
    """

    def __init__(self, size: int | None = None, spares: int | None = None, warm: tuple[str, ...] = WARM_MODULES,
                 cores: int | None = None) -> None:
        self.cores = max(1, cores or os.cpu_count() or 1)
        self.size = max(1, size or _configured_size() or math.ceil(SOLVES_PER_CORE * self.cores))
        self.threads = max(1, self.cores // self.size)
        self.spares = self.size if spares is None else spares
        self.warm = warm
        self._cond = threading.Condition()
        self._line: deque[Ticket] = deque()
        self._running: list[Ticket] = []
        self._spare: list[_Worker] = []
        self._starting = 0  # spares being started
        self._live: set[_Worker] = set()  # every process started and not yet ended (ended at exit)

    # ---- status in words
    def counts(self) -> tuple[int, int]:
        """(tasks running, tasks waiting in line)."""
        with self._cond:
            return len(self._running), len(self._line)

    def line(self, ticket: Ticket) -> str:
        """Where ``ticket`` stands, in words: queued behind whom, or sharing the machine with whom."""
        with self._cond:
            running, waiting = len(self._running), len(self._line)
            position = next((i for i, t in enumerate(self._line) if t is ticket), None)
        cores = f"{self.cores} core{'s' if self.cores != 1 else ''}"
        solves = f"{running} solve{'s' if running != 1 else ''} running on {cores}"
        if ticket.state == "queued" and position is not None:
            return f"{solves}: yours is queued, {_ordinal(position + 1)} in line; it starts when one ends"
        if ticket.state == "starting":
            return f"{solves}: starting a worker process for yours"
        others = running - (0 if ticket.light else 1)
        if ticket.state == "running" and others > 0:
            more = f", {waiting} waiting" if waiting else ""
            return f"sharing {cores} with {others} other solve{'s' if others != 1 else ''}{more}"
        return ""

    # ---- processes
    def _spawn(self) -> _Worker:
        parent, child = _CTX.Pipe()
        stop = _CTX.Event()
        process = _CTX.Process(target=_worker_main, args=(child, stop, self.warm, self.threads), daemon=True,
                               name=WORKER_NAME)
        process.start()
        child.close()
        worker = _Worker(process, parent, stop)
        with self._cond:
            self._live.add(worker)
        return worker

    def _ready(self, worker: _Worker, timeout_s: float = READY_TIMEOUT_S) -> bool:
        """Wait for the worker's 'ready' (it has imported the solvers); False if it died or hung."""
        try:
            if not worker.conn.poll(timeout_s):
                return False
            kind, _ = pickle.loads(worker.conn.recv_bytes())
            return kind == "ready"
        except (EOFError, OSError):
            return False

    def _end(self, worker: _Worker) -> None:
        """End a worker's process (at once: its task is over or abandoned) and reap it."""
        with contextlib.suppress(Exception):
            worker.conn.close()
        if worker.process.is_alive():
            worker.process.join(0.2)
        if worker.process.is_alive():
            worker.process.kill()
        worker.process.join(5)
        with self._cond:
            self._live.discard(worker)

    def _take(self) -> _Worker:
        """A ready worker: a spare started earlier, else a new one (a few seconds of imports)."""
        while True:
            with self._cond:
                spare = self._spare.pop() if self._spare else None
            if spare is None:
                break
            if spare.process.is_alive():
                return spare
            self._end(spare)
        worker = self._spawn()
        if not self._ready(worker):
            self._end(worker)
            raise CcvizError(f"a worker process for the solve did not start within {READY_TIMEOUT_S:g} s; the "
                             "machine may be overloaded, try again in a moment")
        return worker

    def prepare(self) -> None:
        """Start the spare workers now (a page calls this so the first solve does not wait for imports)."""
        self._refill()

    def _refill(self) -> None:
        """Start spare workers in the background so the next solve does not wait for imports."""
        def start() -> None:
            worker = self._spawn()
            ready = self._ready(worker)
            with self._cond:
                self._starting -= 1
                if ready:
                    self._spare.append(worker)
            if not ready:
                self._end(worker)

        with self._cond:
            self._spare = [w for w in self._spare if w.process.is_alive()]  # spares exit after SPARE_IDLE_S
            missing = self.spares - len(self._spare) - self._starting
            self._starting += max(0, missing)
        for _ in range(max(0, missing)):
            threading.Thread(target=start, daemon=True, name="ccviz-spare").start()

    def close(self) -> None:
        """End every worker process (at exit)."""
        with self._cond:
            workers = list(self._live)
            self._spare.clear()
        for worker in workers:
            self._end(worker)

    # ---- a task
    def _wait_turn(self, ticket: Ticket, stop: threading.Event) -> None:
        with self._cond:
            ticket.state, ticket.queued_at, ticket.started_at, ticket.crowd = "queued", time.perf_counter(), None, 0
            if ticket.light:
                self._running.append(ticket)
                return
            self._line.append(ticket)
            while not (self._line[0] is ticket and sum(not t.light for t in self._running) < self.size):
                if stop.is_set():
                    self._line.remove(ticket)
                    self._cond.notify_all()
                    ticket.state = "done"
                    raise CcvizError("stopped: Stop was pressed while the solve waited in line; it never started",
                                     "stop")
                self._cond.wait(0.1)
            self._line.popleft()
            self._running.append(ticket)
            heavy = [t for t in self._running if not t.light]
            for t in heavy:  # every solve running now shares the cores with this many
                t.crowd = max(t.crowd, len(heavy))
            self._cond.notify_all()

    def call(self, function: Callable[..., Any], args: tuple, *, stop: threading.Event,
             on_message: Callable[[str, Any], None] | None = None, time_limit_s: float | None = None,
             ticket: Ticket | None = None) -> Outcome:
        """Run ``function(channel, *args)`` in a worker process; messages go to ``on_message(kind, payload)``.

        Raises ``CcvizError`` with one line when the task failed, crashed, or was stopped with nothing
        to show. ``function`` must be importable by name (a module-level function).
        """
        ticket = ticket or Ticket()
        self._wait_turn(ticket, stop)
        worker = None
        try:
            ticket.state = "starting"
            worker = self._take()
            self._refill()
            ticket.state, ticket.started_at = "running", time.perf_counter()
            try:
                worker.conn.send_bytes(pickle.dumps((function, args), protocol=pickle.HIGHEST_PROTOCOL))
            except (OSError, pickle.PicklingError, AttributeError, TypeError) as exc:
                raise CcvizError(f"the solve could not be sent to its worker process ({exc})") from None
            return self._follow(worker, ticket, stop, on_message, time_limit_s)
        finally:
            ticket.state = "done"
            if worker is not None:
                self._end(worker)
            with self._cond:
                if ticket in self._running:
                    self._running.remove(ticket)
                self._cond.notify_all()
            release_memory()

    def _follow(self, worker: _Worker, ticket: Ticket, stop: threading.Event,
                on_message: Callable[[str, Any], None] | None, time_limit_s: float | None) -> Outcome:
        """Relay the worker's messages until its result; stop it (and end it after ``GRACE_S``) on request."""
        best: tuple[Any, int] | None = None
        stopped_at: float | None = None
        end_at = math.inf  # when the worker is ended if it has not answered
        why = "Stop"
        gone = False  # the worker's end of the pipe closed: it exited or crashed
        while True:
            if not gone and worker.conn.poll(0.05):
                try:
                    data = worker.conn.recv_bytes()
                except (EOFError, OSError):
                    data, gone = None, True
                if data is not None:
                    kind, payload = pickle.loads(data)
                    if kind == "result":
                        return Outcome(payload, len(data), stopped=stopped_at is not None)
                    if kind == "error":
                        message, field_ = payload
                        raise CcvizError(message, field_)
                    if kind == "best":
                        best = (payload, len(data))
                    if kind != "best" and on_message is not None:
                        on_message(kind, payload)
            # Stop and the deadlines are looked at after every message too: a solver reporting without a pause
            # (HiGHS's callbacks) kept this loop reading, and a closed tab's worker ran on past its kill
            now = time.perf_counter()
            if gone or not worker.process.is_alive() and not worker.conn.poll(0):
                worker.process.join(2)
                code = worker.process.exitcode
                raise CcvizError(f"the worker process of this solve ended unexpectedly (exit code {code}); the "
                                 "app and the other solves are unaffected; try again, or a smaller instance")
            if stopped_at is None:
                over = (time_limit_s is not None and ticket.started_at is not None
                        and now - ticket.started_at > time_limit_s + LIMIT_GRACE_S)
                if stop.is_set() or over:
                    why = "Stop" if stop.is_set() else f"its time limit of {time_limit_s:g} s"
                    worker.stop.set()
                    stopped_at = now
                    end_at = now + (GRACE_S if stop.is_set() else max(GRACE_S, LIMIT_FINISH_SHARE * time_limit_s))
            elif stop.is_set() and why != "Stop":  # Stop pressed while a solve stopped at its limit finishes
                why, end_at = "Stop", min(end_at, now + GRACE_S)
            elif now > end_at:
                worker.process.kill()
                waited = f"{now - stopped_at:.3g} s"
                if best is not None:
                    return Outcome(best[0], best[1], stopped=True,
                                   note=f"the solver did not hand back its result within {waited} of {why}, "
                                        "so its process was ended; this is the best schedule it had offered")
                advice = ("let it run longer before pressing Stop" if why == "Stop"
                          else "give it a longer time limit")  # Stop at 12 s of a 600 s limit: not the limit's fault
                raise CcvizError(f"stopped: the solver had no complete schedule yet {waited} after {why}, so its "
                                 f"process was ended; nothing to show ({advice})", "stop")


def _configured_size() -> int | None:
    """``CCVIZ_SOLVE_WORKERS``: how many solves may run at once (default: the machine's cores)."""
    text = os.environ.get("CCVIZ_SOLVE_WORKERS", "").strip()
    if not text:
        return None
    if not text.isdigit() or int(text) < 1:
        raise CcvizError(f"CCVIZ_SOLVE_WORKERS: need a whole number of solves at once (1 or more), got {text!r}",
                         "CCVIZ_SOLVE_WORKERS")
    return int(text)


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 11 <= n % 100 <= 13 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def release_memory() -> None:
    """Hand freed heap pages back to the system (glibc keeps them otherwise); a no-op elsewhere."""
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


_POOL: WorkerPool | None = None
_POOL_LOCK = threading.Lock()


def pool() -> WorkerPool:
    """The process-wide pool (created on first use, sized to the machine's cores)."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            import atexit

            _POOL = WorkerPool()
            atexit.register(_POOL.close)
        return _POOL


# ----------------------------------------------------------------------------- tasks (run in a worker)
def synthesis_task(channel: Channel, topology: Any, collective: str, algorithm: str, size_bytes: float,
                   chunks: int, root: int | None, options: dict[str, Any], registered: Any = None,
                   dest: int | None = None, ranks: tuple[int, ...] | None = None) -> Any:
    """``ccviz.runs.pipeline.run`` with the worker's stop event and progress going to the app.

    ``registered``: an ``Algorithm`` registered in the app process but not built in (a plug-in), so the
    worker knows it too.
    """
    from ccviz.runs.pipeline import run
    from ccviz.synth.registry import SynthOptions, register

    if registered is not None:
        register(registered)
    known = set(SynthOptions.__dataclass_fields__) - {"progress", "stop", "extra", "algorithm_options", "best"}
    extra = {k: v for k, v in options.items() if k not in known}
    best = _BestSoFar(channel, getattr(collective, "name", collective), root)  # a name, or an AllToAllv's Collective
    if not isinstance(collective, str):
        ranks = None  # the collective carries its ranks
    synth = SynthOptions(**{k: v for k, v in options.items() if k in known}, extra=extra,
                         progress=lambda p: channel.send("progress", p), stop=channel.stop, best=best.offer)
    return run(topology, collective, algorithm, size_bytes, chunks, root, synth, dest=dest, ranks=ranks)


class _BestSoFar:
    """The schedules a synthesizer offers (``SynthOptions.offer``), judged and sent to the app at once.

    The app keeps the latest as the answer in case it has to end the worker after Stop or the time
    limit. Judged in the synthesizer's own thread: a helper thread would starve while HiGHS holds the
    interpreter lock, and the offers are few (TE-CCL's greedy, forestcoll's first schedules). An offered
    part of a bigger schedule (one half of an AllReduce) is not an answer and is not sent.
    """

    def __init__(self, channel: Channel, collective: str, root: int | None) -> None:
        self.channel, self.collective, self.root = channel, collective, root
        self.started = time.perf_counter()

    def offer(self, schedule: Any) -> None:
        from ccviz.bounds.cost import lower_bound
        from ccviz.judge.simulate import simulate
        from ccviz.runs.pipeline import RunResult, group_limit

        c, topology = schedule.collective, schedule.topology
        if c.name != self.collective or c.root != self.root:
            return
        timeline = simulate(schedule)
        if not timeline.verified:
            return
        if schedule.synth_time_s is None:  # the registry stamps a returned schedule; an offer, a copy, here
            schedule = copy.copy(schedule)  # (the solver may return this very object later, stamped then)
            schedule.synth_time_s = time.perf_counter() - self.started  # a kept offer read "synthesis time n/a"
        limit = group_limit(topology, c)
        self.channel.send("best", RunResult(topology, c, schedule, timeline, lower_bound(topology, c), limit))
        self.channel.send("offer", timeline.finish_time_s)  # the app may say Stop now keeps this one


def compare_task(channel: Channel, topology: Any, collective: str, algorithms: tuple[str, ...],
                 sizes: tuple[float, ...], chunks: int, root: int | None, time_limit: float | None,
                 epoch: Any, known: dict) -> None:
    """``ccviz.runs.compare.compare`` run row by row in the worker; each row goes to the app as it finishes."""
    from ccviz.runs.compare import compare
    from ccviz.synth.registry import SynthOptions

    compare(topology, collective, algorithms, sizes, chunks, root, SynthOptions(time_limit=time_limit, epoch=epoch),
            on_row=lambda row: channel.send("row", row), stop=channel.stop, known=known,
            on_solver_progress=lambda a, s, p: channel.send("solver", (a, s, p)))


def reproduce_task(channel: Channel, run: Any, time_limit: float) -> Any:
    """One published TE-CCL run re-solved (``ccviz.runs.reproduce.reproduce_run``)."""
    from ccviz.runs.reproduce import reproduce_run

    return reproduce_run(run, time_limit, channel.stop, progress=lambda p: channel.send("progress", p))
