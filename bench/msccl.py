"""MSCCL export, execution and import at scale: wall times and the round-trip finish-time ratio.

Per case: thread blocks, channels and longest thread block of the exported XML; seconds to export,
to execute it symbolically (``ccviz.interop.msccl``) and to import + simulate it; the imported schedule's
finish time over the original's (1.0 = the round trip reproduces it; below 1: the ASAP replay of the
program beats the synthesizer's own timing). Times are the best of ``--repeat`` runs.

    python bench/msccl.py [--repeat 1]
"""

from __future__ import annotations

import argparse
import time

from ccviz import load_topology, make_collective, simulate, synthesize
from ccviz.interop.export import msccl_xml
from ccviz.interop.importers import import_text
from ccviz.interop.msccl import check, parse_program

CASES = [
    ("dgx1", "tacos", "allreduce"),
    ("torus2d:dims=8x8", "ring", "allreduce"),
    ("torus2d:dims=8x8", "tacos", "allreduce"),
    ("star:n=40,copy=false", "direct", "allgather"),
    ("fully_connected:n=16", "direct", "alltoall"),
]


def best_of(repeat: int, fn):
    best, value = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        value = fn()
        best = min(best, time.perf_counter() - t0)
    return best, value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    print(f"{'case':44} {'tbs':>5} {'ch':>3} {'steps':>5} {'export s':>9} {'execute s':>10} {'import s':>9} "
          f"{'msgs':>6} {'ok':>3} {'finish ratio':>12}")
    for spec, alg, coll in CASES:
        topo = load_topology(spec)
        timeline = simulate(synthesize(topo, make_collective(coll, topo, 1e6), alg))
        t_export, xml = best_of(args.repeat, lambda: msccl_xml(timeline))  # noqa: B023
        program = parse_program(xml)
        t_exec, runs = best_of(args.repeat, lambda: check(program))  # noqa: B023
        t_import, again = best_of(args.repeat, lambda: simulate(import_text(xml, "x.xml", topo, 1e6)))  # noqa: B023
        tbs = sum(len(g.tbs) for g in program.gpus)
        longest = max(len(tb.steps) for g in program.gpus for tb in g.tbs)
        ok = all(r.ok for r in runs) and again.verified
        print(f"{spec + ' ' + alg + ' ' + coll:44} {tbs:5d} {program.nchannels:3d} {longest:5d} {t_export:9.2f} "
              f"{t_exec:10.2f} {t_import:9.2f} {len(runs[0].messages):6d} {'yes' if ok else 'NO':>3} "
              f"{again.finish_time_s / timeline.finish_time_s:12.4f}")


if __name__ == "__main__":
    main()
