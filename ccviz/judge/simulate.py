"""The independent judge: replay a schedule under the alpha-beta link model.

``simulate(schedule)`` does two jobs and returns a ``Timeline``:

1. *Time* an untimed schedule (transfers with logical steps): each transfer
   starts when its source has received every earlier-step copy of the chunk
   and its link is free, links serving transfers in step order (FCFS).
2. *Verify* the timed result: a sender holds what it sends when it starts,
   no two transfers overlap on a link's serialization, switches store
   nothing (a switch forwards each arrival when it arrives, unless the node
   declares a buffer) and copy only if allowed, every reduction contribution is
   counted exactly once, and every postcondition holds at the end.

No synthesizer's own estimate is trusted: finish time, link busy time and
buffer contents come from here only. The link rule lives in ``ccviz.model.physics``.
"""

from __future__ import annotations

import bisect
import dataclasses
import heapq
import math
from collections import defaultdict
from itertools import repeat
from operator import itemgetter
from typing import Any

import numpy as np

from ccviz.errors import CcvizError
from ccviz.judge import simulate_fast
from ccviz.judge.in_network import InNetworkSums
from ccviz.judge.timeline import Timeline, Violation, epoch_release
from ccviz.model import link_model
from ccviz.model.physics import ABS_TOL, EPOCH_EPS, REL_TOL, LaneBook, link_costs, tol
from ccviz.model.schedule import COMBINE, RELAY, JudgedTransfers, Schedule, Transfer, gc_paused
from ccviz.model.units import BYTES_PER_GB, us_text
from ccviz.model.validate import MIN_CHUNK_BYTES


# --------------------------------------------------------------------------- API
def simulate(schedule: Schedule, max_violations: int = 50) -> Timeline:
    """Time (if needed) and verify a schedule; the result is the only source of truth.

    Plain schedules take the array fast path (``ccviz.judge.simulate_fast``); whatever it does not model,
    and every schedule with a violation, is replayed by the reference below, which names each fault.
    """
    if not isinstance(schedule, Schedule):
        raise CcvizError(f"schedule: expected a ccviz Schedule, got {type(schedule).__name__}", "schedule")
    check_sizes(schedule)
    check_chunk_ids(schedule)
    declared = schedule.topology
    schedule, latency_s = on_declared_hardware(schedule)
    timed = schedule if schedule.is_timed else assign_times(schedule)
    check_time_resolution(timed)
    timeline = simulate_fast.verify(timed) or _Verifier(timed, max_violations).run()
    if schedule.topology is declared:
        return timeline
    return dataclasses.replace(timeline, finish_time_s=timeline.finish_time_s + latency_s, declared_topology=declared)


def on_declared_hardware(schedule: Schedule) -> tuple[Schedule, float]:
    """A schedule on a fabric that declares a hardware link model (``ccviz.model.link_model``) is judged on the
    effective fabric for its protocol, in the synthesizer's order (its own times where it was planned on that
    fabric: ``options['planned_on'] == 'hardware'``), plus the operation's fixed latency (launch and the
    algorithm's base latency, added to the finish). On textbook fabrics: the schedule itself and 0."""
    model = link_model.declared(schedule.topology)
    if model is None:
        return schedule, 0.0
    protocol = link_model.protocol_of(schedule)
    transfers = list(schedule.transfers)
    if schedule.is_timed and (schedule.options or {}).get("planned_on") != "hardware":
        transfers = link_model.untimed(transfers)  # planned on spec rates: retimed in its own order
    channels = (schedule.options or {}).get("channels")
    effective = link_model.effective_topology(schedule.topology, protocol, channels if isinstance(channels, int)
                                              and not isinstance(channels, bool) and channels > 0 else None,
                                              link_model.chunk_share_of(schedule, model))
    algorithm = str((schedule.options or {}).get("nccl_algo") or "ring")
    judged = dataclasses.replace(schedule, topology=effective, transfers=transfers, release="asap")
    return judged, model.operation_latency_s(algorithm, protocol)


def reference_simulate(schedule: Schedule, max_violations: int = 50) -> Timeline:
    """The straightforward judge (event replay), kept as the fast path's reference."""
    timed = schedule if schedule.is_timed else reference_assign_times(schedule)
    return _Verifier(timed, max_violations).run()


def check_sizes(schedule: Schedule) -> None:
    """A chunk of zero, negative or non-finite bytes would make any schedule look faster than physics."""
    cb = schedule.collective.chunk_bytes
    if isinstance(cb, bool) or not isinstance(cb, (int, float)) or not (0 < cb < math.inf):
        raise CcvizError(f"collective.chunk_bytes: must be a positive finite number of bytes, got {cb!r}",
                         "collective.chunk_bytes")
    if cb < MIN_CHUNK_BYTES:  # 1e-300 B chunks cost alpha only: any schedule would look as fast as latency
        raise CcvizError(f"collective.chunk_bytes: {cb:.3g} B; a chunk must be at least {MIN_CHUNK_BYTES:g} byte",
                         "collective.chunk_bytes")


