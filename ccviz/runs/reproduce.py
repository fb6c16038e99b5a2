"""Reproduce published results row for row: ``ccviz reproduce teccl``.

TE-CCL's 66 published AllGather runs (NDv2 2 chassis as run, DGX2 2 chassis;
epoch modes Slow, Fast, Fast_Early_Stop) ship as package data. Each row is
solved on the topology the run used, with the run's conventions: chunk =
size / 16 on the as-run NDv2 (node 0 marked a switch but counted),
size / 32 on DGX2, switch hops charged by the ``teccl`` rule, the run's own
epoch length (so epoch counts compare one to one) and MIP gap 0.3 for the
early-stop rows. The simulator judges every schedule; the table sets the
epoch model's count and time beside the published ones and the simulated time
beside both.

"Optimal" here is TE-CCL's claim: no schedule in its epoch model needs fewer
epochs. Epochs round alpha and serialization up, so the continuous-time
replay usually finishes a little earlier than epochs x epoch length.
"""

from __future__ import annotations

import csv
import io
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from importlib import resources
from typing import Any

from ccviz.builders.loading import load_topology
from ccviz.errors import CcvizError
from ccviz.model.units import format_time, parse_size
from ccviz.runs.pipeline import RunResult, model_finish_s

PAPERS = ("teccl",)
EARLY_STOP_GAP = 0.3  # the published Fast_Early_Stop runs stopped at this relative MIP gap
DEFAULT_TIME_LIMIT_S = 30.0
TOPOLOGY_SPECS = {  # the fabrics exactly as the published runs modelled them
    "NDv2": "ndv2:chassis=2,as_run=true",
    "DGX2": "dgx2:chassis=2,switch_hop=teccl",
}


@dataclass(frozen=True)
class PublishedRun:
    """One row of TE-CCL's published table."""

    topology: str  # NDv2 | DGX2
    mode: str  # Slow | Fast | Fast_Early_Stop
    size: str  # per-GPU buffer as published, decimal units ("16KB")
    epoch_s: float
    epochs: int
    finish_s: float
    solver_s: float  # Gurobi, 80-core server

    @property
    def name(self) -> str:
        return f"{self.topology} {self.mode} {self.size}"

    @property
    def size_bytes(self) -> float:
        return parse_size(self.size)

    @property
    def gap(self) -> float | None:
        return EARLY_STOP_GAP if self.mode == "Fast_Early_Stop" else None

    @property
    def topology_spec(self) -> str:
        return TOPOLOGY_SPECS[self.topology]


def published_runs(filter_text: str = "") -> list[PublishedRun]:
    """The published rows whose name contains every word of ``filter_text`` (case-insensitive)."""
    text = resources.files("ccviz").joinpath("data/teccl_published.csv").read_text()
    rows = csv.DictReader(io.StringIO("".join(line for line in text.splitlines(keepends=True)
                                              if not line.startswith("#"))))
    runs = [PublishedRun(r["topology"], r["mode"], r["size"], float(r["epoch_s"]), int(r["epochs"]),
                         float(r["finish_s"]), float(r["solver_s"])) for r in rows]
    runs.sort(key=lambda r: (r.topology != "NDv2", ("Slow", "Fast", "Fast_Early_Stop").index(r.mode), r.size_bytes))
    words = filter_text.lower().split()
    chosen = [r for r in runs if all(w in r.name.lower() for w in words)]
    if not chosen:
        raise CcvizError(f"--filter: no published run matches {filter_text!r}; names look like "
                         f"'{runs[0].name}' (every word must appear)", "filter")
    return chosen


