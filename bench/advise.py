"""The fabric advisor (issue 44): plans on five fabrics, their gain, and how long each plan took.

For each fabric: the mix's weighted time at the exact limits before and after the plan, the speed-up, the
plan's cost, the search that ran (exhaustive: proven best among the candidates; greedy: not proven), the
number of exact limit solves, and the wall time. ``--confirm`` also synthesizes the mix on each step's fabric
and prints realized / promised (1.000 = the verified schedules meet the limits). One run on this machine:
read times as what they were under the machine's load (``uptime`` is printed).

    .venv/bin/python bench/advise.py
    .venv/bin/python bench/advise.py --confirm --fabrics dgx1,torus2d:dims=4x4
"""

from __future__ import annotations

import argparse
import os
import time

from ccviz.advise import advise, parse_mix
from ccviz.builders.loading import load_topology

MIX = "allreduce:1GB:0.5,alltoall:256MB:0.3,allgather:64MB:0.2"
FABRICS = [  # (spec, what it stands for, budget in USD)
    ("dgx1", "DGX-1 (8 V100, hybrid cube-mesh)", 5_000),
    ("a100:boxes=2", "2 boxes of 8 A100 (ForestColl's), a NIC per GPU", 20_000),
    ("dgxh100:boxes=4", "4 boxes of 8 H100 on 8 rails", 50_000),
    ("leafspine:leaves=8,hosts=8,spines=2,oversub=2", "64-GPU leaf-spine, 2:1 oversubscribed", 50_000),
    ("torus2d:dims=4x4", "4x4 torus", 5_000),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fabrics", default=None, help="comma-separated builder specs (default: the five above)")
    parser.add_argument("--mix", default=MIX)
    parser.add_argument("--max-candidates", type=int, default=100)
    parser.add_argument("--time-limit", type=float, default=300.0)
    parser.add_argument("--confirm", action="store_true")
    args = parser.parse_args()
    fabrics = FABRICS if args.fabrics is None else [(s, s, 10_000) for s in args.fabrics.split(",")]
    mix = parse_mix(args.mix)
    print(f"mix {args.mix}; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"{'fabric':<48} {'GPUs':>4} {'cands':>5} {'budget':>7} {'before':>9} {'after':>9} {'x':>6} {'cost':>7} "
          f"{'search':>10} {'solves':>6} {'wall s':>7}")
    for spec, what, budget in fabrics:
        topology = load_topology(spec)
        t0 = time.monotonic()
        a = advise(topology, mix, budget=budget, max_candidates=args.max_candidates, time_limit=args.time_limit)
        wall = time.monotonic() - t0
        d = a.to_dict()
        search = ("exhaustive" if a.proven else "greedy") + ("*" if a.cut_short else "")
        print(f"{what[:48]:<48} {topology.n_gpus:>4} {len(a.candidates):>5} {budget:>7,} "
              f"{a.start_s * 1e3:>7.3f}ms {a.weighted_time_s[-1] * 1e3:>7.3f}ms {d['speedup']:>6.3f} "
              f"{d['total_cost']:>7,.0f} {search:>10} {a.exact_evaluations:>6} {wall:>7.1f}")
        for n, step in enumerate(a.steps, 1):
            print(f"    {n}. {a.candidates[step.index].label} ({step.cost:,.0f}): -{step.saved_s * 1e6:.1f} us, "
                  f"{step.bottleneck}")
        if args.confirm:
            from ccviz.advise.confirm import confirm

            for r in confirm(topology, a):
                print(f"    step {r.step}: realized / promised {r.ratio:.3f} ({'verified' if r.verified else 'NOT'})")
    print("* cut short by the time limit (best found so far)")


if __name__ == "__main__":
    main()
