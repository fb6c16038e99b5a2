"""Algorithms side by side: algbw and finish time versus size, and finish bars at one size.

Reads the table of ``ccviz.runs.compare.compare``; the lower bound is drawn as
the ceiling no algorithm may cross, the textbook formulas as dotted lines.
"""

from __future__ import annotations

import math

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ccviz.model.units import format_size
from ccviz.viz.style import algorithm_colors, time_unit

BOUND_COLOR = "#111111"
LIMIT_COLOR = "#E45756"
LIMIT_NAME = "fabric's limit (bandwidth only, alpha ignored)"


def comparison_figure(table: pd.DataFrame) -> go.Figure:
    """Left: algbw vs size (bound = best possible); right: finish time vs size (bound = fastest possible).

    The fabric's limit (``ccviz.bounds.limit``) is drawn as its own line where the collective has one.
    """
    scale, unit = time_unit(float(table[["finish_time_s", "lower_bound_s"]].max().max()))
    fig = make_subplots(rows=1, cols=2, subplot_titles=("algorithm bandwidth (GB/s)", f"finish time ({unit})"))
    algorithms = list(dict.fromkeys(table["algorithm"]))
    colors = algorithm_colors(algorithms)
    above = formulas_above_limit(table)
    for alg in algorithms:
        rows = table[(table["algorithm"] == alg) & table["error"].isna()].sort_values("size_bytes")
        color = colors[alg]
        for col, y in ((1, rows["algbw_GBps"]), (2, rows["finish_time_s"] * scale)):
            fig.add_trace(go.Scatter(
                x=rows["size_bytes"], y=y, mode="lines+markers", name=alg, legendgroup=alg, showlegend=col == 1,
                line={"color": color}, text=rows["size"],
                hovertemplate=f"{alg} @ %{{text}}: %{{y:.4g}}<extra></extra>",
            ), row=1, col=col)
        formula = table[(table["algorithm"] == alg)].sort_values("size_bytes")
        if formula["formula_time_s"].notna().any():
            for col, y in ((1, formula["formula_algbw_GBps"]), (2, formula["formula_time_s"] * scale)):
                over = " — above the fabric's limit" if alg in above else ""
                fig.add_trace(go.Scatter(
                    x=formula["size_bytes"], y=y, mode="lines", name=f"{alg} (ideal α-β formula{over})",
                    legendgroup=alg, showlegend=col == 1, line={"color": color, "dash": "dot", "width": 1.5},
                    hovertemplate=f"{alg} ideal formula (every link at full speed, no contention): "
                                  f"%{{y:.4g}}<extra></extra>",
                ), row=1, col=col)
    # the weakest row's bound per size: an algorithm that refines the chunks (forestcoll) has a lower one
    bound = table.sort_values("lower_bound_s").drop_duplicates("size_bytes").sort_values("size_bytes")
    if bound["lower_bound_s"].notna().any():
        for col, y in ((1, bound["bound_algbw_GBps"]), (2, bound["lower_bound_s"] * scale)):
            fig.add_trace(go.Scatter(
                x=bound["size_bytes"], y=y, mode="lines", name="lower bound (no schedule beats it)",
                legendgroup="bound", showlegend=col == 1, line={"color": BOUND_COLOR, "dash": "dash", "width": 2},
                hovertemplate="bound: %{y:.4g}<extra></extra>",
            ), row=1, col=col)
    if "limit_s" in bound and bound["limit_s"].notna().any():
        for col, y in ((1, bound["size_bytes"] / bound["limit_s"] / 1e9), (2, bound["limit_s"] * scale)):
            fig.add_trace(go.Scatter(
                x=bound["size_bytes"], y=y, mode="lines", name=LIMIT_NAME, legendgroup="limit",
                showlegend=col == 1, line={"color": LIMIT_COLOR, "dash": "dashdot", "width": 2},
                hovertemplate="limit: %{y:.4g}<extra></extra>",
            ), row=1, col=col)
    ticks = sorted(table["size_bytes"].unique())
    for col in (1, 2):
        fig.update_xaxes(type="log", tickvals=ticks, ticktext=[format_size(s) for s in ticks], title="size",
                         row=1, col=col)
    fig.update_yaxes(type="log", row=1, col=2)
    fig.update_layout(height=460, margin={"l": 10, "r": 10, "t": 40, "b": 40},
                      legend={"orientation": "h", "y": -0.2})
    return fig


def formulas_above_limit(table: pd.DataFrame) -> dict[str, list[float]]:
    """Algorithm -> sizes at which its textbook formula is faster than the fabric's limit allows.

    The α-β formulas are ideal: they price every link at the speed of the links the schedule uses and
    assume no two sends share one, so on a fabric whose bottleneck cut is narrower (a fat tree's uplinks)
    a formula can promise more than any schedule can do. Such curves are labelled, never drawn silently.
    """
    if "limit_s" not in table or "formula_time_s" not in table:
        return {}
    rows = table[table["formula_time_s"].notna() & table["limit_s"].notna()]
    rows = rows[rows["formula_time_s"] < rows["limit_s"] * (1 - 1e-9)]
    return {alg: sorted(group["size_bytes"].unique().tolist()) for alg, group in rows.groupby("algorithm", sort=False)}


def finish_bars(table: pd.DataFrame, size_bytes: float) -> go.Figure:
    """Finish time of each algorithm at one size, with the lower bound and the fabric's limit as lines."""
    rows = table[(table["size_bytes"] == size_bytes) & table["error"].isna()].sort_values("finish_time_s")
    bound = table.loc[table["size_bytes"] == size_bytes, "lower_bound_s"]
    bound_s = float(bound.min()) if len(bound) and not math.isnan(bound.min()) else None  # valid for every row
    scale, unit = time_unit(max([*rows["finish_time_s"], bound_s or 0.0], default=0.0))
    colors = algorithm_colors(list(rows["algorithm"]))
    fig = go.Figure(go.Bar(
        x=rows["algorithm"], y=rows["finish_time_s"] * scale, marker_color=[colors[a] for a in rows["algorithm"]],
        text=[f"{v * scale:.4g} {unit}" for v in rows["finish_time_s"]], textposition="outside",
        hovertemplate=f"%{{x}}: %{{y:.4g}} {unit}<extra></extra>",
    ))
    if bound_s is not None:
        fig.add_hline(y=bound_s * scale, line_dash="dash", line_color=BOUND_COLOR,
                      annotation_text=f"lower bound {bound_s * scale:.4g} {unit}", annotation_position="top left",
                      annotation_bgcolor="white")
    limit = table.loc[table["size_bytes"] == size_bytes, "limit_s"] if "limit_s" in table else []
    if len(limit) and not math.isnan(limit.iloc[0]):
        fig.add_hline(y=limit.iloc[0] * scale, line_dash="dashdot", line_color=LIMIT_COLOR,
                      annotation_text=f"fabric's limit {limit.iloc[0] * scale:.4g} {unit}",
                      annotation_position="top right", annotation_bgcolor="white")
    fig.update_layout(title=f"Finish time at {format_size(size_bytes)}", yaxis_title=unit, height=360,
                      margin={"l": 10, "r": 10, "t": 40, "b": 40})
    return fig