@dataclass
class Reproduction:
    """One published run next to ccviz's result on it."""

    run: PublishedRun
    result: RunResult | None = None
    solve_s: float = 0.0
    error: str | None = None

    @property
    def epochs(self) -> int | None:
        return self.result.schedule.epochs if self.result else None

    @property
    def model_s(self) -> float | None:
        return model_finish_s(self.result.schedule) if self.result else None

    @property
    def simulated_s(self) -> float | None:
        return self.result.timeline.finish_time_s if self.result else None

    @property
    def status(self) -> str:
        if self.error:
            return "error"
        return self.result.schedule.status if self.result else "not run"

    @property
    def bound_epochs(self) -> int | None:
        return self.result.schedule.bound_epochs if self.result else None

    @property
    def status_text(self) -> str:
        """optimal (certified by the bound) / feasible or time_limit with the epochs still open."""
        bound = self.bound_epochs
        if self.status == "optimal":
            return f"optimal (bound {bound})" if bound is not None else "optimal"
        if self.result is not None and bound is not None and self.epochs is not None:
            return f"{self.status} (gap {(self.epochs - bound) / self.epochs:.0%})"
        return self.status

    @property
    def verdict(self) -> str:
        """equal / lower / higher epochs than published; invalid when the simulator rejects the schedule."""
        if self.result is None:
            return self.status
        if not self.result.timeline.verified:
            return "invalid"
        if self.epochs == self.run.epochs:
            return "equal"
        return "lower" if self.epochs < self.run.epochs else "higher"

    @property
    def ratio(self) -> float | None:
        """ccviz's solve time over Gurobi's (below 1: faster)."""
        return self.solve_s / self.run.solver_s if self.result is not None and self.run.solver_s > 0 else None

    def to_dict(self) -> dict[str, Any]:
        r = self.run
        return {
            "instance": r.name, "topology": r.topology_spec, "mode": r.mode, "size": r.size,
            "epoch_s": r.epoch_s, "gap_option": r.gap,
            "published_epochs": r.epochs, "published_finish_s": r.finish_s, "published_solver_s": r.solver_s,
            "epochs": self.epochs, "model_finish_s": self.model_s, "simulated_finish_s": self.simulated_s,
            "status": self.status, "bound_epochs": self.bound_epochs,
            "mip_gap": self.result.schedule.mip_gap if self.result else None,
            "verified": self.result.timeline.verified if self.result else False,
            "verdict": self.verdict, "solve_s": self.solve_s, "solve_ratio": self.ratio, "error": self.error,
        }


def reproduce_run(run: PublishedRun, time_limit: float = DEFAULT_TIME_LIMIT_S,
                  stop: threading.Event | None = None, progress: Callable[[Any], None] | None = None
                  ) -> Reproduction:
    """Solve one published instance with TE-CCL as it was run, and judge it with the simulator."""
    from ccviz.bounds.cost import LowerBound
    from ccviz.judge.simulate import simulate
    from ccviz.model.collectives import make_collective
    from ccviz.synth.registry import SynthOptions, synthesize

    topology = load_topology(run.topology_spec)
    collective = make_collective("allgather", topology, run.size_bytes)
    options = SynthOptions(epoch=run.epoch_s, time_limit=time_limit, gap=run.gap, stop=stop, progress=progress)
    _load_solver()
    started = time.perf_counter()
    try:
        schedule = synthesize(topology, collective, "teccl", options)
    except CcvizError as exc:
        return Reproduction(run, None, time.perf_counter() - started, str(exc))
    solve_s = time.perf_counter() - started
    timeline = simulate(schedule)
    # The table compares epochs; the continuous-time lower bound is not needed (and costs seconds).
    no_bound = LowerBound(0.0, 0.0, 0.0, "not computed for the reproduction table")
    return Reproduction(run, RunResult(topology, collective, schedule, timeline, no_bound), solve_s)


def completed_result(row: Reproduction) -> RunResult:
    """A table row's run with what the table skips (the continuous-time lower bound and the fabric's limit), for a
    page that shows one run whole (Papers -> Playback said 'no fabric limit is defined' for an AllGather)."""
    from ccviz.bounds.cost import lower_bound
    from ccviz.runs.pipeline import group_limit

    if row.result is None:
        raise CcvizError(f"reproduce: {row.run.name} has no schedule ({row.verdict})", "reproduce")
    result = row.result
    return replace(result, bound=lower_bound(result.topology, result.collective),
                   limit=group_limit(result.topology, result.collective))


