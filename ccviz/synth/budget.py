"""Stop, time limit and throttled progress for heuristics that run in restarts (TACOS, MTEG).

A ``Budget`` is made once per synthesis from its ``SynthOptions``: the
deadline (``time_limit`` seconds from the start) and the stop event are
shared by every phase of the synthesis (AllReduce runs a ReduceScatter and
an AllGather phase, each mapped onto its share of the 0..1 progress bar).

The rule the heuristics follow: a stop or an expired limit ends the work at
the next check; the best *complete* run so far is the answer (with a note
saying how many restarts ran). If not even one run is complete there is no
valid schedule, and ``Budget.exhausted`` raises a ``CcvizError`` naming the
reason (a partial run is not a schedule of the collective).

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
        self.fraction = 0.0  # last reported (overall) fraction: reports never go backwards
        self.last_report = -math.inf

    def phase(self, low: float, high: float) -> Budget:
        """Map the next phase's fractions 0..1 onto ``low..high`` of the whole synthesis."""
        self.low, self.high = low, high
        return self

    def reason(self) -> str | None:
        """'stopped' or 'time_limit' once the work should end, else None."""
        if self.options.stopped():
            return "stopped"
        if time.perf_counter() >= self.deadline:
            return "time_limit"
        return None

    def expired(self) -> bool:
        return self.reason() is not None

    def elapsed_s(self) -> float:
        return time.perf_counter() - self.began

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
        if done >= restarts:
            return None
        why = "stopped" if self.options.stopped() else f"time limit of {self.options.time_limit:g} s reached"
        return f"{why} after {done} of {restarts} {algorithm} restarts; the best complete run is returned"

    def exhausted(self, algorithm: str, what: str) -> CcvizError:
        """The error for a stop or limit before the first complete run (``what`` says how far it got)."""
        if self.options.stopped():
            return CcvizError(f"stopped: {algorithm} was stopped before its first run completed ({what}); "
                              "no complete schedule yet, so there is nothing to return", "stop")
        return CcvizError(f"time_limit: {algorithm} reached the {self.options.time_limit:g} s limit before its "
                          f"first run completed ({what}); no complete schedule yet; raise the limit", "time_limit")
