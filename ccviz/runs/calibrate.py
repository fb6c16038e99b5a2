"""Fit a fabric's link-model parameters to a user's own nccl-tests log (``ccviz calibrate``).

Why: a preset is built from spec sheets, and a spec sheet is not the machine a user owns (firmware, NIC
placement, NCCL version, a noisy neighbour). Given that machine's nccl-tests output, the knobs the fabric
exposes are moved until the simulator, running the same algorithm family NCCL runs (``-a nccl``), gives the
times the log printed. The simulator stays the only judge: every prediction below is a synthesized schedule
replayed by ``ccviz.judge.simulate``; the fit only chooses the fabric's numbers.

The fit minimizes the squared log-ratio of predicted to measured time (so an 8 B row and an 8 GiB row weigh
the same), in stages: the rate knobs on a few large sizes (>= 64 MiB, where bandwidth decides), then the
latency knobs on a few small ones (<= 64 KiB). Each stage searches its knobs in log space with SciPy's
bounded trust-region least squares, first all together by one common factor (a coarse step), then each, and
ends once its rows are close. Two knobs are not searched but solved: ``launch_us`` and the Simple protocol's
base latency add a fixed time to the judge's finish (and do not change NCCL's choice), so at every step they
take their exact least-squares values (a bounded linear solve); a base latency 30x NCCL's, as a slow
transport shows, is then no harder to find than one at 1x. At the end they are solved again on every small,
then every large size; the sizes between are predicted, not fitted.

The knobs come from the fabric. Where it declares the hardware link model (``meta["link_model"]``, see
docs/link_model.md) they are the parameters that move predictions most: ``efficiency.scaleup`` and
``efficiency.net`` (sustained share of the link rate, large sizes; net only where the fabric has network
hops), ``launch_us`` (per-operation latency, small sizes), one factor on every ``step_us`` (per-hop protocol
latency), one on the Simple protocol's base latencies and one on the reducing switches' ``reduce_GBps``
(NVLS, SHARP) where it has such switches; the protocol shares and NCCL's other base latencies are NCCL's
constants and stay. Without a declared model: the alpha-beta knobs every fabric has, one bandwidth factor per
class of links (links built with the same bandwidth and alpha) and one factor on every link's alpha, searched
last all together on a spread of sizes.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ccviz.errors import CcvizError
from ccviz.judge.simulate import simulate
from ccviz.model.collectives import make_collective
from ccviz.model.topology import Link, Topology
from ccviz.model.units import SECONDS_PER_US, format_size
from ccviz.runs.nccl_log import NcclTestsLog
from ccviz.synth.nccl.synthesizer import TUNER_KEY
from ccviz.synth.registry import SynthOptions, synthesize

MiB = 1 << 20
LARGE_BYTES = 64 * MiB  # the acceptance line: at and above this size the fit must hold within 5 %
LARGE_TOLERANCE = 0.05
# at and below this size the latency knobs are fitted (the acceptance's latency class; above it NCCL may already run
# the Simple protocol, whose base latency the rate stage fits on the large sizes)
SMALL_BYTES = 64 << 10
MAX_FIT_ROWS = 12  # rows simulated per evaluation (spread over the sizes); every row is reported after
COLUMNS = ("both", "out-of-place", "in-place")
LINK_MODEL_KEY = "link_model"
KNOB_RANGE = 100.0  # a knob moves at most this factor either way from where the fabric had it
RATE_KNOBS = ("efficiency.", "bw_factor", "reduce_factor", "simple_base_factor")  # fitted first, on the large sizes
STAGE_ROWS = 3  # sizes simulated per evaluation in the rate and latency stages
STAGE_BUDGET = 8  # evaluations per searched knob (+1) in a stage; JOINT_BUDGET: in the alpha-beta joint stage
JOINT_BUDGET = 12
FIT_TOLERANCE = 1e-3  # a stage stops when its cost or its knobs (log) move less than this share
ADDITIVE_PASSES = 3  # rounds of solving the additive latencies on the small, then the large sizes, at the end
RATE_TARGET = LARGE_TOLERANCE / 20  # the rate stage ends once every large size it fits is this close
LATENCY_TARGET = 0.05  # the latency stage: every small size it fits this close
Run = tuple[float, str, str]  # one prediction: finish time (s), NCCL algorithm, protocol


@dataclass(frozen=True)
class Knob:
    """One fitted number: where it starts, how far it may move, and how it changes a fabric."""

    name: str
    meaning: str
    initial: float
    apply: Callable[[Topology, float], Topology]
    low: float = 0.0  # 0: initial / KNOB_RANGE
    high: float = 0.0  # 0: initial * KNOB_RANGE
    # An additive knob: the seconds the judge adds to the finish per unit of it, given the schedule's NCCL
    # algorithm and protocol. Such a knob is solved exactly (linear least squares) at every step, not searched:
    # a latency 40x its start is then no farther than one at 2x.
    per_unit: Callable[[str, str], float] | None = None

    @property
    def bounds(self) -> tuple[float, float]:
        return (self.low or self.initial / KNOB_RANGE, self.high or self.initial * KNOB_RANGE)


@dataclass(frozen=True)
class Point:
    """One measured size and what the fitted fabric predicts for it."""

    collective: str
    size_bytes: int
    measured_s: float
    predicted_s: float | None = None

    @property
    def error(self) -> float | None:
        """predicted / measured time - 1 (positive: ccviz is slower than the machine)."""
        return None if self.predicted_s is None else self.predicted_s / self.measured_s - 1

    def to_dict(self) -> dict[str, Any]:
        return {"collective": self.collective, "size_bytes": self.size_bytes, "measured_s": self.measured_s,
                "predicted_s": self.predicted_s, "error": self.error}


@dataclass
class Calibration:
    """The fitted fabric, the knobs' values and the error per size."""

    topology: Topology
    knobs: dict[str, float]
    points: list[Point]
    algorithm: str
    evaluations: int
    stopped: str | None = None  # "time_limit" | "stopped" when the fit was cut short
    notes: list[str] = field(default_factory=list)

    def worst_large_error(self) -> float | None:
        """The largest |error| at or above LARGE_BYTES (None when the log has no such size)."""
        errs = [abs(p.error) for p in self.points if p.size_bytes >= LARGE_BYTES and p.error is not None]
        return max(errs) if errs else None

    def to_dict(self) -> dict[str, Any]:
        return {"topology": self.topology.name, "algorithm": self.algorithm, "knobs": self.knobs,
                "evaluations": self.evaluations, "stopped": self.stopped, "notes": self.notes,
                "worst_error_at_64MiB_and_above": self.worst_large_error(),
                "points": [p.to_dict() for p in self.points]}


