"""Groups synthesized together vs composed (issue 29): the job's finish and the synthesis CPU time.

For each case, ``run_workload`` twice: ``--synthesis composed`` (each group synthesized alone, then timed
together on shared links) and ``joint`` (every group's chunks in one synthesis). Prints the job's finish,
each kind's slowest group together, and synthesis CPU seconds of this process: composed = every group's
synthesis (each group synthesized again here, timed alone), joint = the one synthesis of the union.
CPU seconds, not wall clock: the machine is shared. Read ratios.

    .venv/bin/python bench/workload_joint.py
    .venv/bin/python bench/workload_joint.py --cases "leafspine|tp=4,dp=4|tp:allreduce:64MB,dp:allreduce:256MB|tacos"
"""

from __future__ import annotations

import argparse
import time

from ccviz import SynthOptions, load_topology
from ccviz.runs.workload import run_workload
from ccviz.synth.registry import synthesize

CASES = (
    "ndv2:chassis=4|tp=8,dp=4|tp:allreduce:64MB,dp:allreduce:256MB|tacos",
    "ndv2:chassis=4|tp=8,dp=4|tp:allreduce:64MB,dp:allreduce:256MB|mteg",
    "leafspine|tp=4,dp=4|tp:allreduce:64MB,dp:allreduce:256MB|tacos",
    "leafspine|tp=4,dp=4|tp:allreduce:64MB,dp:allreduce:256MB|mteg",
    "ring:n=4|tp=2,dp=2|tp:allreduce:1MB,dp:allreduce:2MB|teccl",
    "ring:n=8|tp=4,dp=2|tp:allreduce:4MB,dp:alltoall:8MB|teccl",
)


def composed_synthesis_cpu(result, options: SynthOptions) -> float:
    """CPU seconds to synthesize every group alone (as the composed run does)."""
    spent = 0.0
    for g in result.groups:
        started = time.process_time()
        synthesize(result.topology, g.collective, result.algorithm, options)
        spent += time.process_time() - started
    return spent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=";".join(CASES), help="TOPOLOGY|PARALLEL|RUN|ALGORITHM, ';' between")
    parser.add_argument("--time-limit", type=float, default=60.0, help="seconds per synthesis")
    args = parser.parse_args()
    print(f"{'case':<70} {'mode':<9} {'finish ms':>10} {'slowest per kind together (ms)':<34} {'synth CPU s':>11}")
    for case in args.cases.split(";"):
        spec, parallel, run, algorithm = case.split("|")
        topology = load_topology(spec)
        options = SynthOptions(time_limit=args.time_limit)
        for mode in ("composed", "joint"):
            result = run_workload(topology, parallel, run, algorithm, options=options, synthesis=mode)
            worst: dict[str, float] = {}
            for g in result.groups:
                worst[g.kind] = max(worst.get(g.kind, 0.0), g.finish_together_s)
            cpu = result.joint_synth_cpu_s if mode == "joint" else composed_synthesis_cpu(result, options)
            kinds = ", ".join(f"{k} {v * 1e3:.2f}" for k, v in worst.items())
            ok = "" if result.timeline.verified else " NOT VERIFIED"
            print(f"{spec + ' ' + parallel + ' ' + algorithm:<70} {mode:<9} {result.finish_s * 1e3:>10.3f} "
                  f"{kinds:<34} {cpu:>11.3f}{ok}", flush=True)


if __name__ == "__main__":
    main()
