"""One sentence per step of a schedule: what moves where, and what it achieves.

Used by the Learn page. It reads the animation's frames and the simulator's
holdings, so the story always matches the pictures and the verdict.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from ccviz.simulate import Timeline
from ccviz.units import format_time
from ccviz.viz.animation import FrameWindow, frame_windows


@dataclass(frozen=True)
class StepStory:
    window: FrameWindow
    sentence: str
    delivered: int  # (chunk, rank) demands complete by the end of the step
    demands: int


def narrate(timeline: Timeline, windows: list[FrameWindow] | None = None) -> list[StepStory]:
    """A plain-language sentence per frame of the schedule."""
    windows = windows or frame_windows(timeline)
    demands = list(timeline.collective.demands())
    stories = []
    previous = 0
    for w in windows:
        delivered = sum(1 for key in demands if timeline.completion_s.get(key, float("inf")) <= w.end_s * (1 + 1e-9))
        stories.append(StepStory(w, _sentence(timeline, w, delivered - previous, delivered, len(demands)),
                                 delivered, len(demands)))
        previous = delivered
    return stories


def _sentence(timeline: Timeline, w: FrameWindow, newly: int, delivered: int, total: int) -> str:
    transfers = [timeline.schedule.transfers[i] for i in w.transfers]
    chunks = timeline.collective.chunks
    if not transfers:
        what = "No new sends start; chunks already on the wire are still arriving"
    else:
        senders = Counter(t.src for t in transfers)
        ops = Counter(t.op for t in transfers)
        verb = "adds its partial of" if ops.get("reduce", 0) >= ops.get("copy", 0) else "forwards"
        examples = ", ".join(
            f"{t.src}→{t.dst} {('reduces' if t.op == 'reduce' else 'copies')} chunk {t.chunk} "
            f"(from {chunks[t.chunk].source})"
            for t in transfers[:3]
        )
        more = f" and {len(transfers) - 3} more" if len(transfers) > 3 else ""
        who = "every sender" if len(senders) == len(transfers) else f"{len(senders)} senders"
        what = (f"{len(transfers)} transfers start on {len({(t.src, t.dst) for t in transfers})} links — "
                f"{who} {verb} a chunk: {examples}{more}")
    why = (
        f"{newly} more chunk deliveries complete ({delivered}/{total} done)" if newly
        else f"these sends prepare later deliveries ({delivered}/{total} done)"
    )
    return f"{format_time(w.start_s)}–{format_time(w.end_s)}: {what}. So {why}."
