"""The judge's fast path: the same timing and verdict as ``ccviz.judge.simulate``'s reference, in array work.

A 1024-GPU schedule has a million transfers; replaying them one event at a time in Python costs
seconds. Most schedules are plain: copies between GPUs over single-lane links with positive delays.
For those the rules reduce to sorts and searches:

* links: sort by (link, start); a transfer overlaps when its predecessor on the link is still busy
  (one link's occupancy is constant, so busy-until is monotone in start: the predecessor is the
  busiest earlier transfer);
* holdings: the earliest arrival of each (node, chunk), found by sorting arrivals; a sender holds a
  chunk if it started with it or the earliest arrival lands by its start (within the tolerance).
  If every sender holds what it sends under "every transfer delivers", each does in the event
  replay as well (induct over departures in time order), so the verdict is the replay's;
* timing: step groups in order, each group one vectorised update (links used twice in one group are
  served in rounds, which keeps first-come-first-served order exact).

Reading a million tuples into arrays costs more than judging them, so the timed schedule that
``assign_times`` returns keeps its arrays (``Columns`` on the read-only ``JudgedTransfers``) and
``verify`` starts from them; any other list is read once, a field per C-speed pass.

Anything else (reductions, switches, lanes, zero-delay hops, odd values) and *any* fault found
returns ``None``: the reference then replays the schedule and names every violation, so verdicts,
violations and times are the reference's by construction. ``tests/test_simulate_fast.py`` runs both
on random schedules, valid and with planted faults, and requires identical results.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from functools import cached_property
from operator import itemgetter
from typing import NamedTuple

import numpy as np

from ccviz.judge.timeline import Timeline, epoch_release
from ccviz.model.physics import ABS_TOL, EPOCH_EPS, REL_TOL, link_costs
from ccviz.model.schedule import RELAY, Schedule, gc_paused

DENSE_LINK_TABLE = 1 << 22  # link lookup by a table of nodes^2 entries up to this size, else a binary search
MIN_GROUP = 40  # timing: below this mean step-group size, per-group array calls cost more than the replay


class Completion(Mapping):
    """(chunk, rank) -> when its postcondition first held, kept as arrays; a dict is built on first lookup."""

    def __init__(self, chunk: np.ndarray, rank: np.ndarray, time_s: np.ndarray) -> None:
        self.chunk, self.rank, self.time_s = chunk, rank, time_s

    @cached_property
    def _dict(self) -> dict[tuple[int, int], float]:
        return dict(zip(zip(self.chunk.tolist(), self.rank.tolist(), strict=True), self.time_s.tolist(), strict=True))

    def __getitem__(self, key: tuple[int, int]) -> float:
        return self._dict[key]

    def __iter__(self) -> Iterator[tuple[int, int]]:
        return iter(self._dict)

    def __len__(self) -> int:
        return len(self.time_s)

    def values(self):  # noqa: ANN201 - the dict's view
        return self._dict.values()


class Columns(NamedTuple):
    """A schedule's transfers field by field (what the judge reads; ``start``/``end`` None when untimed)."""

    chunk: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    start: np.ndarray | None
    end: np.ndarray | None  # nan: no claimed arrival
    step: np.ndarray | None  # None when read from a timed schedule (the judge does not need it)
    ops: frozenset[str]


def read_columns(transfers: list, timed: bool) -> Columns | None:
    """The fields the judge reads, as arrays: the memo a ``JudgedTransfers`` carries, else one C-speed
    pass per field (None when the ids are not whole numbers or the times not numbers)."""
    memo = getattr(transfers, "columns", None)
    if memo is not None:
        return memo
    n = len(transfers)

    def column(k: int, dtype: type) -> np.ndarray:
        try:
            return np.fromiter(map(itemgetter(k), transfers), dtype=dtype, count=n)
        except TypeError:  # None in a float column (no claimed end), or a value of the wrong type
            return np.array(list(map(itemgetter(k), transfers)), dtype=dtype)

    with gc_paused():
        try:
            ids = [column(k, np.int64) for k in (0, 1, 2)]
            start, end = (column(3, float), column(4, float)) if timed else (None, None)
            step = None if timed else column(6, float)
        except (TypeError, ValueError, OverflowError):
            return None  # the reference names what is malformed
        return Columns(*ids, start, end, step, frozenset(map(itemgetter(5), transfers)))


