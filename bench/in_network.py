"""In-network collectives (issue 28): inc against the limit on fabrics whose switches add, with synthesis time.

For each fabric and collective: the limit (``ccviz.bandwidth_limit``, M/BW for AllReduce on a reducing star),
inc's judged finish over it (1.000 = at the limit) and the wall time of synthesis plus the judge. One run on
this machine; read ratios, not seconds, on a shared machine.

    .venv/bin/python bench/in_network.py
    .venv/bin/python bench/in_network.py --fabrics dgxh100:boxes=2 --collectives allreduce --size 1GB
    .venv/bin/python bench/in_network.py --fabrics "star:n=8,reduce=true;dgxh100" --collectives allreduce \
        --algorithms inc,teccl --time-limit 60      # TE-CCL with in-switch reduction beside inc

Targets at 1 GB, AllReduce: star:n=8,reduce=true and dgxh100 within 1.05 x, dgxh100:boxes=2 within 1.10 x.
"""

from __future__ import annotations

import argparse
import time

from ccviz import (
    SynthOptions,
    bandwidth_limit,
    load_topology,
    make_collective,
    parse_size,
    simulate,
    synthesize,
)

FABRICS = ("star:n=8,reduce=true", "dgxh100", "dgxh100:boxes=2", "dgxh100:boxes=4", "railclos:boxes=4", "nvl72",
           "nvl72:racks=2")
COLLECTIVES = ("allreduce", "reducescatter", "reduce", "allgather", "broadcast")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fabrics", default=";".join(FABRICS), help="builder specs separated by ';' (a spec "
                        "has commas of its own)")
    parser.add_argument("--collectives", default=",".join(COLLECTIVES))
    parser.add_argument("--size", default="1GB")
    parser.add_argument("--algorithms", default="inc", help="comma-separated, e.g. inc,teccl")
    parser.add_argument("--time-limit", type=float, default=None, help="seconds per synthesis (teccl)")
    parser.add_argument("--chunks", type=int, default=None, help="chunks per rank (default: the collective's)")
    args = parser.parse_args()
    fabrics = [spec for spec in args.fabrics.split(";") if spec]
    size = parse_size(args.size)
    print(f"{'fabric':24} {'collective':14} {'algorithm':9} {'limit':>10} {'finish':>10} {'x limit':>8} {'verified':>8} {'time':>7}")
    for spec in fabrics:
        topology = load_topology(spec)
        for name in args.collectives.split(","):
            limit = bandwidth_limit(topology, name, size).limit_s
            for algorithm in args.algorithms.split(","):
                t0 = time.perf_counter()
                collective = make_collective(name, topology, size, **(
                    {"chunks_per_rank": args.chunks} if args.chunks else {}))
                schedule = synthesize(topology, collective, algorithm, SynthOptions(time_limit=args.time_limit))
                timeline = simulate(schedule)
                seconds = time.perf_counter() - t0
                print(f"{spec:24} {name:14} {algorithm:9} {limit * 1e3:9.4g}ms {timeline.finish_time_s * 1e3:9.4g}ms "
                      f"{timeline.finish_time_s / limit:8.3f} {str(timeline.verified):>8} {seconds:6.1f}s")


if __name__ == "__main__":
    main()