# ---------------------------------------------------------------- knobs
def knobs_for(topology: Topology) -> list[Knob]:
    """The fabric's hardware link-model knobs where it declares the model, else its alpha-beta knobs."""
    from ccviz.model.link_model import declared

    model = declared(topology)
    if model is None:
        return alpha_beta_knobs(topology)
    knobs = [_model_knob(("efficiency", "scaleup"), model.efficiency["scaleup"], "sustained share of the "
                         "scale-up (NVLink, Infinity Fabric) link rate", high=1.0)]
    if any(model.medium(topology, u, v) == "net" for u, v in topology.links):
        knobs.append(_model_knob(("efficiency", "net"), model.efficiency["net"], "sustained share of the network "
                                 "(NIC, InfiniBand) link rate", high=1.0))
    knobs.append(_model_knob(("launch_us",), max(model.launch_us, 0.1), "per-operation launch latency (us)",
                             per_unit=lambda algo, proto: SECONDS_PER_US))

    def scale_steps(t: Topology, f: float) -> Topology:
        lm = t.meta[LINK_MODEL_KEY]
        steps = {m: {p: v * f for p, v in cells.items()} for m, cells in lm["step_us"].items()}
        return t.with_changes(meta={**t.meta, LINK_MODEL_KEY: {**lm, "step_us": steps}})
    knobs.append(Knob("step_us_factor", "factor on every per-hop protocol latency (step_us)", 1.0, scale_steps))
    def scale_simple(t: Topology, f: float) -> Topology:
        lm = t.meta[LINK_MODEL_KEY]
        bases = {a: {p: v * f if p == "simple" else v for p, v in cells.items()} for a, cells in lm["base_us"].items()}
        return t.with_changes(meta={**t.meta, LINK_MODEL_KEY: {**lm, "base_us": bases}})
    knobs.append(Knob("simple_base_factor", "factor on NCCL's per-operation base latency of the Simple protocol "
                      "(base_us.*.simple; the large sizes' intercept: a slow transport's setup raises it)", 1.0,
                      scale_simple, per_unit=lambda algo, proto: model.base_latency_us(algo, proto) * SECONDS_PER_US
                      if proto == "simple" else 0.0))
    if any(n.reduce and n.reduce_GBps for n in topology.nodes.values()):
        def scale_reduce(t: Topology, f: float) -> Topology:
            seen = t.meta.get(TUNER_KEY)
            meta = t.meta if seen is None else {**t.meta, TUNER_KEY: {**seen,
                                                                      "reduce_factor": seen.get("reduce_factor", 1.0) * f}}
            return t.with_changes(meta=meta, nodes=[replace(n, reduce_GBps=n.reduce_GBps * f)
                                                    if n.reduce and n.reduce_GBps else n for n in t.nodes.values()])
        knobs.append(Knob("reduce_factor", "factor on the reducing switches' engine rate (reduce_GBps)", 1.0,
                          scale_reduce))
    return knobs


