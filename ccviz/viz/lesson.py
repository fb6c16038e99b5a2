"""Why one textbook algorithm wins: every algorithm of a collective on one fabric, over sizes.

The Learn page's side-by-side. Each point is a schedule judged by the
simulator; each dashed line is the same algorithm's alpha-beta formula
evaluated for that schedule (``ccviz.bounds.schedule_formula``). The handovers
mark where the fastest algorithm changes: latency-bound winners (few rounds)
at small sizes give way to bandwidth-bound ones (few bytes per GPU) at large.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import pandas as pd
import plotly.graph_objects as go

from ccviz.errors import CcvizError
from ccviz.judge.simulate import simulate
from ccviz.model.collectives import make_collective
from ccviz.model.topology import Topology
from ccviz.model.units import format_size, format_time
from ccviz.runs.composed_formula import lesson_formula
from ccviz.synth.registry import REGISTRY, SynthOptions

LESSON_SIZES = (1e3, 16e3, 256e3, 4e6, 64e6, 1e9)
# the Learn page's teaching fabrics: label -> builder spec (a link carries the spec as ``lesson=``)
TEACHING_TOPOLOGIES = {
    "ring of 4 GPUs": "ring:n=4",
    "ring of 8 GPUs": "ring:n=8",
    "2x2 torus": "torus2d:dims=2x2",
    "3x3 torus": "torus2d:dims=3x3",
    "4x4 torus": "torus2d:dims=4x4",
    "2x2x2 torus": "torus3d:dims=2x2x2",
    "two tiers: 4x4 on switches": "multidim:dims=4x4,kinds=switch/switch",  # names fit the fabric box (32 chars)
    "two tiers: 2 NDv2 chassis": "ndv2:chassis=2",
    "hypercube of 8 GPUs": "hypercube:n=8",
    "8 GPUs fully connected": "fully_connected:n=8",
    "leaf-spine, 2:1 oversubscribed": "leafspine:oversub=2",
    "star of 8, one α per traversal": "star:n=8,switch_hop=free",  # the reference's star
    "star of 8, store-and-forward": "star:n=8",  # both hops paid
    "NVSwitch box of 8 (adds: NVLS)": "star:n=8,reduce=true",
    "DGX-1 (8 V100, NVLink)": "dgx1",
}


def textbook_unavailable(algorithm: str, n_ranks: int) -> str | None:
    """Why a textbook algorithm cannot run on this many ranks (None when it can)."""
    if algorithm in ("rhd", "rd") and n_ranks & (n_ranks - 1):
        return f"needs a power-of-two number of GPUs (this fabric has {n_ranks})"
    return None


def lesson_table(topology: Topology, collective: str, algorithms: Iterable[str],
                 sizes: Iterable[float] = LESSON_SIZES, chunks: int = 1) -> pd.DataFrame:
    """One row per (algorithm, size): simulated and formula times, rounds, alpha terms, bytes per GPU."""
    rows = []
    for algorithm in algorithms:
        for size in sizes:
            coll = make_collective(collective, topology, size, chunks)
            try:
                schedule = REGISTRY[algorithm].synthesize(topology, coll, SynthOptions())
            except CcvizError as exc:
                rows.append({"algorithm": algorithm, "size_bytes": size, "error": str(exc)})
                continue
            timeline = simulate(schedule)
            f = lesson_formula(topology, coll, algorithm, {(t.src, t.dst) for t in schedule.transfers},
                               schedule.options)
            rows.append({
                "algorithm": algorithm, "size_bytes": size, "simulated_s": timeline.finish_time_s,
                "formula_s": f.time_s if f else math.nan, "rounds": schedule.n_rounds,
                "alpha_terms": f.n_alpha if f else math.nan,
                "bytes_per_gpu": f.n_beta * coll.size_bytes if f else math.nan,
                "verified": timeline.verified, "error": "",
            })
    return pd.DataFrame(rows, columns=["algorithm", "size_bytes", "simulated_s", "formula_s", "rounds",
                                       "alpha_terms", "bytes_per_gpu", "verified", "error"])


def handovers(table: pd.DataFrame) -> list[tuple[float, float, str, str]]:
    """(size before, size after, winner before, winner after) wherever the fastest algorithm changes."""
    ok = table[table["error"] == ""]
    winners = ok.loc[ok.groupby("size_bytes")["simulated_s"].idxmin()].sort_values("size_bytes")
    out = []
    previous = None
    for size, algorithm in zip(winners["size_bytes"], winners["algorithm"], strict=True):
        if previous is not None and algorithm != previous[1]:
            out.append((previous[0], float(size), previous[1], algorithm))
        previous = (float(size), algorithm)
    return out


MARKERS = ("circle", "square", "diamond", "triangle-up", "x", "cross", "star", "triangle-down", "hexagon", "pentagon")


def lesson_figure(table: pd.DataFrame) -> go.Figure:
    """Simulated time vs size per algorithm (solid), its formula (dashed), handovers marked."""
    from ccviz.viz.style import algorithm_colors

    fig = go.Figure()
    ok = table[table["error"] == ""]
    groups = list(ok.groupby("algorithm", sort=True))
    # one colour per algorithm (a 7-colour cycle gave dbt and tree one), one marker each, and a curve that
    # another covers exactly says so (dimdecomp lay hidden under hierarchical on the 4x4 torus)
    colors = algorithm_colors([a for a, _ in groups])
    curves = {a: tuple(rows.sort_values("size_bytes")["simulated_s"].round(15)) for a, rows in groups}
    for k, (algorithm, rows) in enumerate(groups):
        color = colors[algorithm]
        same = [b for b, _ in groups[:k] if curves[b] == curves[algorithm]]
        fig.add_scatter(x=rows["size_bytes"], y=rows["simulated_s"], mode="lines+markers",
                        name=f"{algorithm} (= {same[0]} here)" if same else algorithm,
                        line={"color": color}, legendgroup=algorithm,
                        marker={"symbol": MARKERS[k % len(MARKERS)], "size": 8},
                        hovertemplate=f"{algorithm}: %{{y:.3s}}s at %{{x:.3s}}B<extra>simulated</extra>")
        fig.add_scatter(x=rows["size_bytes"], y=rows["formula_s"], mode="lines", name=f"{algorithm} formula",
                        line={"color": color, "dash": "dash"}, legendgroup=algorithm, showlegend=False,
                        hovertemplate=f"{algorithm}: %{{y:.3s}}s at %{{x:.3s}}B<extra>formula</extra>")
    for lo, hi, before, after in handovers(table):
        x = math.sqrt(lo * hi)
        fig.add_vline(x=x, line={"color": "#888", "dash": "dot"})
        fig.add_annotation(x=math.log10(x), y=1, yref="paper", text=f"{before} → {after}", showarrow=False,
                           yanchor="bottom", font={"size": 11})
    # one label per decade: plotly's automatic 2 and 5 between them read as values on a projected screen
    fig.update_layout(xaxis={"type": "log", "title": "buffer size (bytes)", "dtick": 1},
                      yaxis={"type": "log", "title": "time (s), dashed: formula", "dtick": 1,
                             "exponentformat": "SI"}, height=420,
                      margin={"l": 60, "r": 20, "t": 40, "b": 50}, legend={"orientation": "h", "y": -0.2})
    return fig


def lesson_summary(table: pd.DataFrame, size: float) -> pd.DataFrame:
    """The table at one size, in words a student reads: rounds, alpha terms, bytes per GPU, times."""
    at = table[(table["size_bytes"] == size) & (table["error"] == "")]
    return pd.DataFrame({
        "algorithm": at["algorithm"], "rounds": at["rounds"],
        "α terms": at["alpha_terms"].map(lambda a: "n/a" if math.isnan(a) else f"{a:g}"),
        "bytes per GPU": at["bytes_per_gpu"].map(lambda b: "n/a" if math.isnan(b) else format_size(b)),
        "simulated": at["simulated_s"].map(format_time), "formula": at["formula_s"].map(
            lambda s: "n/a" if math.isnan(s) else format_time(s)),
    }).reset_index(drop=True)
