"""Per-link Gantt chart: every transfer as a bar on its link's row, coloured by chunk source.

Up to 10 sources each gets a legend entry; beyond, one trace coloured on
the continuous source scale with a colourbar (hundreds of traces would
take seconds to build and no one could tell their colours apart). Only
the busiest ``max_links`` links are drawn, and at most ``max_bars`` bars
(the earliest transfers of each link), the title saying what is left out.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from ccviz.judge.simulate import Timeline
from ccviz.viz.style import QUALITATIVE_SOURCES_UP_TO, source_colorbar, source_colors
from ccviz.viz.utilization import link_name

MAX_BARS = 20_000


def gantt_figure(timeline: Timeline, max_links: int = 48, max_bars: int = MAX_BARS) -> go.Figure:
    """Bars span each transfer's serialization (start to link-free); the busiest links first."""
    frame = timeline.transfers_frame()
    util = timeline.link_utilization()
    links = [k for k, u in sorted(util.items(), key=lambda kv: -kv[1]) if u > 0][:max_links]
    order = {k: link_name(timeline, k) for k in links}
    width = max(timeline.topology.nodes, default=0) + 1
    code = frame["src"].to_numpy(dtype=np.int64) * width + frame["dst"].to_numpy(dtype=np.int64)
    frame = frame[np.isin(code, [u * width + v for u, v in links])]
    total = len(frame)
    if total > max_bars:  # the earliest transfers: the start of the run, every link
        frame = frame.sort_values("start_s", kind="stable").iloc[:max_bars]
    names = [order[(s, d)] for s, d in zip(frame["src"], frame["dst"], strict=True)]
    frame = frame.assign(link=names)
    sources = sorted({s for s in frame["source"].dropna().unique()})
    colors = source_colors(sources)
    fig = go.Figure()
    hover = ("chunk %{customdata[0]:.0f} from %{customdata[3]:.0f}<br>%{y}<br>start %{customdata[1]:.4g} us, "
             "arrives %{customdata[2]:.4g} us<extra></extra>")

    def bars(rows, **style) -> go.Bar:
        data = np.column_stack([rows["chunk"], rows["start_s"] * 1e6, rows["arrival_s"] * 1e6,
                                rows["source"].fillna(-1)])
        return go.Bar(base=(rows["start_s"] * 1e6).to_numpy(), x=((rows["busy_until_s"] - rows["start_s"]) * 1e6)
                      .to_numpy(), y=rows["link"].to_numpy(), orientation="h", customdata=data,
                      hovertemplate=hover, **style)

    if len(sources) <= QUALITATIVE_SOURCES_UP_TO:
        for source, rows in frame.groupby("source", sort=True, dropna=False):
            fig.add_trace(bars(rows, name=f"from {source}", marker_color=colors.get(source, "#888")))
    else:
        marker = {**source_colorbar(sources)["marker"], "color": frame["source"].fillna(-1).to_numpy(dtype=float)}
        fig.add_trace(bars(frame, name="transfers", showlegend=False, marker=marker))  # numbers: fast to check
    hidden = sum(1 for u in util.values() if u > 0) - len(links)
    notes = []
    if hidden > 0:
        notes.append(f"busiest {len(links)} links; {hidden} more not shown")
    if total > max_bars:
        notes.append(f"first {max_bars} of {total} transfers")
    fig.update_layout(
        title="Transfers per link" + (f" ({'; '.join(notes)})" if notes else ""),
        barmode="overlay", xaxis_title="time (us)", showlegend=len(sources) <= QUALITATIVE_SOURCES_UP_TO,
        yaxis={"type": "category", "categoryorder": "array", "categoryarray": list(order.values()),
               "autorange": "reversed"},
        height=max(300, min(1000, 60 + 18 * len(links))), margin={"l": 10, "r": 10, "t": 40, "b": 40},
    )
    return fig
