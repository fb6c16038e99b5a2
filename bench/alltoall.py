"""AllToAll against its exact limit (issue 30): TE-CCL's LP, mteg, direct, bruck and mcf, with synthesis times.

For each fabric and size: the limit (``ccviz.bandwidth_limit``: the maximum concurrent flow LP, with its
own computing time) and per algorithm the simulated finish over the limit (1.000 = at the limit), the
synthesis's wall seconds, the whole run's CPU seconds (synthesis, lower bound and judge: on a busy
machine read CPU, not wall), the wall seconds of the rest (lower bound and judge) and the transfers. TE-CCL runs at 16 GPUs only (its LP grows with epochs x chunks x links).

    .venv/bin/python bench/alltoall.py                       # 16 and 64 GPUs, 1 MB and 1 GB
    .venv/bin/python bench/alltoall.py --scale               # mcf and the limit at 432-512 GPUs, 1 GB
    .venv/bin/python bench/alltoall.py --fabrics torus2d:dims=8x8 --algorithms mcf --sizes 1GB
    .venv/bin/python bench/alltoall.py --targets             # mcf at 1 GB on the 64-GPU builders (<= 1.10 x)

Targets: mcf within 1.10 x the limit at 1 GB on the 64-GPU builders, the 8x8x8 torus and fattree:k=12;
synthesis <= 30 s on the 8x8 torus, <= 60 s at 432-512 GPUs; the limit <= 10 s at 64 GPUs, <= 2 min at 512.
"""

from __future__ import annotations

import argparse
import time

from ccviz import CcvizError, SynthOptions, bandwidth_limit, load_topology, run
from ccviz.model.units import parse_size

SMALL = ["torus2d:dims=4x4", "fattree:k=4", "ndv2:chassis=2"]
MEDIUM = ["torus2d:dims=8x8", "torus3d:dims=4x4x4", "fattree:k=6"]
LARGE = ["torus3d:dims=8x8x8", "fattree:k=12"]
TARGETS = ["torus2d:dims=8x8", "torus3d:dims=4x4x4", "mesh2d:dims=8x8", "hypercube:n=64", "fattree:k=6",
           "leafspine:leaves=8,hosts=8,spines=4", "dragonfly:groups=8,routers=4,gpus=2", "ndv2:chassis=8",
           "a100:boxes=8"]
ALGORITHMS = ["teccl", "mteg", "direct", "bruck", "mcf"]
TECCL_MAX_GPUS = 16
SLOW_MAX_GPUS = 64  # mteg beyond this takes many minutes per row


def row(spec: str, algorithm: str, size: float, limit_s: float, time_limit: float) -> str:
    topology = load_topology(spec)
    t0, c0 = time.perf_counter(), time.process_time()
    try:
        result = run(topology, "alltoall", algorithm, size, options=SynthOptions(time_limit=time_limit))
    except CcvizError as error:
        return f"{spec:<38} {algorithm:<7} {'-':>8} {'error: ' + str(error)[:60]}"
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    synth = result.schedule.synth_time_s or 0.0
    ratio = result.timeline.finish_time_s / limit_s
    judge = wall - synth
    ok = "yes" if result.timeline.verified else "NO"
    return (f"{spec:<38} {algorithm:<7} {ratio:>8.3f} {synth:>9.2f} {cpu:>8.2f} {judge:>8.2f} "
            f"{len(result.schedule.transfers):>9} {ok:>8}")


def table(specs: list[str], algorithms: list[str], sizes: list[float], time_limit: float) -> None:
    print(f"{'fabric':<38} {'alg':<7} {'x limit':>8} {'synth s':>9} {'cpu s':>8} {'rest s':>8} {'transfers':>9} "
          f"{'verified':>8}", flush=True)
    for spec in specs:
        topology = load_topology(spec)
        for size in sizes:
            t0 = time.perf_counter()
            limit = bandwidth_limit(topology, "alltoall", size)
            print(f"{spec:<38} limit   {limit.limit_s * 1e6:>10.4g} us at {size:g} B ({topology.n_gpus} GPUs; "
                  f"LP {time.perf_counter() - t0:.2f} s, {limit.method})", flush=True)
            for algorithm in algorithms:
                if algorithm.startswith("teccl") and topology.n_gpus > TECCL_MAX_GPUS:
                    continue
                if algorithm == "mteg" and topology.n_gpus > SLOW_MAX_GPUS:
                    continue
                print(row(spec, algorithm, size, limit.limit_s, time_limit), flush=True)


def split_specs(text: str) -> list[str]:
    """Comma-separated specs whose own keys are comma-separated too: a piece with '=' and no ':' is a
    key of the spec before it (``leafspine:leaves=8,hosts=8,spines=4,dgx1`` is two specs)."""
    specs: list[str] = []
    for piece in text.split(","):
        if specs and "=" in piece and ":" not in piece:
            specs[-1] += "," + piece
        else:
            specs.append(piece)
    return specs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fabrics", default=None, help="comma-separated topology specs")
    parser.add_argument("--algorithms", default=",".join(ALGORITHMS))
    parser.add_argument("--sizes", default="1MB,1GB")
    parser.add_argument("--time-limit", type=float, default=120.0, help="per synthesis (TE-CCL, mteg)")
    parser.add_argument("--scale", action="store_true", help="432-512 GPUs: the limit and mcf at 1 GB")
    parser.add_argument("--targets", action="store_true", help="mcf at 1 GB on the 64-GPU builders")
    args = parser.parse_args()
    algorithms = args.algorithms.split(",")
    sizes = [parse_size(s) for s in args.sizes.split(",")]
    if args.scale:
        table(LARGE, ["mcf", "direct"], [1e9], args.time_limit)
    elif args.targets:
        table(TARGETS, ["mcf"], [1e9], args.time_limit)
    else:
        specs = split_specs(args.fabrics) if args.fabrics else SMALL + MEDIUM
        table(specs, algorithms, sizes, args.time_limit)


if __name__ == "__main__":
    main()