_INTEGER_TYPES = (int, np.integer)
RESOLUTION_SHARE = 0.1  # the judge's slack may be at most this share of the shortest link occupancy


def check_chunk_ids(schedule: Schedule) -> None:
    """A chunk id is a whole number: 0.5 would be read as chunk 0 and could complete a postcondition."""
    transfers = schedule.transfers
    if getattr(transfers, "columns", None) is not None:
        return  # the simulator's own columns: integer arrays already
    ids = list(map(itemgetter(0), transfers))
    if all(type(c) is int for c in ids):
        return
    for i, c in enumerate(ids):
        if isinstance(c, bool) or not isinstance(c, _INTEGER_TYPES):
            raise CcvizError(f"transfers[{i}].chunk: a chunk id is a whole number, got {c!r}", "chunk")


def check_time_resolution(schedule: Schedule) -> None:
    """Refuse times so late that the judge's tolerance (``physics.tol``, which grows with |t|) would swallow a
    transfer: a schedule moved to t = 1e12 s would otherwise pass with every transfer overlapping. The slack
    at the latest time must stay below 10 % of the shortest time a transfer holds its link (and of the shortest
    transfer), wherever the schedule sits; near time 0 the slack is ~1e-13 s and nothing is refused."""
    transfers = schedule.transfers
    if not len(transfers):
        return
    columns = getattr(transfers, "columns", None)
    if columns is not None:
        start, end = np.asarray(columns.start, dtype=float), np.asarray(columns.end, dtype=float)
        pairs = set(zip(np.asarray(columns.src).tolist(), np.asarray(columns.dst).tolist(), strict=True))
    else:
        start = np.array(list(map(itemgetter(3), transfers)), dtype=float)
        end = np.array([np.nan if e is None else e for e in map(itemgetter(4), transfers)], dtype=float)
        pairs = set(zip(map(itemgetter(1), transfers), map(itemgetter(2), transfers), strict=True))
    times = np.concatenate((start, end))
    times = np.abs(times[np.isfinite(times)])
    if not len(times):
        return
    latest = float(times.max())
    slack = tol(latest)
    if slack <= ABS_TOL * 10:
        return
    costs = link_costs(schedule.topology, schedule.chunk_bytes)
    spans = [x for k in pairs if k in costs for x in (costs[k].delay, costs[k].busy) if x > 0]
    if spans and slack > RESOLUTION_SHARE * min(spans):
        raise CcvizError(
            f"transfers: times reach {latest:.3g} s, where the judge's time resolution ({slack:.3g} s) cannot tell "
            f"apart a transfer holding its link {min(spans):.3g} s; start the schedule near time 0 (the judge "
            "compares times within a tolerance that grows with them)", "start_s")


def verify(schedule: Schedule) -> list[Violation]:
    """The violations of a schedule (empty when it is valid)."""
    return simulate(schedule).violations


def assign_times(schedule: Schedule) -> Schedule:
    """Give an untimed schedule real times: ASAP under step-ordered FCFS link contention.

    The switch rule holds here too: a chunk entering a bufferless switch leaves it on arrival, so a
    hop into a switch and the hops that forward it (a chain, a tree on copy switches) are timed as one
    unit, started when every link of the chain is free at the moment the chunk reaches it.
    """
    fast = simulate_fast.assign_times(schedule)
    if fast is None:
        return reference_assign_times(schedule)
    start, arrival, columns = fast
    return _with_times(schedule, start.tolist(), arrival.tolist(),
                       columns._replace(start=start, end=arrival, step=None))  # the judge needs no steps


