"""A traffic matrix as a heatmap, and the AllToAllv algorithms against the limit across skews."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from ccviz.model.units import format_size


def traffic_heatmap(matrix: np.ndarray, ranks: Sequence[int] | None = None, title: str = "bytes from rank to rank"
                    ) -> go.Figure:
    """Rows send, columns receive; the hot expert's rank is the bright column."""
    n = len(matrix)
    names = [str(r) for r in (ranks if ranks is not None else range(n))]
    text = [[format_size(x) for x in row] for row in matrix]
    fig = go.Figure(go.Heatmap(
        z=matrix / 1e6, x=names, y=names, colorscale="Viridis", colorbar={"title": "MB"}, customdata=text,
        hovertemplate="rank %{y} -> rank %{x}: %{customdata}<extra></extra>",
    ))
    into = matrix.sum(axis=0) - np.diag(matrix)
    hot = int(into.argmax())
    fig.update_layout(title=f"{title} (busiest receiver: rank {names[hot]}, {into[hot] / into.mean():.2f} x the mean)",
                      xaxis_title="to rank", yaxis_title="from rank", yaxis_autorange="reversed", height=420,
                      xaxis_type="category", yaxis_type="category",  # ranks, not a number line (no "0.5" ticks)
                      margin={"t": 50, "l": 50, "r": 10, "b": 40})
    return fig


def skew_figure(rows: list[dict], algorithms: Sequence[str]) -> go.Figure:
    """Finish / limit per algorithm across skews (1.0 = at the limit)."""
    fig = go.Figure()
    skews = [r["skew"] for r in rows]
    for algorithm in algorithms:
        values = [r.get(f"{algorithm} x limit") for r in rows]
        fig.add_trace(go.Bar(name=algorithm, x=skews, y=values, text=[f"{v:.3f}" if v else "" for v in values],
                             textposition="outside",
                             hovertemplate=f"{algorithm} at %{{x}}: %{{y:.3f}} x the limit<extra></extra>"))
    fig.add_hline(y=1.0, line_dash="dash", annotation_text="the limit (exact LP)")
    top = max([r.get(f"{a} x limit") or 1.0 for r in rows for a in algorithms], default=1.0)
    fig.update_yaxes(range=[0.9, max(1.1, top * 1.05)])  # the differences are percent: the axis starts near 1
    fig.update_layout(barmode="group", yaxis_title="finish / limit", xaxis_title="expert popularity", height=360,
                      margin={"t": 30, "l": 50, "r": 10, "b": 40})
    return fig
