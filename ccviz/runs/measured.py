"""Every published measurement in ``ccviz/data/measured_nccl.csv`` held against ccviz's prediction
(``ccviz reproduce measured``, ``bench/measured.py``, the Papers page).

Why: a prediction nobody has compared with hardware is a guess. Each row is a real nccl-tests (or
rccl-tests) number from a public source; ccviz predicts it by simulating ``-a nccl`` on the matching system
preset (NCCL's own algorithm choice, or the one the row's environment forced: ``NCCL_NVLS_ENABLE=0`` ->
``algo=ring``), and the ratio is predicted busbw over measured busbw (1.0 = exact; below 1 ccviz is slower
than the machine). busbw is computed from the simulated time the way nccl-tests computes it
(AllReduce algbw x 2(n-1)/n; AllGather, ReduceScatter, AllToAll algbw x (n-1)/n).

The issue's tolerances per size class, reported beside each class (never used to adjust anything):
busbw within 10 % at >= 64 MiB, within 25 % at 1-16 MiB, time within 2x at <= 64 KiB.
"""

from __future__ import annotations

import csv
import math
import statistics
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from ccviz.errors import CcvizError
from ccviz.model.units import format_size

KiB, MiB = 1 << 10, 1 << 20
DATA_FILE = "measured_nccl.csv"
DEFAULT_ALGORITHM = "nccl"
#: (name, lowest size, highest size, tolerance, what the tolerance bounds)
SIZE_CLASSES: tuple[tuple[str, int, float, float | None, str], ...] = (
    ("<=64KiB", 0, 64 * KiB, 2.0, "time within 2x"),
    ("64KiB-1MiB", 64 * KiB + 1, MiB - 1, None, ""),
    ("1-16MiB", MiB, 16 * MiB, 0.25, "busbw within 25 %"),
    ("16-64MiB", 16 * MiB + 1, 64 * MiB - 1, None, ""),
    (">=64MiB", 64 * MiB, float("inf"), 0.10, "busbw within 10 %"),
)
#: an environment variable a row ran with -> the nccl family's option that forces the same choice
ENV_OPTIONS = {"NCCL_NVLS_ENABLE=0": {"algo": "ring"}, "NCCL_ALGO=RING": {"algo": "ring"},
               "NCCL_ALGO=TREE": {"algo": "tree"}, "NCCL_PROTO=SIMPLE": {"proto": "simple"},
               "NCCL_PROTO=LL": {"proto": "ll"}, "NCCL_PROTO=LL128": {"proto": "ll128"}}
MAX_PREDICT_GPUS = 512  # rows on more GPUs are listed, not simulated (minutes each on a 2-core machine)


@dataclass(frozen=True)
class MeasuredRow:
    """One published number, as the CSV holds it."""

    system: str
    nodes: int
    gpus: int
    collective: str
    size_bytes: int
    busbw_GBps: float
    time_us: float | None
    in_place: bool | None
    nccl_version: str
    algo_env: str
    source_url: str
    note: str

    @property
    def label(self) -> str:
        """The machine the row ran on, e.g. 'dgxh100 1x8' or 'nvl72 2x144'."""
        return f"{self.system} {self.nodes}x{self.gpus // max(self.nodes, 1)}"

    @property
    def spec(self) -> str:
        """The ccviz preset that models this machine."""
        opts = [f"nodes={self.nodes}"] if self.nodes > 1 else []
        per_node = self.gpus // max(self.nodes, 1)
        if self.system == "nvl72" and per_node != 72:
            opts.append(f"gpus={per_node}")
        return self.system + (":" + ",".join(opts) if opts else "")

    @property
    def options(self) -> dict[str, Any]:
        opts: dict[str, Any] = {}
        for item in filter(None, (s.strip().upper() for s in self.algo_env.split(";"))):
            opts.update(ENV_OPTIONS.get(item, {}))
        return opts


