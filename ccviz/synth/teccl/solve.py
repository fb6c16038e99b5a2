"""Hand a Pyomo model to HiGHS and watch it: time limit, gap, stop event, progress, early finish.

The model goes to HiGHS through Pyomo's persistent APPSI interface (it
passes the matrix to ``highspy`` directly, far faster than writing a file).
HiGHS callbacks report each improving incumbent and poll the stop event;
``finish_when`` lets the caller end the search as soon as an incumbent is
good enough (e.g. it meets the arithmetic lower bound, so it is optimal).

Building a big model in Pyomo and handing it to HiGHS is seconds of pure
Python that no solver callback sees; ``stop_interrupts`` covers that
stretch: a watcher thread raises ``Interrupted`` inside the building thread
as soon as the stop event fires, so Stop is honoured within milliseconds
there too (the caller then keeps its best schedule so far).
"""

from __future__ import annotations

import ctypes
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import pyomo.environ as pyo
from pyomo.contrib.appsi.base import TerminationCondition
from pyomo.contrib.appsi.solvers import Highs

from ccviz.bounds.solver_output import solver_output_to_stderr
from ccviz.errors import CcvizError
from ccviz.synth.registry import Progress, SynthOptions

HIGHS_THREADS = 2  # a 2-core machine
SOLVER_THREADS_ENV = "CCVIZ_SOLVER_THREADS"  # the app's worker processes set 1: solves sharing the cores take one each
PROGRESS_EVERY_S = 0.5


def highs_threads() -> int:
    """HiGHS's threads: ``CCVIZ_SOLVER_THREADS`` if set (a whole number), else ``HIGHS_THREADS``.

    Why: where several solves share the machine (the app's worker processes), each solver taking
    every core would make them fight over the cores; one thread each shares them evenly.
    """
    text = os.environ.get(SOLVER_THREADS_ENV, "").strip()
    if not text:
        return HIGHS_THREADS
    if not text.isdigit() or int(text) < 1:
        raise CcvizError(f"{SOLVER_THREADS_ENV}: need a whole number of solver threads (1 or more), got {text!r}",
                         SOLVER_THREADS_ENV)
    return int(text)


class Interrupted(BaseException):
    """The stop event fired while a model was being built or handed to HiGHS.

    A ``BaseException`` so that no ``except Exception`` inside Pyomo swallows it on the way out.
    """


