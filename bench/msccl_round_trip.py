"""Export -> import -> simulate round trip of every algorithm x collective: the finish-time ratio per case.

Each case is synthesized at 1 MB (forestcoll with two trees of one piece, what MSCCL's limits hold),
exported as MSCCL XML, imported on the same fabric and judged again. A ratio of 1 means the round trip
keeps the synthesized finish time (the import's promise on point-to-point fabrics; through switches the XML
does not say how connections share a GPU->switch link, so the time may differ); ``relays`` marks schedules whose partial sums cross other GPUs
(imported as relays). Cases an algorithm or the export refuses are listed as refused.

    python bench/msccl_round_trip.py [fabric ...]   (default: the fabrics tests/test_msccl_export.py covers,
                                                     plus ring:n=8 and torus2d:dims=4x4)
"""

from __future__ import annotations

import argparse

from ccviz import CcvizError, load_topology, make_collective, simulate, synthesize
from ccviz.interop.export import msccl_xml
from ccviz.interop.importers import import_text
from ccviz.synth import REGISTRY, SynthOptions

FABRICS = ("dgx1", "ring:n=4", "ring:n=6", "torus2d:dims=3x3", "ring:n=8", "torus2d:dims=4x4")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("fabrics", nargs="*", default=list(FABRICS))
    args = parser.parse_args()
    print(f"{'fabric':18} {'algorithm':12} {'collective':14} {'relays':>6} {'verified':>8} {'finish ratio':>16}")
    worst = 0.0
    for fabric in args.fabrics:
        try:
            topo = load_topology(fabric)
        except CcvizError as exc:
            raise SystemExit(str(exc)) from None
        for alg, entry in REGISTRY.items():
            if alg == "teccl" and topo.n_gpus > 4:  # the MILP's solver time
                continue
            for coll in sorted(entry.collectives - {"custom"}):
                options = SynthOptions(extra={"trees": 2, "pieces": 1}) if alg == "forestcoll" else None
                try:
                    timeline = simulate(synthesize(topo, make_collective(coll, topo, 1e6), alg, options))
                    xml = msccl_xml(timeline)
                except CcvizError as exc:
                    print(f"{fabric:18} {alg:12} {coll:14} refused: {str(exc)[:60]}")
                    continue
                again = simulate(import_text(xml, "round_trip.xml", topo, 1e6))
                ratio = again.finish_time_s / timeline.finish_time_s
                worst = max(worst, abs(ratio - 1))
                relays = "yes" if any(t.op == "relay" for t in timeline.schedule.transfers) else "no"
                print(f"{fabric:18} {alg:12} {coll:14} {relays:>6} {'yes' if again.verified else 'NO':>8} "
                      f"{ratio:16.12f}", flush=True)
    print(f"largest |ratio - 1|: {worst:.3g}")


if __name__ == "__main__":
    main()
