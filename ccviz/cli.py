"""The ``ccviz`` command line: synth, verify, list, cost, export, sweep.

Contracts (DESIGN section 5): ``ccviz synth --json`` prints exactly one JSON
object on stdout; errors exit non-zero with one clear line on stderr, never a
traceback (set CCVIZ_DEBUG=1 to see one).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any, NoReturn

from ccviz.errors import CcvizError
from ccviz.units import format_size, format_time, parse_epoch, parse_size


class _Parser(argparse.ArgumentParser):
    """argparse that reports a usage mistake on one line."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"ccviz: error: {message} (see `{self.prog} --help`)\n")


def parse_extra(items: Sequence[str]) -> dict[str, Any]:
    """--opt key=value pairs for algorithm-specific settings; values parsed as JSON when they can be."""
    extra: dict[str, Any] = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise CcvizError(f"--opt: {item!r} should be key=value, e.g. --opt switch_degree=2", "opt")
        try:
            extra[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            extra[key.strip()] = value
    return extra


def _positive(name: str, value: float | None) -> None:
    if value is not None and not (value > 0 and math.isfinite(value)):
        raise CcvizError(f"--{name}: must be a positive number, got {value}", name)


# ---------------------------------------------------------------------- commands
def cmd_synth(args: argparse.Namespace) -> int:
    from ccviz.loading import load_topology
    from ccviz.pipeline import run
    from ccviz.synth.registry import Progress, SynthOptions

    _positive("time-limit", args.time_limit)
    if args.gap is not None and not (0 <= args.gap < 1):
        raise CcvizError(f"--gap: a relative MIP gap between 0 and 1 (e.g. 0.3), got {args.gap}", "gap")
    if args.epochs is not None and args.epochs < 1:
        raise CcvizError(f"--epochs: must be a whole number >= 1, got {args.epochs}", "epochs")
    if args.restarts < 1:
        raise CcvizError(f"--restarts: must be >= 1, got {args.restarts}", "restarts")
    topology = load_topology(args.topology)
    size = parse_size(args.size)
    stop = threading.Event()

    def show_progress(p: Progress) -> None:
        parts = [f"[{p.elapsed_s:7.1f}s]", p.message]
        if p.incumbent_s is not None:
            parts.append(f"best {format_time(p.incumbent_s)}")
        if p.gap is not None:
            parts.append(f"gap {p.gap:.1%}")
        print(" ".join(x for x in parts if x), file=sys.stderr, flush=True)

    options = SynthOptions(
        epoch=parse_epoch(args.epoch), epochs=args.epochs, time_limit=args.time_limit, gap=args.gap,
        seed=args.seed, restarts=args.restarts, stop=stop,
        progress=show_progress if args.progress else None, extra=parse_extra(args.opt),
    )
    previous = signal.signal(signal.SIGINT, lambda *_: stop.set())  # Ctrl-C: stop and keep the best so far
    try:
        result = run(topology, args.collective, args.algorithm, size, args.chunks, args.root, options)
    finally:
        signal.signal(signal.SIGINT, previous)
    summary = result.summary()
    if args.out:
        from ccviz.export import write_schedule

        write_schedule(result.timeline, args.out)
    if args.msccl:
        from ccviz.export import write_msccl_xml

        write_msccl_xml(result.timeline, args.msccl)
    if args.json:
        print(json.dumps(summary))
    else:
        _print_summary(summary, result.bound.explanation)
    return 0


def _print_summary(s: dict[str, Any], bound_text: str) -> None:
    ok = "verified" if s["verified"] else f"INVALID ({len(s['violations'])} violations)"
    lines = [
        f"{s['algorithm']} {s['collective']} on {s['topology']} ({s['n_gpus']} GPUs), size {format_size(s['size_bytes'])}, "
        f"chunk {format_size(s['chunk_bytes'])}",
        f"  finish time   {format_time(s['finish_time_s'])}  ({ok}, by the simulator)",
        f"  algbw/busbw   {s['algbw_GBps'] or 0:.3f} / {s['busbw_GBps'] or 0:.3f} GB/s",
        f"  lower bound   {format_time(s['lower_bound_s'])}  ({bound_text})",
        f"  synthesis     {format_time(s['synth_time_s'])}, status {s['status']}"
        + (f", gap {s['mip_gap']:.2%}" if s["mip_gap"] is not None else ""),
        f"  transfers     {s['transfers']}" + (f", {s['epochs']} epochs of {format_time(s['epoch_s'])}"
                                              if s["epochs"] else ""),
    ]
    lines += [f"  violation: {v['message']}" for v in s["violations"][:10]]
    print("\n".join(lines))


def cmd_verify(args: argparse.Namespace) -> int:
    from ccviz.schedule import Schedule
    from ccviz.simulate import simulate

    schedule = Schedule.load(args.schedule)
    timeline = simulate(schedule)
    report = {
        "algorithm": schedule.algorithm,
        "topology": schedule.topology.name,
        "collective": schedule.collective.name,
        "transfers": len(schedule.transfers),
        **timeline.summary(),
    }
    if args.json:
        print(json.dumps(report))
    elif timeline.verified:
        print(f"valid: {len(schedule.transfers)} transfers, finish {format_time(timeline.finish_time_s)}, "
              f"algbw {timeline.algbw_GBps:.3f} GB/s")
    else:
        print(f"INVALID: {len(timeline.violations)} violation(s)")
        for v in timeline.violations:
            print(f"  [{v.rule}] {v.message}")
    return 0 if timeline.verified else 1


def cmd_list(args: argparse.Namespace) -> int:
    from ccviz.builders import BUILDERS
    from ccviz.collectives import COLLECTIVES
    from ccviz.cost import formula_table
    from ccviz.synth import REGISTRY

    listing = {
        "algorithms": [
            {"name": a.name, "kind": a.kind, "collectives": sorted(a.collectives), "description": a.description}
            for a in sorted(REGISTRY.values(), key=lambda a: a.name)
        ],
        "collectives": list(COLLECTIVES),
        "topology_builders": [
            {"name": b.name, "parameters": b.signature_text(), "aliases": list(b.aliases), "description": b.summary}
            for b in sorted(BUILDERS.values(), key=lambda b: b.name)
        ],
        "cost_formulas": formula_table(),
    }
    if args.json:
        print(json.dumps(listing))
        return 0
    print("Algorithms (ccviz synth --algorithm NAME):")
    for a in listing["algorithms"]:
        print(f"  {a['name']:<14} {a['kind']:<10} {a['description']}")
        print(f"  {'':<14} {'':<10} collectives: {', '.join(a['collectives'])}")
    print("\nCollectives: " + ", ".join(listing["collectives"]))
    print("\nTopology builders (TOPOLOGY = name[:key=value,...] or a JSON/YAML file):")
    for b in listing["topology_builders"]:
        alias = f" (alias: {', '.join(b['aliases'])})" if b["aliases"] else ""
        print(f"  {b['name']}:{b['parameters']}{alias}\n      {b['description']}")
    print("\nClosed-form costs (ccviz cost --algorithm NAME):")
    for row in listing["cost_formulas"]:
        print(f"  {row}")
    return 0


def cmd_cost(args: argparse.Namespace) -> int:
    from ccviz.collectives import normalize_name
    from ccviz.cost import formula

    if args.n < 2:
        raise CcvizError(f"--n: the number of ranks must be >= 2, got {args.n}", "n")
    _positive("bw", args.bw)
    if args.alpha < 0:
        raise CcvizError(f"--alpha: must be >= 0 microseconds, got {args.alpha}", "alpha")
    result = formula(normalize_name(args.collective), args.algorithm, args.n, parse_size(args.size), args.alpha,
                     args.bw)
    out = {
        "collective": normalize_name(args.collective), "algorithm": args.algorithm, "n": args.n,
        "size_bytes": parse_size(args.size), "alpha_us": args.alpha, "bw_GBps": args.bw,
        "time_s": result.time_s, "n_alpha": result.n_alpha, "n_beta": result.n_beta, "formula": result.text,
    }
    if args.json:
        print(json.dumps(out))
    else:
        print(f"{out['algorithm']} {out['collective']}, N={args.n}, M={format_size(out['size_bytes'])}: "
              f"{format_time(result.time_s)} = {result.n_alpha:g} alpha + {result.n_beta:g} M/BW   [{result.text}]")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from ccviz.export import write_msccl_xml, write_schedule
    from ccviz.schedule import Schedule
    from ccviz.simulate import simulate

    timeline = simulate(Schedule.load(args.schedule))
    if not timeline.verified:
        raise CcvizError(f"schedule: {args.schedule} does not verify; run `ccviz verify {args.schedule}`", "schedule")
    if args.format == "msccl":
        write_msccl_xml(timeline, args.out)
    else:
        write_schedule(timeline, args.out)
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


def cmd_sweep(args: argparse.Namespace) -> int:
    from ccviz.grid import Grid
    from ccviz.sweep import ProgressBar, RowWriter, dask_client, summary_text, sweep

    if args.workers is not None and args.scheduler:
        raise CcvizError("--workers: give --workers N (a cluster on this machine) or --scheduler ADDRESS, not both",
                         "workers")
    _positive("sweep-time-limit", args.sweep_time_limit)
    flags = {"topology": args.topology, "collective": args.collective, "algorithm": args.algorithm,
             "size": args.size, "chunks": args.chunks, "time_limit": args.time_limit, "epoch": args.epoch,
             "gap": args.gap, "root": args.root}
    grid = Grid.from_yaml(args.grid, **flags) if args.grid else Grid.make(**flags)
    out = RowWriter(args.out)
    started = time.perf_counter()
    with dask_client(args.workers, args.scheduler) as client:
        start_s = time.perf_counter() - started
        report = sweep(grid, client, out, time_limit=args.sweep_time_limit, schedules=args.schedules,
                       on_progress=None if args.quiet else ProgressBar())
    if args.json:
        print(json.dumps({**report.summary(), "cluster_start_s": start_s}))
    else:
        print(summary_text(report))
    return 130 if report.stopped == "interrupted" else 0


# ------------------------------------------------------------------------ parser
def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="ccviz", description="Synthesize, verify and visualize collective-communication schedules.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    s = sub.add_parser("synth", help="synthesize a schedule and judge it with the simulator")
    s.add_argument("topology", help="a JSON/YAML file or a builder spec such as ring:n=8 or torus2d:dims=4x4")
    s.add_argument("--collective", default="allgather", help="allgather, reducescatter, allreduce, alltoall, ...")
    s.add_argument("--algorithm", default="ring", help="see `ccviz list`")
    s.add_argument("--size", default="1MB", help="per-rank buffer (nccl-tests convention), e.g. 1KB, 64MB, 1GiB")
    s.add_argument("--chunks", type=int, default=1, help="chunks per rank")
    s.add_argument("--root", type=int, default=None, help="root rank of broadcast/reduce/gather/scatter")
    s.add_argument("--epoch", default="fastest", help="fastest | slowest | SECONDS (epoch-based algorithms)")
    s.add_argument("--epochs", type=int, default=None, help="number of epochs (default: automatic)")
    s.add_argument("--time-limit", type=float, default=None, help="seconds; the best schedule so far is returned")
    s.add_argument("--gap", type=float, default=None, help="stop at this relative MIP gap (0.3 = early stop)")
    s.add_argument("--seed", type=int, default=None)
    s.add_argument("--restarts", type=int, default=1, help="randomized algorithms: keep the best of R runs")
    s.add_argument("--opt", action="append", default=[], metavar="KEY=VALUE", help="algorithm-specific option")
    s.add_argument("--out", help="write the simulated schedule as JSON")
    s.add_argument("--msccl", help="write the schedule as MSCCL XML")
    s.add_argument("--progress", action="store_true", help="print solver progress on stderr")
    s.add_argument("--json", action="store_true", help="print one JSON object with the results")
    s.set_defaults(func=cmd_synth)

    v = sub.add_parser("verify", help="replay a schedule file and list every violation")
    v.add_argument("schedule")
    v.add_argument("--json", action="store_true")
    v.set_defaults(func=cmd_verify)

    ls = sub.add_parser("list", help="algorithms, collectives, topology builders")
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(func=cmd_list)

    c = sub.add_parser("cost", help="closed-form alpha-beta cost of a textbook algorithm")
    c.add_argument("--collective", required=True)
    c.add_argument("--algorithm", required=True)
    c.add_argument("--n", type=int, required=True, help="number of ranks")
    c.add_argument("--size", required=True)
    c.add_argument("--alpha", type=float, default=0.5, help="per-message latency in microseconds")
    c.add_argument("--bw", type=float, default=50.0, help="link bandwidth in GB/s")
    c.add_argument("--json", action="store_true")
    c.set_defaults(func=cmd_cost)

    e = sub.add_parser("export", help="convert a schedule file (json, msccl xml)")
    e.add_argument("schedule")
    e.add_argument("--format", choices=["json", "msccl"], default="msccl")
    e.add_argument("--out", required=True)
    e.set_defaults(func=cmd_export)

    w = sub.add_parser("sweep", help="a grid of runs on Dask: embedded cluster, or any Dask cluster")
    w.add_argument("--topology", action="append", help="repeatable: a file or builder spec (ring:n=8)")
    w.add_argument("--collective", help="one or a comma list: allgather,allreduce")
    w.add_argument("--algorithm", help="one or a comma list: ring,tacos (see `ccviz list`)")
    w.add_argument("--size", help="a range in x4 steps (1KB..1GB) or a comma list (1MB,64MB)")
    w.add_argument("--chunks", help="chunks per rank, one or a comma list (1,2); default 1")
    w.add_argument("--time-limit", type=float, default=None, help="seconds per row; a solver returns its best")
    w.add_argument("--sweep-time-limit", type=float, default=None,
                   help="seconds for the whole sweep; unfinished rows are left for a rerun")
    w.add_argument("--epoch", default=None, help="fastest | slowest | SECONDS (epoch-based algorithms)")
    w.add_argument("--gap", type=float, default=None, help="stop MILPs at this relative gap")
    w.add_argument("--root", type=int, default=None, help="root rank of broadcast/reduce/gather/scatter")
    w.add_argument("--grid", help="a YAML file with the same keys (flags given here win)")
    w.add_argument("--out", required=True, help="results.csv or results.parquet; an existing file is resumed")
    w.add_argument("--workers", type=int, default=None, help="embedded cluster of N processes (default: cores)")
    w.add_argument("--scheduler", help="an existing Dask cluster, e.g. tcp://HOST:8786")
    w.add_argument("--schedules", help="a folder to keep every schedule as JSON")
    w.add_argument("--quiet", action="store_true", help="no progress bar")
    w.add_argument("--json", action="store_true", help="print one JSON object: rows, ok, failed, wall_s, ...")
    w.set_defaults(func=cmd_sweep)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except CcvizError as exc:
        print(f"ccviz: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("ccviz: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # last resort: one line, never a traceback
        if os.environ.get("CCVIZ_DEBUG"):
            raise
        print(f"ccviz: internal error: {type(exc).__name__}: {exc} (set CCVIZ_DEBUG=1 for details)", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
