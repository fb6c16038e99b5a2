"""Shared colours and marker styles, so every figure speaks the same visual language."""

from __future__ import annotations

import plotly.express as px

GPU_COLOR = "#4C78A8"
SWITCH_COLOR = "#F58518"
REDUCING_SWITCH_COLOR = "#B279A2"  # a switch with an in-network reduction engine (Node.reduce)
UTILIZATION_SCALE = "YlOrRd"
BANDWIDTH_SCALE = "Viridis"
# GPU fill in the animation: share of its demanded chunks held (light = nothing yet, blue = done).
HOLDING_SCALE = [[0.0, "#E8EEF6"], [1.0, "#5B9BD5"]]
# Utilization bins of the animation: a frame recolours links by bin (one trace per bin).
UTILIZATION_BINS = (0.0, 0.25, 0.5, 0.75, 1.0)
UTILIZATION_BIN_COLORS = ("#C8CCD2", "#FED976", "#FD8D3C", "#E31A1C", "#800026")


QUALITATIVE_SOURCES_UP_TO = 10  # beyond this, near-identical qualitative colours: use a continuous scale
# an explicit list: plotly.js knows no "Turbo" by name (figures here skip plotly's Python-side conversion)
SOURCE_SCALE = [[k / (len(px.colors.sequential.Turbo) - 1), c] for k, c in enumerate(px.colors.sequential.Turbo)]


def source_colors(sources: list[int]) -> dict[int, str]:
    """One colour per chunk source rank: distinct colours up to 10 sources, then a continuous scale.

    Beyond ``QUALITATIVE_SOURCES_UP_TO`` no palette keeps sources apart by name; colours then follow
    the source's rank on ``SOURCE_SCALE`` and figures show a colourbar instead of a legend.
    """
    if len(sources) <= QUALITATIVE_SOURCES_UP_TO:
        palette = px.colors.qualitative.D3
        return {s: palette[k] for k, s in enumerate(sources)}
    lo, hi = min(sources), max(sources)
    points = [(s - lo) / (hi - lo) if hi > lo else 0.5 for s in sources]
    return dict(zip(sources, px.colors.sample_colorscale(SOURCE_SCALE, points), strict=True))


def source_colorbar(sources: list[int], title: str = "chunk source") -> dict:
    """An invisible trace whose only job is the colourbar of ``source_colors`` beyond 10 sources."""
    lo, hi = min(sources), max(sources)
    return {"type": "scatter", "x": [None], "y": [None], "mode": "markers", "showlegend": False,
            "hoverinfo": "skip",
            "marker": {"color": [lo], "cmin": lo, "cmax": hi, "colorscale": SOURCE_SCALE, "showscale": True,
                       "colorbar": {"title": {"text": title, "side": "right"}, "thickness": 12, "len": 0.6,
                                    "x": 1.0, "xanchor": "left", "y": 0.35}}}


def algorithm_colors(names: list[str]) -> dict[str, str]:
    """One colour per algorithm, the same in every chart and every sweep (fixed by the registry's order)."""
    from ccviz.synth.registry import REGISTRY

    order = sorted(REGISTRY)
    palette = px.colors.qualitative.D3 + px.colors.qualitative.Dark24
    extra = [n for n in names if n not in order]
    return {n: palette[(order.index(n) if n in order else len(order) + extra.index(n)) % len(palette)] for n in names}


def time_unit(seconds_max: float) -> tuple[float, str]:
    """(scale, unit) to draw times up to ``seconds_max`` on one axis: us, ms or s."""
    if not seconds_max or seconds_max != seconds_max or seconds_max < 1e-3:
        return 1e6, "us"
    if seconds_max < 1:
        return 1e3, "ms"
    return 1.0, "s"


def bandwidth_color(bw: float, lo: float, hi: float) -> str:
    """Colour of a bandwidth on the shared scale (equal bandwidths share a colour)."""
    fraction = 0.5 if hi <= lo else (bw - lo) / (hi - lo)
    return px.colors.sample_colorscale(BANDWIDTH_SCALE, [0.15 + 0.7 * fraction])[0]


def bandwidth_width(bw: float, lo: float, hi: float) -> float:
    fraction = 0.5 if hi <= lo else (bw - lo) / (hi - lo)
    return 1.5 + 4.5 * fraction