@dataclass
class Comparison:
    """A measured row with ccviz's prediction (or why there is none)."""

    row: MeasuredRow
    predicted_s: float | None = None
    predicted_busbw_GBps: float | None = None
    notes: str = ""
    missing: str = ""  # why no prediction was made

    @property
    def measured_s(self) -> float:
        """The row's time: as published, else from its busbw the way nccl-tests relates them."""
        if self.row.time_us:
            return self.row.time_us * 1e-6
        return self.row.size_bytes * bus_factor(self.row.collective, self.row.gpus) / (self.row.busbw_GBps * 1e9)

    @property
    def ratio(self) -> float | None:
        """Predicted busbw / measured busbw (1.0 = exact)."""
        if self.predicted_busbw_GBps is None or not self.row.busbw_GBps:
            return None
        return self.predicted_busbw_GBps / self.row.busbw_GBps

    @property
    def size_class(self) -> str:
        return size_class(self.row.size_bytes)

    @property
    def within(self) -> bool | None:
        """Whether the prediction meets the issue's tolerance for this size class (None: no tolerance)."""
        _, _, _, tol, _ = next(c for c in SIZE_CLASSES if c[0] == self.size_class)
        if tol is None or self.predicted_s is None:
            return None
        if self.size_class == "<=64KiB":
            return 1 / tol <= self.predicted_s / self.measured_s <= tol
        return abs(self.ratio - 1) <= tol if self.ratio is not None else None

    def to_dict(self) -> dict[str, Any]:
        r = self.row
        return {"system": r.system, "nodes": r.nodes, "gpus": r.gpus, "label": r.label, "spec": r.spec,
                "collective": r.collective, "size_bytes": r.size_bytes, "size_class": self.size_class,
                "measured_busbw_GBps": r.busbw_GBps, "measured_s": self.measured_s,
                "predicted_busbw_GBps": self.predicted_busbw_GBps, "predicted_s": self.predicted_s,
                "ratio": self.ratio, "within_tolerance": self.within, "in_place": r.in_place,
                "nccl_version": r.nccl_version, "algo_env": r.algo_env, "options": r.options,
                "source_url": r.source_url, "note": r.note, "prediction_notes": self.notes, "missing": self.missing}


def bus_factor(collective: str, n: int) -> float:
    """nccl-tests' busbw / algbw for this collective on n ranks."""
    if n < 2:
        return 1.0
    return 2 * (n - 1) / n if collective == "allreduce" else (n - 1) / n


def size_class(size_bytes: int) -> str:
    for name, lo, hi, _, _ in SIZE_CLASSES:
        if lo <= size_bytes <= hi:
            return name
    return SIZE_CLASSES[-1][0]


def _number(text: str, kind: type, name: str, line: int) -> Any:
    try:
        return kind(text)
    except ValueError:
        raise CcvizError(f"{DATA_FILE} line {line}: {name} {text!r} is not a number", name) from None


def measured_rows(text: str | None = None) -> list[MeasuredRow]:
    """The published rows (the package's CSV unless ``text`` is given)."""
    if text is None:
        text = resources.files("ccviz.data").joinpath(DATA_FILE).read_text()
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith("#")]
    rows = []
    for i, d in enumerate(csv.DictReader(lines), start=2):
        try:
            rows.append(MeasuredRow(
                d["system"], _number(d["nodes"], int, "nodes", i), _number(d["gpus"], int, "gpus", i),
                d["collective"], _number(d["size_bytes"], int, "size_bytes", i),
                _number(d["busbw_GBps"], float, "busbw_GBps", i),
                _number(d["time_us"], float, "time_us", i) if d["time_us"] else None,
                {"1": True, "0": False}.get(d["in_place"]), d["nccl_version"], d["algo_env"], d["source_url"],
                d["note"]))
        except KeyError as exc:
            raise CcvizError(f"{DATA_FILE}: column {exc} is missing", "measured") from None
    return rows


def select(rows: Iterable[MeasuredRow], words: str = "") -> list[MeasuredRow]:
    """Rows whose label, collective or size has every word of ``words`` (e.g. 'dgxh100 allreduce')."""
    wanted = words.lower().split()
    return [r for r in rows
            if all(w in f"{r.label} {r.spec} {r.collective} {format_size(r.size_bytes)}".lower() for w in wanted)]


INTERPOLATION_CHECK = 0.002  # a shape's middle size must sit within 0.2 % of the line through its ends


