"""Simulator throughput on 1024-GPU ring AllGather schedules (~1M transfers): fast path vs reference.

Prints transfers per second for the two jobs of the simulator, timing an untimed (step-ordered)
schedule and verifying the timed result, for the array fast path (``ccviz.judge.simulate``'s dispatch)
and the reference replay (``reference_assign_times`` / ``reference_simulate``), measured in one
run so that the ratio holds on a busy machine. Target (issue 14): >= 1e6 transfers/s each.
"""

from __future__ import annotations

import argparse
import time

from ccviz import Schedule, Transfer, make_collective
from ccviz.builders import ring
from ccviz.judge.simulate import assign_times, reference_assign_times, reference_simulate, simulate

TARGET = 1e6


def ring_allgather(n: int) -> Schedule:
    topo = ring(n=n, bidirectional=False)
    coll = make_collective("allgather", topo, 1e9)
    transfers = [Transfer((i - k) % n, i, (i + 1) % n, None, None, "copy", k) for k in range(n - 1) for i in range(n)]
    return Schedule(topo, coll, transfers, "ring")


def measure(schedule: Schedule, time_fn, judge_fn) -> tuple[float, float, float]:
    t0 = time.perf_counter()
    timed = time_fn(schedule)
    t1 = time.perf_counter()
    timeline = judge_fn(timed)
    t2 = time.perf_counter()
    assert timeline.verified, timeline.violations[:3]
    return t1 - t0, t2 - t1, timeline.finish_time_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=1024, help="ranks in the ring")
    args = parser.parse_args()
    schedule = ring_allgather(args.n)
    count = len(schedule.transfers)
    fast = measure(schedule, assign_times, simulate)
    ref = measure(schedule, reference_assign_times, reference_simulate)
    assert fast[2] == ref[2], "fast path and reference disagree on the finish time"
    print(f"ring AllGather on {args.n} GPUs: {count} transfers, finish {fast[2] * 1e3:.3f} ms (both paths)")
    print(f"{'job':<16}{'reference/s':>14}{'fast/s':>14}{'speed-up':>10}{'fast vs 1e6':>13}")
    for job, k in (("time (untimed)", 0), ("verify (timed)", 1)):
        r, f = count / ref[k], count / fast[k]
        print(f"{job:<16}{r:>14.3g}{f:>14.3g}{f / r:>9.1f}x{f / TARGET:>12.2f}x")


if __name__ == "__main__":
    main()
