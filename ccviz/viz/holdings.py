"""Who holds what: a GPU x chunk matrix over time, so AllGather visibly fills up.

Values come from the simulator (``Timeline.holdings_at``): 1 is a complete
chunk, a fraction is a partial reduction. With many chunks the columns are
the chunk *sources* (share of that source's chunks held) to stay readable.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from ccviz.simulate import Timeline
from ccviz.units import format_time

MAX_COLUMNS = 256


def holdings_matrix(timeline: Timeline, time_s: float) -> tuple[list[str], list[str], np.ndarray]:
    """(row labels, column labels, matrix) of what each GPU holds at ``time_s``."""
    held = timeline.holdings_at(time_s)
    gpus = timeline.topology.gpus
    chunks = timeline.collective.chunks
    rows = [timeline.topology.nodes[g].label for g in gpus]
    if len(chunks) <= MAX_COLUMNS:
        matrix = np.array([[held.get(g, {}).get(c.id, 0.0) for c in chunks] for g in gpus])
        parts = timeline.collective.chunks_per_rank > 1
        cols = [f"c{c.id} from {c.source}" + (f" #{c.index}" if parts else "") for c in chunks]
        return rows, cols, matrix
    sources = sorted({c.source for c in chunks}, key=lambda s: (s is None, s))
    by_source = {s: [c.id for c in chunks if c.source == s] for s in sources}
    matrix = np.array([
        [np.mean([held.get(g, {}).get(cid, 0.0) for cid in by_source[s]]) for s in sources] for g in gpus
    ])
    return rows, [f"from {s}" for s in sources], matrix


def holdings_figure(timeline: Timeline, frames: int = 24) -> go.Figure:
    """The matrix at ``frames`` evenly spaced times from 0 to the finish, with a slider."""
    horizon = max(timeline.finish_time_s, timeline.last_arrival_s)
    times = np.linspace(0.0, horizon, max(2, frames))
    snapshots = [holdings_matrix(timeline, float(t)) for t in times]
    rows, cols, first = snapshots[0]

    def heat(matrix: np.ndarray) -> go.Heatmap:
        return go.Heatmap(z=matrix, x=cols, y=rows, zmin=0, zmax=1, colorscale="Blues",
                          colorbar={"title": "held"}, hovertemplate="%{y} holds %{x}: %{z:.0%}<extra></extra>")

    fig = go.Figure(data=[heat(first)])
    fig.frames = [go.Frame(data=[heat(m)], name=str(k)) for k, (_, _, m) in enumerate(snapshots)]
    fig.update_layout(
        title="Who holds what (rows: GPUs, columns: chunks and the GPU each comes from)",
        height=max(320, min(800, 120 + 22 * len(rows))), margin={"l": 10, "r": 10, "t": 40, "b": 90},
        xaxis={"type": "category", "showticklabels": len(cols) <= 64},
        yaxis={"type": "category", "autorange": "reversed"},
        sliders=[{
            "active": 0, "currentvalue": {"prefix": "time: "}, "pad": {"t": 30},
            "steps": [{"label": format_time(float(t)), "method": "animate",
                       "args": [[str(k)], {"frame": {"duration": 0, "redraw": True}, "mode": "immediate"}]}
                      for k, t in enumerate(times)],
        }],
    )
    return fig