class Predictor:
    """ccviz's time for each row, one simulation per distinct machine, collective, size and options, and fewer
    where sizes share a schedule shape.

    Why: a full table is about 150 simulations, some of 72 and 144 GPUs. Sizes whose NCCL choice has the same
    shape (``ccviz.synth.nccl.synthesizer.Choice.shape``: algorithm, protocol, channels, NVLS chunk) build the
    same schedule with its chunks scaled; its time is then a maximum of (latency + size x per-byte time) over
    its paths, convex in the size. Where four or more sizes share a shape, the smallest, the largest and the
    middle one are simulated; if the middle one lies within ``INTERPOLATION_CHECK`` of the line through the
    ends, the shape is that line (up to twice that error, by convexity) and the sizes between are read off it,
    each row saying so; otherwise every size is simulated."""

    def __init__(self, rows: Sequence[MeasuredRow], algorithm: str = DEFAULT_ALGORITHM) -> None:
        self.algorithm = algorithm
        self.fabrics: dict[str, Any] = {}
        self.cache: dict[tuple, tuple[float | None, str, str]] = {}  # key -> (seconds, missing, note)
        self.sizes: dict[tuple, set[int]] = {}
        for r in rows:
            self.sizes.setdefault(self._group(r), set()).add(r.size_bytes)
        self.simulations = 0

    @staticmethod
    def _group(row: MeasuredRow) -> tuple:
        return (row.spec, row.collective, tuple(sorted(row.options.items())))

    def fabric(self, row: MeasuredRow) -> Any:
        from ccviz.builders.loading import load_topology

        if row.spec not in self.fabrics:
            self.fabrics[row.spec] = load_topology(row.spec)
        fabric = self.fabrics[row.spec]
        if fabric.n_gpus != row.gpus:
            raise CcvizError(f"{row.spec} has {fabric.n_gpus} GPUs, the row ran on {row.gpus}", "system")
        return fabric

    def predict(self, row: MeasuredRow) -> tuple[float | None, str, str]:
        """(seconds or None, why not, how it was found) for one row."""
        key = self._group(row) + (row.size_bytes,)
        if key not in self.cache:
            try:
                self._fill(row)
            except CcvizError as exc:
                self.cache[key] = (None, str(exc), "")
        return self.cache[key]

    def _simulate(self, row: MeasuredRow, size: int) -> float:
        from ccviz.runs.calibrate import predict_s

        self.simulations += 1
        return predict_s(self.fabric(row), row.collective, size, self.algorithm, row.options)

    def _fill(self, row: MeasuredRow) -> None:
        group = self._group(row)
        same = self._same_shape(row, sorted(s for s in self.sizes[group] if group + (s,) not in self.cache))
        if len(same) >= 4:
            lo, hi = same[0], same[-1]
            mid = min(same[1:-1], key=lambda s: abs(math.log(s) - (math.log(lo) + math.log(hi)) / 2))
            times = {s: self._simulate(row, s) for s in (lo, mid, hi)}

            def line(s: int) -> float:
                return times[lo] + (times[hi] - times[lo]) * (s - lo) / (hi - lo)
            if abs(line(mid) - times[mid]) <= INTERPOLATION_CHECK * times[mid]:
                how = (f"interpolated between the simulated {format_size(lo)} and {format_size(hi)} (one schedule "
                       f"shape; {format_size(mid)} simulated within {INTERPOLATION_CHECK:.1%} of that line)")
                for s in same:
                    self.cache[group + (s,)] = (times[s], "", "") if s in times else (line(s), "", how)
                return
            for s, t in times.items():
                self.cache[group + (s,)] = (t, "", "")
            if group + (row.size_bytes,) in self.cache:
                return
        self.cache[group + (row.size_bytes,)] = (self._simulate(row, row.size_bytes), "", "")

    def _same_shape(self, row: MeasuredRow, sizes: list[int]) -> list[int]:
        """The sizes whose NCCL choice has the shape of this row's size ([] for other algorithms)."""
        if self.algorithm != "nccl" or row.size_bytes not in sizes:
            return []
        from ccviz.model.collectives import make_collective
        from ccviz.synth.nccl.synthesizer import nccl_choice
        from ccviz.synth.registry import SynthOptions

        fabric = self.fabric(row)

        def shape(size: int) -> tuple:
            return nccl_choice(fabric, make_collective(row.collective, fabric, float(size)),
                               SynthOptions(extra=dict(row.options))).shape
        mine = shape(row.size_bytes)
        return [s for s in sizes if shape(s) == mine]


def compare(rows: Sequence[MeasuredRow], algorithm: str = DEFAULT_ALGORITHM, time_limit: float | None = None,
            stop: threading.Event | None = None,
            progress: Callable[[int, Comparison], None] | None = None) -> list[Comparison]:
    """Predict every row (``Predictor``: one simulation per distinct machine, collective, size and options, or
    one line per schedule shape where its middle size confirms it)."""
    predictor = Predictor([r for r in rows if r.gpus <= MAX_PREDICT_GPUS], algorithm)
    out = []
    started = time.monotonic()
    for i, row in enumerate(rows):
        comp = Comparison(row)
        if stop is not None and stop.is_set():
            comp.missing = "stopped"
        elif time_limit is not None and time.monotonic() - started > time_limit:
            comp.missing = "time limit"
        elif row.gpus > MAX_PREDICT_GPUS:
            comp.missing = f"{row.gpus} GPUs: more than {MAX_PREDICT_GPUS} are listed, not simulated"
        else:
            comp.predicted_s, comp.missing, comp.notes = predictor.predict(row)
        if comp.predicted_s:
            algbw = row.size_bytes / comp.predicted_s / 1e9
            comp.predicted_busbw_GBps = algbw * bus_factor(row.collective, row.gpus)
        out.append(comp)
        if progress is not None:
            progress(i, comp)
    return out


