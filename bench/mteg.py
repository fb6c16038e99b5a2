"""MTEG AllGather against TE-CCL's published optima (issue 4 targets).

Per instance: our simulated finish time / TE-CCL's optimal finish time
(target <= 1.05), and our synthesis time / the time budget (the MTEG paper's
solve time: under 1 s on the as-run NDv2, 3.8 s on NDv2 4 chassis; target
<= 1), plus TE-CCL's own Gurobi solve time for scale. Times are the best of
``--repeat`` runs (the machine is shared, so single timings are noisy).

    python bench/mteg.py [--repeat 3] [--reference sample_topologies]
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from pathlib import Path

from ccviz import load_topology, make_collective, parse_size, simulate
from ccviz.synth import SynthOptions, synthesize


@dataclass(frozen=True)
class Instance:
    topology: str  # file stem under reference/topologies
    size: str
    epoch: str  # 'fastest' or 'slowest'
    teccl_finish_us: float
    teccl_solve_s: float | None
    budget_s: float  # the MTEG paper's solve time on this instance


AS_RUN = "ndv2_2chassis_teccl_as_run"
INSTANCES = [
    *(Instance(AS_RUN, size, "fastest", finish, solve, 1.0) for size, finish, solve in [
        ("1GB", 43750, 7201), ("256MB", 11200, 7214), ("64MB", 2800, 7209), ("16MB", 700, 7209),
        ("4MB", 190, 153), ("1MB", 48.75, 160), ("256KB", 14.72, 60), ("64KB", 6.08, 28), ("16KB", 4.44, 19),
        ("4KB", 4.24, 12), ("1KB", 4.135, 50),
    ]),
    *(Instance(AS_RUN, size, "slowest", finish, solve, 1.0) for size, finish, solve in [
        ("1GB", 50000, 0.94), ("4MB", 200, None), ("1MB", 70, None), ("256KB", 19.2, None), ("64KB", 7.68, None),
        ("16KB", 4.8, None),
    ]),
    Instance("ndv2_4chassis", "1GB", "fastest", 66250, None, 3.8),
]


def measure(instance: Instance, reference: Path, repeat: int) -> dict[str, float]:
    topo = load_topology(reference / f"{instance.topology}.json")
    coll = make_collective("allgather", topo, parse_size(instance.size))
    best_time = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        schedule = synthesize(topo, coll, "mteg", SynthOptions(epoch=instance.epoch))
        best_time = min(best_time, time.perf_counter() - t0)
    timeline = simulate(schedule)
    if not timeline.verified:
        raise SystemExit(f"{instance}: schedule failed verification: {timeline.violations[0].message}")
    return {
        "finish_us": timeline.finish_time_s * 1e6,
        "finish_ratio": timeline.finish_time_s * 1e6 / instance.teccl_finish_us,
        "solve_s": best_time,
        "solve_ratio": best_time / instance.budget_s,
        "epochs": schedule.epochs,
        "chunk_bytes": coll.chunk_bytes,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3, help="synthesis runs per instance (best time kept)")
    parser.add_argument("--reference", type=Path, default=Path(__file__).resolve().parents[1] / "sample_topologies")
    args = parser.parse_args()
    print(f"{'instance':<60} {'epochs':>6} {'ours us':>10} {'TE-CCL us':>10} {'finish':>7} "
          f"{'solve s':>8} {'budget':>6} {'vs budget':>9} {'TE-CCL ST s':>11}")
    worst_finish = worst_solve = 0.0
    for inst in INSTANCES:
        m = measure(inst, args.reference, args.repeat)
        worst_finish = max(worst_finish, m["finish_ratio"])
        worst_solve = max(worst_solve, m["solve_ratio"])
        name = f"{inst.topology} {inst.size} ({inst.epoch}, chunk {m['chunk_bytes']:g} B)"
        teccl_st = f"{inst.teccl_solve_s:g}" if inst.teccl_solve_s is not None else "-"
        print(f"{name:<60} {m['epochs']:>6} {m['finish_us']:>10.6g} {inst.teccl_finish_us:>10.6g} "
              f"{m['finish_ratio']:>7.3f} {m['solve_s']:>8.3f} {inst.budget_s:>6g} {m['solve_ratio']:>9.3f} "
              f"{teccl_st:>11}")
    print(f"worst finish / TE-CCL optimum: {worst_finish:.3f} (target <= 1.05); "
          f"worst solve time / budget: {worst_solve:.3f} (target <= 1)")


if __name__ == "__main__":
    main()
