"""What a replay on another engine returns (``Replay``), beside the alpha-beta judge's timeline: kept apart
from ``replay`` (which picks the engine) so that each engine can build one."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ccviz.judge.simulate import Timeline
    from ccviz.model.schedule import Schedule

Interval = tuple[float, float]


@dataclass
class Replay:
    """One schedule replayed on an engine, beside the alpha-beta judge's timeline of it."""

    engine: str
    timeline: Timeline                      # the judge's verdict on the same schedule
    finish_time_s: float | None             # postcondition met in the replay (None when it did not finish)
    complete: bool                          # every transfer delivered all its bytes
    bytes_expected: int
    bytes_delivered: int
    bytes_lost: int
    start_s: list[float | None]             # per transfer of timeline.schedule, in the replay
    end_s: list[float | None]
    link_busy: dict[tuple[int, int], list[Interval]]  # per link, merged busy intervals in the replay
    lanes: dict[tuple[int, int], int]
    wall_s: float
    settings: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    stopped: str | None = None              # "stop" or "time limit" when the replay was cut short
    last_arrival_s: float | None = None     # the replay's last byte landed (redundant sends included)
    switch_queue_peak_bytes: dict[tuple[int, int], int] = field(default_factory=dict)  # per link out of a switch

    @property
    def schedule(self) -> Schedule:
        return self.timeline.schedule

    @property
    def judge_finish_time_s(self) -> float:
        return self.timeline.finish_time_s

    @property
    def ratio(self) -> float | None:
        """Replay finish / judge finish (1.0: the alpha-beta model predicted the packet-level time)."""
        if self.finish_time_s is None or not self.judge_finish_time_s:
            return None
        return self.finish_time_s / self.judge_finish_time_s

    @property
    def horizon_s(self) -> float:
        return max(self.finish_time_s or 0.0, self.judge_finish_time_s or 0.0,
                   max((iv[-1][1] for iv in self.link_busy.values() if iv), default=0.0))

    def judge_link_busy(self) -> dict[tuple[int, int], list[Interval]]:
        return {key: [(s, e) for s, e, _ in intervals] for key, intervals in self.timeline.link_busy.items()}

    def link_utilization(self) -> dict[tuple[int, int], tuple[float, float]]:
        """Per link: busy fraction (replay, judge), each over its own finish time."""
        judge = self.timeline.link_utilization()
        horizon = self.finish_time_s or self.horizon_s
        out = {}
        for key in self.schedule.topology.links:
            busy = sum(e - s for s, e in self.link_busy.get(key, ()))
            lanes = self.lanes.get(key, 1)
            out[key] = (min(1.0, busy / (horizon * lanes)) if horizon > 0 else 0.0, judge.get(key, 0.0))
        return out

    def utilization_over_time(self, bins: int = 40) -> tuple[list[float], dict[str, dict[tuple[int, int], list[float]]]]:
        """Bin edges (seconds, over both runs) and per engine ('replay', 'judge') each used link's busy
        fraction in every bin."""
        horizon = self.horizon_s
        edges = [horizon * k / bins for k in range(bins + 1)]
        series: dict[str, dict[tuple[int, int], list[float]]] = {}
        for name, busy in (("replay", self.link_busy), ("judge", self.judge_link_busy())):
            series[name] = {key: _binned(intervals, edges, self.lanes.get(key, 1))
                            for key, intervals in busy.items() if intervals}
        return edges, series

    def transfer_times(self) -> list[dict[str, Any]]:
        """Per transfer: its chunk and link, start and end in the replay and in the judge."""
        tl = self.timeline
        return [
            {"chunk": t.chunk, "src": t.src, "dst": t.dst,
             "start_s": self.start_s[i], "end_s": self.end_s[i],
             "judge_start_s": float(tl.start_s[i]), "judge_end_s": float(tl.arrival_s[i])}
            for i, t in enumerate(self.schedule.transfers)
        ]

    def differing_links(self, top: int = 5) -> list[dict[str, Any]]:
        """The links whose busy time ends furthest apart in the two runs (where the engines disagree most)."""
        judge = self.judge_link_busy()
        rows = []
        for key in set(judge) | set(self.link_busy):
            a, b = self.link_busy.get(key, []), judge.get(key, [])
            replay_end = a[-1][1] if a else 0.0
            judge_end = max((e for _, e in b), default=0.0)
            rows.append({"src": key[0], "dst": key[1], "replay_busy_until_s": replay_end,
                         "judge_busy_until_s": judge_end, "difference_s": replay_end - judge_end,
                         "replay_busy_s": sum(e - s for s, e in a), "judge_busy_s": sum(e - s for s, e in b)})
        rows.sort(key=lambda r: -abs(r["difference_s"]))
        return rows[:top]

    def summary(self) -> dict[str, Any]:
        """The ``ccviz replay --json`` object (without the per-transfer and over-time detail)."""
        s = self.schedule
        return {
            "engine": self.engine,
            "algorithm": s.algorithm,
            "topology": s.topology.name,
            "collective": s.collective.name,
            "size_bytes": s.collective.size_bytes,
            "chunk_bytes": s.chunk_bytes,
            "transfers": len(s.transfers),
            "finish_time_s": self.finish_time_s,
            "judge_finish_time_s": self.judge_finish_time_s,
            "ratio": self.ratio,
            "last_arrival_s": self.last_arrival_s,
            "judge_last_arrival_s": self.timeline.last_arrival_s,
            "complete": self.complete,
            "bytes_expected": self.bytes_expected,
            "bytes_delivered": self.bytes_delivered,
            "bytes_lost": self.bytes_lost,
            "stopped": self.stopped,
            "switch_queue_peak_bytes": max(self.switch_queue_peak_bytes.values(), default=None),
            "wall_s": self.wall_s,
            "settings": self.settings,
            "notes": self.notes,
        }

    def to_dict(self, bins: int = 40) -> dict[str, Any]:
        util = self.link_utilization()
        edges, series = self.utilization_over_time(bins)
        return {
            **self.summary(),
            "link_utilization": [{"src": k[0], "dst": k[1], "replay": r, "judge": j} for k, (r, j) in util.items()],
            "utilization_over_time": {
                "edges_s": edges,
                "links": [{"src": k[0], "dst": k[1], "replay": series["replay"].get(k, [0.0] * bins),
                           "judge": series["judge"].get(k, [0.0] * bins)}
                          for k in sorted(set(series["replay"]) | set(series["judge"]))],
            },
            "differing_links": self.differing_links(),
            "transfer_times": self.transfer_times(),
        }


def _binned(intervals: list[Interval], edges: list[float], lanes: int) -> list[float]:
    out = [0.0] * (len(edges) - 1)
    width = edges[1] - edges[0] if len(edges) > 1 else 0.0
    if width <= 0:
        return out
    for s, e in intervals:
        k = max(0, min(len(out) - 1, int(s / width)))
        while k < len(out) and edges[k] < e:
            overlap = min(e, edges[k + 1]) - max(s, edges[k])
            if overlap > 0:
                out[k] += overlap / (width * lanes)
            k += 1
    return [min(1.0, v) for v in out]
