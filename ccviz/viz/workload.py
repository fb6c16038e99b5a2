"""Figures of a workload (``ccviz.runs.workload``): groups on the fabric, alone vs together, timelines.

They read the result's timelines (the simulator's), never recompute physics.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import plotly.graph_objects as go

from ccviz.model.groups import rank_text
from ccviz.viz.layout import node_positions
from ccviz.viz.topology_fig import topology_figure

if TYPE_CHECKING:
    import pandas as pd

    from ccviz.runs.workload import WorkloadResult

# group colours: none is the GPUs' blue, the switches' orange or the busiest links' red
PALETTE = ("#54A24B", "#B279A2", "#72B7B2", "#9D755D", "#FF9DA6", "#EECA3B", "#17BECF", "#BCBD22", "#8C564B",
           "#9467BD", "#E377C2", "#7F7F7F", "#AEC7E8", "#2CA02C", "#BAB0AC", "#98DF8A")


def group_color(index: int) -> str:
    return PALETTE[index % len(PALETTE)]


def groups_on_fabric(result: WorkloadResult, kind: str, contended: int = 8) -> go.Figure:
    """The fabric with every GPU coloured by its group of ``kind``; the most contended links in red."""
    topo = result.topology
    positions = node_positions(topo)
    busiest = [(b["src"], b["dst"]) for b in result.busiest_links(contended) if len(b["groups"]) > 1]
    fig = topology_figure(topo, positions, highlight_links=busiest, highlight_name="busiest shared links",
                          title=f"{kind} groups on {topo.name} (order {result.order})")
    groups = [g for g in result.groups if g.kind == kind]
    for n, g in enumerate(groups):
        fig.add_trace(go.Scatter(
            x=[positions[r][0] for r in g.ranks], y=[positions[r][1] for r in g.ranks], mode="markers",
            name=f"{g.label}: GPUs {','.join(map(str, g.ranks))}"[:60],
            marker={"size": 16, "color": group_color(n), "line": {"width": 2, "color": "white"}},
            hovertext=[f"GPU {r}: {g.label}" for r in g.ranks], hoverinfo="text"))
    return fig


def alone_vs_together(result: WorkloadResult) -> go.Figure:
    """Each group's finish alone and together with every other group (the gap is contention)."""
    labels = [g.label for g in result.groups]
    fig = go.Figure()
    fig.add_trace(go.Bar(name="alone", x=labels, y=[g.finish_alone_s * 1e3 for g in result.groups],
                         marker_color="#9ECAE9"))
    fig.add_trace(go.Bar(name="together", x=labels, y=[g.finish_together_s * 1e3 for g in result.groups],
                         marker_color="#4C78A8",
                         hovertext=[f"eta_beta {g.eta_beta:.3f}" if g.eta_beta else "" for g in result.groups]))
    fig.update_layout(barmode="group", yaxis_title="finish (ms)", title="each group alone and together",
                      margin={"l": 40, "r": 10, "t": 40, "b": 40}, height=320)
    return fig


def group_timelines(result: WorkloadResult, bins: int = 80) -> go.Figure:
    """Transfers in flight per group over the job's one timeline (a row per group)."""
    owner = np.array(result.group_of_chunk())
    transfers = result.timeline.schedule.transfers
    finish = result.finish_s or 1.0
    edges = np.linspace(0.0, finish, bins + 1)
    counts = np.zeros((len(result.groups), bins))
    if transfers:
        chunk = np.fromiter((t.chunk for t in transfers), dtype=np.int64, count=len(transfers))
        start = np.fromiter((t.start_s or 0.0 for t in transfers), dtype=float, count=len(transfers))
        end = np.fromiter((t.end_s or 0.0 for t in transfers), dtype=float, count=len(transfers))
        width = edges[1] - edges[0]
        for k in range(bins):
            lo, hi = edges[k], edges[k + 1]
            overlap = np.clip(np.minimum(end, hi) - np.maximum(start, lo), 0.0, None) / width
            np.add.at(counts[:, k], owner[chunk], overlap)
    fig = go.Figure(go.Heatmap(z=counts, x=(edges[:-1] + edges[1:]) / 2 * 1e3, y=[g.label for g in result.groups],
                               colorscale="Blues", colorbar={"title": "in flight"},
                               hovertemplate="%{y} at %{x:.3g} ms: %{z:.1f} transfers<extra></extra>"))
    for n, g in enumerate(result.groups):
        fig.add_trace(go.Scatter(x=[g.finish_alone_s * 1e3], y=[g.label], mode="markers", showlegend=n == 0,
                                 name="finish alone", marker={"symbol": "line-ns-open", "size": 14,
                                                              "color": "#E45756", "line": {"width": 3}}))
    fig.update_layout(title={"text": "transfers in flight per group, all groups together<br><sup>red: the group's "
                                     "finish alone</sup>"},  # one line was cut in half a page ("...finish alo")
                      xaxis_title="time (ms)", height=max(260, 26 * len(result.groups) + 120),
                      margin={"l": 60, "r": 10, "t": 60, "b": 40}, showlegend=False)
    return fig


def groups_table(result: WorkloadResult) -> pd.DataFrame:
    import pandas as pd

    rows = []
    for g in result.groups:
        # narrow enough for half a page (two orders side by side): the eta column was cut off
        rows.append({"group": g.label, "alone (ms)": g.finish_alone_s * 1e3,
                     "together (ms)": g.finish_together_s * 1e3, "eta_beta": g.eta_beta,
                     "alone/limit": g.finish_alone_s / g.limit_s if g.limit_s else None,
                     "GPUs": rank_text(g.ranks), "collective": g.collective.name,
                     "schedule": f"relabeled from {g.relabeled_from}" if g.relabeled_from else "synthesized"})
    return pd.DataFrame(rows)


def links_table(result: WorkloadResult, count: int = 10) -> pd.DataFrame:
    import pandas as pd

    return pd.DataFrame([{"link": f"{b['src']}->{b['dst']}", "busy": f"{b['utilization']:.0%}",
                          "busy (ms)": b["busy_s"] * 1e3, "groups sharing it": ", ".join(b["groups"])}
                         for b in result.busiest_links(count)])