def reference_assign_times(schedule: Schedule) -> Schedule:
    """``assign_times`` one transfer at a time in step order (the fast path's reference)."""
    transfers = schedule.transfers
    if any(t.start_s is not None for t in transfers) and not schedule.is_timed:
        raise CcvizError("transfers: either every transfer has a start time or none has; mixing is ambiguous",
                         "transfers")
    costs = link_costs(schedule.topology, schedule.chunk_bytes)
    n_chunks = max(len(schedule.collective.chunks), 1)
    epoch = epoch_release(schedule)
    forwards = switch_forwards(schedule)
    fed = {j for js in forwards.values() for j in js}
    steps = np.fromiter((t.step for t in transfers), dtype=float, count=len(transfers))
    order = np.argsort(steps, kind="stable").tolist()
    relayed_from = relay_continuations(transfers)
    available: dict[int, float] = {}  # node * n_chunks + chunk -> latest arrival of an earlier step
    lanes = LaneBook()
    engine = _ReductionEngines(schedule)
    start_of = [0.0] * len(transfers)
    arrival_of = [0.0] * len(transfers)
    pending: list[tuple[int, float]] = []
    current_step = None

    for i in order:
        if i in fed:
            continue  # timed with the hop that brings its chunk into the switch
        chunk, src, dst, _, _, _, step = transfers[i]
        if step != current_step:
            _commit(available, pending)
            current_step = step
        j = relayed_from.get(i)
        ready = arrival_of[j] if j is not None else available.get(src * n_chunks + chunk, 0.0)
        if epoch and math.floor(step + EPOCH_EPS) * epoch > ready:  # epoch-synchronous: wait for the epoch to open
            ready = math.floor(step + EPOCH_EPS) * epoch
        ready = engine.summed_by(src, chunk, ready)
        chain = _chain(i, forwards, transfers, costs)
        hops = [((transfers[j].src, transfers[j].dst), offset) for j, offset in chain]
        start = lanes.earliest_start(ready, [(key, costs[key].lanes, offset) for key, offset in hops if key in costs])
        arrival_at: dict[int, float] = {}
        for j, _ in chain:
            t = transfers[j]
            s_j = start if j == i else arrival_at[_parent(j, chain, forwards)]
            cost = costs.get((t.src, t.dst))
            if cost is None:  # no such link: leave it at its ready time so the verifier names it
                start_of[j] = arrival_of[j] = arrival_at[j] = s_j
                continue
            lanes.occupy((t.src, t.dst), cost.lanes, s_j, cost.busy)
            start_of[j] = s_j
            arrival_of[j] = arrival_at[j] = s_j + cost.delay
            if t.op != RELAY:  # a parked value is not the receiver's to send on its own
                pending.append((t.dst * n_chunks + t.chunk, s_j + cost.delay))
    return _with_times(schedule, start_of, arrival_of)


def _with_times(schedule: Schedule, start_of: list[float], arrival_of: list[float], columns=None) -> Schedule:
    """The schedule with each transfer's start and arrival filled in (read-only ``JudgedTransfers``,
    carrying ``columns``, the arrays the times came from, when the caller has them)."""
    transfers, field = schedule.transfers, itemgetter
    with gc_paused():  # one C-speed pass: no bytecode per transfer
        timed = JudgedTransfers(map(
            tuple.__new__, repeat(Transfer, len(transfers)),
            zip(map(field(0), transfers), map(field(1), transfers), map(field(2), transfers), start_of, arrival_of,
                map(field(5), transfers), map(field(6), transfers), strict=True)))
    if columns is not None:
        for array in columns:
            if isinstance(array, np.ndarray):
                array.flags.writeable = False  # shared with the transfers (and timelines): never written
    timed.columns = columns
    return schedule.with_transfers(timed)


def switch_forwards(schedule: Schedule) -> dict[int, list[int]]:
    """For each hop into a bufferless switch, the hops that forward that arrival out of it.

    A departure of chunk c from switch s at step k forwards an arrival of c into s with a smaller step:
    the latest such arrival on a copy switch (which may forward it several times), the earliest one not
    yet forwarded on a switch that cannot copy.
    """
    nodes = schedule.topology.nodes
    bufferless = {n for n, node in nodes.items() if node.kind == "switch" and not node.buffer}
    if not bufferless:
        return {}
    arrivals: dict[tuple[int, int], list[tuple[float, int]]] = defaultdict(list)
    departures: dict[tuple[int, int], list[tuple[float, int]]] = defaultdict(list)
    combined: dict[tuple[int, int], list[float]] = defaultdict(list)  # steps of contributions to in-switch sums
    for i, t in enumerate(schedule.transfers):
        if t.dst in bufferless and t.op == COMBINE:
            combined[(t.dst, t.chunk)].append(t.step)
        elif t.dst in bufferless:
            arrivals[(t.dst, t.chunk)].append((t.step, i))
        if t.src in bufferless:
            departures[(t.src, t.chunk)].append((t.step, i))
    forwards: dict[int, list[int]] = defaultdict(list)
    transfers = schedule.transfers
    for key, deps in departures.items():
        arr = sorted(arrivals.get(key, ()))
        copy = nodes[key[0]].copy
        unused = 0
        sums = sorted(combined.get(key, ()))
        for step, j in sorted(deps):
            earlier = bisect.bisect_left(arr, (step, -1))
            summed = bisect.bisect_left(sums, step)
            if summed and (not earlier or sums[summed - 1] >= arr[earlier - 1][0]):
                continue  # it forwards the switch's sum: timed on its own, once the contributions are in
            if copy and earlier:
                # The latest arrival not yet forwarded on this out-link (one arrival crosses a link once);
                # when every one has been, this send cannot leave on arrival: it is timed on its own and
                # the verifier reports the holding.
                dst = transfers[j].dst
                latest = [a for a in range(earlier - 1, -1, -1) if arr[a][0] == arr[earlier - 1][0]]
                feeder = next((arr[a][1] for a in reversed(latest) if not forwards[arr[a][1]]), None)
                if feeder is None:  # every latest arrival is forwarded already: a copy (multicast)
                    feeder = next((arr[a][1] for a in range(earlier - 1, -1, -1)
                                   if all(transfers[k].dst != dst for k in forwards[arr[a][1]])), None)
                if feeder is not None:
                    forwards[feeder].append(j)
            elif not copy and unused < earlier:
                forwards[arr[unused][1]].append(j)
                unused += 1
    return {k: js for k, js in forwards.items() if js}


