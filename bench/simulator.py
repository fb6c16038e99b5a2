"""Simulator throughput on 1024-GPU ring AllGather schedules (~1M transfers).

Prints transfers per second for the two jobs of the simulator: timing an
untimed (step-ordered) schedule and verifying the timed result. The app needs
well over 1e5 transfers/s to stay interactive.
"""

from __future__ import annotations

import argparse
import time

from ccviz import Schedule, Transfer, make_collective
from ccviz.builders import ring
from ccviz.simulate import _Verifier, assign_times

TARGET = 1e5


def ring_allgather(n: int) -> Schedule:
    topo = ring(n=n, bidirectional=False)
    coll = make_collective("allgather", topo, 1e9)
    transfers = [Transfer((i - k) % n, i, (i + 1) % n, None, None, "copy", k) for k in range(n - 1) for i in range(n)]
    return Schedule(topo, coll, transfers, "ring")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=1024, help="ranks in the ring")
    args = parser.parse_args()
    schedule = ring_allgather(args.n)
    count = len(schedule.transfers)
    t0 = time.perf_counter()
    timed = assign_times(schedule)
    t1 = time.perf_counter()
    timeline = _Verifier(timed, 50).run()
    t2 = time.perf_counter()
    assert timeline.verified, timeline.violations[:3]
    timing_rate, verify_rate = count / (t1 - t0), count / (t2 - t1)
    total_rate = count / (t2 - t0)
    print(f"ring AllGather on {args.n} GPUs: {count} transfers, finish {timeline.finish_time_s * 1e3:.3f} ms")
    print(f"{'job':<18}{'seconds':>10}{'transfers/s':>14}{'vs 1e5 target':>15}")
    for job, secs, rate in (("time (untimed)", t1 - t0, timing_rate), ("verify (timed)", t2 - t1, verify_rate),
                            ("simulate (both)", t2 - t0, total_rate)):
        print(f"{job:<18}{secs:>10.2f}{rate:>14.3g}{rate / TARGET:>14.1f}x")


if __name__ == "__main__":
    main()
