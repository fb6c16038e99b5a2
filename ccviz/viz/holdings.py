"""Who holds what: a GPU x chunk matrix over time, so AllGather visibly fills up.

Values follow the simulator's rule (``Timeline.holdings_at``: the last
arrival of a chunk at a GPU sets its share, 1 = complete, a fraction = a
partial reduction), replayed once for all snapshot times with numpy so a
256-GPU schedule draws in well under a second. With many chunks the columns
are the chunk *sources* (share of that source's chunks held); beyond
``MAX_SIDE`` rows or columns, neighbouring GPUs and sources are averaged in
blocks and the title says so.
"""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go

from ccviz.judge.simulate import Timeline
from ccviz.model.physics import ABS_TOL, REL_TOL
from ccviz.model.units import format_time

MAX_COLUMNS = 256  # chunks shown one by one up to this many, else one column per source
MAX_SIDE = 128  # rows/columns of the drawn matrix; beyond, blocks of GPUs/sources are averaged


def _snapshots(timeline: Timeline, times: np.ndarray, reduce) -> list[np.ndarray]:
    """``reduce(shares)`` at each time, shares being the (GPUs, chunks) matrix ``holdings_at`` gives.

    Arrivals are replayed once, in order; each snapshot is reduced at once (a 1024-GPU AllGather's
    full matrix is a million cells, too many to keep per snapshot).
    """
    gpus = timeline.topology.gpus
    chunks = timeline.collective.chunks
    size = max(timeline.topology.nodes, default=0) + 1
    row_of = np.full(size, -1, dtype=np.int64)
    row_of[np.asarray(gpus, dtype=np.int64)] = np.arange(len(gpus))
    col_of = np.full(max((c.id for c in chunks), default=0) + 1, -1, dtype=np.int64)
    col_of[np.array([c.id for c in chunks], dtype=np.int64)] = np.arange(len(chunks))
    held = np.zeros((len(gpus), len(chunks)))
    for c in chunks:
        pre = [row_of[r] for r in c.pre if row_of[r] >= 0]
        held[pre, col_of[c.id]] = (1.0 / len(c.pre)) if c.reduce else 1.0
    frame = timeline.transfers_frame()
    arrival = np.asarray(timeline.arrival_s, dtype=float)
    order = np.argsort(arrival, kind="stable")
    dst = row_of[frame["dst"].to_numpy(dtype=np.int64)[order]]
    chunk = col_of[frame["chunk"].to_numpy(dtype=np.int64)[order]]
    share = np.asarray(timeline.held_fraction, dtype=float)[order]
    arrived = arrival[order]
    out = []
    done = 0
    for t in times:
        upto = max(done, int(np.searchsorted(arrived, t * (1 + REL_TOL) + ABS_TOL, side="right")))
        part = slice(done, upto)
        keep = dst[part] >= 0
        # in arrival order: numpy applies repeated indices in order, so a later arrival overwrites (as holdings_at)
        held[dst[part][keep], chunk[part][keep]] = share[part][keep]
        done = upto
        out.append(reduce(held))
    return out


def _blocks(n: int) -> int:
    return max(1, math.ceil(n / MAX_SIDE))


def _group_mean(matrix: np.ndarray, axis: int, group: np.ndarray) -> np.ndarray:
    """Mean over the entries of each group along ``axis`` (``group``: sorted group index per entry)."""
    starts = np.flatnonzero(np.diff(group, prepend=-1))
    if len(starts) == matrix.shape[axis]:
        return matrix
    counts = np.diff(np.append(starts, matrix.shape[axis]))
    shape = [1] * matrix.ndim
    shape[axis] = len(counts)
    return np.add.reduceat(matrix, starts, axis=axis) / counts.reshape(shape)


def _labels(names: list[str], size: int) -> list[str]:
    if size == 1:
        return names
    return [f"{names[k]}…{names[min(k + size, len(names)) - 1]}" for k in range(0, len(names), size)]


def holdings_series(timeline: Timeline, times: np.ndarray) -> tuple[list[str], list[str], list[np.ndarray], str]:
    """(row labels, column labels, matrices per time, note on grouping) of what each GPU holds."""
    gpus = timeline.topology.gpus
    chunks = timeline.collective.chunks
    rows = [timeline.topology.nodes[g].label for g in gpus]
    if len(chunks) <= MAX_COLUMNS:
        parts = timeline.collective.chunks_per_rank > 1
        cols = [f"c{c.id} from {c.source}" + (f" #{c.index}" if parts else "") for c in chunks]
        column = np.arange(len(chunks))
    else:  # one column per source: the share of that source's chunks held
        sources = sorted({c.source for c in chunks}, key=lambda s: (s is None, s))
        index = {s: k for k, s in enumerate(sources)}
        cols = [f"from {s}" for s in sources]
        column = np.array([index[c.source] for c in chunks])
    row_block, col_block = _blocks(len(rows)), _blocks(len(cols))
    order = np.argsort(column // col_block, kind="stable")
    col_group = (column // col_block)[order]
    row_group = np.arange(len(rows)) // row_block

    def reduce(held: np.ndarray) -> np.ndarray:
        return _group_mean(_group_mean(held[:, order], 1, col_group), 0, row_group)

    series = _snapshots(timeline, np.asarray(times, dtype=float), reduce)
    note = ""
    if row_block > 1 or col_block > 1:
        note = f" — averaged over blocks of {row_block} GPUs × {col_block} columns"
    return _labels(rows, row_block), _labels(cols, col_block), series, note


def holdings_matrix(timeline: Timeline, time_s: float) -> tuple[list[str], list[str], np.ndarray]:
    """(row labels, column labels, matrix) of what each GPU holds at ``time_s``."""
    rows, cols, series, _ = holdings_series(timeline, np.array([time_s]))
    return rows, cols, series[0]


def holdings_figure(timeline: Timeline, frames: int = 24) -> go.Figure:
    """The matrix at ``frames`` evenly spaced times from 0 to the finish, with a slider."""
    horizon = max(timeline.finish_time_s, timeline.last_arrival_s)
    times = np.linspace(0.0, horizon, max(2, frames))
    rows, cols, series, note = holdings_series(timeline, times)

    def heat(matrix: np.ndarray) -> go.Heatmap:
        return go.Heatmap(z=matrix, x=cols, y=rows, zmin=0, zmax=1, colorscale="Blues",
                          colorbar={"title": "held"}, hovertemplate="%{y} holds %{x}: %{z:.0%}<extra></extra>")

    fig = go.Figure(data=[heat(series[0])])
    fig.frames = [go.Frame(data=[heat(m)], name=str(k)) for k, m in enumerate(series)]
    fig.update_layout(
        title="Who holds what (rows: GPUs, columns: chunks and the GPU each comes from)" + note,
        height=max(320, min(800, 120 + 22 * len(rows))), margin={"l": 10, "r": 10, "t": 40, "b": 90},
        xaxis={"type": "category", "showticklabels": len(cols) <= 64},
        yaxis={"type": "category", "autorange": "reversed", "showticklabels": len(rows) <= 64},
        sliders=[{
            "active": 0, "currentvalue": {"prefix": "time: "}, "pad": {"t": 30},
            "steps": [{"label": format_time(float(t)), "method": "animate",
                       "args": [[str(k)], {"frame": {"duration": 0, "redraw": True}, "mode": "immediate"}]}
                      for k, t in enumerate(times)],
        }],
    )
    return fig
