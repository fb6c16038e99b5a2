"""How busy each link is, when: the link x time heatmap and the per-link busy bars.

``busy_fraction`` is the one place figures turn the simulator's busy intervals
into per-window utilization; the animation reuses it to colour links.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from ccviz.judge.simulate import Timeline
from ccviz.model.units import format_time
from ccviz.viz.style import UTILIZATION_SCALE

LinkKey = tuple[int, int]


def busy_fraction(timeline: Timeline, edges_s: np.ndarray) -> tuple[list[LinkKey], np.ndarray]:
    """Per link and time window [edges[k], edges[k+1]): the fraction of the window it is busy, in [0, 1]."""
    edges = np.asarray(edges_s, dtype=float)
    keys = sorted(timeline.topology.links)
    widths = np.diff(edges)
    out = np.zeros((len(keys), len(widths)))
    for row, key in enumerate(keys):
        intervals = timeline.link_busy.get(key)
        if not intervals:
            continue
        spans = np.array([(s, e) for s, e, _ in intervals], dtype=float)
        starts, durations = spans[:, 0], spans[:, 1] - spans[:, 0]
        # busy time accumulated by each edge, then per-window differences
        cumulative = np.clip(edges[:, None] - starts[None, :], 0.0, durations[None, :]).sum(axis=1)
        lanes = timeline.topology.links[key].lanes
        with np.errstate(divide="ignore", invalid="ignore"):
            out[row] = np.where(widths > 0, np.diff(cumulative) / (widths * lanes), 0.0)
    return keys, np.clip(out, 0.0, 1.0)


def node_name(topology, node: int) -> str:
    """A node as the utilization and Gantt views name it: its label, and the number the graph and the limit's
    words show it by where the label does not say it ('R0.0 (48)'; 'GPU3' as it is)."""
    label = topology.nodes[node].label
    return label if label.removeprefix("GPU").removeprefix("S") == str(node) else f"{label} ({node})"


def link_name(timeline: Timeline, key: LinkKey) -> str:
    """'R0.0 (48)→GPU3': a walkthrough read 'R0.0→GPU3' here where the graph and the limit's words said 48."""
    return f"{node_name(timeline.topology, key[0])}→{node_name(timeline.topology, key[1])}"


def bottleneck_links(timeline: Timeline, tolerance: float = 0.01) -> list[LinkKey]:
    """The busiest link(s): those within ``tolerance`` of the highest busy fraction."""
    util = timeline.link_utilization()
    if not util:
        return []
    top = max(util.values())
    if top <= 0:
        return []
    return sorted(k for k, u in util.items() if u >= top - tolerance)


def utilization_heatmap(timeline: Timeline, bins: int = 60, max_links: int = 80) -> go.Figure:
    """Link x time busy fraction; the busiest links first (at most ``max_links`` rows)."""
    horizon = max(timeline.finish_time_s, timeline.last_arrival_s) or 1e-9
    edges = np.linspace(0.0, horizon, bins + 1)
    keys, matrix = busy_fraction(timeline, edges)
    order = np.argsort(-matrix.sum(axis=1), kind="stable")[:max_links]
    used = [i for i in order if matrix[i].sum() > 0] or list(order[:1])
    centers_us = (edges[:-1] + edges[1:]) / 2 * 1e6
    fig = go.Figure(go.Heatmap(
        z=matrix[used], x=centers_us, y=[link_name(timeline, keys[i]) for i in used],
        zmin=0, zmax=1, colorscale=UTILIZATION_SCALE, colorbar={"title": "busy"},
        hovertemplate="%{y}<br>t = %{x:.4g} us<br>busy %{z:.0%}<extra></extra>",
    ))
    hidden = len(keys) - len(used)
    title = "Link utilization over time" + (f" ({hidden} idle or less busy links not shown)" if hidden else "")
    fig.update_layout(
        title=title, xaxis_title="time (us)", yaxis={"autorange": "reversed", "type": "category"},
        height=max(300, min(900, 40 + 16 * len(used))), margin={"l": 10, "r": 10, "t": 40, "b": 40},
    )
    return fig


def link_busy_bars(timeline: Timeline, top: int = 40) -> go.Figure:
    """Each link's busy fraction over the whole run, the bottleneck(s) in red and named."""
    util = timeline.link_utilization()
    ranked = sorted(util.items(), key=lambda kv: -kv[1])[:top]
    bottlenecks = set(bottleneck_links(timeline))
    fig = go.Figure(go.Bar(
        x=[link_name(timeline, k) for k, _ in ranked], y=[u for _, u in ranked],
        marker_color=["#E31A1C" if k in bottlenecks else "#4C78A8" for k, _ in ranked],
        hovertemplate="%{x}: busy %{y:.1%}<extra></extra>",
    ))
    if bottlenecks:
        names = ", ".join(link_name(timeline, k) for k in sorted(bottlenecks)[:4])
        more = f" and {len(bottlenecks) - 4} more" if len(bottlenecks) > 4 else ""
        fig.add_annotation(
            text=f"bottleneck: {names}{more} ({max(util.values()):.0%} busy of {format_time(timeline.finish_time_s)})",
            xref="paper", yref="paper", x=1, y=1.08, showarrow=False, xanchor="right", font={"color": "#E31A1C"},
        )
    fig.update_layout(
        title="Busy fraction per link", height=360, margin={"l": 10, "r": 10, "t": 60, "b": 40},
        yaxis={"range": [0, 1.05], "tickformat": ".0%", "title": "busy (share of the run)"},
        xaxis={"type": "category", "title": f"link, busiest first{f' (the {top} busiest)' if len(util) > top else ''}"},
    )
    return fig
