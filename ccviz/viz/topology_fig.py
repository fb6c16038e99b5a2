"""The fabric as a figure: nodes by kind, links coloured and sized by bandwidth.

Link hover markers carry ``customdata = [src, dst]`` and node markers
``customdata = [node]`` so an app can turn a click into "what does this carry".
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

import numpy as np
import plotly.graph_objects as go

from ccviz.model.topology import Topology
from ccviz.model.units import format_size, format_time
from ccviz.viz.layout import (
    Position,
    Segment,
    direction_deg,
    is_symmetric,
    link_segments,
    node_positions,
    point_along,
)
from ccviz.viz.style import (
    GPU_COLOR,
    HOLDING_SCALE,
    REDUCING_SWITCH_COLOR,
    SWITCH_COLOR,
    bandwidth_color,
    bandwidth_width,
)

LABELS_UP_TO = 64  # beyond this many nodes, labels only on hover


def topology_figure(
    topology: Topology,
    positions: dict[int, Position] | None = None,
    highlight_links: Iterable[tuple[int, int]] = (),
    highlight_nodes: Iterable[int] = (),
    title: str | None = None,
    highlight_name: str = "selected",
) -> go.Figure:
    """Nodes and links; width and colour by bandwidth, arrows where direction matters."""
    positions = positions or node_positions(topology)
    segments = link_segments(topology, positions)
    fig = go.Figure()
    bws = [link.bandwidth_GBps for link in topology.links.values()]
    lo, hi = (min(bws), max(bws)) if bws else (0.0, 0.0)
    by_bw: dict[float, list[tuple[int, int]]] = defaultdict(list)
    for key in drawn_links(topology):
        by_bw[topology.links[key].bandwidth_GBps].append(key)
    for bw in sorted(by_bw, reverse=True):
        xs, ys = segment_xy(segments[k] for k in by_bw[bw])
        fig.add_trace(go.Scatter(
            x=xs, y=ys, mode="lines", name=f"{bw:g} GB/s links", hoverinfo="skip",
            line={"color": bandwidth_color(bw, lo, hi), "width": bandwidth_width(bw, lo, hi)},
        ))
    highlight = [k for k in highlight_links if k in segments]
    if highlight:
        xs, ys = segment_xy(segments[k] for k in highlight)
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", name=highlight_name, hoverinfo="skip",
                                 line={"color": "#E45756", "width": 7}))
    fig.add_traces(direction_traces(topology, segments))
    fig.add_trace(link_hover_trace(topology, segments))
    fig.add_traces(node_traces(topology, positions, highlight_nodes=set(highlight_nodes)))
    style_network_layout(fig, title or topology.summary())
    return fig


def drawn_links(topology: Topology) -> list[tuple[int, int]]:
    """One key per drawn line: a symmetric cable once (as (min, max)), every other link itself."""
    return [(u, v) for (u, v) in topology.links if not (is_symmetric(topology, u, v) and u > v)]


def segment_xy(segments: Iterable[Segment]) -> tuple[list, list]:
    """Paths as one polyline with gaps (None) between them: one trace, many lines."""
    xs: list[float | None] = []
    ys: list[float | None] = []
    for path in segments:
        xs += [p[0] for p in path] + [None]
        ys += [p[1] for p in path] + [None]
    return xs, ys


def direction_traces(topology: Topology, segments) -> list[dict]:
    """Arrow markers on links whose direction matters (one-way or unlike directions)."""
    directed = [k for k in topology.links if not is_symmetric(topology, *k)]
    if not directed:
        return []
    points = [point_along(segments[k], 0.62) for k in directed]
    return [{
        "type": "scatter", "x": [p[0] for p in points], "y": [p[1] for p in points], "mode": "markers",
        "name": "direction", "hoverinfo": "skip", "showlegend": False,
        "marker": {"symbol": "arrow", "size": 11, "angle": [direction_deg(segments[k], 0.62) for k in directed],
                   "color": "#555"},
    }]


def link_label(topology: Topology, u: int, v: int) -> str:
    link = topology.links[(u, v)]
    arrow = "↔" if is_symmetric(topology, u, v) else "→"
    names = topology.nodes
    return (
        f"{names[u].label} {arrow} {names[v].label}<br>"
        f"{link.bandwidth_GBps:g} GB/s, α {link.alpha_us:g} us" + (f", {link.lanes} lanes" if link.lanes > 1 else "")
    )


def link_hover_trace(topology: Topology, segments) -> dict:
    """Small midpoint markers: hover text per link and a click target for selection."""
    keys = drawn_links(topology)
    mids = [point_along(segments[k], 0.5) for k in keys]
    return {
        "type": "scatter", "x": [p[0] for p in mids], "y": [p[1] for p in mids], "mode": "markers",
        "name": "link info", "showlegend": False, "customdata": [[u, v] for u, v in keys],
        "hovertext": [link_label(topology, u, v) for u, v in keys], "hoverinfo": "text",
        "marker": {"size": 9, "color": "rgba(120,120,120,0.25)", "line": {"width": 0}},
    }


def node_traces(
    topology: Topology,
    positions: dict[int, Position],
    highlight_nodes: set[int] | None = None,
    gpu_colors: list | None = None,
    gpu_hover: list[str] | None = None,
) -> list[dict]:
    """GPUs as circles, switches as squares; ``gpu_colors`` lets a caller shade GPUs by state.

    Plain dicts (not validated plotly objects): animations build hundreds of these.
    """
    highlight_nodes = highlight_nodes or set()
    show_text = len(topology.nodes) <= LABELS_UP_TO
    traces = []
    for kind, ids, symbol, color in (
        ("GPU", topology.gpus, "circle", GPU_COLOR),
        ("switch", [n for n in topology.switches if not topology.nodes[n].reduce], "square", SWITCH_COLOR),
        ("reducing switch", topology.reducing_switches, "diamond", REDUCING_SWITCH_COLOR),
    ):
        if not ids:
            continue
        labels = [topology.nodes[n].label for n in ids]
        hover = gpu_hover if (kind == "GPU" and gpu_hover is not None) else [
            f"{lab} ({kind}{', group ' + str(topology.nodes[n].group) if topology.nodes[n].group else ''})"
            for lab, n in zip(labels, ids, strict=True)
        ]
        # numpy arrays and scalars where possible: plotly checks a list element by element (slow in animations)
        marker = {
            "symbol": symbol, "size": 24 if show_text else 10, "color": color,
            "line": {"width": [4 if n in highlight_nodes else 1 for n in ids],
                     "color": ["#E45756" if n in highlight_nodes else "white" for n in ids]}
            if highlight_nodes else {"width": 1, "color": "white"},
        }
        shaded = kind == "GPU" and gpu_colors is not None
        if shaded:
            marker.update(color=np.asarray(gpu_colors, dtype=float), colorscale=HOLDING_SCALE, cmin=0, cmax=1)
        traces.append({
            "type": "scatter", "x": np.array([positions[n][0] for n in ids], dtype=float),
            "y": np.array([positions[n][1] for n in ids], dtype=float),
            "mode": "markers+text" if show_text else "markers",
            "name": {"GPU": "GPUs", "switch": "switches"}.get(kind, "switches that reduce (NVLS/SHARP)"),
            "text": [str(n) for n in ids] if show_text else None,
            "textfont": {"color": "black" if shaded else "white", "size": 10}, "customdata": [[n] for n in ids],
            "hovertext": hover, "hoverinfo": "text", "marker": marker,
        })
    return traces


def style_network_layout(fig: go.Figure, title: str, height: int = 520) -> None:
    fig.update_layout(
        title={"text": title, "font": {"size": 14}},
        height=height, margin={"l": 10, "r": 10, "t": 40, "b": 10},
        plot_bgcolor="white", paper_bgcolor="white", hovermode="closest",
        legend={"orientation": "h", "y": -0.02, "yanchor": "top"},
        xaxis={"visible": False}, yaxis={"visible": False, "scaleanchor": "x", "scaleratio": 1},
    )


def cut_figure(topology: Topology, limit, positions: dict[int, Position] | None = None) -> go.Figure:
    """The fabric with its bottleneck cut (``ccviz.bounds.limit.BandwidthLimit``): the cut's links in red, the
    GPUs on the far side ringed, the cut's bandwidth and the limit in the title."""
    cut = limit.cut
    far = [g for g in topology.gpus if g not in cut.nodes]
    near = [g for g in topology.gpus if g in cut.nodes]
    ringed = far if len(far) <= len(near) else near
    return topology_figure(
        topology, positions, highlight_links=cut.links, highlight_nodes=ringed,
        title=f"bottleneck of {limit.collective}: {cut.bandwidth_GBps:g} GB/s over {len(cut.links)} link(s); "
              f"limit {format_time(limit.limit_s)} at {format_size(limit.size_bytes)} (alpha ignored)",
        highlight_name=f"bottleneck cut ({cut.bandwidth_GBps:g} GB/s)",
    )