class _QuietInterrupts(logging.Filter):
    """Pyomo logs a component whose construction raised; a Stop is not an error worth logging."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "Interrupted" not in record.getMessage()


logging.getLogger("pyomo.core").addFilter(_QuietInterrupts())


@contextmanager
def stop_interrupts(options: SynthOptions, poll_s: float = 0.05, deadline: float | None = None) -> Iterator[None]:
    """Raise ``Interrupted`` in this thread as soon as ``options.stop`` fires inside the block, or once
    ``time.perf_counter()`` passes ``deadline`` (the time limit: building the in-switch model of a 72-GPU
    AllReduce ran 100 s past a 10 s limit).

    Only for pure-Python stretches (model building, APPSI hand-over): the exception is delivered
    at the next Python bytecode, never inside HiGHS itself (its callbacks poll the stop event).
    """
    stop = options.stop
    if stop is None and deadline is None:
        yield
        return
    target = threading.get_ident()
    lock = threading.Lock()
    state = {"armed": True, "fired": False}
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            stopped = stop.wait(poll_s) if stop is not None else (done.wait(poll_s) and False)
            if not (stopped or (deadline is not None and time.perf_counter() >= deadline)):
                continue
            with lock:
                if state["armed"]:
                    state["fired"] = True
                    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(target), ctypes.py_object(Interrupted))
            return

    watcher = threading.Thread(target=watch, daemon=True, name="ccviz-stop-watch")
    watcher.start()
    try:
        yield
    finally:
        with lock:
            state["armed"] = False
        done.set()
        if state["fired"]:
            try:  # the injected exception is delivered here at the latest (it may already be propagating)
                for _ in range(1000):
                    pass
            except Interrupted:
                pass
            raise Interrupted("stopped while building the model")


@dataclass
class SolveResult:
    """What HiGHS returned: termination, whether a solution exists, its gap and time."""

    termination: str  # optimal | time_limit | interrupted | infeasible | other
    has_solution: bool
    objective: float | None
    bound: float | None
    gap: float | None
    elapsed_s: float
    finished_early: bool = False  # stopped by ``finish_when`` (the incumbent was good enough)


class HighsRun:
    """One HiGHS solve of one Pyomo model, with callbacks wired to the synthesis options."""

    def __init__(self, model: pyo.ConcreteModel, options: SynthOptions, time_limit_s: float,
                 mip_gap: float | None, started: float,
                 describe: Callable[[np.ndarray], float | None] | None = None,
                 finish_when: Callable[[np.ndarray], bool] | None = None,
                 watch: list[pyo.Var] | None = None, bound_s: float | None = None, epoch_s: float | None = None,
                 what: str = "the model") -> None:
        self.model = model
        self.options = options
        self.time_limit_s = max(0.5, time_limit_s)
        self.mip_gap = mip_gap
        self.started = started
        self.describe = describe  # incumbent columns -> finish estimate in seconds (for progress)
        self.finish_when = finish_when
        self.watch = watch or []
        self.bound_s = bound_s  # proven lower bound on the finish (the epoch certificate), for progress
        self.epoch_s = epoch_s  # epoch length: progress names the incumbent's and the bound's epochs
        self.what = what  # e.g. "the model for 58 epochs", for progress
        self._best_finish_s: float | None = None
        self.columns: np.ndarray | None = None
        self._finished_early = False
        self._last_report = 0.0
        self._incumbent: np.ndarray | None = None
        self._incumbent_bounds: tuple[float, float] | None = None

    def solve(self, warm_start: bool = False) -> SolveResult:
        with solver_output_to_stderr():  # Pyomo's appsi makes its highspy.Highs (the banner) before output_flag
            return self._solve(warm_start)

    def _solve(self, warm_start: bool) -> SolveResult:
        opt = Highs()
        opt.config.time_limit = self.time_limit_s
        opt.config.mip_gap = self.mip_gap
        opt.config.load_solution = False
        opt.config.stream_solver = False
        opt.config.warmstart = warm_start
        opt.highs_options = {"threads": highs_threads(), "output_flag": False, "random_seed": self.options.seed or 0}
        if not opt.available():
            raise CcvizError("algorithm: TE-CCL needs the HiGHS solver (pip install highspy)", "algorithm")
        with stop_interrupts(self.options, deadline=time.perf_counter() + self.time_limit_s):  # its budget
            self._progress(f"handing {self.what} to HiGHS")
            opt.set_instance(self.model)
        self._progress(f"solving {self.what}")
        col_of = opt._pyomo_var_to_solver_var_map  # id(var) -> HiGHS column
        self.columns = np.array([col_of[id(v)] for v in self.watch], dtype=np.int64)
        highs = opt._solver_model
        highs.cbMipImprovingSolution += self._on_incumbent
        highs.cbMipInterrupt += self._on_poll
        highs.cbSimplexInterrupt += self._on_poll
        t0 = time.perf_counter()
        appsi_log = logging.getLogger("pyomo.contrib.appsi.solvers.highs")
        level = appsi_log.level
        appsi_log.setLevel(logging.ERROR)  # an interrupt (stop, early finish) is ours, not a warning
        try:
            results = opt.solve(self.model)
        finally:
            appsi_log.setLevel(level)
        elapsed = time.perf_counter() - t0
        has_solution = results.best_feasible_objective is not None
        if has_solution:
            results.solution_loader.load_vars()
        elif self._incumbent is not None:
            # Interrupted (stop event or early finish): APPSI does not load it, the callback kept it.
            for var_id, col in col_of.items():
                opt._vars[var_id][0].set_value(float(self._incumbent[col]), skip_validation=True)
            has_solution = True
        tc = results.termination_condition
        termination = {
            TerminationCondition.optimal: "optimal",
            TerminationCondition.maxTimeLimit: "time_limit",
            TerminationCondition.interrupted: "interrupted",
            TerminationCondition.infeasible: "infeasible",
            TerminationCondition.infeasibleOrUnbounded: "infeasible",
        }.get(tc, "other")
        obj, bound = results.best_feasible_objective, results.best_objective_bound
        if obj is None and self._incumbent_bounds is not None:
            obj, bound = self._incumbent_bounds
        if termination == "other" and self._incumbent is not None:
            termination = "interrupted"
        gap = None
        if obj is not None and bound is not None and np.isfinite(bound):
            gap = abs(bound - obj) / max(abs(obj), 1e-12)
        if termination == "optimal" and gap is None:
            gap = 0.0
        return SolveResult(termination, has_solution, obj, bound, gap, elapsed, self._finished_early)

    def _on_incumbent(self, event) -> None:
        """HiGHS found a better incumbent: report it, and stop if it is good enough."""
        out = event.data_out
        solution = np.array(out.mip_solution, dtype=float)
        if len(solution):
            self._incumbent = solution
            self._incumbent_bounds = (float(out.mip_primal_bound), float(out.mip_dual_bound))
        if self.finish_when is not None and len(solution) and self.finish_when(solution[self.columns]):
            self._finished_early = True
        finish = self.describe(solution[self.columns]) if self.describe and len(solution) else None
        if finish is not None and (self._best_finish_s is None or finish < self._best_finish_s):
            self._best_finish_s = finish
        self._progress(f"solving {self.what}: found a better schedule")

    def _on_poll(self, event) -> None:
        """Periodic poll: honour the stop event and an early finish, and report progress now and then."""
        if self._finished_early or self.options.stopped():
            event.interrupt()
            return
        if time.perf_counter() - self._last_report >= PROGRESS_EVERY_S:
            self._progress(f"solving {self.what}")

    def _progress(self, message: str) -> None:
        """Report in words: what is being done, the best schedule's epochs so far, the proven bound."""
        self._last_report = time.perf_counter()
        parts = [message]
        if self.epoch_s:
            if self._best_finish_s is not None:
                parts.append(f"best so far {round(self._best_finish_s / self.epoch_s)} epochs")
            if self.bound_s is not None:
                parts.append(f"proven at least {round(self.bound_s / self.epoch_s)} epochs")
        self.options.report(Progress(elapsed_s=self._last_report - self.started, message="TE-CCL: " + "; ".join(parts),
                                     incumbent_s=self._best_finish_s, bound_s=self.bound_s))
