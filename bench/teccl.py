"""TE-CCL on NDv2 2 chassis as the paper ran it, against its published Gurobi figures.

One row per checked instance (1 chunk per GPU; ``make_collective`` gives
chunk = size/16 on this topology, as in the published runs): our finish time from the simulator, the
epoch model's own finish (epochs x tau), the published finish, our solve time
against the published solve time (Gurobi, 80-core server), status and gap.
Run: ``python bench/teccl.py [--time-limit S] [--astar] [--only 1GB-slowest,...]``.

``--astar-compare`` prints epochs and solve time of ``teccl``, ``teccl-astar`` and
A*'s rounds alone (no greedy continuation) on the same instances, plus AllGather
1 GB (fastest epoch) on the larger reference fabrics where the full MILP is
skipped, against the epoch greedy.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from pathlib import Path

from ccviz import load_topology, make_collective
from ccviz.simulate import simulate
from ccviz.synth import SynthOptions, synthesize
from ccviz.synth.teccl.synthesizer import EpochSolver

TOPOLOGY = "ndv2_2chassis_teccl_as_run.json"
PUBLISHED_CHUNKS = 16  # the published runs split the buffer over 16 nodes (node 0 counted, though a switch)


@dataclass(frozen=True)
class Instance:
    """One published data point."""

    name: str
    collective: str
    size_bytes: float
    epoch: str
    published_us: float
    published_solve_s: float | None  # None: the paper gives no solver time for it


INSTANCES = (
    Instance("AG-1GB-slowest", "allgather", 1e9, "slowest", 50000.0, 0.94),
    Instance("AG-16MB-slowest", "allgather", 16e6, "slowest", 800.0, None),
    Instance("AG-1GB-fastest", "allgather", 1e9, "fastest", 43750.0, 7201.0),
    Instance("AG-1MB-fastest", "allgather", 1e6, "fastest", 48.75, 160.0),
    Instance("AG-64KB-fastest", "allgather", 64e3, "fastest", 6.08, 28.0),
    Instance("A2A-1MB-fastest", "alltoall", 1e6, "fastest", 325.28, None),
)


def run(instance: Instance, algorithm: str, time_limit: float, reference_dir: str) -> dict:
    topo = load_topology(f"{reference_dir}/{TOPOLOGY}")
    coll = make_collective(instance.collective, topo, instance.size_bytes)
    assert coll.chunk_bytes == instance.size_bytes / PUBLISHED_CHUNKS, "topology meta buffer_ranks=16 expected"
    t0 = time.perf_counter()
    schedule = synthesize(topo, coll, algorithm, SynthOptions(epoch=instance.epoch, time_limit=time_limit))
    solve_s = time.perf_counter() - t0
    timeline = simulate(schedule)
    return {
        "instance": instance.name,
        "ours_us": timeline.finish_time_s * 1e6,
        "model_us": (schedule.epochs or 0) * (schedule.epoch_s or 0) * 1e6,
        "published_us": instance.published_us,
        "solve_s": solve_s,
        "published_s": instance.published_solve_s,
        "status": schedule.status,
        "gap": schedule.mip_gap,
        "epochs": schedule.epochs,
        "verified": timeline.verified,
    }


def table(rows: list[dict]) -> str:
    head = (f"{'instance':<17} {'ours us':>10} {'model us':>10} {'publ. us':>10} {'ratio':>6} "
            f"{'solve s':>8} {'publ. s':>8} {'status':>10} {'gap':>7} {'epochs':>6} verified")
    lines = [head, "-" * len(head)]
    for r in rows:
        published_s = f"{r['published_s']:.2f}" if r["published_s"] is not None else "n/a"
        gap = f"{r['gap']:.3g}" if r["gap"] is not None else "-"
        lines.append(
            f"{r['instance']:<17} {r['ours_us']:>10.6g} {r['model_us']:>10.6g} {r['published_us']:>10.6g} "
            f"{r['ours_us'] / r['published_us']:>6.3f} {r['solve_s']:>8.2f} {published_s:>8} {r['status']:>10} "
            f"{gap:>7} {r['epochs']:>6} {r['verified']}")
    return "\n".join(lines)


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
    cases = [(i.name, TOPOLOGY, i.collective, i.size_bytes, i.epoch) for i in INSTANCES
             if i.collective == "allgather" and (not wanted or i.name in wanted)]
    cases += [(f"AG-1GB-fastest {name.removesuffix('.json')}", name, "allgather", 1e9, "fastest") for name in LARGE
              if not wanted or name.removesuffix(".json") in wanted]
    head = (f"{'instance':<34} {'greedy':>6} {'teccl':>12} {'astar':>12} {'rounds only':>12}   "
            "(epochs / solve s; * = not verified; g = rounds stalled, greedy returned)")
    print(head + "\n" + "-" * len(head))
    for name, topo_file, collective, size, epoch in cases:
        topo = load_topology(f"{reference_dir}/{topo_file}")
        coll = make_collective(collective, topo, size)
        greedy = EpochSolver(topo, coll, SynthOptions(epoch=epoch), 0.0, 0.0).greedy_plan().epochs
        cells = []
        for algorithm, extra in ASTAR_VARIANTS:
            epochs, seconds, verified = solve_epochs(topo, coll, epoch, algorithm, extra, time_limit)
            cells.append(f"{epochs}{'' if verified else '*'} / {seconds:.1f}")
        print(f"{name:<34} {greedy:>6} " + " ".join(f"{c:>12}" for c in cells), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--time-limit", type=float, default=60.0, help="seconds per instance")
    parser.add_argument("--astar", action="store_true", help="run teccl-astar instead of teccl")
    parser.add_argument("--astar-compare", action="store_true",
                        help="epochs and time of teccl, teccl-astar and A*'s rounds alone (plus larger fabrics)")
    parser.add_argument("--only", default="", help="comma-separated instance names")
    parser.add_argument("--reference", default=str(Path(__file__).resolve().parents[1] / "sample_topologies"),
                        help="topology folder (the papers' files ship in sample_topologies/)")
    args = parser.parse_args()
    wanted = {name.strip() for name in args.only.split(",") if name.strip()}
    if args.astar_compare:
        astar_compare(args.time_limit, args.reference, wanted)
        return
    algorithm = "teccl-astar" if args.astar else "teccl"
    rows = []
    for instance in INSTANCES:
        if wanted and instance.name not in wanted:
            continue
        rows.append(run(instance, algorithm, args.time_limit, args.reference))
        print(f"done {instance.name}: {rows[-1]['solve_s']:.2f} s", flush=True)
    print(f"\n{algorithm} on {TOPOLOGY} (ours = simulator finish; model = epochs x tau)")
    print(table(rows))


if __name__ == "__main__":
    main()