def _model_knob(path: tuple[str, ...], value: float, meaning: str, high: float = 0.0,
                per_unit: Callable[[str, str], float] | None = None) -> Knob:
    """A number inside meta.link_model, e.g. ('efficiency', 'net')."""
    def apply(t: Topology, v: float) -> Topology:
        lm = dict(t.meta[LINK_MODEL_KEY])
        if len(path) == 1:
            lm[path[0]] = v
        else:
            lm[path[0]] = {**lm[path[0]], path[1]: v}
        return t.with_changes(meta={**t.meta, LINK_MODEL_KEY: lm})
    return Knob(".".join(path), meaning, float(value), apply, high=high, per_unit=per_unit)


def link_classes(topology: Topology) -> dict[tuple[float, float], list[tuple[int, int]]]:
    """Links grouped by the (bandwidth, alpha) they were built with: NVLink, NIC, PCIe ... of a preset."""
    classes: dict[tuple[float, float], list[tuple[int, int]]] = {}
    for key, link in topology.links.items():
        classes.setdefault((link.bandwidth_GBps, link.alpha_us), []).append(key)
    return classes


def alpha_beta_knobs(topology: Topology) -> list[Knob]:
    """A bandwidth factor per link class and one factor on every alpha (1.0 = the fabric as built)."""
    knobs = []
    for (bw, alpha), keys in sorted(link_classes(topology).items()):
        members = frozenset(keys)

        def scale_bw(t: Topology, f: float, members: frozenset = members) -> Topology:
            return t.with_changes(links=[_link(link, bw=link.bandwidth_GBps * f) if k in members else link
                                         for k, link in t.links.items()])
        knobs.append(Knob(f"bw_factor[{bw:g} GB/s, {alpha:g} us]",
                          f"factor on the bandwidth of the {len(keys)} links built at {bw:g} GB/s", 1.0, scale_bw))
    if any(link.alpha_us > 0 for link in topology.links.values()):
        def scale_alpha(t: Topology, f: float) -> Topology:
            return t.with_changes(links=[_link(link, alpha=link.alpha_us * f) for link in t.links.values()])
        knobs.append(Knob("alpha_factor", "factor on every link's alpha (latency)", 1.0, scale_alpha))
    return knobs


def _link(link: Link, bw: float | None = None, alpha: float | None = None) -> Link:
    return Link(link.src, link.dst, link.bandwidth_GBps if bw is None else bw,
                link.alpha_us if alpha is None else alpha, link.lanes)


def apply_knobs(topology: Topology, knobs: Sequence[Knob], values: Sequence[float]) -> Topology:
    """The fabric with every knob set (alpha-beta knobs are factors on the fabric as built)."""
    for knob, value in zip(knobs, values, strict=True):
        topology = knob.apply(topology, value)
    return topology


# ---------------------------------------------------------------- prediction
def predict_s(topology: Topology, collective: str, size_bytes: float, algorithm: str = "nccl",
              extra: dict[str, Any] | None = None) -> float:
    """The simulator's finish time of ``algorithm`` for one collective and size on this fabric."""
    return predict_run(topology, collective, size_bytes, algorithm, extra)[0]


