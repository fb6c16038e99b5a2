"""How close each synthesizer comes to the fabric's limit (issue 17), and how long it takes.

For every fabric (each built-in builder at its defaults and each sample topology) and collective,
the exact limit (``ccviz.bandwidth_limit``, with its own computing time) and, per algorithm, the
simulated finish time over the limit (1.000 = at the limit) and the synthesis time. All numbers come
from one run on this machine; read ratios, not seconds, on a shared machine.

    .venv/bin/python bench/limit.py                                  # forestcoll, AllGather/RS/AR, 1 GB
    .venv/bin/python bench/limit.py --algorithms forestcoll,tacos,mteg,teccl --time-limit 30
    .venv/bin/python bench/limit.py --fabrics dgx1,a100 --collectives allgather
    .venv/bin/python bench/limit.py --scale    # the limit at 64 / 256 / 1,024 GPUs; forestcoll at 256
    .venv/bin/python bench/limit.py --synth64  # forestcoll's synthesis time on five 64-GPU fabrics
    .venv/bin/python bench/limit.py --odd      # fabrics nobody tuned for: uneven, mixed classes, NICs, random

``--scale`` times the limit (AllGather) on fabrics of 64, 256 and 1,024 GPUs with the exact integer
Newton on scipy, beside the networkx float path it replaced (same run, up to 256 GPUs), and runs
forestcoll on 256-GPU fabrics.

``--odd`` runs the same table on fabrics outside that set (``ODD`` and ``RANDOM_SEEDS``): uneven dims,
mixed link classes, several NICs per box (``amd:chassis=2,as_published=false`` is the two-box MI250: 16
GPUs a box, a NIC per GPU pair, one switch between the boxes) and seeded random boxes (``odd_fabric``).

Where the limit counts sums made in reducing switches (AllReduce on ``nvl72``, ``dgxh100``, ``railclos``: NVLS,
SHARP), a schedule summing at GPUs as ReduceScatter then AllGather (forestcoll) cannot reach it; its ratio is
then also given over the limit without switch sums (``BandwidthLimit.without_switch_sums_s``, the column
``RS+AG x``), and the last line counts each algorithm within 1.05 x of the limit it can reach (that one for
schedules with no sum in a switch, the fabric's limit for the rest, ``-a inc``).

The ``floor`` column is each schedule's booking floor (``ccviz.synth.forestcoll.floor``), over the limit: no
booking of that schedule's own routes and piece sizes, in any order, can end sooner (each link's pieces in a row
after the earliest can reach it, then the shortest chain after it). A row near its floor books its trees about as
well as they can be booked; one far above it loses to its booking. It bounds those trees and that chunking only.

Targets: forestcoll within 1.05 x the limit on every fabric for AllGather, ReduceScatter and
AllReduce at 1 GB, median within 1.03 x; synthesis <= 30 s at 64 GPUs; the limit <= 1 s at 64 GPUs.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from pathlib import Path

from ccviz import CcvizError, SynthOptions, Topology, bandwidth_limit, load_topology, run
from ccviz.bounds import limit as limit_module
from ccviz.builders import BUILDERS
from ccviz.builders.fabric import Fabric
from ccviz.model.schedule import COMBINE
from ccviz.synth.forestcoll.floor import booking_floor

SAMPLES = Path(__file__).resolve().parents[1] / "sample_topologies"
TARGET = 1.05  # issue 17: every row within this of the limit


ODD = ["rfs3d:dims=2x4x4", "amd:chassis=2,as_published=false", "torus2d:dims=3x5", "mesh2d:dims=2x6,bw=50/25",
       "multidim:dims=3x5,kinds=ring/switch,bw=100/50", "hypercube:n=16,bw=50/25/12.5/50", "a100:boxes=3",
       "dragonfly:groups=3,routers=2,gpus=3", "dragonfly:groups=6,routers=3,gpus=2", "dragonfly:groups=9,routers=4,gpus=1",
       "dragonfly:groups=4,routers=2,gpus=6", "dragonfly:groups=5,routers=4,gpus=3"]
RANDOM_SEEDS = (1, 2, 3, 4)
LINK_CLASSES = (25.0, 50.0, 100.0, 200.0)  # GB/s inside a box
NIC_CLASSES = (12.5, 25.0)  # GB/s from a NIC to the switch between boxes


def odd_fabric(seed: int) -> Topology:
    """Seeded random boxes no builder makes: 2-3 boxes of 3-6 GPUs, each box a ring with random chords of
    mixed bandwidths, a NIC (a bufferless copy switch) per one or two GPUs, every NIC cabled to one switch
    between the boxes at one of two NIC speeds."""
    rng = random.Random(seed)
    fabric = Fabric()
    hub = fabric.add_switch(label="between boxes")
    for box in range(rng.randint(2, 3)):
        gpus = [fabric.add_gpu(group=f"box{box}") for _ in range(rng.randint(3, 6))]
        pairs = {tuple(sorted((gpus[i], gpus[(i + 1) % len(gpus)]))) for i in range(len(gpus))}
        pairs |= {tuple(sorted(rng.sample(gpus, 2))) for _ in range(rng.randint(0, len(gpus)))}
        for u, v in sorted(pairs):
            fabric.cable(u, v, rng.choice(LINK_CLASSES), 0.7)
        nic_bw = rng.choice(NIC_CLASSES)
        i = 0
        while i < len(gpus):
            group = gpus[i:i + rng.randint(1, 2)]
            nic = fabric.add_switch(group=f"box{box}", label="NIC")
            for gpu in group:
                fabric.cable(gpu, nic, 2 * nic_bw, 0.7)
            fabric.cable(nic, hub, nic_bw, 1.3)
            i += len(group)
    return fabric.topology(f"odd{seed}", f"random boxes (seed {seed})", "chassis")


def fabrics(selected: list[str] | None) -> list[str]:
    specs = sorted(BUILDERS) + [str(p) for p in sorted(SAMPLES.glob("*.json"))]
    if not selected:
        return specs
    return [s for s in specs if any(Path(s).stem == name or s == name for name in selected)] + \
        [name for name in selected if ":" in name]


SCALE_LIMIT = ["torus2d:dims=8x8", "dgx2:chassis=4", "rfs3d:dims=2x4x8", "torus2d:dims=16x16", "dgx2:chassis=16",
               "leafspine:leaves=16,hosts=16,spines=4", "ring:n=256", "torus2d:dims=32x32", "hypercube:n=1024",
               "fattree:k=16", "rfs3d:dims=2x4x128", "dgx2:chassis=64", "ring:n=1024"]
SCALE_SYNTH = ["torus2d:dims=8x8", "torus2d:dims=16x16", "leafspine:leaves=16,hosts=16,spines=4"]
FLOAT_PATH_MAX_GPUS = 256  # the networkx path takes minutes above
SYNTH_64 = ["torus2d:dims=8x8", "rfs3d:dims=2x4x8", "dgx2:chassis=4", "hypercube:n=64",
            "leafspine:leaves=8,hosts=8,spines=4", "dragonfly:groups=4,routers=4,gpus=4",
            "dragonfly:groups=8,routers=4,gpus=2"]
SYNTH_TARGET_S = 30.0  # issue 17: forestcoll synthesis at 64 GPUs


def synth64(size: float, collectives: list[str]) -> None:
    """forestcoll's synthesis time on 64-GPU fabrics (target <= 30 s each), with each schedule's ratio."""
    print(f"{'forestcoll at 64 GPUs':<40} {'collective':<13} {'x limit':>8} {'synth s':>8} {'<= 30 s':>7}", flush=True)
    times = []
    for spec in SYNTH_64:
        topology = load_topology(spec)
        for collective in collectives:
            limit = bandwidth_limit(topology, collective, size)
            result = run(topology, collective, "forestcoll", size)
            mark = "" if result.timeline.verified else "!"
            seconds = result.schedule.synth_time_s
            times.append(seconds)
            print(f"{spec:<40} {collective:<13} {result.finish_time_s / limit.limit_s:>7.3f}{mark} {seconds:>8.2f} "
                  f"{'yes' if seconds <= SYNTH_TARGET_S else 'NO':>7}", flush=True)
    print(f"slowest {max(times):.1f} s, {sum(t <= SYNTH_TARGET_S for t in times)}/{len(times)} within {SYNTH_TARGET_S:g} s")


def scale(size: float) -> None:
    """The limit's computing time by fabric size, before (networkx floats) and after (scipy integers)."""
    print(f"{'fabric':<40} {'GPUs':>5} {'limit us':>10} {'scipy s':>8} {'networkx s':>10} {'speed-up':>8}", flush=True)
    for spec in SCALE_LIMIT:
        topology = load_topology(spec)
        t0 = time.perf_counter()
        limit = bandwidth_limit(topology, "allgather", size)
        fast = time.perf_counter() - t0
        line = f"{spec:<40} {topology.n_gpus:>5} {limit.limit_s * 1e6:>10.1f} {fast:>8.2f}"
        if topology.n_gpus <= FLOAT_PATH_MAX_GPUS:
            capacity = limit_module._capacities(topology)
            t0 = time.perf_counter()
            ratio, _ = limit_module._float_gather(topology, capacity,
                                                  limit_module._single_gpu_start(topology, capacity)[0])
            slow = time.perf_counter() - t0
            assert abs(ratio * size / topology.n_gpus / 1e9 - limit.limit_s) <= 1e-9 * limit.limit_s
            line += f" {slow:>10.2f} {slow / fast:>7.0f}x"
        print(line, flush=True)
    print(f"\n{'forestcoll at scale':<40} {'GPUs':>5} {'collective':<10} {'x limit':>8} {'synth s':>8}", flush=True)
    for spec in SCALE_SYNTH:
        topology = load_topology(spec)
        limit = bandwidth_limit(topology, "allgather", size)
        result = run(topology, "allgather", "forestcoll", size)
        mark = "" if result.timeline.verified else "!"
        print(f"{spec:<40} {topology.n_gpus:>5} {'allgather':<10} {result.finish_time_s / limit.limit_s:>7.3f}{mark} "
              f"{result.schedule.synth_time_s:>8.2f}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--algorithms", default="forestcoll")
    parser.add_argument("--collectives", default="allgather,reducescatter,allreduce")
    parser.add_argument("--fabrics", default="", help="comma list of builder names, sample stems or specs")
    parser.add_argument("--size", type=float, default=1e9)
    parser.add_argument("--time-limit", type=float, default=60.0, help="per synthesis, for the solvers")
    parser.add_argument("--max-gpus", type=int, default=256)
    parser.add_argument("--scale", action="store_true", help="time the limit at 64-1,024 GPUs, forestcoll at 256")
    parser.add_argument("--synth64", action="store_true", help="forestcoll's synthesis time on 64-GPU fabrics")
    parser.add_argument("--odd", action="store_true",
                        help="fabrics outside the tuned set: uneven dims, mixed link classes, NICs, random boxes")
    args = parser.parse_args()
    collectives = args.collectives.split(",")
    if args.scale:
        scale(args.size)
        return
    if args.synth64:
        synth64(args.size, collectives)
        return
    algorithms = args.algorithms.split(",")
    ratios: dict[str, list[float]] = {a: [] for a in algorithms}
    reachable: dict[str, list[float]] = {a: [] for a in algorithms}  # over the limit each schedule can reach
    over: dict[str, list[float]] = {a: [] for a in algorithms}  # the booking floors of rows over TARGET x
    header = f"{'fabric':<36} {'GPUs':>4} {'collective':<13} {'limit us':>10} {'lim s':>6}"
    header += "".join(f" {a + ' x':>12} {'floor':>6} {'RS+AG x':>8} {'synth s':>8} {'cpu s':>7}" for a in algorithms)
    print(header, flush=True)
    chosen: list[str | Topology] = [*ODD, *(odd_fabric(seed) for seed in RANDOM_SEEDS)] if args.odd else \
        fabrics([f for f in args.fabrics.split(",") if f])
    for spec in chosen:
        topology = spec if isinstance(spec, Topology) else load_topology(spec)
        if topology.n_gpus > args.max_gpus:
            continue
        name = topology.name if isinstance(spec, Topology) else Path(spec).stem if spec.endswith(".json") else spec
        for collective in collectives:
            t0 = time.perf_counter()
            limit = bandwidth_limit(topology, collective, args.size)
            limit_time = time.perf_counter() - t0
            line = f"{name:<36} {topology.n_gpus:>4} {collective:<13} {limit.limit_s * 1e6:>10.1f} {limit_time:>6.2f}"
            for algorithm in algorithms:
                options = SynthOptions(time_limit=args.time_limit)
                cpu = time.process_time()  # synthesis and the simulator's check, this process only (loaded machine)
                try:
                    result = run(topology, collective, algorithm, args.size, options=options)
                except CcvizError as exc:
                    line += f" {'error':>12} {'':>6} {'':>8} {'':>8} {'':>7}"
                    print(f"  {algorithm} on {name}: {exc}", flush=True)
                    continue
                ratio = result.finish_time_s / limit.limit_s
                mark = "" if result.timeline.verified else "!"
                ratios[algorithm].append(ratio)
                cpu = time.process_time() - cpu
                floor = booking_floor(result.schedule)  # any booking of these routes and pieces ends after it
                floor_x = f"{floor / limit.limit_s:>6.3f}" if floor is not None else f"{'':>6}"
                if floor is not None and ratio > TARGET:
                    over[algorithm].append(floor / limit.limit_s)
                without = limit.without_switch_sums_s
                sums_at_gpus = without is not None and not any(t.op == COMBINE for t in result.schedule.transfers)
                reachable[algorithm].append(result.finish_time_s / without if sums_at_gpus else ratio)
                no_sums = f"{result.finish_time_s / without:>8.3f}" if without is not None else f"{'':>8}"
                line += f" {ratio:>11.3f}{mark} {floor_x} {no_sums} {result.schedule.synth_time_s:>8.2f} {cpu:>7.1f}"
            print(line, flush=True)
    for algorithm, values in ratios.items():
        if values:
            reach = reachable[algorithm]
            print(f"{algorithm}: {len(values)} runs, median {statistics.median(values):.3f} x the limit, "
                  f"worst {max(values):.3f}, within 1.05 x: {sum(v <= 1.05 for v in values)}/{len(values)}; "
                  f"over the limit it can reach (without switch sums where it sums at GPUs): worst {max(reach):.3f}, "
                  f"within 1.05 x: {sum(v <= 1.05 for v in reach)}/{len(reach)}")
            if over[algorithm]:
                print(f"  rows over {TARGET:g} x: booking floors (no booking of their routes and pieces ends sooner) "
                      f"{', '.join(f'{v:.3f}' for v in over[algorithm])} x the limit")


if __name__ == "__main__":
    main()
