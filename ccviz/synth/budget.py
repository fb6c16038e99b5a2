"""Stop, time limit and throttled progress for heuristics that run in restarts (TACOS, MTEG).

A ``Budget`` is made once per synthesis from its ``SynthOptions``: the
deadline (``time_limit`` seconds from the start) and the stop event are
shared by every phase of the synthesis (AllReduce runs a ReduceScatter and
an AllGather phase, each mapped onto its share of the 0..1 progress bar).

The rule the heuristics follow: a stop or an expired limit ends the work at
the next check; the best *complete* run so far is the answer (with a note
saying how many restarts ran). If not even one run is complete there is no
valid schedule, and ``Budget.exhausted`` raises a ``CcvizError`` naming the
reason (a partial run is not a schedule of the collective). One exception:
the second half of an AllReduce (``phase(..., finish_first=True)``) always
completes its first run once the first half has a schedule, so a stop there
still returns a whole AllReduce, one run late, instead of throwing the
first half away.

Checks are cheap: callers ask ``expired()`` every few dozen events, and
``report`` sends at most one progress message per ``every_s`` seconds
(besides the forced ones at the end of each run).
"""

from __future__ import annotations

import math
import time

from ccviz.errors import CcvizError
from ccviz.synth.registry import Progress, SynthOptions

REPORT_EVERY_S = 0.2


class Budget:
    """Deadline, stop event and progress throttle of one synthesis."""

    def __init__(self, options: SynthOptions, every_s: float = REPORT_EVERY_S) -> None:
        limit = options.time_limit
        if limit is not None and not (isinstance(limit, int | float) and limit > 0):
            raise CcvizError(f"time_limit: need a positive number of seconds, got {limit!r}", "time_limit")
        self.options = options
        self.every_s = every_s
        self.began = time.perf_counter()
        self.deadline = math.inf if limit is None else self.began + float(limit)
        self.low, self.high = 0.0, 1.0  # the share of the progress bar of the current phase
        self.finish_first = False  # this phase completes its first run whatever happens
        self.overran = False  # ... and did so past a stop or the limit
        self.fraction = 0.0  # last reported (overall) fraction: reports never go backwards
        self.last_report = -math.inf
        self.answered = False  # the caller holds a complete schedule already: work past the limit may be dropped

    def phase(self, low: float, high: float, finish_first: bool = False) -> Budget:
        """Map the next phase's fractions 0..1 onto ``low..high`` of the whole synthesis.

        ``finish_first``: the phase's first run is never cut short (see the module docstring).
        """
        self.low, self.high, self.finish_first, self.overran = low, high, finish_first, False
        return self

    def reason(self) -> str | None:
        """'stopped' or 'time_limit' once the work should end, else None. The time limit first: a front end
        that stops a solve from outside does so after its limit has passed (the app, 5 s later)."""
        if time.perf_counter() >= self.deadline:
            return "time_limit"
        if self.options.stopped():
            return "stopped"
        return None

    def expired(self) -> bool:
        return self.reason() is not None

    def ends(self, done: int) -> bool:
        """True when the work should end now, with ``done`` complete runs in this phase."""
        if not self.expired():
            return False
        if self.finish_first and done == 0:
            self.overran = True
            return False
        return True

    def elapsed_s(self) -> float:
        return time.perf_counter() - self.began

    def superseded(self) -> bool:
        """Whether work in progress may be abandoned: stopped or past the limit while the caller already holds
        a complete schedule (``answered``), so nothing is lost by returning that one now."""
        return self.answered and self.expired()

    def would_pass(self, share: float, more_s: float) -> bool:
        """Whether ``more_s`` seconds of further work would end past ``share`` of the time limit (never without
        one). A search step that is not needed for a first schedule asks this, so that the steps which make the
        first schedule still fit in the limit (and on a loaded machine, in the front end's grace after it)."""
        if math.isinf(self.deadline):
            return False
        return self.elapsed_s() + more_s > share * (self.deadline - self.began)

    def report(self, message: str, fraction: float, incumbent_s: float | None = None, force: bool = False) -> None:
        """Send a progress report (phase fraction 0..1), at most one per ``every_s`` unless forced."""
        if self.options.progress is None:
            return
        now = time.perf_counter()
        if not force and now - self.last_report < self.every_s:
            return
        self.last_report = now
        overall = self.low + (self.high - self.low) * min(1.0, max(0.0, fraction))
        self.fraction = max(self.fraction, overall)
        self.options.report(Progress(now - self.began, message, incumbent_s=incumbent_s, fraction=self.fraction))

    def note(self, algorithm: str, done: int, restarts: int) -> str | None:
        """The schedule note when restarts were cut short, else None."""
        if done >= restarts and not self.overran:
            return None
        why = "stopped" if self.reason() == "stopped" else f"time limit of {self.options.time_limit:g} s reached"
        if self.overran:
            return (f"{why}; the {algorithm} run of this half was completed anyway (the other half already had "
                    f"a schedule), {done} of {restarts} restarts")
        return f"{why} after {done} of {restarts} {algorithm} restarts; the best complete run is returned"

    def exhausted(self, algorithm: str, what: str) -> CcvizError:
        """The error for a stop or limit before the first complete run (``what`` says how far it got)."""
        if self.options.stopped():
            return CcvizError(f"stopped: {algorithm} was stopped before its first run completed ({what}); "
                              "no complete schedule yet, so there is nothing to return", "stop")
        return CcvizError(f"time_limit: {algorithm} reached the {self.options.time_limit:g} s limit before its "
                          f"first run completed ({what}); no complete schedule yet; raise the limit", "time_limit")
