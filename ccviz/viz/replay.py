"""A replay beside the judge: the two link-utilization timelines on one time axis, one link order."""

from __future__ import annotations

from typing import TYPE_CHECKING

import plotly.graph_objects as go

from ccviz.viz.style import UTILIZATION_SCALE

if TYPE_CHECKING:
    from ccviz.judge.replay import Replay

ENGINE_TITLES = {"judge": "α-β judge", "replay": "packet level ({engine})"}


def replay_heatmaps(result: Replay, bins: int = 50, max_links: int = 40) -> tuple[go.Figure, go.Figure]:
    """(judge, replay) link x time busy fraction over the same bins; the busiest links of either, first."""
    edges, series = result.utilization_over_time(bins)
    keys = sorted(set(series["judge"]) | set(series["replay"]),
                  key=lambda k: -(sum(series["judge"].get(k, ())) + sum(series["replay"].get(k, ()))))[:max_links]
    labels = [f"{result.schedule.topology.nodes[s].label}→{result.schedule.topology.nodes[d].label}" for s, d in keys]
    centers_us = [(a + b) / 2 * 1e6 for a, b in zip(edges[:-1], edges[1:], strict=True)]
    figures = []
    for name in ("judge", "replay"):
        z = [series[name].get(k, [0.0] * bins) for k in keys]
        fig = go.Figure(go.Heatmap(
            z=z, x=centers_us, y=labels, zmin=0, zmax=1, colorscale=UTILIZATION_SCALE, showscale=name == "replay",
            colorbar={"title": "busy"}, hovertemplate="%{y}<br>t = %{x:.4g} us<br>busy %{z:.0%}<extra></extra>",
        ))
        fig.update_layout(
            title=ENGINE_TITLES[name].format(engine=result.engine), xaxis_title="time (us)",
            yaxis={"autorange": "reversed", "type": "category"},
            height=max(280, min(800, 60 + 16 * len(keys))), margin={"l": 10, "r": 10, "t": 40, "b": 40},
        )
        figures.append(fig)
    return figures[0], figures[1]
