"""Issue 14's table, before -> after: whole-process times, simulator rates, quality and memory at scale.

Every row runs as a user runs it: a fresh ``python`` process calling the CLI (or a short probe),
timed from the outside, its peak RSS reported by the process itself on exit. Bytecode is compiled
first (``compileall``) and children may write it, as in a user's installed copy (an environment with
PYTHONDONTWRITEBYTECODE would otherwise recompile every module on every start). ``--before PATH``
runs the same rows against another checkout (e.g. ``git worktree add /tmp/ccviz-main main``) in the
same invocation, so the two columns share the machine's load: compare ratios, not absolute seconds,
on a busy machine. The 32x32 row is also split into its phases (imports, synthesis, simulation and
verification, lower bound) by a probe that runs them one by one: what dominates. Results are also
written as JSON (``--out``) for README's measured section.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NET = "bw=53.6870912,alpha=0.5"
# The child reports its own peak RSS on exit (stderr's last line), whatever way it ends.
PEAK = ("import atexit, resource, sys\n"
        "atexit.register(lambda: print('peak_rss_kb', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, "
        "file=sys.stderr))\n")
CLI = PEAK + "from ccviz.cli import main\nsys.exit(main(sys.argv[1:]))"
PHASES = PEAK + """
import json, sys, time
t0 = time.perf_counter()
import ccviz.cli, ccviz.runs.pipeline
from ccviz.model.collectives import make_collective
from ccviz.bounds.cost import lower_bound
from ccviz.builders.loading import load_topology
from ccviz.judge.simulate import simulate
from ccviz.synth.registry import synthesize
t1 = time.perf_counter()
topo = load_topology(sys.argv[1])
coll = make_collective("allgather", topo, 2**30)
t2 = time.perf_counter()
schedule = synthesize(topo, coll, "tacos")
t3 = time.perf_counter()
timeline = simulate(schedule)
t4 = time.perf_counter()
lower_bound(topo, coll)
t5 = time.perf_counter()
assert timeline.verified
print(json.dumps({"imports_s": t1 - t0, "synth_s": t3 - t2, "simulate_verify_s": t4 - t3, "lower_bound_s": t5 - t4}))
"""
MEMORY_CAP = 8 << 30  # the 4096-GPU row runs under this address-space limit: it fails rather than swaps
SIM_PROBE = PEAK + """
import json, sys, time
from ccviz import Schedule, Transfer, make_collective
from ccviz.builders import ring
from ccviz.judge.simulate import assign_times, simulate
n = int(sys.argv[1])
topo = ring(n=n, bidirectional=False)
coll = make_collective("allgather", topo, 1e9)
transfers = [Transfer((i - k) % n, i, (i + 1) % n, None, None, "copy", k) for k in range(n - 1) for i in range(n)]
untimed = Schedule(topo, coll, transfers, "ring")
t0 = time.perf_counter(); timed = assign_times(untimed)
t1 = time.perf_counter(); timeline = simulate(timed)
t2 = time.perf_counter()
assert timeline.verified
print(json.dumps({"transfers": len(transfers), "time_rate": len(transfers) / (t1 - t0),
                  "verify_rate": len(transfers) / (t2 - t1), "finish_time_s": timeline.finish_time_s}))
"""


@dataclass
class Outcome:
    wall_s: float
    peak_rss_mb: float
    code: int
    stdout: str
    stderr: str

    def json(self) -> dict:
        try:
            return json.loads(self.stdout.strip().splitlines()[-1])
        except (json.JSONDecodeError, IndexError):
            return {}


def run(root: Path, code: str, args: list[str], cap: int | None = None, timeout: float = 600) -> Outcome:
    """One fresh interpreter with ``root`` first on sys.path; wall time and peak RSS of that process."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(root)

    def limit() -> None:
        if cap:
            resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", code, *args], cwd=root, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=limit)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        err += f"\n(killed after {timeout:.0f} s)"
    wall = time.perf_counter() - t0
    lines = err.strip().splitlines()
    rss = float(lines.pop().split()[1]) / 1024 if lines and lines[-1].startswith("peak_rss_kb") else float("nan")
    return Outcome(wall, rss, proc.returncode, out, "\n".join(lines))


def run_cli(root: Path, args: list[str], cap: int | None = None) -> Outcome:
    return run(root, CLI, args, cap)


def synth(topology: str, algorithm: str = "tacos", collective: str = "allgather") -> list[str]:
    return ["synth", topology, "--collective", collective, "--algorithm", algorithm, "--size", "1GiB", "--json"]