class _ReductionEngines:
    """Untimed schedules through reducing switches slower than line rate (``Node.reduce_GBps``): a sum leaves
    once the engine, one chunk at a time, has summed it (``ccviz.judge.in_network``'s rule)."""

    def __init__(self, schedule: Schedule) -> None:
        nodes = schedule.topology.nodes
        self.rate = {n: node.reduce_GBps for n, node in nodes.items() if node.reduce and node.reduce_GBps}
        self.summed = ({(t.dst, t.chunk) for t in schedule.transfers if t.op == COMBINE and t.dst in self.rate}
                       if self.rate else set())
        self.chunk_bytes = schedule.chunk_bytes
        self.free: dict[int, float] = {}
        self.done: dict[tuple[int, int, float], float] = {}

    def summed_by(self, switch: int, chunk: int, ready: float) -> float:
        """When a send of ``chunk`` out of ``switch`` ready at ``ready`` can leave (``ready`` unless it is a sum)."""
        if (switch, chunk) not in self.summed:
            return ready
        key = (switch, chunk, ready)
        if key not in self.done:  # a multicast's sends share one sum
            begin = max(ready, self.free.get(switch, 0.0))
            self.done[key] = self.free[switch] = begin + self.chunk_bytes / (self.rate[switch] * BYTES_PER_GB)
        return self.done[key]


def _chain(head: int, forwards: dict[int, list[int]], transfers, costs) -> list[tuple[int, float]]:
    """The hop ``head`` and every hop forwarding its chunk through switches, with their delay from head's start."""
    chain = [(head, 0.0)]
    k = 0
    while k < len(chain):
        j, offset = chain[k]
        cost = costs.get((transfers[j].src, transfers[j].dst))
        delay = cost.delay if cost is not None else 0.0
        chain.extend((child, offset + delay) for child in forwards.get(j, ()))
        k += 1
    return chain


def _parent(j: int, chain: list[tuple[int, float]], forwards: dict[int, list[int]]) -> int:
    for i, _ in chain:
        if j in forwards.get(i, ()):
            return i
    raise AssertionError("a chain hop without its feeding hop")


# ------------------------------------------------------------------ relay rule
def relay_continuations(transfers: list[Transfer]) -> dict[int, int]:
    """The relay rule: continuation transfer index -> the relay transfer whose value it carries on.

    A transfer with ``op="relay"`` delivers a value *in transit*: the receiver (GPU or switch) parks it
    without merging it into, or overwriting, its own holding of the chunk, and the schedule's very next
    transfer (same chunk, leaving that receiver) carries exactly that value on. This is how a partial
    sum crosses GPUs that still hold their own partial of the same chunk (rhd partners that are not
    neighbours). A relay not followed by such a transfer is flagged by the verifier.
    """
    out: dict[int, int] = {}
    for i, t in enumerate(transfers):
        if t[5] == RELAY and i + 1 < len(transfers):
            nxt = transfers[i + 1]
            if nxt[0] == t[0] and nxt[1] == t[2]:
                out[i + 1] = i
    return out


def _commit(available: dict[int, float], pending: list[tuple[int, float]]) -> None:
    """Make one step's arrivals visible to later steps (a later step waits for all of them)."""
    for key, arrival in pending:
        if arrival > available.get(key, -1.0):
            available[key] = arrival
    pending.clear()


