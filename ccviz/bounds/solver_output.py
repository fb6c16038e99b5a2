"""Native solver output never reaches standard output.

HiGHS (through highspy, or Pyomo's appsi wrapper that builds its model before it passes
``output_flag``) prints its "Running HiGHS ..." banner with C stdio straight to file descriptor 1,
past ``sys.stdout``: `ccviz synth --json` then printed a banner before its one JSON object in some
runs. While a synthesizer runs, descriptor 1 points at descriptor 2 (standard error), and C's
buffered output is flushed before it is pointed back, so whatever a native library prints lands on
stderr, never in a result a program reads from stdout.
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_depth = 0
_saved_fd: int | None = None


def _flush_c_stdio() -> None:
    try:
        ctypes.CDLL(None).fflush(None)  # every C stdio stream: HiGHS's printf buffer included
    except (OSError, AttributeError):  # no C library to reach (not on this platform): nothing buffered there
        pass


def _flush_python() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass


@contextmanager
def solver_output_to_stderr() -> Iterator[None]:
    """Point descriptor 1 at descriptor 2 for the duration (re-entrant, shared by threads)."""
    global _depth, _saved_fd
    with _lock:
        if _depth == 0:
            _flush_python()
            try:
                _saved_fd = os.dup(1)
                os.dup2(2, 1)
            except OSError:  # no descriptor 1 or 2 (a daemon): there is no stdout to protect
                _saved_fd = None
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _saved_fd is not None:
                _flush_python()
                _flush_c_stdio()
                os.dup2(_saved_fd, 1)
                os.close(_saved_fd)
                _saved_fd = None


def quiet_highs():
    """A ``highspy.Highs`` with its output off; the banner it prints on construction, before any option can be
    set, goes to /dev/null (inside ``solver_output_to_stderr`` too: descriptor 1 is put back as it was)."""
    import highspy

    with _lock:
        _flush_python()
        saved, devnull = os.dup(1), os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, 1)
            h = highspy.Highs()
            _flush_c_stdio()
        finally:
            os.dup2(saved, 1)
            os.close(saved)
            os.close(devnull)
    h.setOptionValue("output_flag", False)
    h.setOptionValue("log_to_console", False)
    return h
