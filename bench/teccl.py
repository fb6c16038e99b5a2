"""TE-CCL against its published table: the same rows and columns as ``ccviz reproduce teccl``.

Every published run (NDv2 2 chassis as run, DGX2 2 chassis; AllGather; Slow, Fast and
Fast_Early_Stop epochs) solved with the run's conventions and epoch length, judged by the simulator,
and set beside the published epochs, times and Gurobi solve seconds; the summary line gives the
geometric mean of ccviz/Gurobi solve-time ratios measured in this run.
Run: ``python bench/teccl.py [--time-limit S] [--filter TEXT]``.

``--astar-compare`` prints epochs and solve time of ``teccl``, ``teccl-astar`` and
A*'s rounds alone (no greedy continuation) on NDv2 as-run instances, plus AllGather
1 GB (fastest epoch) on the larger reference fabrics where the full MILP is
skipped, against the epoch greedy.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from datetime import UTC, datetime
from pathlib import Path

from ccviz import load_topology, make_collective
from ccviz.judge.simulate import simulate
from ccviz.runs.reproduce import format_table, published_runs, reproduce, summary, summary_line
from ccviz.synth import SynthOptions, synthesize
from ccviz.synth.teccl.synthesizer import EpochSolver

ASTAR_ROWS = ("NDv2 Fast 1GB", "NDv2 Fast 1MB")

LARGE = ("ndv2_4chassis.json", "amd_2chassis.json")  # AllGather 1 GB, fastest epoch: no full MILP
ASTAR_VARIANTS = (("teccl", {}), ("teccl-astar", {}), ("teccl-astar", {"astar_greedy": False}))


def solve_epochs(topo, coll, epoch: str, algorithm: str, extra: dict, time_limit: float) -> tuple[str, float, bool]:
    """Epochs (suffix g: A*'s rounds stalled and the epoch greedy was returned), seconds, verified."""
    t0 = time.perf_counter()
    schedule = synthesize(topo, coll, algorithm, SynthOptions(epoch=epoch, time_limit=time_limit, extra=extra))
    seconds = time.perf_counter() - t0
    fallback = extra.get("astar_greedy") is False and "best = epoch greedy" in " ".join(schedule.notes)
    return f"{schedule.epochs}{'g' if fallback else ''}", seconds, simulate(schedule).verified


def astar_compare(time_limit: float, reference_dir: str, wanted: set[str]) -> None:
    cases = []
    for name in ASTAR_ROWS:
        run = next(r for r in published_runs(name) if r.mode == "Fast")
        if not wanted or name in wanted:
            cases.append((name, run.topology_spec, "allgather", run.size_bytes, run.epoch_s))
    cases += [(f"AG-1GB-fastest {name.removesuffix('.json')}", f"{reference_dir}/{name}", "allgather", 1e9,
               "fastest") for name in LARGE if not wanted or name.removesuffix(".json") in wanted]
    head = (f"{'instance':<34} {'greedy':>6} {'teccl':>12} {'astar':>12} {'rounds only':>12}   "
            "(epochs / solve s; * = not verified; g = rounds stalled, greedy returned)")
    print(head + "\n" + "-" * len(head))
    for name, topo_file, collective, size, epoch in cases:
        topo = load_topology(topo_file)
        coll = make_collective(collective, topo, size)
        greedy = EpochSolver(topo, coll, SynthOptions(epoch=epoch), 0.0, 0.0).greedy_plan().epochs
        cells = []
        for algorithm, extra in ASTAR_VARIANTS:
            epochs, seconds, verified = solve_epochs(topo, coll, epoch, algorithm, extra, time_limit)
            cells.append(f"{epochs}{'' if verified else '*'} / {seconds:.1f}")
        print(f"{name:<34} {greedy:>6} " + " ".join(f"{c:>12}" for c in cells), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--time-limit", type=float, default=30.0, help="seconds per row")
    parser.add_argument("--filter", default="", help="rows whose name has every word, e.g. 'DGX2 Fast'")
    parser.add_argument("--astar-compare", action="store_true",
                        help="epochs and time of teccl, teccl-astar and A*'s rounds alone (plus larger fabrics)")
    parser.add_argument("--only", default="", help="--astar-compare: comma-separated case names")
    parser.add_argument("--reference", default=str(Path(__file__).resolve().parents[1] / "sample_topologies"),
                        help="topology folder for --astar-compare's larger fabrics")
    args = parser.parse_args()
    if args.astar_compare:
        wanted = {name.strip() for name in args.only.split(",") if name.strip()}
        astar_compare(args.time_limit, args.reference, wanted)
        return
    runs = published_runs(args.filter)
    started = time.perf_counter()
    rows = reproduce(runs, args.time_limit, on_row=lambda i, r: print(
        f"[{i + 1}/{len(runs)}] {r.run.name}: {r.epochs} epochs, {r.solve_s:.1f} s", flush=True))
    print(f"\nccviz reproduce teccl, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {platform.machine()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}, {args.time_limit:g} s per row, "
          f"{time.perf_counter() - started:.0f} s in all")
    print(format_table(rows))
    print(summary_line(summary(rows)))


if __name__ == "__main__":
    main()