class _Columns:
    """A schedule's transfers as arrays, or ``ok = False`` when the fast path does not model them."""

    def __init__(self, schedule: Schedule, timed: bool) -> None:
        transfers = schedule.transfers
        topo, coll = schedule.topology, schedule.collective
        self.ok = False
        self.n = n = len(transfers)
        chunks = coll.chunks
        self.n_chunks = n_chunks = len(chunks)
        if n == 0 or n_chunks == 0 or any(c.id != k for k, c in enumerate(chunks)):
            return
        cols = read_columns(transfers, timed)
        if cols is None:
            return
        self.columns = cols
        self.chunk, self.src, self.dst = cols.chunk, cols.src, cols.dst
        if self.chunk.min() < 0 or self.chunk.max() >= n_chunks:
            return
        self.start, self.claimed_end, self.step = cols.start, cols.end, cols.step
        self.only_copies = cols.ops == {"copy"}
        span = int(max(max(topo.nodes), self.src.max(), self.dst.max())) + 1
        is_gpu = np.zeros(span, dtype=bool)
        is_gpu[topo.gpus] = True
        if min(self.src.min(), self.dst.min()) < 0 or not (is_gpu[self.src].all() and is_gpu[self.dst].all()):
            return  # switches, or nodes the topology lacks: the reference judges them
        link = _link_index(topo, self.src, self.dst)
        if link is None:
            return
        costs = link_costs(topo, coll.chunk_bytes)
        delay, occupancy, lanes = (np.array(c, dtype=float) for c in zip(*costs.values(), strict=True))
        self.link, self.occupancy, self.delay = link, occupancy, delay
        used = np.zeros(len(lanes), dtype=bool)
        used[link] = True
        if (lanes[used] != 1).any() or not (np.isfinite(occupancy[used]).all() and np.isfinite(delay[used]).all()):
            return
        self.key_span, self.is_gpu = span, is_gpu
        self.ok = True


def _link_index(topo, src: np.ndarray, dst: np.ndarray) -> np.ndarray | None:
    """Each transfer's position in ``topo.links`` (insertion order), or None if some link is missing."""
    k = int(max(max(topo.nodes), src.max(), dst.max())) + 1
    keys = np.array([u * k + v for u, v in topo.links], dtype=np.int64)
    want = src * k + dst
    if k * k <= DENSE_LINK_TABLE:
        table = np.full(k * k, -1, dtype=np.int64)
        table[keys] = np.arange(len(keys))
        link = table[want]
        return None if (link < 0).any() else link
    order = np.argsort(keys)
    pos = np.minimum(np.searchsorted(keys[order], want), len(keys) - 1)
    if not (keys[order][pos] == want).all():
        return None
    return order[pos]


def assign_times(schedule: Schedule) -> tuple[np.ndarray, np.ndarray, Columns] | None:
    """Start and arrival of every transfer of an untimed schedule (as the reference computes them) and
    the columns they were computed from, or None when the fast path does not model the schedule."""
    transfers = schedule.transfers
    if not transfers or transfers[0][3] is not None or set(map(itemgetter(3), transfers)) != {None}:
        return None  # timed or mixed: the reference decides
    c = _Columns(schedule, timed=False)
    if not c.ok or RELAY in c.columns.ops or (c.delay[c.link] <= 0).any():
        return None  # a relayed value leaves when its relay arrives: the reference's relay rule times it
    order = np.argsort(c.step, kind="stable")
    steps = c.step[order]
    cuts = np.flatnonzero(steps[1:] != steps[:-1]) + 1
    if (len(cuts) + 1) * MIN_GROUP > c.n:
        return None
    epoch = epoch_release(schedule)
    (read_key, write_key), size = _dense_keys(c.key_span * c.n_chunks, c.src * c.n_chunks + c.chunk,
                                              c.dst * c.n_chunks + c.chunk)
    # Everything in step order, so that a step group is a slice
    link, read_key, write_key = c.link[order], read_key[order], write_key[order]
    occupancy, delay = c.occupancy[link], c.delay[link]
    available = np.zeros(size)  # latest arrival of an earlier step per (node, chunk)
    link_free = np.zeros(len(c.occupancy))
    start = np.empty(c.n)
    arrival = np.empty(c.n)
    bounds = np.concatenate(([0], cuts, [c.n])).tolist()
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        ready = available[read_key[a:b]]
        if epoch:
            opens = np.floor(steps[a] + EPOCH_EPS) * epoch
            ready = np.where(opens > ready, opens, ready)
        _serve_group(a, b, ready, link, occupancy, delay, link_free, start, arrival)
        np.maximum.at(available, write_key[a:b], arrival[a:b])
    start[order], arrival[order] = start.copy(), arrival.copy()  # back to the schedule's order
    return start, arrival, c.columns


