"""Alpha-beta judge vs the ns-3 packet-level replay (docs/replay.md's tables). Run: python bench/replay.py

Sections: (1) one link and a chain from 1 KB to 1 GB; (2) MSCCL's AllGather programs imported and
replayed from 1 KB to 1 GB (CSC290's experiment, past its 6 MB wall); (3) every AllGather algorithm on
dgx1, ndv2:chassis=2 and fattree:k=4 (and the fat tree judged under
switch_hop=teccl) at 1 MB and 1 GB; (4) wall time of an 8-GPU and a 64-GPU AllGather
at 1 GB. Prints markdown tables; ``--only N`` runs one section, ``--time-limit S`` bounds each synthesis.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import ccviz  # noqa: E402
from ccviz.interop.importers import import_schedule  # noqa: E402
from ccviz.judge.replay import replay  # noqa: E402
from ccviz.judge.replay_ns3 import engine_module  # noqa: E402
from ccviz.model.collectives import make_collective  # noqa: E402
from ccviz.model.schedule import Schedule, Transfer  # noqa: E402
from ccviz.model.units import format_size  # noqa: E402

FIXTURES = REPO / "tests" / "fixtures"
SIZES = [1e3, 1e4, 1e5, 1e6, 6.144e6, 1e7, 6.4e7, 1e8, 1e9]


def us(t: float | None) -> str:
    return "—" if t is None else f"{t * 1e6:,.2f}"


def row(label: str, result) -> str:
    s = result.summary()
    ratio = "—" if s["ratio"] is None else f"{s['ratio']:.4f}"
    state = "all bytes" if s["complete"] else f"INCOMPLETE ({s['bytes_lost']} B lost)"
    return (f"| {label} | {us(s['judge_finish_time_s'])} | {us(s['finish_time_s'])} | {ratio} | {state} "
            f"| {s['wall_s']:.2f} |")


HEADER = "| case | α-β (µs) | ns-3 (µs) | ns-3 / α-β | delivered | wall (s) |\n|---|---:|---:|---:|---|---:|"


def chain(hops: int, size: float) -> Schedule:
    topology = ccviz.load_topology(f"line:n={hops + 1}")
    collective = make_collective("broadcast", topology, size, root=0)
    return Schedule(topology, collective, [Transfer(0, k, k + 1, step=k) for k in range(hops)], "chain")


def section_links() -> None:
    print("\n### One link and a 4-hop chain (line, 50 GB/s, 0.5 µs)\n\n" + HEADER)
    for hops in (1, 4):
        for size in SIZES:
            print(row(f"{hops} hop(s), {format_size(size)}", replay(chain(hops, size))), flush=True)


def section_msccl() -> None:
    print("\n### MSCCL AllGather programs (msccl-tools), imported and replayed\n\n" + HEADER)
    programs = [("allgather_ring_8", str(FIXTURES / "dgx1_ring_order.json"), "dgx1 (ring order)"),
                ("allgather_ring_8_2ch", str(FIXTURES / "dgx1_ring_order.json"), "dgx1 (ring order)"),
                ("allgather_allpairs_8", None, "fully connected"),
                ("allgather_recursive_doubling_8", "dgx1", "dgx1"),
                ("allgather_recursive_doubling_8", None, "fully connected")]
    for name, topology, where in programs:
        for size in SIZES:
            schedule = import_schedule(FIXTURES / "msccl" / f"{name}.xml", topology, size)
            print(row(f"{name} on {where}, {format_size(size)}", replay(schedule)), flush=True)


def section_algorithms(time_limit: float) -> None:
    print("\n### Every AllGather algorithm, α-β vs ns-3\n\n" + HEADER)
    for spec in ("dgx1", "ndv2:chassis=2", "fattree:k=4", "fattree:k=4,switch_hop=teccl"):
        topology = ccviz.load_topology(spec)
        for size in (1e6, 1e9):
            for algorithm in ccviz.algorithms_for("allgather"):
                label = f"{spec} {algorithm} {format_size(size)}"
                try:
                    run = ccviz.run(topology, "allgather", algorithm, size_bytes=size,
                                    options=ccviz.SynthOptions(time_limit=time_limit))
                except ccviz.CcvizError as exc:
                    print(f"| {label} | not synthesized: {exc} | | | | |", flush=True)
                    continue
                print(row(label, replay(run.timeline.schedule)), flush=True)


def section_speed() -> None:
    print("\n### Replay wall time at 1 GB (after the import)\n\n" + HEADER)
    for spec, algorithm in (("ring:n=8", "ring"), ("dgx1", "ring"), ("dgx1", "tacos"), ("ring:n=64", "ring"),
                            ("torus2d:dims=8x8", "ring"), ("torus2d:dims=8x8", "direct")):
        run = ccviz.run(ccviz.load_topology(spec), "allgather", algorithm, size_bytes=1e9)
        result = replay(run.timeline.schedule)  # wall: the judge, the plan and the ns-3 run
        print(row(f"{algorithm} AllGather on {spec}, 1GB ({len(run.timeline.schedule.transfers)} transfers)", result),
              flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--only", type=int, choices=[1, 2, 3, 4])
    parser.add_argument("--time-limit", type=float, default=20.0)
    args = parser.parse_args()
    t0 = time.perf_counter()
    engine_module()
    print(f"ns-3 import and engine compile: {time.perf_counter() - t0:.1f} s")
    sections = {1: section_links, 2: section_msccl, 3: lambda: section_algorithms(args.time_limit),
                4: section_speed}
    for k, section in sections.items():
        if args.only in (None, k):
            section()


if __name__ == "__main__":
    main()
