"""Any schedule told in dependency steps, drawn as a figure the browser plays and steps by itself.

Time windows cut a schedule where the clock says, so a textbook algorithm
shows up as a hundred slivers. Steps cut it where the data says: a transfer
belongs to the step after the latest transfer that brought its chunk to its
sender (a hop out of a switch stays in the step of the hop into it). A
textbook schedule already labels its rounds (``Schedule.rounds``), and those
are used as they are, so Playback and Learn count the same steps. In each
frame a link is coloured by what it does in that step (copies, reduces, or
nothing; adding into a reducing switch's sum is reducing, and the switch's
sum fills), GPUs by how much of what they need they hold once the step's
transfers have landed (the simulator's completion times). Play, the slider
and the frames live in the plotly figure: stepping needs no server.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go

from ccviz.judge.simulate import Timeline
from ccviz.model.units import format_time
from ccviz.viz.animation import (
    BIG_FABRIC_FRAMES,
    CHUNKS_UP_TO,
    FrameWindow,
    _Scene,
    _static_traces,
    add_player,
    in_switch_sums_trace,
)
from ccviz.viz.layout import Position
from ccviz.viz.topology_fig import segment_xy, style_network_layout

MAX_STEPS = 120  # beyond this many dependency steps, neighbouring steps share a frame
OP_COLORS = {"idle": "#D5D8DC", "copy": "#1F77B4", "reduce": "#D62728"}
OP_NAMES = {"idle": "idle in this step", "copy": "copies in this step", "reduce": "reduces in this step"}
EPS = 1e-12


@dataclass(frozen=True)
class Step:
    """One step: the transfers it starts, its label, and when its first starts and its last lands."""

    number: int  # 1-based
    label: str
    transfers: tuple[int, ...]
    start_s: float
    end_s: float


def dependency_rounds(timeline: Timeline) -> list[int]:
    """Per transfer, its step (1-based): the schedule's own rounds, else one more than the step of the
    latest transfer that brought the same chunk to its sender before it started."""
    schedule = timeline.schedule
    if schedule.rounds and len(schedule.rounds) == len(schedule.transfers):
        return [int(r) for r in schedule.rounds]
    transfers = schedule.transfers
    starts, arrivals = np.asarray(timeline.start_s, float), np.asarray(timeline.arrival_s, float)
    order = sorted(range(len(transfers)), key=lambda i: (starts[i], arrivals[i], i))
    scale = max(float(arrivals.max()) if len(arrivals) else 0.0, 1e-15)
    landed: dict[tuple[int, int], list[tuple[float, int]]] = {}  # (node, chunk) -> [(arrival, step)]
    step = [1] * len(transfers)
    for i in order:
        t = transfers[i]
        before = [s for at, s in landed.get((t.src, t.chunk), ()) if at <= starts[i] + EPS * scale]
        if timeline.topology.is_switch(t.src):
            step[i] = max(before, default=1)  # a switch forwards within the step that reached it
        else:
            step[i] = 1 + max(before, default=0)
        landed.setdefault((t.dst, t.chunk), []).append((float(arrivals[i]), step[i]))
    return step


def schedule_steps(timeline: Timeline, max_steps: int = MAX_STEPS) -> list[Step]:
    """The schedule's steps in order (empty steps dropped), at most ``max_steps`` (neighbours merged)."""
    rounds = dependency_rounds(timeline)
    if not rounds:
        return []
    labels = timeline.schedule.round_labels if timeline.schedule.rounds else []
    members: dict[int, list[int]] = {}
    for i, r in enumerate(rounds):
        members.setdefault(r, []).append(i)
    numbers = sorted(members)
    per = -(-len(numbers) // max_steps)  # ceil: how many steps share a frame
    groups = [numbers[k:k + per] for k in range(0, len(numbers), per)]
    starts, arrivals = np.asarray(timeline.start_s, float), np.asarray(timeline.arrival_s, float)
    steps = []
    for k, group in enumerate(groups, start=1):
        indices = sorted(i for r in group for i in members[r])
        if len(group) == 1 and 0 < group[0] <= len(labels) and labels[group[0] - 1]:
            label = labels[group[0] - 1]
        elif len(group) == 1:
            label = f"{len(indices)} transfer{'s' if len(indices) != 1 else ''}"
        else:
            label = f"dependency steps {group[0]}–{group[-1]}"
        steps.append(Step(k, label, tuple(indices), float(starts[indices].min()), float(arrivals[indices].max())))
    return steps


def _wrapped(text: str, width: int) -> str:
    """The step's label whole, on as many lines as it needs (cut at 110 characters it ended in '…')."""
    import textwrap

    return "<br>".join(textwrap.wrap(text, width)) or text


def _step_windows(timeline: Timeline, steps: list[Step]) -> list[FrameWindow]:
    """Frame 0 is the start (nothing sent); frame k is step k."""
    windows = [FrameWindow(0, 0.0, 0.0, "start", ())]
    windows += [FrameWindow(s.number, s.start_s, s.end_s, s.label, s.transfers) for s in steps]
    return windows


def _op_link_traces(scene: _Scene, window: FrameWindow) -> list[dict]:
    """Three traces (idle, copy, reduce): each link in the colour of what it does in this step."""
    transfers = scene.timeline.schedule.transfers
    doing: dict[tuple[int, int], str] = {}
    for i in window.transfers:
        t = transfers[i]
        key = (t.src, t.dst)
        # a contribution into a reducing switch's sum (op "combine") reduces too: it is added, not copied
        doing[key] = "reduce" if t.op in ("reduce", "combine") or doing.get(key) == "reduce" else "copy"
    drawn: dict[str, list] = {"idle": [], "copy": [], "reduce": []}
    seen_cables: set[tuple[int, int]] = set()
    for key in sorted(scene.topology.links):
        op = doing.get(key, "idle")
        cable = (min(key), max(key))
        if op == "idle" and (cable in seen_cables or doing.get((key[1], key[0]))):
            continue  # a busy direction of the cable is drawn; its idle twin would hide it
        seen_cables.add(cable)
        drawn[op].append(scene.segments[key])
    traces = []
    for op, segments in drawn.items():
        xs, ys = segment_xy(segments)
        xs, ys = (np.array(v or [None], dtype=float) for v in (xs, ys))
        traces.append({"type": "scatter", "x": xs, "y": ys, "mode": "lines", "name": OP_NAMES[op],
                       "hoverinfo": "skip", "legendgroup": "ops",
                       "line": {"color": OP_COLORS[op], "width": 2 if op == "idle" else 5}})
    return traces


def _frame_traces(scene: _Scene, window: FrameWindow) -> list[dict]:
    from ccviz.viz.topology_fig import node_traces

    fills, hover = scene.gpu_fill(window)
    gpus = node_traces(scene.topology, scene.positions, gpu_colors=fills, gpu_hover=hover)[0]
    sums = ([in_switch_sums_trace(scene.timeline, scene.positions, window, by_step=True)]
            if scene.topology.reducing_switches else [])  # where switches add (NVLS, SHARP): their sums fill
    return [*_op_link_traces(scene, window), scene.chunk_trace(window), gpus, *sums]


def steps_figure(timeline: Timeline, positions: dict[int, Position] | None = None, frame_ms: int = 1000,
                 max_steps: int = MAX_STEPS) -> go.Figure:
    """The schedule step by step: frames with ▶ Play, ❚❚ Pause and a slider, starting at the first frame.

    Above ``CHUNKS_UP_TO`` GPUs every frame redraws every link, so neighbouring steps share one of at
    most ``BIG_FABRIC_FRAMES`` frames (as the animation in time does).
    """
    if timeline.topology.n_gpus > CHUNKS_UP_TO:
        max_steps = min(max_steps, BIG_FABRIC_FRAMES)
    steps = schedule_steps(timeline, max_steps)
    windows = _step_windows(timeline, steps)
    scene = _Scene(timeline, windows, positions)
    first = _frame_traces(scene, windows[0])
    changing = list(range(len(first)))
    n = len(steps)
    total = len({*dependency_rounds(timeline)})
    counted = f"{n} step{'s' if n != 1 else ''}" if n == total else f"{total} steps in {n} frames"
    head = (f"{timeline.schedule.algorithm} · {timeline.collective.name} on {timeline.topology.name}: "
            f"{counted} · finish {format_time(timeline.finish_time_s)}")

    def title(w: FrameWindow) -> dict:
        what = ("before step 1: every GPU holds only its own data" if w.index == 0
                else _wrapped(f"{'step' if n == total else 'frame'} {w.index} of {n}: {w.label}", 100))
        return {"text": f"{head}<br><span style='font-size:13px'>{what}</span>", "font": {"size": 14}}

    frames = [go.Frame(data=_frame_traces(scene, w), traces=changing, name=str(w.index),
                       layout={"title": title(w)}, _validate=False)
              for w in windows]
    fig = go.Figure(data=first + _static_traces(scene), frames=frames, _validate=False)
    add_player(fig, [(str(w.index), "start" if w.index == 0 else f"{w.index}/{n}") for w in windows], frame_ms,
               y=-0.02, slider_x=0.2, prefix="step ")
    style_network_layout(fig, head, height=620)
    lines = max(_wrapped(f"frame {w.index} of {n}: {w.label}", 100).count("<br>") for w in windows) + 1
    fig.update_layout(title=title(windows[0]), margin={"l": 10, "r": 10, "t": 46 + 16 * lines, "b": 90},
                      legend={"y": 1.0, "x": 1.0, "xanchor": "left", "orientation": "v"})
    return fig