def measure(root: Path, big: bool) -> dict[str, dict]:
    """Every row of the issue's table for the checkout at ``root`` (``big``: also the 4096-GPU row)."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", "ccviz"], cwd=root, check=False,
                   stdout=subprocess.DEVNULL)
    rows: dict[str, dict] = {}
    for name, spec in (("tacos mesh2d 32x32", f"mesh2d:dims=32x32,{NET}"),
                       ("tacos torus3d 8x8x8", f"torus3d:dims=8x8x8,{NET}"),
                       ("tacos torus2d 16x16", f"torus2d:dims=16x16,{NET}")):
        out = run_cli(root, synth(spec))
        s = out.json()
        rows[name] = {"whole_s": out.wall_s, "synth_s": s.get("synth_time_s"), "finish_us": _us(s.get("finish_time_s")),
                      "transfers": s.get("transfers"), "verified": s.get("verified"), "peak_rss_mb": out.peak_rss_mb}
    small = run_cli(root, synth(f"ring:n=8,{NET}", "ring"))
    mesh = rows["tacos mesh2d 32x32"]
    if mesh["transfers"]:
        mesh["bytes_per_transfer"] = (mesh["peak_rss_mb"] - small.peak_rss_mb) * 2**20 / mesh["transfers"]
    if mesh["synth_s"] is not None:
        mesh["whole_minus_synth_s"] = mesh["whole_s"] - mesh["synth_s"]  # target: <= 2 s
    rows["tacos mesh2d 32x32 phases"] = run(root, PHASES, [f"mesh2d:dims=32x32,{NET}"]).json()
    for name, args in (("ccviz --help", ["--help"]), ("ccviz list", ["list"]),
                       ("ccviz cost", ["cost", "--collective", "allgather", "--algorithm", "ring", "--n", "8",
                                       "--size", "1GB"])):
        rows[name] = {"whole_s": run_cli(root, args).wall_s}
    mteg = run_cli(root, synth(f"mesh2d:dims=8x8,{NET}", "mteg")).json()
    rows["mteg mesh2d 8x8"] = {"finish_us": _us(mteg.get("finish_time_s")),
                               "bound_ratio": _ratio(mteg.get("finish_time_s"), mteg.get("lower_bound_s"))}
    for coll in ("reducescatter", "allreduce"):
        s = run_cli(root, synth(f"torus3d:dims=8x8x8,{NET}", "tacos", coll)).json()
        rows[f"tacos {coll} torus3d 8x8x8"] = {"synth_s": s.get("synth_time_s"), "finish_us": _us(s.get("finish_time_s")),
                                               "verified": s.get("verified")}
    sim = run(root, SIM_PROBE, ["1024"])
    rows["simulator ring 1024"] = sim.json() or {"error": sim.stderr.strip().splitlines()[-1:]}
    if big:
        out = run(root, CLI, synth(f"ring:n=4096,{NET}", "ring"), cap=MEMORY_CAP, timeout=900)
        s = out.json()
        rows["ring allgather 4096"] = {
            "whole_s": out.wall_s, "peak_rss_mb": out.peak_rss_mb, "exit": out.code,
            "transfers": s.get("transfers"), "verified": s.get("verified"),
            "message": (out.stderr.strip().splitlines() or [""])[-1][:160],
        }
    return rows


def _us(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1e6


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a and b else None


def _fmt(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 1e4 else f"{value:.3e}"
    return str(value)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--before", type=Path, help="a checkout of the old code (e.g. a git worktree of main)")
    parser.add_argument("--big", action="store_true", help="also the 4096-GPU ring AllGather (16.8M transfers)")
    parser.add_argument("--out", type=Path, help="write the measurements as JSON")
    args = parser.parse_args()
    after = measure(ROOT, args.big)
    # The old code ran the 4096-GPU row for over 900 s before it was killed: only the new code runs it.
    before = measure(args.before.resolve(), big=False) if args.before else {}
    print(f"{'row':<34}{'metric':<20}{'before':>14}{'after':>14}")
    for row, values in after.items():
        for metric, value in values.items():
            old = before.get(row, {}).get(metric)
            print(f"{row:<34}{metric:<20}{_fmt(old):>14}{_fmt(value):>14}")
    if args.out:
        args.out.write_text(json.dumps({"before": before, "after": after}, indent=1))


if __name__ == "__main__":
    main()