def predict_run(topology: Topology, collective: str, size_bytes: float, algorithm: str = "nccl",
                extra: dict[str, Any] | None = None) -> Run:
    """The simulator's finish time, with the NCCL algorithm and protocol the schedule ran (what an additive
    knob's seconds depend on)."""
    from ccviz.model.link_model import protocol_of

    coll = make_collective(collective, topology, float(size_bytes))
    schedule = synthesize(topology, coll, algorithm, SynthOptions(extra=dict(extra or {})))
    timeline = simulate(schedule)
    if not timeline.verified:
        raise CcvizError(f"calibrate: {algorithm} produced an invalid {collective} schedule at {size_bytes:g} B "
                         "(a synthesizer bug; report it)", "algorithm")
    return timeline.finish_time_s, str((schedule.options or {}).get("nccl_algo") or "ring"), protocol_of(schedule)


def measured_points(log: NcclTestsLog, column: str = "both") -> list[Point]:
    """One point per (collective, size): the log's time in the chosen column (both: their mean)."""
    if column not in COLUMNS:
        raise CcvizError(f"--column: {column!r} is not one of {', '.join(COLUMNS)}", "column")
    seen: dict[tuple[str, int], list[float]] = {}
    for collective, row in log.rows:
        if row.size_bytes <= 0:
            continue
        times = {"out-of-place": [row.time_oop_us], "in-place": [row.time_ip_us],
                 "both": [row.time_oop_us, row.time_ip_us]}[column]
        seen.setdefault((collective or "", row.size_bytes), []).extend(t for t in times if t > 0)
    points = [Point(c, s, sum(ts) / len(ts) * 1e-6) for (c, s), ts in seen.items() if ts]
    if not points:
        raise CcvizError(f"{log.name}: no row with a positive size and time to fit", "log")
    return sorted(points, key=lambda p: (p.collective, p.size_bytes))


def fit_rows(points: Sequence[Point], limit: int = MAX_FIT_ROWS) -> list[Point]:
    """At most ``limit`` points spread evenly over the sizes (the largest always kept)."""
    if len(points) <= limit:
        return list(points)
    step = (len(points) - 1) / (limit - 1)
    return [points[round(i * step)] for i in range(limit)]


class _Stop(Exception):
    """Raised inside the residual function when the fit's time runs out or the user stops it."""


class _Close(Exception):
    """Raised inside the residual function when a stage's rows are as close as it asks."""