MAX_VECTOR_ROUNDS = 16  # a link used more often in one step group is served by a per-link scan


def _serve_group(a: int, b: int, ready: np.ndarray, link: np.ndarray, occupancy: np.ndarray, delay: np.ndarray,
                 link_free: np.ndarray, start: np.ndarray, arrival: np.ndarray) -> None:
    """Serve the step group ``a:b`` FCFS per link (each link in schedule order), writing start and arrival.

    A few uses per link: one vector operation per use (``_rounds``). Many uses of one link in a group
    (``--chunks 100000`` puts 100,000 transfers on each ring link in one step) made that quadratic, a
    mask over the whole group per use: those groups are served link by link in one pass, the same
    ``max(ready, free)`` then ``+ occupancy`` recurrence in the same order, so the times are identical.
    """
    lk = link[a:b]
    counts = np.bincount(lk)
    if counts.max() <= MAX_VECTOR_ROUNDS:
        for part, part_ready in _rounds(a, b, ready, link):
            lk = link[part]
            s = np.maximum(part_ready, link_free[lk])
            link_free[lk] = s + occupancy[part]
            start[part] = s
            arrival[part] = s + delay[part]
        return
    by_link = np.argsort(lk, kind="stable")
    ready_sorted = ready[by_link].tolist()
    occ_sorted = occupancy[a + by_link].tolist()
    starts = [0.0] * len(by_link)
    bounds = np.concatenate(([0], np.cumsum(counts[counts > 0]))).tolist()
    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
        which = int(lk[by_link[lo]])
        free = float(link_free[which])
        for j in range(lo, hi):
            r = ready_sorted[j]
            s = r if r > free else free  # np.maximum(ready, free): free wins ties, the same value either way
            starts[j] = s
            free = s + occ_sorted[j]
        link_free[which] = free
    where = a + by_link
    start[where] = starts
    arrival[where] = start[where] + delay[where]


def _rounds(a: int, b: int, ready: np.ndarray, link: np.ndarray) -> Iterator[tuple[slice | np.ndarray, np.ndarray]]:
    """The step group ``a:b`` split so that no link appears twice in a part; the k-th use of a link is in
    part k (a slice when every link appears once, else positions)."""
    lk = link[a:b]
    if np.bincount(lk).max() <= 1:
        yield slice(a, b), ready
        return
    by_link = np.argsort(lk, kind="stable")
    sorted_lk = lk[by_link]
    first = np.flatnonzero(np.concatenate(([True], sorted_lk[1:] != sorted_lk[:-1])))
    run_start = np.repeat(first, np.diff(np.concatenate((first, [len(lk)]))))
    use = np.empty(len(lk), dtype=np.int64)
    use[by_link] = np.arange(len(lk)) - run_start
    for k in range(int(use.max()) + 1):
        mask = use == k
        yield a + np.flatnonzero(mask), ready[mask]


def _dense_keys(span: int, *keys: np.ndarray) -> tuple[list[np.ndarray], int]:
    """(node, chunk) keys (node * chunks + chunk, all below ``span``) as indices into a dense array:
    the keys themselves when the span is small, else their ranks among the distinct keys."""
    total = sum(len(k) for k in keys)
    if span <= 4 * total + 4096:
        return list(keys), span
    distinct = np.unique(np.concatenate(keys))
    return [np.searchsorted(distinct, k) for k in keys], len(distinct)


