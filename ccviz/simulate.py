"""The independent judge: replay a schedule under the alpha-beta link model.

``simulate(schedule)`` does two jobs and returns a ``Timeline``:

1. *Time* an untimed schedule (transfers with logical steps): each transfer
   starts when its source has received every earlier-step copy of the chunk
   and its link is free, links serving transfers in step order (FCFS).
2. *Verify* the timed result: a sender holds what it sends when it starts,
   no two transfers overlap on a link's serialization, switches store
   nothing and copy only if allowed, every reduction contribution is counted
   exactly once, and every postcondition holds at the end.

No synthesizer's own estimate is trusted: finish time, link busy time and
buffer contents come from here only. Physics lives in ``Topology``
(``arrival_delay``/``occupancy``).
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from ccviz.errors import CcvizError
from ccviz.schedule import Schedule, Transfer

REL_TOL = 1e-9
ABS_TOL = 1e-13


@dataclass(frozen=True)
class Violation:
    """One broken rule: which rule, which transfer, what happened and by how much."""

    rule: str  # no_link | bad_transfer | not_held | link_overlap | too_fast | double_count | bad_reduce | missing
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
        return self.collective.size_bytes / self.finish_time_s / 1e9

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
            if t.dst in held:
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


# --------------------------------------------------------------------------- API
def simulate(schedule: Schedule, max_violations: int = 50) -> Timeline:
    """Time (if needed) and verify a schedule; the result is the only source of truth."""
    timed = schedule if schedule.is_timed else assign_times(schedule)
    return _Verifier(timed, max_violations).run()


def verify(schedule: Schedule) -> list[Violation]:
    """The violations of a schedule (empty when it is valid)."""
    return simulate(schedule).violations


def assign_times(schedule: Schedule) -> Schedule:
    """Give an untimed schedule real times: ASAP under step-ordered FCFS link contention."""
    topo = schedule.topology
    nbytes = schedule.chunk_bytes
    transfers = schedule.transfers
    if any(t.start_s is not None for t in transfers) and not schedule.is_timed:
        raise CcvizError("transfers: either every transfer has a start time or none has; mixing is ambiguous",
                         "transfers")
    costs = _link_costs(topo, nbytes)
    steps = np.fromiter((t.step for t in transfers), dtype=float, count=len(transfers))
    order = np.argsort(steps, kind="stable")
    available: dict[tuple[int, int], float] = {}  # (node, chunk) -> latest committed arrival
    link_free: dict[tuple[int, int], Any] = {}
    timed: list[Transfer | None] = [None] * len(transfers)
    pending: list[tuple[tuple[int, int], float]] = []
    current_step = None
    for i in order.tolist():
        t = transfers[i]
        if t.step != current_step:
            _commit(available, pending)
            current_step = t.step
        key = (t.src, t.dst)
        cost = costs.get(key)
        if cost is None:  # no such link: keep it untimed-at-ready so the verifier names it
            ready = available.get((t.src, t.chunk), 0.0)
            timed[i] = t._replace(start_s=ready, end_s=ready)
            continue
        occupancy, delay, lanes = cost
        ready = available.get((t.src, t.chunk), 0.0)
        if lanes == 1:
            start = max(ready, link_free.get(key, 0.0))
            link_free[key] = start + occupancy
        else:
            heap = link_free.setdefault(key, [0.0] * lanes)
            start = max(ready, heapq.heappop(heap))
            heapq.heappush(heap, start + occupancy)
        arrival = start + delay
        timed[i] = t._replace(start_s=start, end_s=arrival)
        pending.append(((t.dst, t.chunk), arrival))
    return schedule.with_transfers(timed)  # type: ignore[arg-type]


def _commit(available: dict[tuple[int, int], float], pending: list[tuple[tuple[int, int], float]]) -> None:
    """Make one step's arrivals visible to later steps (a later step waits for all of them)."""
    for key, arrival in pending:
        if arrival > available.get(key, -1.0):
            available[key] = arrival
    pending.clear()


def _link_costs(topo, nbytes: float) -> dict[tuple[int, int], tuple[float, float, int]]:
    """Per link: (serialization seconds, start-to-arrival seconds, lanes) for one chunk."""
    return {
        key: (topo.occupancy(*key, nbytes), topo.arrival_delay(*key, nbytes), link.lanes)
        for key, link in topo.links.items()
    }


def _tol(t: float) -> float:
    return ABS_TOL + REL_TOL * abs(t)