def _load_solver() -> None:
    """Import what a TE-CCL row runs before the clock starts: a fresh worker process (the app runs each row in
    one) spent 0.2-1.2 s importing Pyomo, HiGHS and pandas, which the CLI pays once for the whole table, so the
    same rows read 22.9x faster than Gurobi on the page and 125x from the CLI. Gurobi's published times do not
    count Python's imports either."""
    import importlib

    for module in ("pandas", "highspy", "pyomo.environ", "ccviz.judge.simulate", "ccviz.synth.budget",
                   "ccviz.synth.mteg", "ccviz.synth.teccl.frame", "ccviz.synth.teccl.synthesizer"):
        importlib.import_module(module)


def reproduce(runs: list[PublishedRun], time_limit: float = DEFAULT_TIME_LIMIT_S,
              stop: threading.Event | None = None,
              on_row: Callable[[int, Reproduction], None] | None = None) -> list[Reproduction]:
    """Every run in order; after Stop the remaining rows are reported as 'not run'."""
    out = []
    for i, run in enumerate(runs):
        row = Reproduction(run) if stop is not None and stop.is_set() else reproduce_run(run, time_limit, stop)
        out.append(row)
        if on_row is not None:
            on_row(i, row)
    return out


def summary(rows: list[Reproduction]) -> dict[str, Any]:
    """Counts by verdict and status, and the geometric mean of ccviz/Gurobi solve-time ratios."""
    ratios = [r.ratio for r in rows if r.ratio]
    verdicts = [r.verdict for r in rows]
    return {
        "rows": len(rows),
        "equal": verdicts.count("equal"),
        "lower": verdicts.count("lower"),
        "higher": verdicts.count("higher"),
        "invalid": verdicts.count("invalid"),
        "not_run": sum(v in ("not run", "error") for v in verdicts),
        "optimal": sum(r.status == "optimal" for r in rows),
        "time_limit": sum(r.status == "time_limit" for r in rows),
        "geomean_solve_ratio": math.exp(sum(math.log(x) for x in ratios) / len(ratios)) if ratios else None,
        "max_solve_s": max((r.solve_s for r in rows if r.result is not None), default=None),
        "ok": not any(v in ("higher", "invalid", "error") for v in verdicts),
    }


COLUMNS = ("instance", "publ. ep", "publ. time", "ccviz ep", "model time", "simulated", "status", "verdict",
           "ccviz s", "Gurobi s", "ratio")


def table_rows(rows: list[Reproduction]) -> list[tuple[str, ...]]:
    """The table's cells, as text (the CLI, bench/teccl.py and the app show the same)."""
    def t(x: float | None) -> str:
        return format_time(x) if x is not None else "-"

    return [(r.run.name, str(r.run.epochs), t(r.run.finish_s), str(r.epochs) if r.epochs is not None else "-",
             t(r.model_s), t(r.simulated_s), r.status_text, r.verdict,
             f"{r.solve_s:.2f}" if r.result is not None else "-", f"{r.run.solver_s:.2f}",
             f"{r.ratio:.2g}" if r.ratio else "-") for r in rows]


def format_table(rows: list[Reproduction]) -> str:
    cells = [COLUMNS, *table_rows(rows)]
    widths = [max(len(row[i]) for row in cells) for i in range(len(COLUMNS))]
    lines = ["  ".join(c.ljust(w) if i in (0, 6, 7) else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths,
                                                                                                   strict=True)))
             for row in cells]
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(lines)


def summary_line(s: dict[str, Any]) -> str:
    ratio = s["geomean_solve_ratio"]
    speed = f"; geometric mean solve time ccviz/Gurobi = {ratio:.3g} ({1 / ratio:.3g}x faster)" if ratio else ""
    worst = f"; slowest row {s['max_solve_s']:.1f} s" if s["max_solve_s"] is not None else ""
    return (f"{s['rows']} rows: {s['equal']} equal, {s['lower']} lower, {s['higher']} higher than published, "
            f"{s['invalid']} invalid, {s['not_run']} not run; {s['optimal']} optimal, {s['time_limit']} time_limit"
            f"{speed}{worst}. Epoch counts are TE-CCL's model (alpha and serialization rounded up to epochs); "
            "'simulated' is the continuous-time replay.")
