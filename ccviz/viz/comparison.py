"""Algorithms side by side: algbw and finish time versus size, and finish bars at one size.

Reads the table of ``ccviz.runs.compare.compare``; the lower bound is drawn as
the ceiling no algorithm may cross, the textbook formulas as dotted lines.
"""

from __future__ import annotations

import math

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ccviz.model.units import format_size, format_time
from ccviz.viz.style import algorithm_colors, time_unit

BOUND_COLOR = "#111111"
LIMIT_COLOR = "#E45756"
LIMIT_NAME = "fabric's limit (bandwidth only, alpha ignored)"
SUMS_NAME = "limit without switch sums (ReduceScatter then AllGather, summed at GPUs)"


def comparison_figure(table: pd.DataFrame) -> go.Figure:
    """Left: algbw vs size (bound = best possible); right: finish time vs size (bound = fastest possible).

    The fabric's limit (``ccviz.bounds.limit``) is drawn as its own line where the collective has one, and,
    for AllReduce on switches that add, the limit without switch sums (what trees summing at GPUs can reach).
    """
    scale, unit = time_unit(float(table[["finish_time_s", "lower_bound_s"]].max().max()))
    fig = make_subplots(rows=1, cols=2, subplot_titles=("algorithm bandwidth (GB/s)", "finish time"))
    units = {1: "GB/s", 2: unit}  # hovers name their unit; the time axis labels each tick with its own
    algorithms = list(dict.fromkeys(table["algorithm"]))
    colors = algorithm_colors(algorithms)
    above = formulas_above_limit(table)
    for alg in algorithms:
        rows = table[(table["algorithm"] == alg) & table["error"].isna()].sort_values("size_bytes")
        color = colors[alg]
        for col, y in ((1, rows["algbw_GBps"]), (2, rows["finish_time_s"] * scale)):
            fig.add_trace(go.Scatter(
                x=rows["size_bytes"], y=y, mode="lines+markers", name=alg, legendgroup=alg, showlegend=col == 1,
                line={"color": color}, text=rows["size"],
                hovertemplate=f"{alg} @ %{{text}}: %{{y:.4g}} {units[col]}<extra></extra>",
            ), row=1, col=col)
        formula = table[(table["algorithm"] == alg)].sort_values("size_bytes")
        if formula["formula_time_s"].notna().any():
            for col, y in ((1, formula["formula_algbw_GBps"]), (2, formula["formula_time_s"] * scale)):
                over = " — above the fabric's limit" if alg in above else ""
                fig.add_trace(go.Scatter(
                    x=formula["size_bytes"], y=y, mode="lines", name=f"{alg} (textbook α-β formula{over})",
                    legendgroup=alg, showlegend=col == 1, line={"color": color, "dash": "dot", "width": 1.5},
                    hovertemplate=f"{alg} textbook formula (one message per GPU at a time, full link speed, no "
                                  "contention): "
                                  f"%{{y:.4g}} {units[col]}<extra></extra>",
                ), row=1, col=col)
    # the weakest row's bound per size: an algorithm that refines the chunks (forestcoll) has a lower one
    bound = table.sort_values("lower_bound_s").drop_duplicates("size_bytes").sort_values("size_bytes")
    if bound["lower_bound_s"].notna().any():
        for col, y in ((1, bound["bound_algbw_GBps"]), (2, bound["lower_bound_s"] * scale)):
            fig.add_trace(go.Scatter(
                x=bound["size_bytes"], y=y, mode="lines", name="lower bound (no schedule beats it)",
                legendgroup="bound", showlegend=col == 1, line={"color": BOUND_COLOR, "dash": "dash", "width": 2},
                hovertemplate=f"bound: %{{y:.4g}} {units[col]}<extra></extra>",
            ), row=1, col=col)
    if "limit_s" in bound and bound["limit_s"].notna().any():
        for col, y in ((1, bound["size_bytes"] / bound["limit_s"] / 1e9), (2, bound["limit_s"] * scale)):
            fig.add_trace(go.Scatter(
                x=bound["size_bytes"], y=y, mode="lines", name=LIMIT_NAME, legendgroup="limit",
                showlegend=col == 1, line={"color": LIMIT_COLOR, "dash": "dashdot", "width": 2},
                hovertemplate=f"limit: %{{y:.4g}} {units[col]}<extra></extra>",
            ), row=1, col=col)
    if "limit_without_switch_sums_s" in bound and bound["limit_without_switch_sums_s"].notna().any():
        sums = bound["limit_without_switch_sums_s"]
        for col, y in ((1, bound["size_bytes"] / sums / 1e9), (2, sums * scale)):
            fig.add_trace(go.Scatter(
                x=bound["size_bytes"], y=y, mode="lines", name=SUMS_NAME, legendgroup="sums",
                showlegend=col == 1, line={"color": LIMIT_COLOR, "dash": "dot", "width": 2},
                hovertemplate=f"limit without switch sums: %{{y:.4g}} {units[col]}<extra></extra>",
            ), row=1, col=col)
    ticks = sorted(table["size_bytes"].unique())
    for col in (1, 2):
        fig.update_xaxes(type="log", tickvals=ticks, ticktext=[format_size(s) for s in ticks], title="size",
                         row=1, col=col)
    fig.update_yaxes(type="log", row=1, col=2, **decade_ticks(fig, 2, scale))
    fig.update_layout(height=460, margin={"l": 10, "r": 10, "t": 40, "b": 40},
                      legend={"orientation": "h", "y": -0.2})
    return fig


