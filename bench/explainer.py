"""The Collectives Explainer's rows (issue 27): how fast ``ccviz cost`` answers each new row, how long
``ccviz reproduce explainer`` takes, and how close dimdecomp's simulated schedule comes to its formula.

    .venv/bin/python bench/explainer.py

Targets: every cost row <= 0.3 s (the whole CLI process, best of 3); reproduce explainer <= 60 s;
dimdecomp AllReduce within 1.02 x its formula on every torus and mesh listed. Read ratios, not seconds, on a
shared machine.
"""

from __future__ import annotations

import subprocess
import sys
import time

from ccviz import explained_cost, load_topology, run

COST_ROWS = [
    ["-c", "allreduce", "-a", "dimdecomp", "--dims", "8x8x8"],
    ["-c", "allreduce", "-a", "dimdecomp", "--dims", "8x8x8", "--mesh", "--per-dim", "rhd"],
    ["-c", "allreduce", "-a", "hierarchical", "--tiers", "72x2", "--alpha", "0.5/2", "--bw", "900/50",
     "--eta", "crossbar/clos:2"],  # clos:2 prices the oversubscription (with --oversub 2 too: refused)
    ["-c", "allgather", "-a", "pat", "--n", "512"],
    ["-c", "allreduce", "-a", "inc", "--n", "512", "--eta", "nvls"],
    ["-c", "alltoall", "-a", "direct", "--n", "16", "--ports", "15"],
    ["-c", "allreduce", "-a", "dbt", "--n", "512", "--eta-alpha", "1.2", "--eta-beta", "0.6"],
]
GRIDS = [("torus2d:dims=4x4", "4x4", False), ("torus2d:dims=8x8", "8x8", False), ("torus3d:dims=4x4x4", "4x4x4", False),
         ("mesh2d:dims=4x4", "4x4", True), ("mesh2d:dims=6x5", "6x5", True), ("mesh3d:dims=4x4x4", "4x4x4", True)]


def wall(argv: list[str]) -> float:
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "ccviz.cli", *argv], check=True, capture_output=True)
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    baseline = wall(["cost", "-c", "allreduce", "-a", "ring", "--n", "8", "-s", "1MB"])
    print(f"ccviz cost (existing ring row, for comparison): {baseline:.3f} s")
    for row in COST_ROWS:
        print(f"ccviz cost {' '.join(row)} -s 16MB --json: {wall(['cost', *row, '-s', '16MB', '--json']):.3f} s")
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "ccviz.cli", "reproduce", "explainer", "--json"], check=True,
                   capture_output=True)
    print(f"ccviz reproduce explainer --json: {time.perf_counter() - t0:.1f} s")
    for spec, dims, mesh in GRIDS:
        t0 = time.perf_counter()
        result = run(load_topology(spec), "allreduce", "dimdecomp", 1e6)
        formula = explained_cost("allreduce", "dimdecomp", 1e6, 0.5, 50, dims=dims, mesh=mesh).time_s
        print(f"dimdecomp allreduce 1MB on {spec}: simulated {result.finish_time_s * 1e6:.2f} us, formula "
              f"{formula * 1e6:.2f} us, ratio {result.finish_time_s / formula:.4f}, verified {result.timeline.verified}"
              f" ({time.perf_counter() - t0:.1f} s)")


if __name__ == "__main__":
    main()
