"""Algorithms side by side: algbw and finish time versus size, and finish bars at one size.

Reads the table of ``ccviz.compare.compare``; the lower bound is drawn as
the ceiling no algorithm may cross, the textbook formulas as dotted lines.
"""

from __future__ import annotations

import math

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ccviz.units import format_size, format_time
from ccviz.viz.style import source_colors

BOUND_COLOR = "#111111"
LIMIT_COLOR = "#E45756"
LIMIT_NAME = "fabric's limit (bandwidth only, alpha ignored)"


def comparison_figure(table: pd.DataFrame) -> go.Figure:
    """Left: algbw vs size (bound = best possible); right: finish time vs size (bound = fastest possible).

    The fabric's limit (``ccviz.limit``) is drawn as its own line where the collective has one.
    """
    fig = make_subplots(rows=1, cols=2, subplot_titles=("algorithm bandwidth (GB/s)", "finish time (us)"))
    algorithms = list(dict.fromkeys(table["algorithm"]))
    colors = source_colors(list(range(len(algorithms))))
    for k, alg in enumerate(algorithms):
        rows = table[(table["algorithm"] == alg) & table["error"].isna()].sort_values("size_bytes")
        color = colors[k]
        for col, y in ((1, rows["algbw_GBps"]), (2, rows["finish_time_s"] * 1e6)):
            fig.add_trace(go.Scatter(
                x=rows["size_bytes"], y=y, mode="lines+markers", name=alg, legendgroup=alg, showlegend=col == 1,
                line={"color": color}, text=rows["size"],
                hovertemplate=f"{alg} @ %{{text}}: %{{y:.4g}}<extra></extra>",
            ), row=1, col=col)
        formula = table[(table["algorithm"] == alg)].sort_values("size_bytes")
        if formula["formula_time_s"].notna().any():
            for col, y in ((1, formula["formula_algbw_GBps"]), (2, formula["formula_time_s"] * 1e6)):
                fig.add_trace(go.Scatter(
                    x=formula["size_bytes"], y=y, mode="lines", name=f"{alg} (textbook α-β)",
                    legendgroup=alg, showlegend=col == 1, line={"color": color, "dash": "dot", "width": 1.5},
                    hovertemplate=f"{alg} formula: %{{y:.4g}}<extra></extra>",
                ), row=1, col=col)
    bound = table.drop_duplicates("size_bytes").sort_values("size_bytes")
    if bound["lower_bound_s"].notna().any():
        for col, y in ((1, bound["bound_algbw_GBps"]), (2, bound["lower_bound_s"] * 1e6)):
            fig.add_trace(go.Scatter(
                x=bound["size_bytes"], y=y, mode="lines", name="lower bound (no schedule beats it)",
                legendgroup="bound", showlegend=col == 1, line={"color": BOUND_COLOR, "dash": "dash", "width": 2},
                hovertemplate="bound: %{y:.4g}<extra></extra>",
            ), row=1, col=col)
    if "limit_s" in bound and bound["limit_s"].notna().any():
        for col, y in ((1, bound["size_bytes"] / bound["limit_s"] / 1e9), (2, bound["limit_s"] * 1e6)):
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


def finish_bars(table: pd.DataFrame, size_bytes: float) -> go.Figure:
    """Finish time of each algorithm at one size, with the lower bound and the fabric's limit as lines."""
    rows = table[(table["size_bytes"] == size_bytes) & table["error"].isna()].sort_values("finish_time_s")
    fig = go.Figure(go.Bar(
        x=rows["algorithm"], y=rows["finish_time_s"] * 1e6, marker_color="#4C78A8",
        text=[format_time(v) for v in rows["finish_time_s"]], textposition="outside",
        hovertemplate="%{x}: %{y:.4g} us<extra></extra>",
    ))
    bound = table.loc[table["size_bytes"] == size_bytes, "lower_bound_s"]
    if len(bound) and not math.isnan(bound.iloc[0]):
        fig.add_hline(y=bound.iloc[0] * 1e6, line_dash="dash", line_color=BOUND_COLOR,
                      annotation_text=f"lower bound {format_time(bound.iloc[0])}", annotation_position="top left",
                      annotation_bgcolor="white")
    limit = table.loc[table["size_bytes"] == size_bytes, "limit_s"] if "limit_s" in table else []
    if len(limit) and not math.isnan(limit.iloc[0]):
        fig.add_hline(y=limit.iloc[0] * 1e6, line_dash="dashdot", line_color=LIMIT_COLOR,
                      annotation_text=f"fabric's limit {format_time(limit.iloc[0])}", annotation_position="top right",
                      annotation_bgcolor="white")
    fig.update_layout(title=f"Finish time at {format_size(size_bytes)}", yaxis_title="us", height=360,
                      margin={"l": 10, "r": 10, "t": 40, "b": 40})
    return fig