class _Verifier:
    """Replays a timed schedule event by event; one method per rule it enforces."""

    def __init__(self, schedule: Schedule, max_violations: int) -> None:
        self.schedule = schedule
        self.topo = schedule.topology
        self.coll = schedule.collective
        self.max_violations = max_violations
        self.violations: list[Violation] = []
        self.overflow = 0
        n = len(schedule.transfers)
        self.start = np.empty(n)
        self.arrival = np.empty(n)
        self.busy_until = np.empty(n)
        self.held_fraction = np.zeros(n)
        self.valid = np.ones(n, dtype=bool)

    def flag(self, rule: str, message: str, transfer: int | None = None, amount: float | None = None) -> None:
        if len(self.violations) < self.max_violations:
            self.violations.append(Violation(rule, message, transfer, amount))
        else:
            self.overflow += 1

    def run(self) -> Timeline:
        self.check_transfers_and_physics()
        self.check_link_overlaps()
        completion = self.replay_holdings()
        finish = self.check_postconditions(completion)
        if self.overflow:
            self.violations.append(Violation("more", f"... and {self.overflow} more violations not listed"))
        return Timeline(
            self.schedule, self.start, self.arrival, self.busy_until, self.held_fraction, finish, completion,
            self.violations,
        )

    # Rule: each transfer names a real chunk, a real link, a known op, and physics-consistent times.
    def check_transfers_and_physics(self) -> None:
        nbytes = self.coll.chunk_bytes
        costs = _link_costs(self.topo, nbytes)
        n_chunks = len(self.coll.chunks)
        chunks = self.coll.chunks
        for i, t in enumerate(self.schedule.transfers):
            start = float(t.start_s)
            self.start[i] = start
            cost = costs.get((t.src, t.dst))
            if not (0 <= t.chunk < n_chunks):
                self.flag("bad_transfer", f"transfer #{i}: chunk {t.chunk} does not exist (0..{n_chunks - 1})", i)
                self.valid[i] = False
            elif t.op not in ("copy", "reduce"):
                self.flag("bad_transfer", f"transfer #{i}: op {t.op!r} is not 'copy' or 'reduce'", i)
                self.valid[i] = False
            elif t.op == "reduce" and not chunks[t.chunk].reduce:
                self.flag("bad_reduce", f"transfer #{i}: reduces chunk {t.chunk}, which is not a reduction chunk", i)
                self.valid[i] = False
            if cost is None:
                self.flag("no_link", f"transfer #{i}: there is no link {t.src}->{t.dst} for chunk {t.chunk}", i)
                self.valid[i] = False
                self.arrival[i] = self.busy_until[i] = start
                continue
            occupancy, delay, _ = cost
            self.arrival[i] = start + delay
            self.busy_until[i] = start + occupancy
            if start < -_tol(0.0):
                self.flag("bad_transfer", f"transfer #{i}: starts before time 0 ({start:.6g} s)", i, -start)
            if t.end_s is not None and t.end_s < start + delay - _tol(start + delay):
                short = start + delay - t.end_s
                self.flag(
                    "too_fast",
                    f"transfer #{i}: chunk {t.chunk} on {t.src}->{t.dst} claims arrival at {t.end_s * 1e6:.6g} us "
                    f"but alpha + bytes/bandwidth puts it at {(start + delay) * 1e6:.6g} us",
                    i, short,
                )

    # Rule: transfers on one link never overlap in serialization (beyond its lanes).
    def check_link_overlaps(self) -> None:
        per_link: dict[tuple[int, int], list[int]] = defaultdict(list)
        for i, t in enumerate(self.schedule.transfers):
            if self.valid[i]:
                per_link[(t.src, t.dst)].append(i)
        for key, idx in per_link.items():
            lanes = self.topo.links[key].lanes
            idx.sort(key=lambda i: self.start[i])
            busy: list[tuple[float, int]] = []  # heap of (busy_until, transfer) for the lanes in use
            for i in idx:
                s = self.start[i]
                while busy and busy[0][0] <= s + _tol(s):
                    heapq.heappop(busy)
                if len(busy) >= lanes:
                    until, j = busy[0]
                    self.flag(
                        "link_overlap",
                        f"transfers #{j} and #{i} overlap on link {key[0]}->{key[1]} by {(until - s) * 1e6:.6g} us "
                        f"(#{i} starts at {s * 1e6:.6g} us, the link is busy until {until * 1e6:.6g} us)",
                        i, until - s,
                    )
                    heapq.heappop(busy)
                heapq.heappush(busy, (self.busy_until[i], i))

    # Rule: a sender holds what it sends; switches store nothing and copy only if allowed;
    # reductions count every contribution exactly once.
    def replay_holdings(self) -> dict[tuple[int, int], float]:
        transfers = self.schedule.transfers
        chunks = self.coll.chunks
        nodes = self.topo.nodes
        # Each chunk's value is a bitmask of the contributions it carries (bit k = k-th pre rank).
        bit_of = [{r: k for k, r in enumerate(sorted(c.pre))} for c in chunks]
        full = [(1 << len(c.pre)) - 1 if c.reduce else 1 for c in chunks]
        n_contrib = [len(c.pre) if c.reduce else 1 for c in chunks]
        held: dict[tuple[int, int], int] = {}
        completion: dict[tuple[int, int], float] = {}
        for c in chunks:
            for r in c.pre:
                held[(r, c.id)] = (1 << bit_of[c.id][r]) if c.reduce else 1
                if r in c.post and held[(r, c.id)] == full[c.id]:
                    completion[(c.id, r)] = 0.0
        tokens: dict[tuple[int, int], list[list[Any]]] = defaultdict(list)  # switch buffers: [value, used]
        sent_value = [0] * len(transfers)
        valid_idx = np.flatnonzero(self.valid)
        # Departures in time order; at equal times switches forward first, so that a zero-delay hop out
        # of a switch (switch_hop="free") lands before a GPU that starts at that instant needs it.
        from_switch = np.array([nodes[t.src].kind == "switch" for t in transfers], dtype=bool)
        departures = valid_idx[np.lexsort((~from_switch[valid_idx], self.start[valid_idx]))].tolist()
        arrivals = valid_idx[np.argsort(self.arrival[valid_idx], kind="stable")].tolist()
        departed = np.zeros(len(transfers), dtype=bool)
        arrival_times = self.arrival
        start_times = self.start
        n_arr = len(arrivals)
        a = 0
        for i in departures:
            s = start_times[i]
            limit = s + _tol(s)
            while a < n_arr and arrival_times[arrivals[a]] <= limit and departed[arrivals[a]]:
                self._arrive(arrivals[a], transfers, chunks, nodes, held, tokens, sent_value, full, n_contrib,
                             completion)
                a += 1
            departed[i] = True
            t = transfers[i]
            if nodes[t.src].kind == "switch":
                sent_value[i] = self._take_from_switch(i, t, tokens)
            else:
                value = held.get((t.src, t.chunk), 0)
                if not value:
                    self._flag_not_held(i, t)
                sent_value[i] = value
        while a < n_arr:
            self._arrive(arrivals[a], transfers, chunks, nodes, held, tokens, sent_value, full, n_contrib, completion)
            a += 1
        self.final_held = held
        self.full = full
        return completion

    def _take_from_switch(self, i: int, t: Transfer, tokens: dict) -> int:
        """A switch forwards an arrival: once if it cannot copy, any number of times if it can."""
        queue = tokens.get((t.src, t.chunk))
        if not queue:
            self._flag_not_held(i, t)
            return 0
        if self.topo.nodes[t.src].copy:
            return queue[-1][0]
        for token in queue:
            if not token[1]:
                token[1] = True
                return token[0]
        self.flag(
            "switch_copy",
            f"transfer #{i}: switch {t.src} cannot copy, and every arrival of chunk {t.chunk} at it "
            "has already been forwarded",
            i,
        )
        return 0

    def _flag_not_held(self, i: int, t: Transfer) -> None:
        later = [
            self.arrival[j] for j, u in enumerate(self.schedule.transfers)
            if u.dst == t.src and u.chunk == t.chunk and self.valid[j]
        ] if len(self.violations) < self.max_violations else []
        when = f"; it arrives there at {min(later) * 1e6:.6g} us" if later else "; it never arrives there"
        amount = (min(later) - self.start[i]) if later else None
        self.flag(
            "not_held",
            f"transfer #{i}: node {t.src} sends chunk {t.chunk} to {t.dst} at {self.start[i] * 1e6:.6g} us "
            f"before holding it{when}",
            i, amount,
        )

    def _arrive(self, j, transfers, chunks, nodes, held, tokens, sent_value, full, n_contrib, completion) -> None:
        t = transfers[j]
        value = sent_value[j]
        if not value:
            return
        if nodes[t.dst].kind == "switch":
            tokens[(t.dst, t.chunk)].append([value, False])
            self.held_fraction[j] = value.bit_count() / n_contrib[t.chunk]
            return
        key = (t.dst, t.chunk)
        before = held.get(key, 0)
        if t.op == "reduce":
            overlap = before & value
            if overlap:
                c = chunks[t.chunk]
                ranks = [r for k, r in enumerate(sorted(c.pre)) if overlap >> k & 1]
                self.flag(
                    "double_count",
                    f"transfer #{j}: reduces chunk {t.chunk} into node {t.dst}, which already includes the "
                    f"contribution(s) of rank(s) {ranks}; each contribution must be combined exactly once",
                    j,
                )
            after = before | value
        else:
            after = value
        held[key] = after
        self.held_fraction[j] = after.bit_count() / n_contrib[t.chunk]
        c = chunks[t.chunk]
        if t.dst in c.post:
            if after == full[t.chunk]:
                if before != full[t.chunk] or (t.chunk, t.dst) not in completion:
                    completion[(t.chunk, t.dst)] = float(self.arrival[j])
            else:
                completion.pop((t.chunk, t.dst), None)

    # Rule: at the end, every post rank holds the complete chunk.
    def check_postconditions(self, completion: dict[tuple[int, int], float]) -> float:
        missing = 0
        for c in self.coll.chunks:
            for r in sorted(c.post):
                if (c.id, r) not in completion:
                    missing += 1
                    have = self.final_held.get((r, c.id), 0)
                    what = (
                        f"holds {have.bit_count()} of {len(c.pre)} contributions" if c.reduce and have
                        else "never receives it"
                    )
                    self.flag("missing", f"chunk {c.id} (from rank {c.source}) must reach rank {r}, which {what}")
        if completion and not missing:
            return max(completion.values())
        return float(self.arrival.max()) if len(self.arrival) else 0.0
