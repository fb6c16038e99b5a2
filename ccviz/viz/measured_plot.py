"""Predicted against measured busbw per machine over sizes (the Papers page's "Measured" view).

Reads ``ccviz.runs.measured.compare``'s rows: one colour per machine, the published measurement as a
solid line with dots, ccviz's prediction (``-a nccl`` on the matching preset) as a dashed line in the same
colour, so where the two part is where the model is wrong.
"""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from ccviz.model.units import format_size
from ccviz.runs.measured import Comparison
from ccviz.viz.style import algorithm_colors


def measured_figure(comparisons: Sequence[Comparison], collective: str = "allreduce") -> go.Figure:
    """busbw (GB/s) vs size, log-log: measured (solid) and predicted (dashed) per machine and source."""
    rows = [c for c in comparisons if c.row.collective == collective]
    series: dict[tuple[str, str], list[Comparison]] = {}
    for c in rows:
        key = (c.row.label + ("" if not c.row.algo_env else f" {c.row.algo_env}"), _source(c.row.source_url))
        series.setdefault(key, []).append(c)
    colors = algorithm_colors([label for label, _ in series])
    fig = go.Figure()
    for (label, source), comps in series.items():
        comps = sorted(comps, key=lambda c: c.row.size_bytes)
        color = colors[label]
        name = f"{label} · {source}"
        sizes = [c.row.size_bytes for c in comps]
        text = [format_size(s) for s in sizes]
        fig.add_trace(go.Scatter(
            x=sizes, y=[c.row.busbw_GBps for c in comps], mode="lines+markers", name=f"{name} (measured)",
            legendgroup=name, line={"color": color}, text=text,
            hovertemplate=f"{name} measured @ %{{text}}: %{{y:.4g}} GB/s<extra></extra>"))
        predicted = [c for c in comps if c.predicted_busbw_GBps is not None]
        if predicted:
            fig.add_trace(go.Scatter(
                x=[c.row.size_bytes for c in predicted], y=[c.predicted_busbw_GBps for c in predicted],
                mode="lines", name=f"{name} (ccviz)", legendgroup=name,
                line={"color": color, "dash": "dash", "width": 1.5},
                text=[f"{format_size(c.row.size_bytes)}, ratio {c.ratio:.2f}" for c in predicted],
                hovertemplate=f"{name} ccviz @ %{{text}}: %{{y:.4g}} GB/s<extra></extra>"))
    ticks = sorted({c.row.size_bytes for c in rows})[::2]
    fig.update_xaxes(type="log", title="size per rank", tickvals=ticks, ticktext=[format_size(s) for s in ticks])
    fig.update_yaxes(type="log", title="busbw (GB/s)")
    fig.update_layout(height=560, margin={"l": 10, "r": 10, "t": 30, "b": 10},
                      legend={"font": {"size": 10}}, title=f"{collective}: measured (solid) and ccviz (dashed)")
    return fig


def _source(url: str) -> str:
    """A short name for a source URL: the repository's owner/name."""
    parts = url.split("github.com/", 1)[-1].split("/")
    return "/".join(parts[:2]) if len(parts) >= 2 else url
