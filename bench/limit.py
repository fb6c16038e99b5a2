"""How close each synthesizer comes to the fabric's limit (issue 17), and how long it takes.

For every fabric (each built-in builder at its defaults and each sample topology) and collective,
the exact limit (``ccviz.bandwidth_limit``, with its own computing time) and, per algorithm, the
simulated finish time over the limit (1.000 = at the limit) and the synthesis time. All numbers come
from one run on this machine; read ratios, not seconds, on a shared machine.

    .venv/bin/python bench/limit.py                                  # forestcoll, AllGather/RS/AR, 1 GB
    .venv/bin/python bench/limit.py --algorithms forestcoll,tacos,mteg,teccl --time-limit 30
    .venv/bin/python bench/limit.py --fabrics dgx1,a100 --collectives allgather

Targets: forestcoll within 1.05 x the limit on every fabric for AllGather, ReduceScatter and
AllReduce at 1 GB, median within 1.03 x; synthesis <= 30 s at 64 GPUs; the limit <= 1 s at 64 GPUs.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from ccviz import CcvizError, SynthOptions, bandwidth_limit, load_topology, run
from ccviz.builders import BUILDERS

SAMPLES = Path(__file__).resolve().parents[1] / "sample_topologies"


def fabrics(selected: list[str] | None) -> list[str]:
    specs = sorted(BUILDERS) + [str(p) for p in sorted(SAMPLES.glob("*.json"))]
    if not selected:
        return specs
    return [s for s in specs if any(Path(s).stem == name or s == name for name in selected)] + \
        [name for name in selected if ":" in name]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--algorithms", default="forestcoll")
    parser.add_argument("--collectives", default="allgather,reducescatter,allreduce")
    parser.add_argument("--fabrics", default="", help="comma list of builder names, sample stems or specs")
    parser.add_argument("--size", type=float, default=1e9)
    parser.add_argument("--time-limit", type=float, default=60.0, help="per synthesis, for the solvers")
    parser.add_argument("--max-gpus", type=int, default=256)
    args = parser.parse_args()
    algorithms = args.algorithms.split(",")
    collectives = args.collectives.split(",")
    ratios: dict[str, list[float]] = {a: [] for a in algorithms}
    header = f"{'fabric':<28} {'GPUs':>4} {'collective':<13} {'limit us':>10} {'lim s':>6}"
    header += "".join(f" {a + ' x':>12} {'synth s':>8}" for a in algorithms)
    print(header, flush=True)
    for spec in fabrics([f for f in args.fabrics.split(",") if f]):
        topology = load_topology(spec)
        if topology.n_gpus > args.max_gpus:
            continue
        name = Path(spec).stem if spec.endswith(".json") else spec
        for collective in collectives:
            t0 = time.perf_counter()
            limit = bandwidth_limit(topology, collective, args.size)
            limit_time = time.perf_counter() - t0
            line = f"{name:<28} {topology.n_gpus:>4} {collective:<13} {limit.limit_s * 1e6:>10.1f} {limit_time:>6.2f}"
            for algorithm in algorithms:
                options = SynthOptions(time_limit=args.time_limit)
                try:
                    result = run(topology, collective, algorithm, args.size, options=options)
                except CcvizError as exc:
                    line += f" {'error':>12} {'':>8}"
                    print(f"  {algorithm} on {name}: {exc}", flush=True)
                    continue
                ratio = result.finish_time_s / limit.limit_s
                mark = "" if result.timeline.verified else "!"
                ratios[algorithm].append(ratio)
                line += f" {ratio:>11.3f}{mark} {result.schedule.synth_time_s:>8.2f}"
            print(line, flush=True)
    for algorithm, values in ratios.items():
        if values:
            print(f"{algorithm}: {len(values)} runs, median {statistics.median(values):.3f} x the limit, "
                  f"worst {max(values):.3f}, within 1.05 x: {sum(v <= 1.05 for v in values)}/{len(values)}")


if __name__ == "__main__":
    main()
