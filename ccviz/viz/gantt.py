"""Per-link Gantt chart: every transfer as a bar on its link's row, coloured by chunk source."""

from __future__ import annotations

import plotly.graph_objects as go

from ccviz.simulate import Timeline
from ccviz.viz.style import source_colors
from ccviz.viz.utilization import link_name


def gantt_figure(timeline: Timeline, max_links: int = 48) -> go.Figure:
    """Bars span each transfer's serialization (start to link-free); the busiest links first."""
    frame = timeline.transfers_frame()
    util = timeline.link_utilization()
    links = [k for k, u in sorted(util.items(), key=lambda kv: -kv[1]) if u > 0][:max_links]
    order = {k: name for k, name in ((k, link_name(timeline, k)) for k in links)}
    frame = frame[[(s, d) in order for s, d in zip(frame["src"], frame["dst"], strict=True)]]
    colors = source_colors(sorted({s for s in frame["source"].dropna().unique()}))
    fig = go.Figure()
    for source, rows in frame.groupby("source", sort=True, dropna=False):
        fig.add_trace(go.Bar(
            base=rows["start_s"] * 1e6, x=(rows["busy_until_s"] - rows["start_s"]) * 1e6,
            y=[order[(s, d)] for s, d in zip(rows["src"], rows["dst"], strict=True)],
            orientation="h", name=f"from {source}", marker_color=colors.get(source, "#888"),
            customdata=rows[["chunk", "start_s", "arrival_s"]].to_numpy() * [1, 1e6, 1e6],
            hovertemplate="chunk %{customdata[0]:.0f}<br>%{y}<br>start %{customdata[1]:.4g} us, "
                          "arrives %{customdata[2]:.4g} us<extra>%{fullData.name}</extra>",
        ))
    hidden = sum(1 for u in util.values() if u > 0) - len(links)
    fig.update_layout(
        title="Transfers per link" + (f" (busiest {len(links)} links; {hidden} more not shown)" if hidden > 0 else ""),
        barmode="overlay", xaxis_title="time (us)", showlegend=len(colors) <= 32,
        yaxis={"type": "category", "categoryorder": "array", "categoryarray": list(order.values()),
               "autorange": "reversed"},
        height=max(300, min(1000, 60 + 18 * len(links))), margin={"l": 10, "r": 10, "t": 40, "b": 40},
    )
    return fig