class _Fitter:
    """The fit's machinery: simulate rows on the fabric with knobs set, solve the additive knobs exactly, search
    the others with least squares in log space; keeps the best point of the stage running (a fit cut short by
    its time limit or the user keeps it)."""

    def __init__(self, topology: Topology, knobs: list[Knob], algorithm: str, extra: dict[str, Any] | None,
                 time_limit: float, stop: threading.Event | None,
                 progress: Callable[[int, float], None] | None) -> None:
        import numpy as np

        self.topology, self.knobs, self.algorithm, self.extra = topology, knobs, algorithm, extra
        self.time_limit, self.stop, self.progress = time_limit, stop, progress
        self.started = time.monotonic()
        self.evaluations = 0
        self.lo = np.log([k.bounds[0] for k in knobs])
        self.hi = np.log([k.bounds[1] for k in knobs])
        self.additive = [i for i, k in enumerate(knobs) if k.per_unit is not None]
        self.stage_best: dict[str, Any] = {"cost": math.inf, "x": None}

    def runs(self, rows: Sequence[Point], x: Any, checked: bool = True) -> list[Run]:
        """The judge's prediction of every row on the fabric with the knobs at exp(x)."""
        import numpy as np

        if checked:
            if self.stop is not None and self.stop.is_set():
                raise _Stop("stopped")
            if time.monotonic() - self.started > self.time_limit:
                raise _Stop("time_limit")
        fabric = apply_knobs(self.topology, self.knobs, np.exp(x))
        return [predict_run(fabric, p.collective, p.size_bytes, self.algorithm, self.extra) for p in rows]

    def solve_additive(self, rows: Sequence[Point], runs: Sequence[Run], ran_at: Any, x: Any,
                       which: Sequence[int]) -> tuple[Any, Any]:
        """``x`` with the additive knobs ``which`` at their least-squares values (relative error, bounded) for
        these runs (made with the knobs at ``ran_at``), and the predictions it gives. Exact: the judge adds each
        such knob's seconds to the finish, and they do not change NCCL's choice."""
        import numpy as np
        from scipy.optimize import lsq_linear

        measured = np.array([p.measured_s for p in rows])
        finish = np.array([r[0] for r in runs])
        values = np.exp(x)
        per_unit = np.array([[self.knobs[k].per_unit(algo, proto) for k in self.additive]  # type: ignore[misc]
                             for _, algo, proto in runs]).reshape(len(runs), len(self.additive))
        rest = finish - per_unit @ np.exp(ran_at)[self.additive]  # the finish with every additive knob at 0
        cols = [j for j, k in enumerate(self.additive) if k in which and np.any(per_unit[:, j] > 0)]
        out = x.copy()
        if cols:
            held = [j for j in range(len(self.additive)) if j not in cols]
            target = measured - per_unit[:, held] @ values[[self.additive[j] for j in held]] - rest
            idx = [self.additive[j] for j in cols]
            solved = lsq_linear(per_unit[:, cols] / measured[:, None], target / measured,
                                bounds=(np.exp(self.lo[idx]), np.exp(self.hi[idx])))
            out[idx] = np.log(np.clip(solved.x, np.exp(self.lo[idx]), np.exp(self.hi[idx])))
        return out, rest + per_unit @ np.exp(out)[self.additive]

    def stage(self, searched: list[int], solved: list[int], rows: list[Point], x: Any, budget: int,
              target: float = 0.0) -> Any:
        """Least squares over the knobs ``searched`` (log space) on ``rows``, the additive knobs ``solved``
        solved exactly at every step, the others held at ``x``; returns the best point found. Several searched
        knobs move first together, by one common factor (the large sizes' slope is one number; a coarse step
        before the fine one), then each on its own. The stage ends early once every row is within ``target``."""
        import numpy as np
        from scipy.optimize import least_squares

        if not rows or not (searched or solved):
            return x
        measured = np.array([p.measured_s for p in rows])
        self.stage_best = {"cost": math.inf, "x": x}

        def residuals(sub: Any) -> Any:
            full = x.copy()
            full[searched] = sub
            runs = self.runs(rows, full)
            full, predicted = self.solve_additive(rows, runs, full, full, solved)
            r = np.log(predicted / measured)
            self.evaluations += 1
            cost = float(r @ r)
            if cost < self.stage_best["cost"]:
                self.stage_best = {"cost": cost, "x": full}
            if self.progress is not None:
                self.progress(self.evaluations, math.sqrt(cost / len(r)))
            if float(np.max(np.abs(r))) <= target:
                raise _Close
            return r

        lo, hi = self.lo[searched], self.hi[searched]
        options = {"diff_step": 0.05, "ftol": FIT_TOLERANCE, "xtol": FIT_TOLERANCE}
        try:
            if not searched:
                residuals(np.array([]))
                return self.stage_best["x"]
            if len(searched) > 1:
                reach = math.log(KNOB_RANGE)
                least_squares(lambda t: residuals(np.clip(x[searched] + t[0], lo, hi)), [0.0],
                              bounds=([-reach], [reach]), max_nfev=budget, **options)
            least_squares(residuals, np.clip(self.stage_best["x"][searched], lo, hi), bounds=(lo, hi),
                          max_nfev=budget * (len(searched) + 1), **options)
        except _Close:
            pass
        return self.stage_best["x"]


