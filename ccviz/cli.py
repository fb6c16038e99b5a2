"""The ``ccviz`` command line: synth, verify, list, cost, limit, export, import, execute, reproduce, sweep,
replay.

Contracts (the interface automated checks call): ``ccviz synth --json`` prints exactly one JSON
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
from pathlib import Path
from typing import Any, NoReturn

from ccviz.errors import CcvizError
from ccviz.model.strict_json import dumps  # noqa: F401  (commands and tests print with it)
from ccviz.model.units import format_size, format_time, parse_epoch, parse_size
from ccviz.model.validate import MAX_NODES


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
            raise CcvizError(f"--opt: {item!r} should be key=value, e.g. --opt pick=random (`ccviz list` shows each algorithm's)",
                              "opt")
        try:
            extra[key.strip()] = json.loads(value, parse_constant=str)
        except json.JSONDecodeError:
            extra[key.strip()] = value
    return extra


REPRODUCE_TIME_LIMIT_S = 30.0  # seconds per TE-CCL row of `ccviz reproduce teccl`


def _positive(name: str, value: float | None) -> None:
    if value is not None and not (value > 0 and math.isfinite(value)):
        raise CcvizError(f"--{name}: must be a positive number, got {value}", name)


def check_output_path(flag: str, path: str | None) -> None:
    """Refuse an output path that cannot be written, before any long work starts."""
    if not path:
        return
    target = Path(path)
    if target.is_dir():
        raise CcvizError(f"--{flag}: {path!r} is a directory; give a file name", flag)
    parent = target.parent if str(target.parent) else Path(".")
    if not parent.is_dir():
        raise CcvizError(f"--{flag}: directory {str(parent)!r} does not exist; create it first", flag)
    if not os.access(parent, os.W_OK) or (target.exists() and not os.access(target, os.W_OK)):
        raise CcvizError(f"--{flag}: cannot write {path!r} (permission denied)", flag)


MAX_RESTARTS = 10_000

def option_line(o: dict[str, Any]) -> str:
    """One algorithm option in ``ccviz list``: name=values (default) and what it means."""
    low, high = o["minimum"], o["maximum"]
    if o["choices"]:
        values = "|".join(o["choices"])
    elif low is not None and high is not None:
        values = f"{o['type']} {low:g}..{high:g}"
    else:
        values = o["type"] + (f" >= {low:g}" if low is not None else "") + (f" <= {high:g}" if high is not None else "")
    if o["automatic"]:
        values += "|auto"
    default = o["default"]
    default = "auto" if default is None else str(default).lower() if isinstance(default, bool) else default
    return f"{o['name']}={values} (default {default}): {o['meaning']}"


# ---------------------------------------------------------------------- commands
def cmd_synth(args: argparse.Namespace) -> int:
    from ccviz.builders.loading import load_topology
    from ccviz.runs.pipeline import run
    from ccviz.synth.registry import Progress, SynthOptions

    _positive("time-limit", args.time_limit)
    if args.gap is not None and not (0 <= args.gap < 1):
        raise CcvizError(f"--gap: a relative MIP gap between 0 and 1 (e.g. 0.3), got {args.gap}", "gap")
    if args.epochs is not None and args.epochs < 1:
        raise CcvizError(f"--epochs: must be a whole number >= 1, got {args.epochs}", "epochs")
    if not 1 <= args.restarts <= MAX_RESTARTS:
        raise CcvizError(f"--restarts: must be between 1 and {MAX_RESTARTS}, got {args.restarts}", "restarts")
    check_output_path("out", args.out)
    check_output_path("msccl", args.msccl)
    topology = load_topology(args.topology)
    if args.switch_hop is not None:
        topology = topology.with_changes(switch_hop=args.switch_hop)
    size = parse_size(args.size)
    stop = threading.Event()

    def show_progress(p: Progress) -> None:
        print(f"[{p.elapsed_s:7.1f}s] {p.text()}", file=sys.stderr, flush=True)

    options = SynthOptions(
        epoch=parse_epoch(args.epoch), epochs=args.epochs, time_limit=args.time_limit, gap=args.gap,
        seed=args.seed, restarts=args.restarts, stop=stop,
        progress=show_progress if args.progress else None, extra=parse_extra(args.opt),
    )
    if args.collective in ("alltoallv", "moe") or args.matrix is not None or args.moe is not None:
        return _synth_matrix(args, topology, options, stop)
    previous = signal.signal(signal.SIGINT, lambda *_: stop.set())  # Ctrl-C: stop and keep the best so far
    try:
        result = run(topology, args.collective, args.algorithm, size, args.chunks, args.root, options,
                     ranks=args.ranks, dest=args.dest)
    finally:
        signal.signal(signal.SIGINT, previous)
    return _report_synth(args, result)


def _synth_matrix(args: argparse.Namespace, topology: Any, options: Any, stop: threading.Event) -> int:
    """``-c alltoallv|moe`` with ``--matrix`` or ``--moe`` (ccviz.runs.moe)."""
    from ccviz.runs.moe import MoeResult, run_matrix, traffic_matrix

    if args.collective not in ("alltoallv", "moe"):
        raise CcvizError(f"--matrix/--moe: set -c alltoallv (or -c moe), not -c {args.collective}", "collective")
    n = topology.n_gpus
    if args.ranks is not None:
        from ccviz.model.groups import group_ranks

        n = len(group_ranks(topology, args.ranks))
    if args.matrix is None and args.moe is None and args.collective == "alltoallv":  # a size: the uniform matrix
        import numpy as np

        matrix = np.full((n, n), parse_size(args.size) / n)
    else:
        matrix = traffic_matrix(n, args.matrix, args.moe)
    if args.collective == "moe" and (args.out or args.msccl):
        raise CcvizError("--out: -c moe is two runs (dispatch, combine); write each with -c alltoallv", "out")
    previous = signal.signal(signal.SIGINT, lambda *_: stop.set())
    try:
        result = run_matrix(topology, args.collective, args.algorithm, matrix, options, args.ranks)
    finally:
        signal.signal(signal.SIGINT, previous)
    if not isinstance(result, MoeResult):
        return _report_synth(args, result)
    summary = result.summary()
    if args.json:
        print(dumps(summary))
    else:
        for step in ("dispatch", "combine"):
            print(f"{step}:")
            part = getattr(result, step)
            _print_summary(part.summary(), part.bound.explanation, part.schedule.sums_in_switches)
        limit = "" if result.limit_s is None else (f", limit {format_time(result.limit_s)} "
                                                   f"({result.finish_time_s / result.limit_s:.3f} x)")
        print(f"moe (dispatch then combine): {format_time(result.finish_time_s)}{limit}")
    return 0 if summary["verified"] else 1


def _report_synth(args: argparse.Namespace, result: Any) -> int:
    summary = result.summary()
    if args.json:  # the run is printed before any file is written: a refused export never loses it
        print(dumps(summary), flush=True)
    else:
        _print_summary(summary, result.bound.explanation, result.schedule.sums_in_switches)
    if args.out:
        from ccviz.interop.export import write_schedule

        write_schedule(result.timeline, args.out)
    if args.msccl:
        from ccviz.interop.export import write_msccl_xml

        write_msccl_xml(result.timeline, args.msccl)
    if not result.timeline.verified:
        from ccviz.runs.pipeline import synthesizer_bug

        print(f"ccviz: {synthesizer_bug(result.schedule.algorithm, result.timeline)}", file=sys.stderr)
        return 1
    return 0


def _print_summary(s: dict[str, Any], bound_text: str, sums_in_switches: bool | None = None) -> None:
    from ccviz.bounds.limit import limit_sentence, switch_sums_sentence
    from ccviz.runs.pipeline import CUT_SHORT_WORDS

    ok = "verified" if s["verified"] else f"INVALID ({len(s['violations'])} violations)"
    lines = [
        f"{s['algorithm']} {s['collective']} on {s['topology']} ({s['n_gpus']} GPUs), size {format_size(s['size_bytes'])}, "
        f"chunk {format_size(s['chunk_bytes'])}",
        f"  finish time   {format_time(s['finish_time_s'])}  ({ok}, by the simulator)",
        f"  algbw/busbw   {s['algbw_GBps'] or 0:.3f} / {s['busbw_GBps'] or 0:.3f} GB/s",
        f"  lower bound   {format_time(s['lower_bound_s'])}  ({bound_text})",
        f"  fabric limit  {limit_sentence(s['finish_time_s'], s['limit_s'], s['n_gpus'], s['collective'])}",
        *([f"                {sums}"] if (sums := switch_sums_sentence(
            s['finish_time_s'], s.get('limit_without_switch_sums_s'), sums_in_switches)) else []),
        f"  synthesis     {format_time(s['synth_time_s'])}, status {s['status']}"
        + (f", gap {s['mip_gap']:.2%}" if s["mip_gap"] is not None else "")
        + (f", {CUT_SHORT_WORDS[cut]} (the best schedule so far)" if (cut := s.get("cut_short")) else ""),
        f"  transfers     {s['transfers']}" + (f", {s['epochs']} epochs of {format_time(s['epoch_s'])}"
                                              if s["epochs"] else ""),
    ]
    lines += [f"  violation: {v['message']}" for v in s["violations"][:10]]
    print("\n".join(lines))


def cmd_verify(args: argparse.Namespace) -> int:
    from ccviz.judge.simulate import simulate
    from ccviz.model.schedule import Schedule

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
        print(dumps(report))
    elif timeline.verified:
        print(f"valid: {len(schedule.transfers)} transfers, finish {format_time(timeline.finish_time_s)}, "
              f"algbw {timeline.algbw_GBps:.3f} GB/s")
    else:
        print(f"INVALID: {len(timeline.violations)} violation(s)")
        for v in timeline.violations:
            print(f"  [{v.rule}] {v.message}")
    return 0 if timeline.verified else 1


def cmd_list(args: argparse.Namespace) -> int:
    from ccviz.bounds.cost import formula_table
    from ccviz.builders import BUILDERS, COMMON_KEYS
    from ccviz.model.collectives import COLLECTIVES, VARIABLE
    from ccviz.model.topology import SWITCH_HOPS
    from ccviz.synth import REGISTRY

    listing = {
        "algorithms": [
            {"name": a.name, "kind": a.kind, "collectives": sorted(a.collectives & set(COLLECTIVES + VARIABLE)),
             "description": a.description, "options_used": list(a.options_used),
             "options": [spec.as_dict() for spec in a.options.specs()]}
            for a in sorted(REGISTRY.values(), key=lambda a: a.name)
        ],
        "collectives": list(COLLECTIVES + VARIABLE),
        "topology_builders": [
            {"name": b.name, "parameters": b.signature_text(), "aliases": list(b.aliases), "description": b.summary}
            for b in sorted(BUILDERS.values(), key=lambda b: b.name)
        ],
        "cost_formulas": formula_table(),
    }
    if args.json:
        print(dumps(listing))
        return 0
    print("Algorithms (ccviz synth --algorithm NAME):")
    for a in listing["algorithms"]:
        print(f"  {a['name']:<14} {a['kind']:<10} {a['description']}")
        print(f"  {'':<14} {'':<10} collectives: {', '.join(a['collectives'])}")
        for o in a["options"]:
            print(f"  {'':<14} {'':<10} --opt {option_line(o)}")
    print("\nCollectives: " + ", ".join(listing["collectives"]))
    print("\nTopology builders (TOPOLOGY = name[:key=value,...] or a JSON/YAML file):")
    for b in listing["topology_builders"]:
        alias = f" (alias: {', '.join(b['aliases'])})" if b["aliases"] else ""
        print(f"  {b['name']}:{b['parameters']}{alias}\n      {b['description']}")
    print(f"  every builder also takes {COMMON_KEYS}:")
    for name, text in SWITCH_HOPS.items():
        print(f"      {name}: {text}")
    print("\nClosed-form costs (ccviz cost --algorithm NAME):")
    for row in listing["cost_formulas"]:
        print(f"  {row}")
    return 0


def _number_or_text(value: str) -> float | str:
    """'0.5' -> 0.5; '0.5/2' (per tier) stays as given."""
    try:
        return float(value)
    except ValueError:
        return value


def cmd_cost(args: argparse.Namespace) -> int:
    from ccviz.bounds.explained import explained_cost, format_cost

    if args.n is not None and not 2 <= args.n <= MAX_NODES:
        raise CcvizError(f"--n: the number of ranks must be between 2 and {MAX_NODES}, got {args.n}", "n")
    result = explained_cost(args.collective, args.algorithm, parse_size(args.size), args.alpha, args.bw, n=args.n,
                            dims=args.dims, mesh=args.mesh, per_dim=args.per_dim, tiers=args.tiers,
                            oversub=args.oversub, inner=args.inner, outer=args.outer, eta=args.eta,
                            eta_alpha=args.eta_alpha, eta_beta=args.eta_beta, ports=args.ports,
                            segments=args.segments, pods_per_leaf=args.pods_per_leaf)
    if args.json:
        print(dumps({**result.to_dict(), "alpha_us": _number_or_text(args.alpha), "bw_GBps": _number_or_text(args.bw)}))
    else:
        print(format_cost(result))
    return 0


def cmd_crossover(args: argparse.Namespace) -> int:
    from ccviz.runs.crossover import formula_crossover, simulated_crossover

    if args.topology:
        result = simulated_crossover(args.topology, args.collective, args.algorithms, chunks=args.chunks)
        if args.json:
            print(dumps(result))
        else:
            m = result["crossover_bytes"]
            print(f"{' vs '.join(result['algorithms'])} on {result['topology']}: "
                  f"{'no crossover between 1 KB and 1 GB' if m is None else f'crossover at {m:,.0f} B'}")
        return 0
    if args.n is None:
        raise CcvizError("--n: the number of ranks is required for formulas (or give --topology)", "n")
    c = formula_crossover(args.collective, args.algorithms, args.n, args.alpha, args.bw, c_real=args.c_real,
                          eta=args.eta, eta_alpha=args.eta_alpha, eta_beta=args.eta_beta)
    if args.json:
        print(dumps(c.to_dict()))
    else:
        from ccviz.runs.crossover import format_crossover

        print(format_crossover(c))
    return 0


def cmd_limit(args: argparse.Namespace) -> int:
    from ccviz.bounds.limit import bandwidth_limit
    from ccviz.builders.loading import load_topology

    topology = load_topology(args.topology)
    fabric = topology
    if args.ranks is not None:
        from ccviz.model.groups import group_ranks, relay_fabric

        fabric = relay_fabric(topology, group_ranks(topology, args.ranks))
    if args.collective in ("alltoallv", "moe") or args.matrix is not None or args.moe is not None:
        from ccviz.runs.moe import matrix_limit, traffic_matrix

        if args.collective != "alltoallv":
            raise CcvizError(f"--matrix/--moe: the limit is for -c alltoallv, not -c {args.collective}", "collective")
        group = None if args.ranks is None else fabric.gpus
        matrix = traffic_matrix(len(group or topology.gpus), args.matrix, args.moe)
        limit = matrix_limit(fabric, matrix, group)
    else:
        limit = bandwidth_limit(fabric, args.collective, parse_size(args.size), args.root)
    out = limit.to_dict()
    if args.ranks is not None:
        out["ranks"] = fabric.gpus
    if args.json:
        print(json.dumps(out))
        return 0
    lines = [
        f"{out['collective']} of {format_size(out['size_bytes'])} on {fabric.name} ({fabric.n_gpus} GPUs"
        + (", the other GPUs relay)" if fabric is not topology else ")"),
        f"  limit       {format_time(out['limit_s'])}  (algbw {out['algbw_GBps']:.4g} GB/s; bandwidth only, "
        "alpha is not part of it)",
    ]
    for name, seconds in out.get("parts_s", {}).items():
        lines.append(f"  {name:<11} {format_time(seconds)}")
    if "method" in out:  # AllToAll: an LP, whose cut may explain only part of the limit
        lines.append(f"  found by    {out['method']}")
    if "limit_without_switch_sums_s" in out:
        lines.append(f"  no sums in switches  {format_time(out['limit_without_switch_sums_s'])}  (ReduceScatter then "
                     "AllGather summed at GPUs, as forestcoll and ring run it; `-a inc` sums in the switches)")
    lines += [
        f"  bottleneck  {limit.cut.words}",
        f"  cut links   {', '.join(f'{u}->{v}' for u, v in out['cut_links'])}",
    ]
    print("\n".join(lines))
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from ccviz.interop.export import write_msccl_xml, write_schedule
    from ccviz.judge.simulate import simulate
    from ccviz.model.schedule import Schedule

    check_output_path("out", args.out)
    timeline = simulate(Schedule.load(args.schedule))
    if not timeline.verified:
        raise CcvizError(f"schedule: {args.schedule} does not verify; run `ccviz verify {args.schedule}`", "schedule")
    if args.format == "msccl":
        write_msccl_xml(timeline, args.out)
    elif args.format == "chakra":
        from ccviz.interop.chakra import trace_prefix, write_chakra

        paths, notes = write_chakra(timeline, args.out, trace_prefix(args.schedule))
        for note in notes:
            print(f"note: {note}", file=sys.stderr)
        print(f"wrote {len(paths)} Chakra ET files {paths[0].parent}/{paths[0].name.rsplit('.', 2)[0]}.RANK.et",
              file=sys.stderr)
        return 0
    else:
        write_schedule(timeline, args.out)
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


def cmd_fabric(args: argparse.Namespace) -> int:
    from ccviz.builders.loading import load_topology
    from ccviz.interop.fabric_io import write_fabric

    check_output_path("out", args.out)
    if args.from_nvidia_smi:
        from ccviz.interop.nvidia_smi import topo_to_fabric
        from ccviz.model.files import check_readable_file, read_text_file

        if args.spec:
            raise CcvizError("fabric: give either a topology SPEC or --from-nvidia-smi FILE, not both", "fabric")
        source = Path(args.from_nvidia_smi)
        check_readable_file(source, "nvidia-smi")
        topology = topo_to_fabric(read_text_file(source, "nvidia-smi"), args.gpu, name=source.stem,
                                  model=args.model or "hardware")
    elif args.spec:
        if args.gpu or args.model:
            raise CcvizError(f"{'gpu' if args.gpu else 'model'}: --{'gpu' if args.gpu else 'model'} applies to "
                             "--from-nvidia-smi only (a preset takes model=... in its spec)", "gpu" if args.gpu else "model")
        topology = load_topology(args.spec)
    else:
        raise CcvizError("fabric: give a topology SPEC (e.g. dgx1) or --from-nvidia-smi FILE", "fabric")
    write_fabric(topology, args.out, args.format)
    for line in topology.meta.get("assumptions", []):
        print(f"assumed: {line}", file=sys.stderr)
    print(f"wrote {args.out} ({topology.summary()})", file=sys.stderr)
    return 0


def cmd_reproduce_explainer(args: argparse.Namespace) -> int:
    from ccviz.runs import explainer
    from ccviz.runs.explainer_conflicts import conflicts, format_conflicts

    rows = explainer.reproduce_explainer()
    summary = explainer.summary(rows)
    if args.json:
        print(dumps({"paper": "explainer", "rows": [r.to_dict() for r in rows], "summary": summary,
                     "inconsistencies": conflicts()}))
    else:
        print(explainer.format_table(rows))
        print(format_conflicts(conflicts()))
        print(f"{summary['rows']} rows: {summary['within_1pct']} within 1 %, {summary['explained']} differ with the "
              f"reason given, {len(summary['unexplained'])} unexplained; {summary['simulated']} simulated")
    return 0 if not summary["unexplained"] else 1


def cmd_reproduce_measured(args: argparse.Namespace) -> int:
    from ccviz.runs import measured

    rows = measured.select(measured.measured_rows(), args.filter)
    stop = threading.Event()

    def report(i: int, c: measured.Comparison) -> None:
        if not args.json:
            print(f"[{i + 1}/{len(rows)}] {c.row.label} {c.row.collective} {format_size(c.row.size_bytes)}",
                  file=sys.stderr, flush=True)

    previous = signal.signal(signal.SIGINT, lambda *_: stop.set())  # Ctrl-C: the rows left say "stopped"
    try:
        comps = measured.compare(rows, args.algorithm or measured.DEFAULT_ALGORITHM, args.time_limit * len(rows),
                                 stop, report)
    finally:
        signal.signal(signal.SIGINT, previous)
    table = measured.error_table(comps)
    if args.json:
        print(dumps({"paper": "measured", "rows": [c.to_dict() for c in comps],
                     "summary": [e.to_dict() for e in table]}))
    else:
        print(measured.format_rows(comps))
        print()
        print(measured.format_error_table(table))
    return 0


def cmd_reproduce(args: argparse.Namespace) -> int:
    _positive("time-limit", args.time_limit)
    if args.paper == "explainer":
        for flag, given in (("time-limit", args.time_limit is not None), ("filter", bool(args.filter)),
                            ("algorithm", args.algorithm is not None)):
            if given:  # its rows are closed forms and small simulations, all of them always
                raise CcvizError(f"--{flag}: `reproduce explainer` runs every row, without a time limit; drop "
                                 f"--{flag} (it applies to `reproduce teccl` or `measured`)", flag.replace("-", "_"))
        return cmd_reproduce_explainer(args)
    args.time_limit = REPRODUCE_TIME_LIMIT_S if args.time_limit is None else args.time_limit
    if args.paper == "measured":
        return cmd_reproduce_measured(args)
    from ccviz.runs import reproduce

    runs = reproduce.published_runs(args.filter)
    stop = threading.Event()

    def report(i: int, row: reproduce.Reproduction) -> None:
        print(f"[{i + 1}/{len(runs)}] {row.run.name}: {row.epochs} epochs (published {row.run.epochs}), "
              f"{row.status_text}, {row.verdict}, {row.solve_s:.1f} s", file=sys.stderr, flush=True)

    previous = signal.signal(signal.SIGINT, lambda *_: stop.set())  # Ctrl-C: finish this row's best, skip the rest
    try:
        rows = reproduce.reproduce(runs, args.time_limit, stop, report)
    finally:
        signal.signal(signal.SIGINT, previous)
    summary = reproduce.summary(rows)
    if args.json:
        print(json.dumps({"paper": args.paper, "time_limit_s": args.time_limit, "rows": [r.to_dict() for r in rows],
                          "summary": summary}))
    else:
        print(reproduce.format_table(rows))
        print(reproduce.summary_line(summary))
    return 0 if summary["ok"] else 1


def cmd_calibrate(args: argparse.Namespace) -> int:
    from ccviz.builders.loading import load_topology
    from ccviz.runs import calibrate
    from ccviz.runs.nccl_log import read_log

    _positive("time-limit", args.time_limit)
    check_output_path("out", args.out)
    log = read_log(args.log, args.collective)
    topology = load_topology(args.system)
    stop = threading.Event()

    def show(i: int, rms: float) -> None:
        if not args.json:
            print(f"[fit {i}] rms log-error {rms:.3f}", file=sys.stderr, flush=True)

    previous = signal.signal(signal.SIGINT, lambda *_: stop.set())  # Ctrl-C: keep the best fit so far
    try:
        result = calibrate.calibrate(log, topology, args.algorithm, args.column, args.time_limit, stop, show,
                                     parse_extra(args.opt))
    finally:
        signal.signal(signal.SIGINT, previous)
    if args.out:
        result.topology.save(args.out)
    if args.json:
        print(dumps({**result.to_dict(), "log": log.name, "out": args.out}))
        return 0
    print(calibrate.format_points(result.points))
    print("fitted: " + ", ".join(f"{k} = {v:.4g}" for k, v in result.knobs.items()))
    worst = result.worst_large_error()
    print(f"worst error at 64 MiB and above: {'-' if worst is None else f'{worst:.1%}'}; "
          f"{result.evaluations} fit evaluations" + (f", cut short ({result.stopped})" if result.stopped else ""))
    for note in result.notes:
        print(f"note: {note}")
    if args.out:
        print(f"wrote {args.out} (loads wherever a fabric does: ccviz synth {args.out} ...)", file=sys.stderr)
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    from ccviz.interop.chakra import import_chakra, is_chakra_path
    from ccviz.interop.importers import import_schedule
    from ccviz.interop.msccl import check
    from ccviz.judge.simulate import simulate

    size = parse_size(args.size) if args.size else None
    if is_chakra_path(args.file):
        schedule = import_chakra(args.file, args.topology, size, args.collective)
    else:
        schedule = import_schedule(args.file, args.topology, size, args.collective)
    timeline = simulate(schedule)
    runs = check(args.file) if schedule.options.get("format") == "msccl" else []
    if args.out:
        from ccviz.interop.export import write_schedule

        write_schedule(timeline, args.out)
    report = {
        "format": schedule.options.get("format", "ccviz"),
        "source": args.file,
        "algorithm": schedule.algorithm,
        "topology": schedule.topology.name,
        "collective": schedule.collective.name,
        "n_gpus": schedule.topology.n_gpus,
        "size_bytes": schedule.collective.size_bytes,
        "chunk_bytes": schedule.chunk_bytes,
        "transfers": len(schedule.transfers),
        **timeline.summary(),
        "notes": schedule.notes,
        "msccl": [r.to_dict() for r in runs],
    }
    ok = timeline.verified and all(r.ok for r in runs)
    if args.json:
        print(json.dumps(report))
    else:
        for note in schedule.notes:
            print(f"note: {note}")
        for r in runs:
            print(("executes: " if r.ok else "MSCCL PROBLEMS: ") + r.summary())
        if timeline.verified:
            print(f"valid: {len(schedule.transfers)} transfers on {schedule.topology.name}, finish "
                  f"{format_time(timeline.finish_time_s)}, algbw {timeline.algbw_GBps:.3f} GB/s")
        else:
            print(f"INVALID under the link model: {len(timeline.violations)} violation(s)")
            for v in timeline.violations[:20]:
                print(f"  [{v.rule}] {v.message}")
        if args.out:
            print(f"wrote {args.out} (judge it again with `ccviz verify {args.out}`)")
    return 0 if ok else 1


def cmd_replay(args: argparse.Namespace) -> int:
    from ccviz.judge.replay import replay, replay_lines
    from ccviz.model.schedule import Schedule
    from ccviz.synth.registry import Progress

    _positive("time-limit", args.time_limit)
    schedule = Schedule.load(args.schedule)
    stop = threading.Event()

    def show_progress(p: Progress) -> None:
        print(f"[{p.elapsed_s:7.1f}s] {p.text()}", file=sys.stderr, flush=True)

    previous = signal.signal(signal.SIGINT, lambda *_: stop.set())  # Ctrl-C: stop, report what was delivered
    try:
        result = replay(schedule, args.engine, mtu=args.mtu, switch_queue_frames=args.switch_queue,
                        progress=None if args.quiet else show_progress, stop=stop, time_limit_s=args.time_limit)
    finally:
        signal.signal(signal.SIGINT, previous)
    if args.json:
        print(dumps(result.to_dict()))
    else:
        print("\n".join(replay_lines(result)))
    if not result.complete:  # said on stderr too: `--quiet --json` used to exit 1 with nothing on the screen
        s = result.summary()
        print(f"ccviz: the replay is incomplete: {s['bytes_delivered']} of {s['bytes_expected']} bytes delivered"
              f"{', ' + str(s['bytes_lost']) + ' lost' if s['bytes_lost'] else ''}", file=sys.stderr)
    return 0 if result.complete else 1


def cmd_execute(args: argparse.Namespace) -> int:
    from ccviz.interop.msccl import check

    if args.fifo_depth < 1 or args.max_steps < 1:
        raise CcvizError("--fifo-depth and --max-steps must be >= 1", "fifo_depth")
    runs = check(args.file, fifo_depth=args.fifo_depth, max_steps=args.max_steps)
    warnings = list(runs[0].program.warnings) if runs else []
    if args.json:
        print(json.dumps({"file": args.file, "ok": all(r.ok for r in runs), "runs": [r.to_dict() for r in runs],
                          "warnings": warnings}))
    else:
        for w in warnings:
            print(f"warning: {w}")
        for r in runs:
            print(("ok: " if r.ok else "FAILS: ") + r.summary())
            for p in r.problems:
                print(f"  [{p.kind}] {p.message}")
    return 0 if all(r.ok for r in runs) else 1


def cmd_sweep(args: argparse.Namespace) -> int:
    from ccviz.runs.grid import Grid
    from ccviz.runs.sweep import ProgressBar, RowWriter, dask_client, summary_text, sweep

    if args.workers is not None and args.scheduler:
        raise CcvizError("--workers: give --workers N (a cluster on this machine) or --scheduler ADDRESS, not both",
                         "workers")
    _positive("sweep-time-limit", args.sweep_time_limit)
    flags = {"topology": args.topology, "collective": args.collective, "algorithm": args.algorithm,
             "size": args.size, "chunks": args.chunks, "time_limit": args.time_limit, "epoch": args.epoch,
             "gap": args.gap, "root": args.root, "ranks": args.ranks}
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


def cmd_workload(args: argparse.Namespace) -> int:
    from ccviz.builders.loading import load_topology
    from ccviz.runs.workload import read_workload_file, run_workload
    from ccviz.synth.registry import SynthOptions

    config = read_workload_file(args.config) if args.config else {}
    topology_spec = args.topology or config.get("topology")
    if not topology_spec:
        raise CcvizError("topology: give TOPOLOGY or a `topology:` key in --config", "topology")
    parallel = args.parallel or config.get("parallel")
    steps = args.run or config.get("run")
    algorithm = args.algorithm or config.get("algorithm") or "ring"
    if not parallel or not steps:
        raise CcvizError("parallel: give --parallel tp=8,dp=4 and --run tp:allreduce:64MB,... (or a --config file)",
                         "parallel")
    _positive("time-limit", args.time_limit)
    if args.order is not None and not args.order.strip():
        raise CcvizError("--order: empty; give kinds innermost first, e.g. tp-dp, or random (or leave it out)", "order")
    if args.chunks is not None and args.chunks < 1:
        raise CcvizError(f"--chunks: chunks per rank, a whole number >= 1, got {args.chunks}", "chunks")
    options = SynthOptions(time_limit=args.time_limit or config.get("time_limit"), seed=args.seed,
                           extra=parse_extra(args.opt) if args.opt else dict(config.get("opt") or {}))
    result = run_workload(load_topology(topology_spec), parallel, steps, algorithm,
                          order=args.order or config.get("order"), seed=args.seed or config.get("seed", 0),
                          options=options, groups=config.get("groups"), chunks=args.chunks or config.get("chunks", 1),
                          synthesis=args.synthesis or config.get("synthesis") or "composed",
                          relabel=not args.synthesize_each and config.get("relabel", True) is not False,
                          progress=None if args.json else lambda text: print(text, file=sys.stderr, flush=True))
    out = result.to_dict()
    if args.json:
        print(dumps(out))
        return 0 if out["verified"] else 1
    ok = "verified" if out["verified"] else f"INVALID ({len(out['violations'])} violations shown)"
    print(f"{algorithm} workload on {out['topology']} ({out['n_gpus']} GPUs), {out['parallel']}, order {out['order']}")
    print(f"  job finish   {format_time(out['finish_s'])}  ({ok}, by the simulator)")
    print(f"  synthesis    {out['synthesis']}")
    for g in out["groups"]:
        eta = "n/a" if g["eta_beta"] is None else f"{g['eta_beta']:.3f}"
        print(f"  {g['kind']}{g['index']:<3} {g['collective']:<13} alone {format_time(g['finish_alone_s']):>10}  "
              f"together {format_time(g['finish_together_s']):>10}  eta_beta {eta}")
    for link in out["busiest_links"][:5]:
        print(f"  busiest {link['src']}->{link['dst']}: {link['utilization']:.0%} busy, groups {', '.join(link['groups'])}")
    return 0 if out["verified"] else 1


# ------------------------------------------------------------------------ parser
def _matrix_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--matrix", default=None, help="-c alltoallv: bytes from rank i to rank j, a .csv, .npy or "
                                                  ".json file (or inline JSON rows)")
    p.add_argument("--moe", default=None, help="-c alltoallv|moe: a mixture-of-experts dispatch matrix, e.g. "
                                               "experts=64,topk=8,tokens=4096,hidden=7168,dtype=bf16,skew=zipf:1.2,"
                                               "seed=0")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="ccviz", description="Synthesize, verify and visualize collective-communication schedules.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    s = sub.add_parser("synth", help="synthesize a schedule and judge it with the simulator")
    s.add_argument("topology", help="a JSON/YAML file or a builder spec such as ring:n=8 or torus2d:dims=4x4")
    s.add_argument("-c", "--collective", default="allgather", help="allgather, reducescatter, allreduce, alltoall, ...")
    s.add_argument("-a", "--algorithm", default="ring", help="see `ccviz list`")
    s.add_argument("-s", "--size", default="1MB", help="per-rank buffer (nccl-tests convention), e.g. 1KB, 64MB, 1GiB")
    s.add_argument("--chunks", type=int, default=1, help="chunks per rank")
    s.add_argument("--switch-hop", choices=["paid", "teccl", "free"], default=None,
                   help="how a hop out of a switch is charged (default: the topology's own, paid unless it says): "
                        "paid = alpha + bytes/bw like any link; teccl = alpha only, TE-CCL's published runs; "
                        "free = no time (TACCL)")
    s.add_argument("--root", type=int, default=None, help="root rank of broadcast/reduce/gather/scatter/sendrecv")
    s.add_argument("--dest", type=int, default=None, help="sendrecv: the rank the root sends to")
    s.add_argument("--ranks", default=None, help="a process group, e.g. 0-7,16,18: the collective covers these GPUs "
                                                 "and the others only relay (default: every GPU)")
    s.add_argument("--epoch", default="fastest", help="fastest | slowest | SECONDS (epoch-based algorithms)")
    s.add_argument("--epochs", type=int, default=None, help="number of epochs (default: automatic)")
    s.add_argument("--time-limit", type=float, default=None, help="seconds; the best schedule so far is returned")
    s.add_argument("--gap", type=float, default=None, help="stop at this relative MIP gap (0.3 = early stop)")
    s.add_argument("--seed", type=int, default=None)
    s.add_argument("--restarts", type=int, default=1, help="randomized algorithms: keep the best of R runs")
    s.add_argument("--opt", action="append", default=[], metavar="KEY=VALUE", help="an algorithm's own option, e.g. --opt pick=random (each algorithm's are in `ccviz list`)")
    s.add_argument("--out", help="write the simulated schedule as JSON")
    s.add_argument("--msccl", help="write the schedule as MSCCL XML")
    _matrix_arguments(s)
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
    c.add_argument("-c", "--collective", required=True)
    c.add_argument("-a", "--algorithm", required=True)
    c.add_argument("--n", type=int, default=None, help="number of ranks (dimdecomp: from --dims; hierarchical: "
                   "from --tiers)")
    c.add_argument("-s", "--size", required=True)
    c.add_argument("--alpha", default="0.5", help="per-message latency in microseconds (hierarchical: A_IN/A_OUT)")
    c.add_argument("--bw", default="50", help="link bandwidth in GB/s (hierarchical: BW_IN/BW_OUT)")
    c.add_argument("--dims", default=None, help="dimdecomp: the torus or mesh, e.g. 8x8x8")
    c.add_argument("--mesh", action="store_true", help="dimdecomp: no wrap-around links")
    c.add_argument("--per-dim", default="ring", help="dimdecomp: ring or rhd in every dimension")
    c.add_argument("--tiers", default=None, help="hierarchical: N_INNERxL, e.g. 72x2 (72 GPUs per group, 2 groups)")
    c.add_argument("--oversub", default="1", help="hierarchical: oversubscription s of the outer tier (S1/S2: one "
                   "per Clos tier, compounded)")
    c.add_argument("--pods-per-leaf", type=int, default=None, help="hierarchical with --alpha A_IN/A_LEAF/A_SPINE: "
                   "pods sharing a rail leaf (p)")
    c.add_argument("--inner", default="ring", help="hierarchical: the inner phases' algorithm")
    c.add_argument("--outer", default="ring", help="hierarchical: the outer phase's algorithm")
    c.add_argument("--eta", default=None, help="contention profile: crossbar, nvls, torus, clos:S (hierarchical: "
                   "INNER/OUTER, e.g. crossbar/clos:2)")
    c.add_argument("--eta-alpha", default=None, help="alpha inflation >= 1 (hierarchical: IN/OUT)")
    c.add_argument("--eta-beta", default=None, help="bandwidth utilization in (0, 1] (hierarchical: IN/OUT)")
    c.add_argument("--ports", type=int, default=None, help="port budget P: links a rank drives at once (default: what the formula assumes, "
                   "named in its answer; pairwise alltoall: 1)")
    c.add_argument("--segments", type=int, default=None,
                   help="pipelining depth S of pipelined formulas (a schedule's --chunks); default: the best S")
    c.add_argument("--json", action="store_true")
    c.set_defaults(func=cmd_cost)

    x = sub.add_parser("crossover", help="the size M* where one algorithm overtakes another (formulas or a fabric)")
    x.add_argument("-c", "--collective", required=True)
    x.add_argument("--algorithms", required=True, help="two algorithms, e.g. ring,dbt")
    x.add_argument("--n", type=int, default=None, help="number of ranks (formulas)")
    x.add_argument("--alpha", type=float, default=0.5, help="per-message latency in microseconds")
    x.add_argument("--bw", type=float, default=50.0, help="link bandwidth in GB/s")
    x.add_argument("--c-real", type=float, default=1.0, help="practice factor >= 1 on a pipelined algorithm's M/BW")
    x.add_argument("--eta", default=None, help="contention profile: crossbar, nvls, torus, clos:S")
    x.add_argument("--eta-alpha", type=float, default=None, help="alpha inflation >= 1")
    x.add_argument("--eta-beta", type=float, default=None, help="bandwidth utilization in (0, 1]")
    x.add_argument("--topology", default=None, help="simulate both schedules on this fabric instead of formulas")
    x.add_argument("--chunks", type=int, default=1, help="--topology: chunks per GPU of both schedules")
    x.add_argument("--json", action="store_true")
    x.set_defaults(func=cmd_crossover)

    r = sub.add_parser("reproduce", help="re-run a paper's published table and compare row by row")
    r.add_argument("paper", choices=["teccl", "explainer", "measured"], help="teccl: TE-CCL's 66 published AllGather "
                   "runs (NDv2, DGX2); explainer: the Collectives Explainer's worked tables (formulas and small "
                   "fabrics); measured: published nccl-tests/rccl-tests numbers against -a nccl on the system presets")
    r.add_argument("--filter", default="", help="only rows whose name has every word, e.g. 'DGX2 Slow' or '1MB'")
    r.add_argument("--time-limit", type=float, default=None, help="teccl, measured: seconds per row (best so far is "
                   f"kept; default {REPRODUCE_TIME_LIMIT_S:g})")
    r.add_argument("-a", "--algorithm", default=None, help="measured: the algorithm predicting each row (default nccl)")
    r.add_argument("--json", action="store_true", help="one JSON object: rows and summary")
    r.set_defaults(func=cmd_reproduce)

    lim = sub.add_parser("limit", help="the fabric's exact bandwidth limit for a collective and its bottleneck cut")
    lim.add_argument("topology", help="a JSON/YAML file or a builder spec such as ring:n=8")
    lim.add_argument("-c", "--collective", default="allgather", help="allgather, reducescatter, allreduce, broadcast, reduce")
    lim.add_argument("-s", "--size", default="1GB", help="per-rank buffer (nccl-tests convention), e.g. 1GB")
    lim.add_argument("--root", type=int, default=None, help="root rank of broadcast/reduce")
    lim.add_argument("--ranks", default=None, help="a process group, e.g. 0-7,16: its limit with the other GPUs as "
                                                   "relays")
    _matrix_arguments(lim)
    lim.add_argument("--json", action="store_true")
    lim.set_defaults(func=cmd_limit)

    from ccviz.advise.command import add_parser as add_advise_parser

    add_advise_parser(sub)

    e = sub.add_parser("export", help="convert a schedule file (json, msccl xml)")
    e.add_argument("schedule")
    e.add_argument("--format", choices=["json", "msccl", "chakra"], default="msccl",
                   help="chakra: a directory of PREFIX.RANK.et Chakra execution traces (ASTRA-sim's input)")
    e.add_argument("--out", required=True)
    e.set_defaults(func=cmd_export)

    fb = sub.add_parser("fabric", help="write a fabric (a builder, a file, or an nvidia-smi topo -m matrix) to a file")
    fb.add_argument("spec", nargs="?", default=None, help="a builder spec or a topology file (omit with --from-nvidia-smi)")
    fb.add_argument("--from-nvidia-smi", default=None, metavar="TOPO.TXT",
                    help="the saved output of `nvidia-smi topo -m`")
    fb.add_argument("--gpu", default=None, help="v100 | a100 | h100 | b200: the GPU generation whose NVLink rate to use "
                                               "(default: inferred from the NVLink counts)")
    fb.add_argument("--model", choices=["hardware", "alphabeta"], default=None,
                    help="with --from-nvidia-smi: judge the box with the hardware link model of the preset of its "
                         "generation (default, as the presets are) or the textbook alpha-beta rule at spec rates")
    fb.add_argument("--format", choices=["json", "infragraph"], default="json")
    fb.add_argument("--out", required=True)
    fb.set_defaults(func=cmd_fabric)

    im = sub.add_parser("import", help="import an MSCCL XML, TE-CCL output or Chakra ET as a schedule and verify it")
    im.add_argument("file", help="MSCCL XML (msccl-tools, SCCL, ccviz export), TE-CCL output JSON, or a directory "
                                 "(or DIR/PREFIX) of Chakra ET files PREFIX.RANK.et")
    im.add_argument("--topology", default=None,
                    help="fabric to run on (MSCCL default: fully connected; TE-CCL: the fabric it was solved on)")
    im.add_argument("--size", default=None, help="per-rank buffer, e.g. 1MB (MSCCL default 1MB; TE-CCL required)")
    im.add_argument("--collective", default=None,
                    help="what an MSCCL program with coll=\"custom\" computes (broadcast, reduce, gather, scatter, ...);"
                         " default: read off the program's outputs")
    im.add_argument("--out", help="write the imported, simulated schedule as JSON")
    im.add_argument("--json", action="store_true", help="print one JSON object with the results")
    im.set_defaults(func=cmd_import)

    ex = sub.add_parser("execute", help="run an MSCCL XML program symbolically: deadlocks, races, postcondition")
    ex.add_argument("file")
    ex.add_argument("--fifo-depth", type=int, default=2, help="messages a connection buffers (default 2)")
    ex.add_argument("--max-steps", type=int, default=64, help="steps per thread block (64: the build default of RCCL and msccl-executor-nccl; a runtime built with a larger MSCCL_MAX_NUM_STEPS accepts more)")
    ex.add_argument("--json", action="store_true")
    ex.set_defaults(func=cmd_execute)

    rp = sub.add_parser("replay", help="replay a schedule packet by packet on ns-3 beside the alpha-beta judge")
    rp.add_argument("schedule", help="a ccviz schedule JSON (`ccviz synth --out` or `ccviz import --out`)")
    rp.add_argument("--engine", default="ns3", choices=["ns3"], help="the packet-level simulator (default ns3)")
    rp.add_argument("--mtu", type=int, default=None, help="bytes per frame, 64..65535 (default 65000)")
    rp.add_argument("--switch-queue", type=int, default=None,
                    help="frames a switch port queues before dropping (default: never drops, a lossless fabric)")
    rp.add_argument("--time-limit", type=float, default=None, help="wall-clock seconds; reports what was delivered")
    rp.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    rp.add_argument("--json", action="store_true",
                    help="one JSON object: finish_time_s, judge_finish_time_s, ratio, link_utilization, ...")
    rp.set_defaults(func=cmd_replay)

    w = sub.add_parser("sweep", help="a grid of runs on Dask: embedded cluster, or any Dask cluster")
    w.add_argument("--topology", action="append", help="repeatable: a file or builder spec (ring:n=8)")
    w.add_argument("-c", "--collective", help="one or a comma list: allgather,allreduce")
    w.add_argument("-a", "--algorithm", help="one or a comma list: ring,tacos (see `ccviz list`)")
    w.add_argument("-s", "--size", help="a range in x4 steps (1KB..1GB) or a comma list (1MB,64MB)")
    w.add_argument("--chunks", help="chunks per rank, one or a comma list (1,2); default 1")
    w.add_argument("--time-limit", type=float, default=None, help="seconds per row; a solver returns its best")
    w.add_argument("--sweep-time-limit", type=float, default=None,
                   help="seconds for the whole sweep; unfinished rows are left for a rerun")
    w.add_argument("--epoch", default=None, help="fastest | slowest | SECONDS (epoch-based algorithms)")
    w.add_argument("--gap", type=float, default=None, help="stop MILPs at this relative gap")
    w.add_argument("--root", type=int, default=None, help="root rank of broadcast/reduce/gather/scatter")
    w.add_argument("--ranks", default=None, help="a process group, e.g. 0-7,16: every row's collective covers it and "
                                                 "the other GPUs relay")
    w.add_argument("--grid", help="a YAML file with the same keys (flags given here win)")
    w.add_argument("--out", required=True, help="results.csv or results.parquet; an existing file is resumed")
    w.add_argument("--workers", type=int, default=None, help="embedded cluster of N processes (default: cores)")
    w.add_argument("--scheduler", help="an existing Dask cluster, e.g. tcp://HOST:8786")
    w.add_argument("--schedules", help="a folder to keep every schedule as JSON")
    w.add_argument("--quiet", action="store_true", help="no progress bar")
    w.add_argument("--json", action="store_true", help="print one JSON object: rows, ok, failed, wall_s, ...")
    w.set_defaults(func=cmd_sweep)
    wl = sub.add_parser("workload", help="every process group of a parallel job runs its collective at once")
    wl.add_argument("topology", nargs="?", default=None, help="a file or builder spec (or `topology:` in --config)")
    wl.add_argument("--parallel", help="group sizes, e.g. tp=8,dp=4 (kinds tp, cp, ep, pp, dp)")
    wl.add_argument("--order", default=None, help="kinds innermost first, e.g. tp-dp (tp groups are consecutive GPUs; the "
                                                        "default is --parallel's order), dp-tp, or random")
    wl.add_argument("--run", help="each kind's collective, e.g. tp:allreduce:64MB,dp:allreduce:256MB")
    wl.add_argument("-a", "--algorithm", default=None, help="see `ccviz list` (default ring)")
    wl.add_argument("--chunks", type=int, default=None, help="chunks per rank of the kind with the smallest chunks "
                                                          "(the others: as many as make theirs the same size)")
    wl.add_argument("--synthesis", default=None, help="composed (default): each group synthesized alone, then timed "
                                                      "together; joint: every group's chunks in one synthesis "
                                                      "(tacos, mteg, teccl, teccl-astar)")
    wl.add_argument("--synthesize-each", action="store_true",
                    help="synthesize every group (default: a group that a fabric symmetry maps from one already "
                         "synthesized gets its schedule relabeled, judged alone like any other)")
    wl.add_argument("--config", help="a YAML file with the same keys (and `groups`: an explicit rank map)")
    wl.add_argument("--time-limit", type=float, default=None, help="seconds per group's synthesis (joint: also for "
                                                                  "the one synthesis of every group)")
    wl.add_argument("--seed", type=int, default=None, help="seed of --order random and randomized algorithms")
    wl.add_argument("--opt", action="append", default=[], metavar="KEY=VALUE", help="an algorithm's own option")
    wl.add_argument("--json", action="store_true", help="print one JSON object")
    wl.set_defaults(func=cmd_workload)
    cal = sub.add_parser("calibrate", help="fit a fabric's link model to an nccl-tests/rccl-tests log")
    cal.add_argument("log", help="nccl-tests output (all_reduce_perf, all_gather_perf, reduce_scatter_perf, alltoall_perf)")
    cal.add_argument("--system", required=True, help="the fabric it ran on: a preset (dgxh100, dgxh100:nodes=2) or a file")
    cal.add_argument("-a", "--algorithm", default="nccl", help="the algorithm the simulator runs (default nccl)")
    cal.add_argument("--collective", default=None, help="the log's collective where it does not name its test")
    cal.add_argument("--column", default="both", choices=["both", "out-of-place", "in-place"],
                     help="which time the fit matches (both: their mean)")
    cal.add_argument("--time-limit", type=float, default=300.0, help="seconds for the fit (the best so far is kept)")
    cal.add_argument("--opt", action="append", default=[], metavar="KEY=VALUE", help="the algorithm's own option")
    cal.add_argument("--out", default=None, help="write the fitted fabric here (JSON; loads wherever a fabric does)")
    cal.add_argument("--json", action="store_true", help="one JSON object: knobs, points (error per size)")
    cal.set_defaults(func=cmd_calibrate)
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
    except BrokenPipeError:  # the reader left (`ccviz list | head`): stop quietly, as Unix tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # so the exit flush cannot fail again
        return 1
    except Exception as exc:  # last resort: one line, never a traceback
        if os.environ.get("CCVIZ_DEBUG"):
            raise
        print(f"ccviz: internal error: {type(exc).__name__}: {exc} (set CCVIZ_DEBUG=1 for details)", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
