"""Mixture-of-experts dispatch (skewed AllToAllv): the exact limit against direct, twophase and mcf.

For each fabric and skew, the dispatch matrix of ``experts=2 x GPUs, topk=8, tokens=4096, hidden=7168, bf16``
(``ccviz.model.traffic.moe_matrix``, seed 0) is judged by the simulator for each algorithm; the table gives
finish / limit and the synthesis time. Run from the repository root:

    python bench/moe.py [--fabrics dgxh100:boxes=2,...] [--skews uniform,zipf:1.2,zipf:1.5] [--algorithms ...]
                        [--direct-max-gpus 32] [--json]

``direct`` (NCCL's pairwise exchange, planned send by send) takes minutes to lay out above 32 GPUs; it is
skipped above ``--direct-max-gpus``.
"""

from __future__ import annotations

import argparse
import json
import time

from ccviz import load_topology
from ccviz.bounds.demand_flow import alltoallv_limit
from ccviz.model.traffic import moe_matrix, moe_summary
from ccviz.runs.moe import matrix_collective, run_matrix

FABRICS = ("dgxh100:boxes=2", "dgxh100:boxes=4", "dgxh100:boxes=8", "leafspine:leaves=8,spines=4,hosts=8")
SKEWS = ("uniform", "zipf:1.2", "zipf:1.5")
ALGORITHMS = ("direct", "twophase", "mcf")


def bench_row(spec: str, skew: str, algorithms: tuple[str, ...], direct_max_gpus: int) -> dict:
    topology = load_topology(spec)
    n = topology.n_gpus
    matrix = moe_matrix(n, experts=2 * n, topk=8, tokens=4096, hidden=7168, skew=skew, seed=0)
    t0 = time.perf_counter()
    limit = alltoallv_limit(topology, matrix_collective(topology, matrix))
    row = {"fabric": spec, "gpus": n, "skew": skew, "hot_over_mean": moe_summary(matrix)["max_over_mean_in"],
           "limit_s": limit.limit_s, "limit_wall_s": time.perf_counter() - t0}
    for algorithm in algorithms:
        if algorithm == "direct" and n > direct_max_gpus:
            row[algorithm] = None
            continue
        try:
            result = run_matrix(topology, "alltoallv", algorithm, matrix)
        except Exception as e:  # a fabric without boxes (twophase): the row says so
            row[algorithm] = {"error": str(e)}
            continue
        row[algorithm] = {"finish_s": result.finish_time_s, "ratio": result.finish_time_s / limit.limit_s,
                          "synth_s": result.schedule.synth_time_s, "verified": result.timeline.verified}
    return row


def markdown(rows: list[dict], algorithms: tuple[str, ...]) -> str:
    head = "| fabric | GPUs | skew | hot/mean | limit | " + " | ".join(f"{a} (x limit, synth s)" for a in algorithms) + " |"
    lines = [head, "|" + "---|" * (5 + len(algorithms))]
    for r in rows:
        cells = []
        for a in algorithms:
            x = r.get(a)
            if x is None:
                cells.append("not run")
            elif "error" in x:
                cells.append("n/a")
            else:
                cells.append(f"{x['ratio']:.3f} ({x['synth_s']:.1f})" + ("" if x["verified"] else " INVALID"))
        lines.append(f"| `{r['fabric']}` | {r['gpus']} | {r['skew']} | {r['hot_over_mean']:.2f} | "
                     f"{r['limit_s'] * 1e3:.3f} ms ({r['limit_wall_s']:.1f} s) | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--fabrics", default=",".join(FABRICS).replace(",spines", ";spines").replace(",hosts", ";hosts"))
    p.add_argument("--skews", default=",".join(SKEWS))
    p.add_argument("--algorithms", default=",".join(ALGORITHMS))
    p.add_argument("--direct-max-gpus", type=int, default=32)
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    fabrics = [f.replace(";", ",") for f in args.fabrics.split(",")]
    algorithms = tuple(args.algorithms.split(","))
    rows = []
    for spec in fabrics:
        for skew in args.skews.split(","):
            rows.append(bench_row(spec, skew, algorithms, args.direct_max_gpus))
            print(json.dumps(rows[-1]) if args.json else markdown(rows[-1:], algorithms).splitlines()[-1], flush=True)
    if not args.json:
        print()
        print(markdown(rows, algorithms))


if __name__ == "__main__":
    main()
