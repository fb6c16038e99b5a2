"""Module-level algorithms and tasks for tests/test_isolated.py (worker processes import them by name)."""

import os
import sys
import time

from ccviz.synth.registry import REGISTRY


def stuck(topology, collective, options):
    """Offers ring's schedule, then ignores Stop (a solver inside one long step) for a minute."""
    options.offer(REGISTRY["ring"].synthesize(topology, collective, options))
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < 60:
        sum(range(10_000))
    return REGISTRY["ring"].synthesize(topology, collective, options)


def silent(topology, collective, options):
    """Offers nothing and ignores Stop for a minute (forestcoll packing trees on a 64-GPU dragonfly)."""
    from ccviz.synth.registry import Progress

    options.report(Progress(0.0, "packing"))  # the test stops it once this arrives: the solve is running
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < 60:
        sum(range(10_000))
    return REGISTRY["ring"].synthesize(topology, collective, options)


def finishing(topology, collective, options):
    """Works until the app stops it at its time limit, then takes 0.7 s more to hand back its result
    (forestcoll keeping the best schedule complete at its limit, then mirroring and judging it). It waits for
    the Stop itself, not for a clock of its own: a worker started late on a loaded machine would otherwise
    still be working when its grace ends."""
    options.stop.wait(options.time_limit + 120)
    time.sleep(0.7)
    return REGISTRY["ring"].synthesize(topology, collective, options)


def crash(topology, collective, options):
    """Dies the way a solver's segfault does: the process is gone, nothing is sent back."""
    os._exit(3)


def noisy(channel, text):
    """Writes to stdout and stderr as a solver's C code would, then returns."""
    print(text)
    print(text, file=sys.stderr)
    os.write(1, text.encode() + b"\n")
    os.write(2, text.encode() + b"\n")
    return text


def wait_for_stop(channel, seconds):
    """Runs until stopped (or ``seconds``), reporting progress."""
    t0 = time.perf_counter()
    while not channel.stop.is_set() and time.perf_counter() - t0 < seconds:
        channel.send("progress", time.perf_counter() - t0)
        time.sleep(0.05)
    return "stopped" if channel.stop.is_set() else "done"


def solver_threads(channel):
    """The HiGHS threads a solver in this worker would use."""
    from ccviz.synth.teccl.solve import highs_threads

    return highs_threads()


def chatty(channel, seconds):
    """Reports progress without a pause and ignores Stop (HiGHS's callbacks, many a second, in a long solve)."""
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        channel.send("progress", time.perf_counter() - t0)
    return "done"