class _Verifier:
    """Replays a timed schedule and names every broken rule. Four passes, in this order (``run``):

    1. links and physics (``check_links_and_physics``): each transfer names a real chunk, link and op,
       claims no arrival earlier than the link rule allows, and no link serializes more at once than
       it has lanes;
    2. holdings and causality (``check_holdings_and_causality``): replayed event by event, a sender
       holds what it sends when it starts, a switch forwards what arrived (once unless it may copy)
       and holds nothing without a buffer;
    3. reductions (``merge_reduction``, applied at each reducing arrival of pass 2): every
       contribution is combined exactly once;
    4. postconditions (``check_postconditions``): at the end every post rank holds the whole chunk.
    """

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
        self.link_of = np.zeros(0, dtype=np.int64)

    def flag(self, rule: str, message: str, transfer: int | None = None, amount: float | None = None) -> None:
        """Record a violation (past ``max_violations`` only count it)."""
        if len(self.violations) < self.max_violations:
            self.violations.append(Violation(rule, message, transfer, amount))
        else:
            self.overflow += 1

    def run(self) -> Timeline:
        """Every pass in order; the Timeline carries the times, holdings and verdict."""
        self.check_links_and_physics()
        completion = self.check_holdings_and_causality()
        finish = self.check_postconditions(completion)
        if self.overflow:
            self.violations.append(Violation("more", f"... and {self.overflow} more violations not listed"))
        return Timeline(
            self.schedule, self.start, self.arrival, self.busy_until, self.held_fraction, finish, completion,
            self.violations,
        )

    # ------------------------------------------------------------ pass 1: links and physics
    def check_links_and_physics(self) -> None:
        """Pass 1: well-formed transfers timed by the link rule, and no link over its lanes."""
        self.check_transfers()
        self.check_link_overlaps()

    def check_transfers(self) -> None:
        """Each transfer names a real chunk, a real link, a known op, and claims physics-consistent times."""
        transfers = self.schedule.transfers
        if not transfers:
            return
        cols = list(zip(*transfers, strict=True))
        chunk = np.array(cols[0], dtype=np.int64)
        self.start[:] = np.array(cols[3], dtype=float)
        claimed_end = np.array(cols[4], dtype=float)  # None -> nan: no claim
        ops = np.array(cols[5])
        known, has_link = self.time_by_link_rule(np.array(cols[1], dtype=np.int64), np.array(cols[2], dtype=np.int64))
        reducible = np.array([c.reduce for c in self.coll.chunks] + [False], dtype=bool)
        n_chunks = len(self.coll.chunks)
        bad_chunk = (chunk < 0) | (chunk >= n_chunks)
        is_combine = ops == COMBINE
        is_reduce = (ops == "reduce") | is_combine
        bad_op = ~bad_chunk & ~((ops == "copy") | is_reduce | (ops == RELAY))
        bad_reduce = ~bad_chunk & is_reduce & ~reducible[np.where(bad_chunk, n_chunks, chunk)]
        bad_reduce |= known & is_combine & ~np.array([self.topo.nodes[t.dst].reduce if t.dst in self.topo.nodes
                                                      else False for t in transfers], dtype=bool)
        early = self.start < -ABS_TOL
        unfinite = ~np.isfinite(self.start) | np.isinf(claimed_end)  # end nan = no claim
        self.start[unfinite] = 0.0  # keep the arrays finite; the transfer is flagged and left out
        self.arrival[unfinite] = self.busy_until[unfinite] = 0.0
        too_fast = claimed_end < self.arrival - (ABS_TOL + REL_TOL * np.abs(self.arrival))  # nan compares False
        too_fast &= ~unfinite
        self.valid[:] = has_link & ~bad_chunk & ~bad_op & ~bad_reduce & ~unfinite
        for i in np.flatnonzero(~self.valid | early | too_fast).tolist():
            t = transfers[i]
            if unfinite[i]:
                self.flag("bad_transfer", f"transfer #{i}: its times ({t.start_s!r}, {t.end_s!r}) are not finite", i)
            if not known[i]:
                bad = t.src if t.src not in self.topo.nodes else t.dst
                self.flag("no_link", f"transfer #{i}: node {bad} is not in the topology", i)
            elif bad_chunk[i]:
                self.flag("bad_transfer", f"transfer #{i}: chunk {t.chunk} does not exist (0..{n_chunks - 1})", i)
            elif bad_op[i]:
                self.flag("bad_transfer", f"transfer #{i}: op {t.op!r} is not 'copy', 'reduce', 'relay' or "
                          "'combine'", i)
            elif bad_reduce[i] and is_combine[i] and reducible[chunk[i]]:
                self.flag("bad_reduce", f"transfer #{i}: combines chunk {t.chunk} into node {t.dst}, which is not a "
                          "reducing switch (reduce=true); use op 'reduce' to add at a GPU", i)
            elif bad_reduce[i]:
                self.flag("bad_reduce", f"transfer #{i}: reduces chunk {t.chunk}, which is not a reduction chunk", i)
            if known[i] and not has_link[i]:
                self.flag("no_link", f"transfer #{i}: there is no link {t.src}->{t.dst} for chunk {t.chunk}", i)
            if early[i]:
                self.flag("bad_transfer", f"transfer #{i}: starts before time 0 ({self.start[i]:.6g} s)", i,
                          -float(self.start[i]))
            if too_fast[i]:
                self.flag(
                    "too_fast",
                    f"transfer #{i}: chunk {t.chunk} on {t.src}->{t.dst} claims arrival at {us_text(t.end_s)} "
                    f"but alpha + bytes/bandwidth puts it at {us_text(self.arrival[i])}",
                    i, float(self.arrival[i] - t.end_s),
                )

    def time_by_link_rule(self, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each transfer's link (``link_of``, -1 for none) and its arrival and busy-until by ``physics.link_costs``;
        returns (both nodes known, link exists).

        All links are looked up at once (keys src*K+dst in a sorted array). Ids outside the topology's
        nodes get no link (a negative id must not alias onto a real link's key).
        """
        node_ids = np.array(sorted(self.topo.nodes), dtype=np.int64)
        known = np.isin(src, node_ids) & np.isin(dst, node_ids)
        src = np.where(known, src, 0)
        dst = np.where(known, dst, 0)
        keys_list = list(self.topo.links)
        k = int(node_ids.max()) + 1
        link_keys = np.array([u * k + v for u, v in keys_list], dtype=np.int64)
        order = np.argsort(link_keys)
        link_keys = link_keys[order]
        costs = link_costs(self.topo, self.coll.chunk_bytes)
        delay, occupancy, self.link_lanes = (np.array(column) for column in zip(
            *(costs[keys_list[j]] for j in order), strict=True))
        want = src * k + dst
        pos = np.minimum(np.searchsorted(link_keys, want), len(link_keys) - 1)
        has_link = (link_keys[pos] == want) & known
        self.link_of = np.where(has_link, pos, -1)
        self.arrival[:] = np.where(has_link, self.start + delay[pos], self.start)
        self.busy_until[:] = np.where(has_link, self.start + occupancy[pos], self.start)
        return known, has_link

    def check_link_overlaps(self) -> None:
        """Transfers on one link never overlap in serialization (beyond its lanes)."""
        idx = np.flatnonzero(self.valid)
        if len(idx) == 0:
            return
        link = self.link_of[idx]
        single = self.link_lanes[link] == 1
        self._check_single_lane(idx[single])
        for lk in np.unique(link[~single]).tolist():
            self._check_multi_lane(lk, idx[link == lk])

    def _check_single_lane(self, idx: np.ndarray) -> None:
        """Vectorized: a transfer overlaps when an earlier one on its link is still busy at its start."""
        import pandas as pd

        if len(idx) < 2:
            return
        order = idx[np.lexsort((self.start[idx], self.link_of[idx]))]
        link = self.link_of[order]
        busy = pd.Series(self.busy_until[order])
        busiest_before = busy.groupby(link).cummax().groupby(link).shift(1).to_numpy()
        start = self.start[order]
        overlap = busiest_before - start
        flagged = np.flatnonzero(overlap > ABS_TOL + REL_TOL * np.abs(start)).tolist()
        for count, pos in enumerate(flagged):
            if len(self.violations) >= self.max_violations:  # naming more would cost O(n) each
                self.overflow += len(flagged) - count
                return
            i = int(order[pos])
            earlier = order[:pos][link[:pos] == link[pos]]
            j = int(earlier[np.argmax(self.busy_until[earlier])])
            self._flag_overlap(j, i, float(self.busy_until[j]))

    def _check_multi_lane(self, lk: int, idx: np.ndarray) -> None:
        """One link with several lanes: at most ``lanes`` transfers serialize at any instant."""
        lanes = int(self.link_lanes[lk])
        busy: list[tuple[float, int]] = []  # heap of (busy_until, transfer) for the lanes in use
        for i in idx[np.argsort(self.start[idx], kind="stable")].tolist():
            s = self.start[i]
            while busy and busy[0][0] <= s + tol(s):
                heapq.heappop(busy)
            if len(busy) >= lanes:
                until, j = heapq.heappop(busy)
                self._flag_overlap(j, i, until)
            heapq.heappush(busy, (self.busy_until[i], i))

    def _flag_overlap(self, j: int, i: int, until: float) -> None:
        """Name the overlap of transfer ``i`` with the earlier ``j`` still busy until ``until``."""
        t = self.schedule.transfers[i]
        s = float(self.start[i])
        self.flag(
            "link_overlap",
            f"transfers #{j} and #{i} overlap on link {t.src}->{t.dst} by {us_text(until - s)} "
            f"(#{i} starts at {us_text(s)}, the link is busy until {us_text(until)})",
            i, until - s,
        )

    # ------------------------------------------------------- pass 2: holdings and causality
    def check_holdings_and_causality(self) -> dict[tuple[int, int], float]:
        """Pass 2: replay departures and arrivals in time order (``_HoldingsReplay``); returns when each
        (chunk, post rank) pair first held its whole chunk."""
        replay = _HoldingsReplay(self)
        completion = replay.run()
        self.held_fraction[:] = replay.held_fraction
        self.final_held, self.n_chunk_keys = replay.held, replay.n_chunks  # read only if a postcondition fails
        return completion

    def _check_relays_continue(self, transfers: list[Transfer], relayed_from: dict[int, int]) -> dict[int, int]:
        """Relay rule: every relay must be carried on by the next transfer (see ``relay_continuations``)."""
        continued = set(relayed_from.values())
        for i, t in enumerate(transfers):
            if t.op == RELAY and i not in continued and self.valid[i]:
                self.flag("bad_transfer", f"transfer #{i}: relays chunk {t.chunk} to {t.dst}, but the next transfer "
                          f"does not carry it on from {t.dst}; a relay must be followed by its continuation", i)
        return {}

    def _take_from_switch(self, i: int, t: Transfer, tokens: dict) -> int:
        """A switch forwards an arrival: each once if it cannot copy, any number of times if it can.

        One rule for both: among the arrivals it may still forward, the one of this very instant not
        forwarded yet (arrivals at one instant may carry different partials of a reduction); else one of
        this instant again (a copy: multicast); else a held one (the holding is reported unless the
        switch has a buffer): the latest copy on a copy switch, the earliest in the queue on one that
        forwards each arrival once.
        """
        queue = tokens.get((t.src, t.chunk))
        if not queue:
            self._flag_not_held(i, t)
            return 0
        node = self.topo.nodes[t.src]
        forwardable = queue if node.copy else [tk for tk in queue if not tk[1]]
        if not forwardable:
            self.flag("switch_copy", f"transfer #{i}: switch {t.src} cannot copy, and every arrival of chunk "
                      f"{t.chunk} at it has already been forwarded", i)
            return 0
        start = float(self.start[i])
        now = [tk for tk in forwardable if abs(tk[2] - start) <= tol(start)]
        token = next((tk for tk in now if not tk[1]), None)
        if token is None:
            token = (now or forwardable)[-1 if node.copy else 0]
        token[1] = True
        self.check_switch_forwards_on_arrival(i, t, node, token[2])
        return token[0]

    def check_switch_forwards_on_arrival(self, i: int, t: Transfer, node, arrived_s: float) -> None:
        """The switch rule: a bufferless switch receives the whole chunk, then sends it on at the instant it
        has arrived. Sending later is holding it in a buffer the switch does not have (declare ``buffer``
        on the node to allow it)."""
        held = float(self.start[i]) - arrived_s
        if node.buffer or held <= tol(arrived_s):
            return
        self.flag(
            "switch_hold",
            f"transfer #{i}: switch {t.src} holds chunk {t.chunk} for {us_text(held)} (it arrived at "
            f"{us_text(arrived_s)}, leaves for {t.dst} at {us_text(self.start[i])}); a switch without "
            "a buffer forwards each arrival when it arrives",
            i, held,
        )

    def _flag_not_held(self, i: int, t: Transfer) -> None:
        """Name a send of a chunk its sender does not hold yet (and when, if ever, it arrives there)."""
        later = [
            self.arrival[j] for j, u in enumerate(self.schedule.transfers)
            if u.dst == t.src and u.chunk == t.chunk and self.valid[j]
        ] if len(self.violations) < self.max_violations else []
        when = f"; it arrives there at {us_text(min(later))}" if later else "; it never arrives there"
        amount = (min(later) - self.start[i]) if later else None
        self.flag(
            "not_held",
            f"transfer #{i}: node {t.src} sends chunk {t.chunk} to {t.dst} at {us_text(self.start[i])} "
            f"before holding it{when}",
            i, amount,
        )

    # ------------------------------------------------------------------- pass 3: reductions
    def merge_reduction(self, j: int, before: int, value: int) -> int:
        """Pass 3, at each reducing arrival: a contribution already held must not be combined again."""
        if before & value:
            self._flag_double_count(j, before & value)
        return before | value

    def _flag_double_count(self, j: int, overlap: int) -> None:
        """Name the ranks whose contributions transfer ``j`` would combine a second time."""
        t = self.schedule.transfers[j]
        ranks = [r for k, r in enumerate(sorted(self.coll.chunks[t.chunk].pre)) if overlap >> k & 1]
        self.flag(
            "double_count",
            f"transfer #{j}: reduces chunk {t.chunk} into node {t.dst}, which already includes the "
            f"contribution(s) of rank(s) {ranks}; each contribution must be combined exactly once",
            j,
        )

    # --------------------------------------------------------------- pass 4: postconditions
    def check_postconditions(self, completion: dict[tuple[int, int], float]) -> float:
        """Pass 4: at the end every post rank holds the complete chunk; returns the finish time."""
        # completion holds only (chunk, post rank) pairs, so a full count means nothing is missing
        expected = sum(len(c.post) for c in self.coll.chunks)
        missing = 0
        for c in self.coll.chunks if len(completion) < expected else ():
            for r in sorted(c.post):
                if (c.id, r) not in completion:
                    missing += 1
                    have = self.final_held.get(r * self.n_chunk_keys + c.id, 0)
                    what = (
                        f"holds {have.bit_count()} of {len(c.pre)} contributions" if c.reduce and have
                        else "never receives it"
                    )
                    self.flag("missing", f"chunk {c.id} (from rank {c.source}) must reach rank {r}, which {what}")
        if completion and not missing:
            return max(completion.values())
        return float(self.arrival.max()) if len(self.arrival) else 0.0


class _HoldingsReplay:
    """Pass 2's event replay: departures and arrivals in time order over what every node holds.

    A chunk value is a bitmask of contributions (bit k = the k-th pre rank; a copy chunk has one bit).
    A GPU keeps one value per chunk; a switch keeps the arrivals it may still forward (tokens
    ``[value, forwarded, arrival time]``); a relay parks its value for the transfer that carries it on.
    """

    def __init__(self, verifier: _Verifier) -> None:
        self.v = verifier
        self.transfers = verifier.schedule.transfers
        chunks = verifier.coll.chunks
        self.n_chunks = max(len(chunks), 1)
        self.full = [(1 << len(c.pre)) - 1 if c.reduce else 1 for c in chunks]
        self.n_contrib = [len(c.pre) if c.reduce else 1 for c in chunks]
        self.post = [c.post for c in chunks]
        self.is_switch = {n: node.kind == "switch" for n, node in verifier.topo.nodes.items()}
        self.held: dict[int, int] = {}  # node * n_chunks + chunk -> contribution mask
        self.completion: dict[tuple[int, int], float] = {}
        for c in chunks:
            for bit, r in enumerate(sorted(c.pre)):
                self.held[r * self.n_chunks + c.id] = (1 << bit) if c.reduce else 1
                if r in c.post and self.held[r * self.n_chunks + c.id] == self.full[c.id]:
                    self.completion[(c.id, r)] = 0.0
        self.tokens: dict[tuple[int, int], list[list[Any]]] = defaultdict(list)
        self.sent_value = [0] * len(self.transfers)
        self.held_fraction = [0.0] * len(self.transfers)
        self.arrival_times = verifier.arrival.tolist()
        self.relayed_from = relay_continuations(self.transfers)
        self.parked = verifier._check_relays_continue(self.transfers, self.relayed_from)  # relay -> value
        self.sums = InNetworkSums(verifier.topo, chunks, verifier.coll.chunk_bytes, verifier.flag)

    def run(self) -> dict[tuple[int, int], float]:
        """Walk departures in time order, landing every arrival due by each departure first."""
        v, transfers = self.v, self.transfers
        valid_idx = np.flatnonzero(v.valid)
        # Departures in time order; at equal times switches forward first, so that a zero-delay hop out
        # of a switch (switch_hop="free") lands before a GPU that starts at that instant needs it.
        from_switch = np.array([self.is_switch.get(t.src, False) for t in transfers], dtype=bool)
        departures = valid_idx[np.lexsort((~from_switch[valid_idx], v.start[valid_idx]))].tolist()
        arrivals = valid_idx[np.argsort(v.arrival[valid_idx], kind="stable")].tolist()
        departed = [False] * len(transfers)
        landing_at_departure: set[int] = set()  # arrivals passed over before their transfer departed
        arrival_times, start_times = self.arrival_times, v.start.tolist()
        n_arr = len(arrivals)
        a = 0
        for i in departures:
            s = start_times[i]
            limit = s + ABS_TOL + REL_TOL * s
            while a < n_arr and arrival_times[arrivals[a]] <= limit:
                if departed[arrivals[a]]:
                    self.arrive(arrivals[a])
                else:  # a zero-delay hop leaving at this same instant: it lands as it departs (below)
                    landing_at_departure.add(arrivals[a])
                a += 1
            departed[i] = True
            self.depart(i)
            if i in landing_at_departure:
                self.arrive(i)
        while a < n_arr:
            self.arrive(arrivals[a])
            a += 1
        self.sums.finish()
        return self.completion

    def depart(self, i: int) -> None:
        """Causality: what transfer ``i`` carries is what its sender holds (or forwards, or carries on) now."""
        t = self.transfers[i]
        if i in self.relayed_from:
            self.sent_value[i] = self.parked.pop(self.relayed_from[i], 0)
            if not self.sent_value[i]:
                self.v._flag_not_held(i, t)
        elif self.is_switch[t.src]:
            summed = self.sums.take(i, t.src, t.dst, t.chunk, t.op, self.v.start[i], bool(self.tokens.get((t.src, t.chunk))))
            self.sent_value[i] = self.v._take_from_switch(i, t, self.tokens) if summed is None else summed
        else:
            value = self.held.get(t.src * self.n_chunks + t.chunk, 0)
            if not value:
                self.v._flag_not_held(i, t)
            self.sent_value[i] = value

    def arrive(self, j: int) -> None:
        """Transfer ``j`` lands: parked (relay), queued (switch), or merged into the receiver's holding."""
        chunk, _, dst, _, _, op, _ = self.transfers[j]
        value = self.sent_value[j]
        if not value:
            return
        share = value.bit_count() / self.n_contrib[chunk]
        if op == RELAY:
            self.parked[j] = value
            self.held_fraction[j] = share
            return
        if op == COMBINE:  # into a reducing switch's running sum (pass 1 refused any other receiver)
            total = self.sums.combine(j, dst, chunk, value, self.arrival_times[j])
            self.held_fraction[j] = total.bit_count() / self.n_contrib[chunk]
            return
        if self.is_switch[dst]:
            self.tokens[(dst, chunk)].append([value, False, self.arrival_times[j]])
            self.held_fraction[j] = share
            return
        key = dst * self.n_chunks + chunk
        before = self.held.get(key, 0)
        after = self.v.merge_reduction(j, before, value) if op == "reduce" else value
        self.held[key] = after
        self.held_fraction[j] = after.bit_count() / self.n_contrib[chunk]
        if dst in self.post[chunk]:
            if after == self.full[chunk]:
                if before != after or (chunk, dst) not in self.completion:
                    self.completion[(chunk, dst)] = self.arrival_times[j]
            else:
                self.completion.pop((chunk, dst), None)