def calibrate(log: NcclTestsLog, topology: Topology, algorithm: str = "nccl", column: str = "both",
              time_limit: float = 300.0, stop: threading.Event | None = None,
              progress: Callable[[int, float], None] | None = None,
              extra: dict[str, Any] | None = None) -> Calibration:
    """Fit the fabric's knobs to the log; the best values found are kept if the time limit cuts it short.

    In stages, each starting where the one before ended: the rate knobs on the large sizes (where bandwidth
    decides; the Simple protocol's base latency, their intercept, solved with them), then the latency knobs on
    the small sizes; a fabric without additive knobs (alpha-beta) then searches every knob on the spread of
    sizes. Last, the additive knobs are solved again on every small and every large size of the log."""
    import numpy as np

    _check_ranks(log, topology)
    measured = measured_points(log, column)
    points = _splittable(topology, measured, algorithm, extra)
    if not points:
        raise CcvizError(f"{log.name}: every size is too small to split into {algorithm}'s chunks on "
                         f"{topology.n_gpus} GPUs", "log")
    fitted_on = fit_rows(points)
    topology = with_tuner_view(topology)
    knobs = knobs_for(topology)
    if not knobs:
        raise CcvizError(f"calibrate: {topology.name} has no knob to fit (no link model, no links)", "system")
    fitter = _Fitter(topology, knobs, algorithm, extra, time_limit, stop, progress)
    x = np.log([k.initial for k in knobs])
    rates = [i for i, k in enumerate(knobs) if k.name.startswith(RATE_KNOBS)]
    latencies = [i for i in range(len(knobs)) if i not in rates]
    additive = fitter.additive
    large = [p for p in points if p.size_bytes >= LARGE_BYTES] or points[-max(1, len(points) // 3):]
    small = [p for p in points if p.size_bytes <= SMALL_BYTES]
    if not small and not additive:  # alpha-beta: the alpha factor is searched on the smallest third
        small = points[:max(1, len(points) // 3)]
    guard = fit_rows(large, STAGE_ROWS)
    stopped = None
    before_last: Any = None
    try:
        x = fitter.stage([i for i in rates if i not in additive], [i for i in rates if i in additive], guard, x,
                         STAGE_BUDGET, RATE_TARGET)
        x = fitter.stage([i for i in latencies if i not in additive], [i for i in latencies if i in additive],
                         fit_rows(small, STAGE_ROWS), x, STAGE_BUDGET, LATENCY_TARGET)
        if not additive:
            before_last = x
            x = fitter.stage(list(range(len(knobs))), [], fitted_on, x, JOINT_BUDGET)
    except _Stop as why:
        stopped = str(why)
        x = fitter.stage_best["x"]
    guarded = None
    if before_last is not None and x is not before_last:
        # the joint stage trades every size against every other; it may not give up the large sizes (where the
        # fit is held to 5 %) for the small ones: keep the stages before it where it would
        def worst_large(v: Any) -> float:
            return max(abs(math.log(r[0] / p.measured_s)) for p, r in zip(guard, fitter.runs(guard, v, False),
                                                                            strict=True))
        last, kept = worst_large(x), worst_large(before_last)
        if last > max(math.log(1 + LARGE_TOLERANCE), kept):
            guarded = (last, kept)
            x = before_last
    ran_at = x
    runs = fitter.runs(points, ran_at, checked=False)
    # the additive latencies, solved again on every size of their stage (no simulation: they add to the
    # finish): the latency ones on the small sizes, then the rate ones on the large sizes, which go last so
    # that the sizes >= 64 MiB keep their fit; the middle sizes are reported, not fitted (the protocol NCCL chose
    # there on the machine may not be the one its tuner model chooses here: the A3 Mega log's jump at 32 MiB)
    for _ in range(ADDITIVE_PASSES):
        for rows, which in ((small, [i for i in latencies if i in additive]),
                            (large, [i for i in rates if i in additive])):
            picked = [i for i, p in enumerate(points) if p in rows]
            x, _ = fitter.solve_additive([points[i] for i in picked], [runs[i] for i in picked], ran_at, x, which)
    _, predicted = fitter.solve_additive(points, runs, ran_at, x, [])
    values = np.exp(x)
    fitted = apply_knobs(topology, knobs, values)
    knob_values = {k.name: float(v) for k, v in zip(knobs, values, strict=True)}
    report = [Point(p.collective, p.size_bytes, p.measured_s, float(t)) for p, t in zip(points, predicted,
                                                                                           strict=True)]
    calibration = Calibration(fitted, knob_values, report, algorithm, fitter.evaluations, stopped)
    calibration.topology = fitted.with_changes(
        name=f"{topology.name}_calibrated",
        description=f"{topology.description} Calibrated on {log.name} ({algorithm}).".strip(),
        meta={**fitted.meta, "calibration": {"log": log.name, "from": topology.name, "algorithm": algorithm,
                                             "knobs": knob_values,
                                             "worst_error_at_64MiB_and_above": calibration.worst_large_error()}})
    for knob, v in zip(knobs, values, strict=True):
        low, high = knob.bounds
        if v <= low * 1.01 or v >= high * 0.99:
            calibration.notes.append(f"{knob.name} ended at its bound ({v:.4g}, {v / knob.initial:.3g} x as built): "
                                     "the model cannot follow this log with that knob alone")
    if guarded is not None:
        calibration.notes.append(f"the fit over every size moved the sizes >= {format_size(LARGE_BYTES)} to "
                                 f"{math.exp(guarded[0]) - 1:.1%} off; kept the fit of rates on them and latencies "
                                 f"on the small sizes ({math.exp(guarded[1]) - 1:.1%})")
    if len(points) < len(measured):
        calibration.notes.append(f"{len(measured) - len(points)} sizes up to {format_size(points[0].size_bytes / 2)} "
                                 f"left out: too small to split into {algorithm}'s chunks on {topology.n_gpus} GPUs")
    if additive and not small:
        calibration.notes.append(f"no size <= {format_size(SMALL_BYTES)} in the log: the latency knobs "
                                 f"({', '.join(knobs[i].name for i in latencies)}) stay as built")
    if additive:
        calibration.notes.append(f"rates searched on {len(guard)} sizes >= {format_size(guard[0].size_bytes)}, "
                                 f"latencies on {min(len(small), STAGE_ROWS)} small sizes; the additive latencies "
                                 f"({', '.join(knobs[i].name for i in additive)}) solved on all {len(small)} small "
                                 f"and {len(large)} large sizes; the {sum(p not in small and p not in large for p in points)} "
                                 "sizes between are predicted, not fitted")
    elif len(fitted_on) < len(points):
        calibration.notes.append(f"fitted on {len(fitted_on)} of the log's {len(points)} sizes (spread evenly); "
                                 "the error is reported for every size")
    return calibration


def with_tuner_view(topology: Topology) -> Topology:
    """The fabric with the rates NCCL's tuner model reads kept as built (``meta['nccl_tuner']``): the fit moves
    the rates the simulator charges, not the ones NCCL chose by on the machine that made the log."""
    from ccviz.model.link_model import declared

    model = declared(topology)
    if model is None or TUNER_KEY in topology.meta:
        return topology
    return topology.with_changes(meta={**topology.meta, TUNER_KEY: {"efficiency": dict(model.efficiency),
                                                                    "reduce_factor": 1.0}})


def _splittable(topology: Topology, points: Sequence[Point], algorithm: str,
                extra: dict[str, Any] | None) -> list[Point]:
    """The points the algorithm can cut into chunks: per collective, every size from the smallest that splits
    up (a larger size splits wherever a smaller one does; sizes >= 1 MiB always do), so at most a few are
    simulated to find out."""
    out: list[Point] = []
    for collective in sorted({p.collective for p in points}):
        mine = sorted((p for p in points if p.collective == collective), key=lambda p: p.size_bytes)
        first = next((i for i, p in enumerate(mine) if p.size_bytes >= MiB or _splits(topology, p, algorithm, extra)),
                     len(mine))
        out += mine[first:]
    return sorted(out, key=lambda p: (p.collective, p.size_bytes))


def _splits(topology: Topology, point: Point, algorithm: str, extra: dict[str, Any] | None) -> bool:
    """Whether the algorithm can cut this size into chunks of at least a byte on this fabric."""
    try:
        predict_s(topology, point.collective, point.size_bytes, algorithm, extra)
    except CcvizError as exc:
        if exc.field == "size":
            return False
        raise
    return True


def _check_ranks(log: NcclTestsLog, topology: Topology) -> None:
    for section in log.sections:
        if section.ranks is not None and section.ranks != topology.n_gpus:
            raise CcvizError(f"--system: the log ran on {section.ranks} ranks but {topology.name} has "
                             f"{topology.n_gpus} GPUs; give a system of that size (e.g. ':nodes=N')", "system")


def format_points(points: Sequence[Point]) -> str:
    """The per-size error table the CLI prints."""
    from ccviz.model.units import format_time

    lines = [f"{'collective':<14}{'size':>10}{'measured':>12}{'predicted':>12}{'error':>9}"]
    for p in points:
        err = "-" if p.error is None else f"{p.error:+.1%}"
        pred = "-" if p.predicted_s is None else format_time(p.predicted_s)
        lines.append(f"{p.collective:<14}{format_size(p.size_bytes):>10}{format_time(p.measured_s):>12}"
                     f"{pred:>12}{err:>9}")
    return "\n".join(lines)