@dataclass
class ClassError:
    """Median and worst |ratio - 1| of one system's rows in one size class."""

    label: str
    size_class: str
    rows: int
    predicted: int
    median_error: float | None
    worst_error: float | None
    within: int
    tolerance: str
    examples: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "size_class": self.size_class, "rows": self.rows, "predicted": self.predicted,
                "median_error": self.median_error, "worst_error": self.worst_error,
                "within_tolerance": self.within, "tolerance": self.tolerance}


def class_error(c: Comparison) -> float | None:
    """|predicted busbw / measured - 1|; at <= 64 KiB the factor the time is off by (max(r, 1/r))."""
    if c.ratio is None:
        return None
    return max(c.ratio, 1 / c.ratio) if c.size_class == SIZE_CLASSES[0][0] else abs(c.ratio - 1)


def format_error(cls: str, value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.2g}x" if cls == SIZE_CLASSES[0][0] else f"{value:.0%}"


def error_table(comparisons: Sequence[Comparison]) -> list[ClassError]:
    """Median and worst error per system and size class (``class_error``)."""
    groups: dict[tuple[str, str], list[Comparison]] = {}
    for c in comparisons:
        groups.setdefault((c.row.label, c.size_class), []).append(c)
    order = [name for name, *_ in SIZE_CLASSES]
    table = []
    for (label, cls), comps in sorted(groups.items(), key=lambda kv: (kv[0][0], order.index(kv[0][1]))):
        errors = [e for c in comps if (e := class_error(c)) is not None]
        tolerance = next(t for name, _, _, _, t in SIZE_CLASSES if name == cls)
        table.append(ClassError(label, cls, len(comps), len(errors),
                                statistics.median(errors) if errors else None, max(errors) if errors else None,
                                sum(1 for c in comps if c.within), tolerance))
    return table


def format_rows(comparisons: Sequence[Comparison]) -> str:
    """One line per measured row: machine, collective, size, measured and predicted busbw, ratio."""
    lines = [f"{'machine':<18}{'collective':<14}{'size':>9}{'measured':>10}{'ccviz':>9}{'ratio':>7}  env / why not"]
    for c in comparisons:
        r = c.row
        pred = "-" if c.predicted_busbw_GBps is None else f"{c.predicted_busbw_GBps:.1f}"
        ratio = "-" if c.ratio is None else f"{c.ratio:.2f}"
        lines.append(f"{r.label:<18}{r.collective:<14}{format_size(r.size_bytes):>9}{r.busbw_GBps:>10.2f}"
                     f"{pred:>9}{ratio:>7}  {r.algo_env}{' ' if r.algo_env and c.missing else ''}{c.missing[:70]}")
    return "\n".join(lines)


def format_error_table(table: Sequence[ClassError]) -> str:
    """The error table: median and worst per system and size class (busbw GB/s, both as |ratio - 1|)."""
    lines = [f"{'machine':<18}{'size class':<12}{'rows':>5}{'median':>9}{'worst':>9}{'within':>8}  tolerance"]
    for e in table:
        med, worst = format_error(e.size_class, e.median_error), format_error(e.size_class, e.worst_error)
        within = f"{e.within}/{e.predicted}" if e.tolerance else ""
        lines.append(f"{e.label:<18}{e.size_class:<12}{e.rows:>5}{med:>9}{worst:>9}{within:>8}  {e.tolerance}")
    return "\n".join(lines)


def error_markdown(table: Sequence[ClassError]) -> str:
    """The same table in Markdown (the README's)."""
    lines = ["| machine | size class | rows | median error | worst error | within tolerance |",
             "|---|---|---:|---:|---:|---|"]
    for e in table:
        med, worst = format_error(e.size_class, e.median_error), format_error(e.size_class, e.worst_error)
        within = f"{e.within}/{e.predicted} ({e.tolerance})" if e.tolerance else "-"
        lines.append(f"| {e.label} | {e.size_class} | {e.rows} | {med} | {worst} | {within} |")
    return "\n".join(lines)