def verify(schedule: Schedule) -> Timeline | None:
    """The reference's Timeline for a valid plain schedule; None when it needs the event replay
    (something the fast path does not model, or any violation to name)."""
    coll = schedule.collective
    if any(c.reduce for c in coll.chunks):
        return None
    c = _Columns(schedule, timed=True)
    if not (c.ok and c.only_copies):
        return None
    start, claimed = c.start, c.claimed_end
    if not np.isfinite(start).all() or np.isinf(claimed).any() or (
            np.isnan(claimed).any() and np.isnan(claimed).sum() != sum(t.end_s is None for t in schedule.transfers)):
        return None
    delay = c.delay[c.link]
    arrival = start + delay
    if np.array_equal(arrival, claimed):
        arrival = claimed  # the timing's own arrivals: the timeline shares the array
    busy_until = start + c.occupancy[c.link]
    if (start < -ABS_TOL).any() or (claimed < arrival - (ABS_TOL + REL_TOL * np.abs(arrival))).any():
        return None
    if delay.min() <= 2 * (ABS_TOL + REL_TOL * float(np.abs(arrival).max())):
        return None  # a hop that lands as it leaves: the replay's same-instant ordering decides
    if _overlaps(c.link, start, busy_until):
        return None
    n_chunks = c.n_chunks
    pre_chunk, pre_rank = _members(coll.chunks, "pre")
    post_chunk, post_rank = _members(coll.chunks, "post")
    ranks = np.concatenate((pre_rank, post_rank))
    if len(ranks) and (ranks.min() < 0 or ranks.max() >= c.key_span or not c.is_gpu[ranks].all()):
        return None  # the reference names a switch or an unknown node in a pre/postcondition
    pre_key = pre_rank * n_chunks + pre_chunk
    (landed, sent, pre, post), size = _dense_keys(
        c.key_span * n_chunks, c.dst * n_chunks + c.chunk, c.src * n_chunks + c.chunk, pre_key,
        post_rank * n_chunks + post_chunk)
    earliest = np.full(size, np.inf)  # per (node, chunk): its first arrival
    np.minimum.at(earliest, landed, arrival)
    at_start = np.zeros(size, dtype=bool)
    at_start[pre] = True
    # A sender holds what it sends if it started with it or its first arrival lands by the send.
    late = np.flatnonzero(earliest[sent] > start + ABS_TOL + REL_TOL * start)
    if not at_start[sent[late]].all():
        return None
    # Each (chunk, post rank) completes at 0 if it held the chunk from the start, else at its first arrival.
    completed = np.where(at_start[post], 0.0, earliest[post])
    if np.isinf(completed).any():
        return None  # missing: the reference names it
    completion = Completion(post_chunk, post_rank, completed)
    finish = float(completed.max()) if len(completed) else float(arrival.max())
    return Timeline(schedule, start, arrival, busy_until, np.ones(c.n), finish, completion, [])


def _members(chunks: list, side: str) -> tuple[np.ndarray, np.ndarray]:
    """Every (chunk id, rank) of the chunks' ``pre`` or ``post`` sets, as two arrays (in set order).
    Chunks often share one set object (every rank of an AllGather): each is read once."""
    sets = [getattr(ch, side) for ch in chunks]
    read: dict[int, np.ndarray] = {}
    for members in sets:
        if id(members) not in read:
            read[id(members)] = np.fromiter(members, dtype=np.int64, count=len(members))
    sizes = np.fromiter(map(len, sets), dtype=np.int64, count=len(sets))
    chunk = np.repeat(np.fromiter((ch.id for ch in chunks), dtype=np.int64, count=len(chunks)), sizes)
    rank = np.concatenate([read[id(members)] for members in sets]) if sets else np.zeros(0, dtype=np.int64)
    return chunk, rank


def _overlaps(link: np.ndarray, start: np.ndarray, busy_until: np.ndarray) -> bool:
    """Does any transfer start before its predecessor on the same link is done (beyond the tolerance)?"""
    # by start, then stably by link: (link, start) order; small link ids sort by radix
    by_start = np.argsort(start)
    narrow = np.int16 if len(busy_until) and link.max() < 2**15 else np.int64
    order = by_start[np.argsort(link[by_start].astype(narrow), kind="stable")]
    same = link[order][1:] == link[order][:-1]
    s = start[order][1:]
    return bool((same & (busy_until[order][:-1] - s > ABS_TOL + REL_TOL * np.abs(s))).any())
