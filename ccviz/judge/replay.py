"""A second opinion on a schedule: its replay on another engine, set beside the alpha-beta judge's verdict.

``replay(schedule, engine="ns3")`` runs the schedule's transfers on a packet-level simulator and returns a
``Replay``: the replay's finish time, the judge's (``judge_finish_time_s``) and their ``ratio``, every
transfer's start and end in both, every link's busy time in both, the bytes delivered and lost. The
judge stays the only verdict on validity; a replay says how the same schedule fares under queues,
packets and switch forwarding. Engines: ``ENGINES`` (ns-3 needs the ``ns3`` extra).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from threading import Event
from typing import TYPE_CHECKING, Any

from ccviz.errors import CcvizError
from ccviz.judge.replay_result import Replay

if TYPE_CHECKING:
    from ccviz.judge.simulate import Timeline
    from ccviz.model.progress import Progress
    from ccviz.model.schedule import Schedule

ENGINES = ("ns3",)


def replay(schedule: Schedule | Timeline | Any, engine: str = "ns3", *, mtu: int | None = None,
           switch_queue_frames: int | None = None,
           progress: Callable[[Progress], None] | None = None, stop: Event | None = None,
           time_limit_s: float | None = None) -> Replay:
    """Replay ``schedule`` (or a Timeline's, or a ``ccviz.run`` result's) on ``engine`` beside the alpha-beta
    judge (see the module docstring).

    ``mtu``: bytes per frame (ns-3's point-to-point limit is 65535); ``switch_queue_frames``: frames a
    switch port queues before it drops (None: never drops, a lossless fabric); ``stop`` / ``time_limit_s`` cut a long replay short
    (the result says so and reports what was delivered).
    """
    schedule = getattr(schedule, "timeline", schedule)  # a RunResult: its judged schedule
    schedule = getattr(schedule, "schedule", schedule)  # a Timeline: its schedule
    if engine not in ENGINES:
        raise CcvizError(f"engine: {engine!r} is not one of {', '.join(ENGINES)}", "engine")
    if time_limit_s is not None and not (time_limit_s > 0 and math.isfinite(time_limit_s)):
        raise CcvizError(f"time_limit_s: must be a positive number of seconds, got {time_limit_s}", "time_limit_s")
    from ccviz.judge import replay_ns3

    return replay_ns3.replay_ns3(schedule, mtu=mtu, switch_queue_frames=switch_queue_frames,
                                 progress=progress, stop=stop, time_limit_s=time_limit_s)


def replay_lines(result: Replay) -> list[str]:
    """The replay in words (``ccviz replay`` without ``--json``)."""
    from ccviz.model.units import format_size, format_time

    s = result.summary()
    finish = format_time(s["finish_time_s"]) if s["finish_time_s"] is not None else "did not finish"
    ratio = f"{s['ratio']:.4f}" if s["ratio"] is not None else "n/a"
    lines = [
        f"{s['algorithm']} {s['collective']} on {s['topology']}, size {format_size(s['size_bytes'])}, "
        f"{s['transfers']} transfers, replayed on {s['engine']} (mtu {s['settings']['mtu']} B)",
        f"  {s['engine']} finish   {finish}",
        f"  alpha-beta   {format_time(s['judge_finish_time_s'])}  (the judge)",
        f"  ratio        {ratio}",
        f"  bytes        {s['bytes_delivered']} of {s['bytes_expected']} delivered, {s['bytes_lost']} lost"
        + ("" if s["complete"] else "  INCOMPLETE"),
        f"  wall         {s['wall_s']:.2f} s"
        + (f", deepest switch queue {format_size(s['switch_queue_peak_bytes'])}" if s["switch_queue_peak_bytes"] else ""),
    ]
    for row in result.differing_links(3):
        lines.append(f"  link {row['src']}->{row['dst']}: busy until {format_time(row['replay_busy_until_s'])} "
                     f"({s['engine']}) vs {format_time(row['judge_busy_until_s'])} (judge)")
    lines += [f"  note: {n}" for n in s["notes"]]
    return lines
