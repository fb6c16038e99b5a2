"""What the judge returns: a ``Timeline`` (times, link busy intervals, holdings, verdict) and its
``Violation``s. Both judges (the reference replay in ``simulate`` and the array fast path in
``simulate_fast``) build it, so it lives below them both."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from ccviz.errors import CcvizError
from ccviz.model.physics import ABS_TOL, REL_TOL
from ccviz.model.schedule import RELAY, Schedule
from ccviz.model.units import BYTES_PER_GB


@dataclass(frozen=True)
class Violation:
    """One broken rule: which rule, which transfer, what happened and by how much."""

    rule: str  # no_link | bad_transfer | not_held | link_overlap | too_fast | double_count | bad_reduce |
    #           missing | switch_copy | switch_hold | partial_sum | unforwarded_sum (ccviz.judge.in_network)
    message: str
    transfer: int | None = None
    amount_s: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"rule": self.rule, "transfer": self.transfer, "amount_s": self.amount_s, "message": self.message}


@dataclass
class Timeline:
    """What really happens when a schedule runs: times, link busy intervals, holdings, verdict."""

    schedule: Schedule  # timed (start_s/end_s filled in by the simulator)
    start_s: np.ndarray
    arrival_s: np.ndarray
    busy_until_s: np.ndarray  # start + serialization: when the link is free again
    held_fraction: np.ndarray  # per transfer: share of the chunk's contributions at dst after arrival
    finish_time_s: float
    completion_s: dict[tuple[int, int], float]  # (chunk, rank) -> when its postcondition first held
    violations: list[Violation] = field(default_factory=list)
    # The fabric as declared when the judge timed the schedule on its hardware model's effective fabric
    # (``schedule.topology``): what an export writes so the model, and its per-operation latency, survive.
    declared_topology: Any = None

    @property
    def verified(self) -> bool:
        return not self.violations

    @property
    def topology(self):
        return self.schedule.topology

    @property
    def collective(self):
        return self.schedule.collective

    @property
    def last_arrival_s(self) -> float:
        return float(self.arrival_s.max()) if len(self.arrival_s) else 0.0

    @property
    def algbw_GBps(self) -> float | None:
        if self.finish_time_s <= 0:
            return None
        return self.collective.size_bytes / self.finish_time_s / BYTES_PER_GB

    @property
    def busbw_GBps(self) -> float | None:
        algbw = self.algbw_GBps
        return None if algbw is None else algbw * self.collective.busbw_factor

    @cached_property
    def link_busy(self) -> dict[tuple[int, int], list[tuple[float, float, int]]]:
        """Per link, its busy intervals ``(start, end, transfer index)`` in time order."""
        busy: dict[tuple[int, int], list[tuple[float, float, int]]] = defaultdict(list)
        for i, t in enumerate(self.schedule.transfers):
            busy[(t.src, t.dst)].append((float(self.start_s[i]), float(self.busy_until_s[i]), i))
        for intervals in busy.values():
            intervals.sort()
        return dict(busy)

    def link_utilization(self, horizon_s: float | None = None) -> dict[tuple[int, int], float]:
        """Busy fraction of every link over [0, horizon] (default: the finish time)."""
        horizon = horizon_s or self.finish_time_s or self.last_arrival_s
        util = {key: 0.0 for key in self.topology.links}
        if horizon <= 0:
            return util
        for key, intervals in self.link_busy.items():
            lanes = self.topology.links[key].lanes if key in self.topology.links else 1
            util[key] = min(1.0, sum(e - s for s, e, _ in intervals) / (horizon * lanes))
        return util

    def transfers_frame(self):
        """A pandas DataFrame of every transfer with its simulated times (for tables and figures)."""
        import pandas as pd

        tr = self.schedule.transfers
        chunks = self.collective.chunks
        return pd.DataFrame({
            "chunk": [t.chunk for t in tr],
            "source": [chunks[t.chunk].source if 0 <= t.chunk < len(chunks) else None for t in tr],
            "src": [t.src for t in tr],
            "dst": [t.dst for t in tr],
            "op": [t.op for t in tr],
            "step": [t.step for t in tr],
            "start_s": self.start_s,
            "arrival_s": self.arrival_s,
            "busy_until_s": self.busy_until_s,
            "held_fraction": self.held_fraction,
        })

    def holdings_at(self, time_s: float) -> dict[int, dict[int, float]]:
        """Per GPU, chunk -> share of the chunk it holds at ``time_s`` (1.0 = complete)."""
        coll = self.collective
        held: dict[int, dict[int, float]] = {r: {} for r in self.topology.gpus}
        for c in coll.chunks:
            for r in c.pre:
                held.setdefault(r, {})[c.id] = (1.0 / len(c.pre)) if c.reduce else 1.0
        order = np.argsort(self.arrival_s, kind="stable")
        tr = self.schedule.transfers
        for i in order:
            if self.arrival_s[i] > time_s * (1 + REL_TOL) + ABS_TOL:
                break
            t = tr[i]
            if t.dst in held and t.op != RELAY:  # a parked value in transit is not the receiver's
                held[t.dst][t.chunk] = float(self.held_fraction[i])
        return held

    def summary(self) -> dict[str, Any]:
        return {
            "finish_time_s": self.finish_time_s,
            "algbw_GBps": self.algbw_GBps,
            "busbw_GBps": self.busbw_GBps,
            "verified": self.verified,
            "violations": [v.to_dict() for v in self.violations],
        }


def epoch_release(schedule: Schedule) -> float | None:
    """The epoch length when transfers may not start before their epoch (``release='epoch'``)."""
    if schedule.release != "epoch":
        return None
    if not schedule.epoch_s or schedule.epoch_s <= 0:
        raise CcvizError("release: an epoch-released schedule needs a positive epoch_s", "release")
    return schedule.epoch_s
