"""Run ``ccviz`` in-process on one input and classify what happened (shared by the hostile-input tests).

Outcomes: ``clear`` (exit 2, one line on stderr, no traceback, no warning), ``invalid``
(exit 1 from ``verify``, a correct INVALID report), ``ok`` (exit 0), or a failure class the
tests count and require to be zero: ``traceback`` (an exception or "internal error"),
``multiline`` (an error over several lines), ``warning`` (a Python warning printed), ``hang``,
``memory`` (with ``measure_memory``: Python allocations peaked over ``MEMORY_MB``).
"""

from __future__ import annotations

import contextlib
import io
import time
import tracemalloc
import warnings
from dataclasses import dataclass

from ccviz.cli import main

HANG_S = 20.0
MEMORY_MB = 300.0  # a hostile input refused up front costs a few MB; a blow-up costs gigabytes


@dataclass
class Outcome:
    kind: str
    code: int | None
    stdout: str
    stderr: str
    seconds: float
    peak_mb: float | None = None


def run_cli(argv: list[str], measure_memory: bool = False) -> Outcome:
    """Run ``ccviz argv`` in-process; ``measure_memory`` traces Python allocations (slower: for inputs that
    must be refused before they are laid out)."""
    if not measure_memory:
        return _run_cli(argv)
    tracemalloc.start()
    try:
        outcome = _run_cli(argv)
        peak = tracemalloc.get_traced_memory()[1] / 1e6
    finally:
        tracemalloc.stop()
    outcome.peak_mb = peak
    if peak > MEMORY_MB:
        outcome.kind = "memory"
    return outcome


def _run_cli(argv: list[str]) -> Outcome:
    out, err = io.StringIO(), io.StringIO()
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stdout(out), \
            contextlib.redirect_stderr(err):
        warnings.simplefilter("always")
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse usage errors
            code = exc.code if isinstance(exc.code, int) else 2
        except BaseException as exc:  # noqa: BLE001 - a traceback is what we count
            return Outcome("traceback", None, out.getvalue(), f"{type(exc).__name__}: {exc}",
                           time.perf_counter() - t0)
    seconds = time.perf_counter() - t0
    stderr = err.getvalue()
    lines = [x for x in stderr.splitlines() if x.strip()]
    if seconds > HANG_S:
        kind = "hang"
    elif "internal error" in stderr or "Traceback" in stderr:
        kind = "traceback"
    elif caught:
        kind = "warning"
        stderr += " | warnings: " + "; ".join(str(w.message) for w in caught)
    elif code == 2:
        kind = "clear" if len(lines) == 1 else "multiline"
    elif code == 1 and ("INVALID" in out.getvalue() or "\"verified\": false" in out.getvalue()):
        kind = "invalid"
    elif code == 0:
        kind = "ok"
    else:
        kind = f"exit{code}"
    return Outcome(kind, code, out.getvalue(), stderr, seconds)


# Figures of the fuzz suite, printed at the end of the test session (tests/conftest.py).
FIGURES: dict[str, int] = {
    "cases tried": 0, "clear errors": 0, "INVALID reports": 0, "verified results": 0,
    "tracebacks": 0, "hangs": 0, "silently accepted": 0, "invalid-but-verified": 0,
}


def record(outcome: Outcome, *, bad_input: bool, independent_valid: bool | None = None) -> None:
    """Count one fuzz case; ``bad_input`` marks inputs that must never be accepted."""
    FIGURES["cases tried"] += 1
    if outcome.kind == "clear":
        FIGURES["clear errors"] += 1
    elif outcome.kind == "invalid":
        FIGURES["INVALID reports"] += 1
    elif outcome.kind == "hang":
        FIGURES["hangs"] += 1
    elif outcome.kind == "ok":
        FIGURES["verified results"] += 1
        if bad_input:
            FIGURES["silently accepted"] += 1
        if independent_valid is False:
            FIGURES["invalid-but-verified"] += 1
    else:
        FIGURES["tracebacks"] += 1
