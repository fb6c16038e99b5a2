"""Chakra ET export -> import -> simulate round trip of every algorithm on the acceptance fabrics.

For AllGather, ReduceScatter, AllReduce and AllToAll on dgx1, ring:n=8, torus2d:dims=4x4 and
dgxh100:boxes=2, each algorithm that takes the case synthesizes it at 1 MB (a 20 s time limit per
synthesis), the judged schedule is written as one PREFIX.RANK.et per rank, read back, and judged again.
A row reads ``same`` when the finish time is bit-for-bit the same, ``refused`` with the export's reason
(a schedule that sums inside a switch has no Chakra form), or the algorithm's own refusal.

    python bench/chakra_round_trip.py [fabric ...]
"""

from __future__ import annotations

import argparse
import tempfile
import time

from ccviz import CcvizError, load_topology, make_collective, simulate, synthesize
from ccviz.interop.chakra import import_chakra, write_chakra
from ccviz.synth import REGISTRY, SynthOptions

FABRICS = ("dgx1", "ring:n=8", "torus2d:dims=4x4", "dgxh100:boxes=2")
COLLECTIVES = ("allgather", "reducescatter", "allreduce", "alltoall")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("fabrics", nargs="*", default=list(FABRICS))
    parser.add_argument("--time-limit", type=float, default=20.0)
    args = parser.parse_args()
    counts = {"same": 0, "differs": 0, "export refused": 0, "algorithm refused": 0}
    for fabric in args.fabrics:
        topo = load_topology(fabric)
        for coll in COLLECTIVES:
            for alg, entry in REGISTRY.items():
                if coll not in entry.collectives:
                    continue
                t0 = time.perf_counter()
                try:
                    schedule = synthesize(topo, make_collective(coll, topo, 1e6), alg,
                                          SynthOptions(time_limit=args.time_limit))
                    timeline = simulate(schedule)
                except CcvizError as exc:
                    counts["algorithm refused"] += 1
                    print(f"{fabric:18} {coll:14} {alg:13} algorithm refused: {str(exc)[:70]}", flush=True)
                    continue
                with tempfile.TemporaryDirectory() as out:
                    try:
                        paths, _ = write_chakra(timeline, out)
                    except CcvizError as exc:
                        counts["export refused"] += 1
                        print(f"{fabric:18} {coll:14} {alg:13} export refused: {str(exc)[:70]}", flush=True)
                        continue
                    again = simulate(import_chakra(out))
                same = again.verified and again.finish_time_s == timeline.finish_time_s
                counts["same" if same else "differs"] += 1
                print(f"{fabric:18} {coll:14} {alg:13} {'same' if same else 'DIFFERS'} finish "
                      f"{timeline.finish_time_s * 1e6:.3f} us, {len(paths)} files, {time.perf_counter() - t0:.1f} s",
                      flush=True)
    print(counts)


if __name__ == "__main__":
    main()
