"""One sentence per step of a schedule: what moves where, and why it helps.

Used by the Learn page. It reads the animation's frames, the simulator's
link busy times and completion times, so the story always matches the
pictures and the verdict.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ccviz.simulate import Timeline
from ccviz.units import format_time
from ccviz.viz.animation import FrameWindow, frame_windows
from ccviz.viz.utilization import busy_fraction


@dataclass(frozen=True)
class StepStory:
    window: FrameWindow
    sentence: str
    delivered: int  # (chunk, rank) demands complete by the end of the step
    demands: int


def narrate(timeline: Timeline, windows: list[FrameWindow] | None = None) -> list[StepStory]:
    """A plain-language account of each frame of the schedule."""
    windows = windows or frame_windows(timeline)
    demands = list(timeline.collective.demands())
    completion = np.sort([timeline.completion_s.get(key, np.inf) for key in demands])
    edges = np.array([w.start_s for w in windows] + [windows[-1].end_s])
    _, busy = busy_fraction(timeline, edges)
    n_links = max(1, busy.shape[0])
    stories = []
    previous = 0
    for k, w in enumerate(windows):
        delivered = int(np.searchsorted(completion, w.end_s * (1 + 1e-9) + 1e-15, side="right"))
        active = int((busy[:, k] > 1e-9).sum()) if busy.size else 0
        why = _why(delivered - previous, delivered, len(demands), active, n_links)
        sentence = f"**{format_time(w.start_s)} – {format_time(w.end_s)}.** {_what(timeline, w)} {why}"
        stories.append(StepStory(w, sentence, delivered, len(demands)))
        previous = delivered
    return stories


def _what(timeline: Timeline, w: FrameWindow) -> str:
    """Who sends what: own data, data received earlier (relaying), or partial sums (reducing)."""
    transfers = [timeline.schedule.transfers[i] for i in w.transfers]
    if not transfers:
        return "No new sends start; chunks already on the wire keep arriving."
    chunks = timeline.collective.chunks
    topo = timeline.topology
    reduce = sum(1 for t in transfers if t.op == "reduce")
    switched = sum(1 for t in transfers if topo.is_switch(t.src) or topo.is_switch(t.dst))
    own = sum(1 for t in transfers if t.op == "copy" and not chunks[t.chunk].reduce and t.src in chunks[t.chunk].pre)
    result = sum(1 for t in transfers if t.op == "copy" and chunks[t.chunk].reduce)
    relay = len(transfers) - reduce - own - result
    parts = []
    if own:
        parts.append(f"{own} send{'s' if own == 1 else ''} a GPU's own data")
    if result:
        parts.append(f"{result} pass{'es' if result == 1 else ''} on a reduced result")
    if relay:
        parts.append(f"{relay} forward{'s' if relay == 1 else ''} data received earlier")
    if reduce:
        parts.append(f"{reduce} add{'s' if reduce == 1 else ''} a partial sum into the receiver's")
    examples = "; ".join(
        f"{t.src}→{t.dst}: chunk {t.chunk} (from {chunks[t.chunk].source}{', reduce' if t.op == 'reduce' else ''})"
        for t in transfers[:3]
    ) + (f"; … {len(transfers) - 3} more" if len(transfers) > 3 else "")
    via = f", {switched} of them through a switch" if switched else ""
    return (f"{len(transfers)} transfer{'s' if len(transfers) != 1 else ''} start on "
            f"{len({(t.src, t.dst) for t in transfers})} links{via}: {', '.join(parts)} ({examples}).")


def _why(newly: int, delivered: int, total: int, active: int, n_links: int) -> str:
    use = f"{active} of {n_links} links are busy in this step"
    if delivered == total and newly:
        return f"Why: this completes the collective — every GPU now holds what it needs ({use})."
    if newly:
        return (f"Why: {newly} more chunk deliveries complete ({delivered}/{total} done); "
                f"{use}, and the more links work at once, the sooner it ends.")
    return f"Why: these sends set up later deliveries ({delivered}/{total} done so far); {use}."