def decade_ticks(fig: go.Figure, col: int, scale: float) -> dict:
    """Ticks at every decade the column's times span, each labelled with its own unit ('100 us', '1 ms'): a log
    axis in ms spanning 1 KB to 1 GB read '100μ' (plotly's SI prefix on a number already in ms)."""
    ys = [y for trace in fig.data if trace.xaxis == ("x" if col == 1 else f"x{col}") and trace.y is not None
          for y in trace.y if y is not None and y == y and y > 0]
    if not ys:
        return {}
    lo, hi = math.floor(math.log10(min(ys) / scale)), math.ceil(math.log10(max(ys) / scale))
    decades = [10.0 ** k for k in range(lo, hi + 1)]
    return {"tickvals": [d * scale for d in decades], "ticktext": [format_time(d) for d in decades]}


def formulas_above_limit(table: pd.DataFrame) -> dict[str, list[float]]:
    """Algorithm -> sizes at which its textbook formula is faster than the fabric's limit allows.

    The α-β formulas price every link at the speed of the links the schedule uses and
    assume no two sends share one, so on a fabric whose bottleneck cut is narrower (a fat tree's uplinks)
    a formula can promise more than any schedule can do. Such curves are labelled, never drawn silently.
    """
    if "limit_s" not in table or "formula_time_s" not in table:
        return {}
    rows = table[table["formula_time_s"].notna() & table["limit_s"].notna()]
    rows = rows[rows["formula_time_s"] < rows["limit_s"] * (1 - 1e-9)]
    return {alg: sorted(group["size_bytes"].unique().tolist()) for alg, group in rows.groupby("algorithm", sort=False)}


def formulas_beaten(table: pd.DataFrame) -> dict[str, list[float]]:
    """Algorithm -> sizes at which its verified, simulated schedule finishes before its textbook formula.

    Why: the α-β formulas assume a one-port GPU (one message at a time); on a fabric with several links per
    GPU a schedule that sends on all of them at once (direct AllToAll on a torus) beats its formula, so the
    formula is not an ideal there and the page must not call it one.
    """
    if "formula_time_s" not in table:
        return {}
    ok = table[table["error"].isna() & table["verified"].fillna(False).astype(bool) & table["formula_time_s"].notna()]
    rows = ok[ok["finish_time_s"] < ok["formula_time_s"] * (1 - 1e-9)]
    return {alg: sorted(group["size_bytes"].unique().tolist()) for alg, group in rows.groupby("algorithm", sort=False)}


TIE = 1e-9  # relative: finish times this close are the same (forestcoll keeps inc's schedule where it is faster)


def fastest_by_size(table: pd.DataFrame) -> list[tuple[float, float, str]]:
    """(first size, last size, algorithm): the runs of sizes over which one algorithm finishes first
    (algorithms that tie joined by "and", e.g. "forestcoll and inc").

    Only verified rows count. Why: a bandwidth-optimal schedule (mcf, TE-CCL) wins large buffers and may
    lose small ones to a latency-optimal one (fewer rounds); where the winner changes is the handover a
    researcher reads off Compare.
    """
    ok = table[table["error"].isna() & table["verified"].fillna(False).astype(bool) & table["finish_time_s"].notna()]
    if ok.empty:
        return []
    best = ok.groupby("size_bytes")["finish_time_s"].transform("min")
    tied = ok[ok["finish_time_s"] <= best * (1 + TIE)]  # two algorithms may book the very same schedule
    winners = tied.groupby("size_bytes", sort=True)["algorithm"].agg(lambda names: " and ".join(dict.fromkeys(names)))
    spans: list[tuple[float, float, str]] = []
    for size, algorithm in winners.items():
        if spans and spans[-1][2] == algorithm:
            spans[-1] = (spans[-1][0], float(size), algorithm)
        else:
            spans.append((float(size), float(size), algorithm))
    return spans


