"""Concurrent process groups (issue 29): tp=8,dp=8 on 64-GPU fabrics, every group alone and together.

For each fabric, algorithm and rank order: AllReduce in both kinds (tp 64 MB, dp 256 MB), every group
synthesized alone (the other GPUs relay) and judged alone, then all 16 groups judged together in one
timeline. A group that a fabric symmetry maps from one already synthesized gets that schedule relabeled
(judged alone like any other); ``--synthesize-each`` synthesizes all 16. Prints how many groups were
synthesized, the synthesis CPU time (all groups, and the slowest group; relabeling counted), the whole
run's CPU time (judging included), each kind's worst finish alone over its own limit (the group's limit
with the other GPUs as relays), each kind's median eta_beta (alone / together) and the job's finish.
All numbers from one run on this machine; read CPU seconds and ratios, not wall seconds, on a shared
machine.

    .venv/bin/python bench/workload.py
    .venv/bin/python bench/workload.py --algorithms tacos --orders tp-dp --fabrics ndv2:chassis=8
    .venv/bin/python bench/workload.py --algorithms forestcoll --chunks 64

Targets (issue 29): synthesis <= 30 s per workload; each group within 1.10 x its own limit alone.
"""

from __future__ import annotations

import argparse
import statistics
import time

from ccviz import CcvizError, SynthOptions, load_topology
from ccviz.runs.workload import run_workload

FABRICS = {
    "ndv2:chassis=8": "8 NDv2 boxes (8 V100 each, one NIC per box on a shared switch)",
    "leafspine:leaves=8,hosts=8": "leaf-spine, 8 leaves x 8 GPUs, 2 spines with fat uplinks",
    "leafspine:leaves=8,hosts=8,spines=8,uplink_bw=50": "fat tree (two tiers, every link 50 GB/s, 8 spines)",
}
RUN = "tp:allreduce:64MB,dp:allreduce:256MB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fabrics", default=";".join(FABRICS), help="topology specs, ';' between")
    parser.add_argument("--algorithms", default="tacos,ring,mteg,forestcoll")
    parser.add_argument("--orders", default="tp-dp,dp-tp")
    parser.add_argument("--time-limit", type=float, default=60.0, help="seconds per group's synthesis")
    parser.add_argument("--chunks", default="1,4", help="chunks per rank of the tp groups (comma list)")
    parser.add_argument("--synthesize-each", action="store_true", help="synthesize all 16 groups (no relabeling)")
    args = parser.parse_args()
    fabrics = [f.strip() for f in args.fabrics.split(";") if f.strip()]
    print("| fabric | algorithm | order, tp chunks | groups synthesized | synthesis CPU (s), slowest group | "
          "run CPU (s) | tp alone / limit (worst) | dp alone / limit (worst) | tp eta_beta (median) | "
          "dp eta_beta (median) | job finish (ms) | verified |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for chunks in (int(c) for c in args.chunks.split(",")):
        run_all(fabrics, args, chunks)


def run_all(fabrics: list[str], args: argparse.Namespace, chunks: int) -> None:
    for spec in fabrics:
        topology = load_topology(spec)
        for algorithm in args.algorithms.split(","):
            for order in args.orders.split(","):
                started = time.process_time()
                try:
                    result = run_workload(topology, "tp=8,dp=8", RUN, algorithm, order=order,
                                          options=SynthOptions(time_limit=args.time_limit), chunks=chunks,
                                          relabel=not args.synthesize_each)
                except CcvizError as exc:
                    print(f"| {spec} | {algorithm} | {order}, {chunks} chunk(s) | refused: {exc} |||||||||", flush=True)
                    continue
                cpu = time.process_time() - started
                cells = []
                for kind in ("tp", "dp"):
                    groups = [g for g in result.groups if g.kind == kind]
                    over = [g.finish_alone_s / g.limit_s for g in groups if g.limit_s]
                    cells.append(f"{max(over):.3f}" if over else "n/a")
                for kind in ("tp", "dp"):
                    cells.append(f"{statistics.median(g.eta_beta for g in result.groups if g.kind == kind):.3f}")
                synth = sum(g.synth_cpu_s for g in result.groups)
                slowest = max(g.synth_cpu_s for g in result.groups)
                made = sum(g.relabeled_from is None for g in result.groups)
                print(f"| {spec} | {algorithm} | {order}, {chunks} chunk(s) | {made} of {len(result.groups)} | "
                      f"{synth:.1f}, {slowest:.1f} | {cpu:.1f} | {' | '.join(cells)} | {result.finish_s * 1e3:.3f} | "
                      f"{result.timeline.verified} |", flush=True)


if __name__ == "__main__":
    main()