def handover_sentence(table: pd.DataFrame) -> str | None:
    """Which algorithm finishes first over which sizes, in words (None without verified rows)."""
    spans = fastest_by_size(table)
    if not spans:
        return None
    if len(spans) == 1:
        lo, hi, algorithm = spans[0]
        return (f"Fastest verified at every size compared ({format_size(lo)}–{format_size(hi)}): **{algorithm}**; "
                "no handover in this range.")
    parts = [f"**{a}** at {format_size(lo)}" if lo == hi else f"**{a}** from {format_size(lo)} to {format_size(hi)}"
             for lo, hi, a in spans]
    changes = ", ".join(f"{spans[k][2]} → {spans[k + 1][2]} between {format_size(spans[k][1])} and "
                        f"{format_size(spans[k + 1][0])}" for k in range(len(spans) - 1))
    return f"Fastest verified: {'; '.join(parts)}. Handover: {changes}."


def finish_bars(table: pd.DataFrame, size_bytes: float) -> go.Figure:
    """Finish time of each algorithm at one size, with the lower bound and the fabric's limit as lines.

    The lines' labels face away from each other: the lower bound above its line on the left, the fabric's
    limit below its line on the right, the limit without switch sums (always above it) above its line on the
    right; labels facing each other across a thin gap covered one another (dgxh100 AllReduce at 1 GB)."""
    rows = table[(table["size_bytes"] == size_bytes) & table["error"].isna()].sort_values("finish_time_s")
    bound = table.loc[table["size_bytes"] == size_bytes, "lower_bound_s"]
    bound_s = float(bound.min()) if len(bound) and not math.isnan(bound.min()) else None  # valid for every row
    scale, unit = time_unit(max([*rows["finish_time_s"], bound_s or 0.0], default=0.0))
    colors = algorithm_colors(list(rows["algorithm"]))
    fig = go.Figure(go.Bar(
        x=rows["algorithm"], y=rows["finish_time_s"] * scale, marker_color=[colors[a] for a in rows["algorithm"]],
        text=[f"{v * scale:.4g} {unit}" for v in rows["finish_time_s"]], textposition="outside",
        hovertemplate=f"%{{x}}: %{{y:.4g}} {unit}<extra></extra>",
    ))
    if bound_s is not None:
        fig.add_hline(y=bound_s * scale, line_dash="dash", line_color=BOUND_COLOR,
                      annotation_text=f"lower bound {bound_s * scale:.4g} {unit}", annotation_position="top left",
                      annotation_bgcolor="white")
    limit = table.loc[table["size_bytes"] == size_bytes, "limit_s"] if "limit_s" in table else []
    if len(limit) and not math.isnan(limit.iloc[0]):
        fig.add_hline(y=limit.iloc[0] * scale, line_dash="dashdot", line_color=LIMIT_COLOR,
                      annotation_text=f"fabric's limit {limit.iloc[0] * scale:.4g} {unit}",
                      annotation_position="bottom right", annotation_bgcolor="white")
    sums = table.loc[table["size_bytes"] == size_bytes, "limit_without_switch_sums_s"] \
        if "limit_without_switch_sums_s" in table else []
    if len(sums) and not math.isnan(sums.iloc[0]):
        fig.add_hline(y=sums.iloc[0] * scale, line_dash="dot", line_color=LIMIT_COLOR,
                      annotation_text=f"without switch sums {sums.iloc[0] * scale:.4g} {unit}",
                      annotation_position="top right", annotation_bgcolor="white")
    fig.update_layout(title=f"Finish time at {format_size(size_bytes)}", yaxis_title=unit, height=360,
                      margin={"l": 10, "r": 10, "t": 40, "b": 40})
    if rows.empty:  # a Stopped sweep skips the largest sizes: say so instead of drawing empty axes
        fig.update_layout(xaxis_visible=False, yaxis_visible=False, height=160)
        fig.add_annotation(text=f"no run finished at {format_size(size_bytes)} (skipped or failed); choose a size "
                                "above whose runs finished", showarrow=False, xref="paper", yref="paper", x=0.5, y=0.5)
    return fig


def largest_finished_size(table: pd.DataFrame) -> float | None:
    """The largest size at which some run finished (the bars' first view), None when none did."""
    done = table.loc[table["error"].isna() & table["finish_time_s"].notna(), "size_bytes"]
    return float(done.max()) if len(done) else None
