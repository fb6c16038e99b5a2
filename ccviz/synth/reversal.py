"""Reductions from broadcasts: reverse a timed AllGather/Broadcast schedule in time.

A reduction chunk (pre = ranks holding partials, post = {owner}) is the mirror
of a copy chunk flowing from the owner to every pre rank. Synthesize that
copy demand on ``topology.reversed()`` (``mirror_collective``), then
``reverse_schedule`` turns it into a reduction on the real topology: every
forward transfer a->b becomes b->a with op="reduce", and every node sends its
partial up only after the partials of its whole subtree have arrived.
``concatenate`` runs one schedule after another (AllReduce = ReduceScatter
then AllGather), so any timed synthesizer (TACOS, mteg, TE-CCL) gets the
reducing collectives for free.

Timing: the reversed transfers get logical steps in reversed-time order and the simulator replays
them ASAP (``assign_times``), which repairs a timing that is not causal as it stands (under
``switch_hop="teccl"`` or ``"free"`` a hop out of a switch is cheaper than the reversed hop into it)
and moves chains through switches in one go, as the switch rule requires. Where every hop costs what
its reverse costs (``costs_alike_both_ways``: the "paid" rule, or no switches) the kept forward
transfers mirrored exactly in time are causal too, and keep every link as busy as it was and every
route through a switch back to back; the faster of the two is kept (the replay loses the interleaving
of routes through switches: TACOS ReduceScatter on a leaf-spine 4.0 -> 2.5 ms with the mirror; the
mirror keeps a forward's idle gaps, which the replay closes: 0.3-2 % on direct-link fabrics).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, replace
from operator import itemgetter

import numpy as np

from ccviz.errors import CcvizError
from ccviz.judge.simulate import assign_times
from ccviz.judge.simulate_fast import _link_index
from ccviz.model.collectives import Chunk, Collective
from ccviz.model.physics import link_costs, tol
from ccviz.model.schedule import Schedule, Transfer, gc_paused
from ccviz.model.topology import Topology
from ccviz.model.units import us_text

SWITCH_SEPARATION = 4  # in simulator tolerances (``physics.tol``): how far a switch hop may precede its feeder


def mirror_collective(target: Collective) -> Collective:
    """The copy demand whose time reversal is ``target``: each chunk flows post -> pre.

    Only reductions into a single rank mirror to a copy with a single source
    (ReduceScatter, Reduce); AllReduce is ReduceScatter then AllGather.
    """
    chunks = []
    for c in target.chunks:
        if not c.reduce or len(c.post) != 1:
            raise CcvizError(
                f"collective: chunk {c.id} of {target.name} does not reduce into exactly one rank; only "
                "reductions into one owner (reducescatter, reduce) can be built by reversing a broadcast",
                "collective",
            )
        chunks.append(Chunk(c.id, c.post, c.pre, False, c.source, c.index))
    name = "broadcast" if target.name == "reduce" else "allgather" if target.name == "reducescatter" else "custom"
    return Collective(name, target.ranks, tuple(chunks), target.chunk_bytes, target.size_bytes,
                      target.chunks_per_rank, target.root)


def mirror_fabric(topology: Topology) -> Topology:
    """Where a reduction's mirrored copy runs: every link reversed and no switch multicasting (turned
    around, a multicast would be a switch adding partials, which no switch here can)."""
    reversed_topology = topology.reversed()
    return reversed_topology.with_changes(
        nodes=[replace(n, copy=False) if n.is_switch else n for n in reversed_topology.nodes.values()])


def split_allreduce(target: Collective) -> tuple[Collective, Collective]:
    """AllReduce = ReduceScatter into each chunk's owner, then AllGather from it.

    The owner is the chunk's source rank (the lowest partial holder when a custom demand names none);
    it must hold a partial itself. Built from ``target``'s own chunks so ids, sizes and ranks carry over.
    """
    reduce_parts, gather_parts = [], []
    for c in target.chunks:
        owner = c.source if c.source is not None else min(c.pre, default=None)
        if not c.reduce or owner not in c.pre:
            raise CcvizError(f"collective: chunk {c.id} of {target.name} is not a reduction whose source rank holds "
                             "a partial; only AllReduce-like demands split into ReduceScatter + AllGather",
                             "collective")
        reduce_parts.append(Chunk(c.id, c.pre, frozenset([owner]), True, owner, c.index))
        gather_parts.append(Chunk(c.id, frozenset([owner]), c.post, False, owner, c.index))
    return tuple(
        Collective(name, target.ranks, tuple(chunks), target.chunk_bytes, target.size_bytes, target.chunks_per_rank,
                   target.root)
        for name, chunks in (("reducescatter", reduce_parts), ("allgather", gather_parts))
    )


def split_demand(target: Collective) -> tuple[Collective, Collective]:
    """Any demand (a workload's union of groups) = its reductions into each chunk's owner, then copies.

    The first part holds every reducing chunk, summed into its owner (its source rank, which holds a
    partial); the second the copies: each reduced sum from its owner to the rest of its post ranks, and the
    demand's copy chunks as they are. Ids are renumbered within each part; chunks keep (source, index), by
    which ``concatenate`` puts them back on ``target``. Either part may have no chunks.
    """
    reduce_parts, gather_parts = [], []
    for c in target.chunks:
        if not c.reduce:
            gather_parts.append(Chunk(len(gather_parts), c.pre, c.post, False, c.source, c.index))
            continue
        if c.source not in c.pre:
            raise CcvizError(f"collective: reducing chunk {c.id} of {target.name} has no source rank holding a "
                             "partial to sum into", "collective")
        reduce_parts.append(Chunk(len(reduce_parts), c.pre, frozenset([c.source]), True, c.source, c.index))
        if c.post - {c.source}:
            gather_parts.append(Chunk(len(gather_parts), frozenset([c.source]), c.post, False, c.source, c.index))
    return tuple(
        Collective(name, target.ranks, tuple(chunks), target.chunk_bytes, target.size_bytes, 1, None)
        for name, chunks in (("custom", reduce_parts), ("custom", gather_parts))
    )


@dataclass
class _Tree:
    """The useful part of a forward schedule: first arrivals and the switch hops that feed them.

    ``parent[i]`` is the kept forward transfer whose delivery ``kept[i]`` forwards (-1 when it
    leaves a rank that held the chunk from the start); reversed, a transfer waits for all the
    transfers it is the parent of. Arrays, because a 512-GPU reduction keeps a quarter of a
    million transfers.
    """

    kept: np.ndarray  # forward transfer indices, ascending
    parent: np.ndarray  # per kept transfer: the forward transfer it forwards, or -1
    switch_pairs: dict[tuple[int, int], list[tuple[int, int]]]  # (switch, chunk) -> [(arrival, departure)]


def _columns(transfers: list[Transfer]) -> tuple[np.ndarray, ...]:
    """(chunk, src, dst, end) of every transfer as arrays."""
    n = len(transfers)
    return tuple(np.fromiter(map(itemgetter(k), transfers), dtype=dtype, count=n)
                 for k, dtype in ((0, np.int64), (1, np.int64), (2, np.int64), (4, float)))


def _forward_tree(forward: Schedule, feeders: dict[int, int] | None,
                  columns: tuple[np.ndarray, ...]) -> _Tree:
    """Keep each rank's first arrival of a chunk and prune branches that feed nobody
    (``columns``: the forward transfers' ``_columns``)."""
    topology = forward.topology
    chunks = forward.collective.chunks
    n_chunks = len(chunks)
    chunk, src, dst, end = columns
    span = max(max(topology.nodes), int(src.max()), int(dst.max())) + 1
    is_switch = np.zeros(span, dtype=bool)
    is_switch[list(topology.switches)] = True
    held = np.zeros(span * n_chunks, dtype=bool)  # (rank, chunk): the rank holds the chunk from the start
    for c in chunks:
        held[[r * n_chunks + c.id for r in c.pre]] = True
    key = dst * n_chunks + chunk
    by_end = np.argsort(end, kind="stable")  # ties in list order
    arriving = by_end[~is_switch[dst[by_end]] & ~held[key[by_end]]]
    _, first = np.unique(key[arriving], return_index=True)
    firsts = arriving[first]  # the first arrival of each (rank, chunk)
    first_of = np.full(span * n_chunks, -1, dtype=np.int64)
    first_of[key[firsts]] = firsts
    from_switch = is_switch[src]
    if not from_switch.any():
        kept = np.sort(firsts)
        return _Tree(kept, first_of[src[kept] * n_chunks + chunk[kept]], {})
    # Paths through switches: a transfer is useful when it is a first arrival at a rank, or feeds a
    # switch hop that is; each hop out of a switch forwards one arrival (its feeder).
    if feeders is None:
        into_switch: dict[tuple[int, int], list[int]] = defaultdict(list)
        for k in by_end[is_switch[dst[by_end]]].tolist():
            into_switch[(int(dst[k]), int(chunk[k]))].append(k)
        feeders = _switch_feeders(forward, into_switch)
    useful: set[int] = set(firsts.tolist())
    for k in firsts[from_switch[firsts]].tolist():
        while from_switch[k]:
            k = feeders[k]
            useful.add(k)
    kept = np.array(sorted(useful), dtype=np.int64)
    parent = first_of[src[kept] * n_chunks + chunk[kept]]
    forwarded: set[int] = set()
    switch_pairs: dict[tuple[int, int], list[tuple[int, int]]] = defaultdict(list)
    for i in np.flatnonzero(from_switch[kept]).tolist():
        k = int(kept[i])
        parent[i] = feeder = feeders[k]
        if feeder in forwarded:
            raise CcvizError(
                f"schedule: switch {src[k]} multicasts chunk {chunk[k]}; a multicast cannot be reversed into a "
                "reduction (a switch cannot add partials) - synthesize the broadcast without switch copies",
                "schedule",
            )
        forwarded.add(feeder)
        switch_pairs[(int(src[k]), int(chunk[k]))].append((feeder, k))
    return _Tree(kept, parent, switch_pairs)


def _without_dead_ends(tree: _Tree, columns: tuple[np.ndarray, ...], forward: Schedule, target: Collective,
                       chunk_map: dict[int, int]) -> _Tree:
    """The tree without branches that end at ranks holding no partial of the target (relays a copy core was
    asked to deliver to, so that it could route through them): reversed, such a rank would send nothing.
    A no-op when every kept arrival is at a rank the target sums from."""
    target_pre = {c.id: c.pre for c in target.chunks}
    if all(c.post == target_pre[chunk_map[c.id]] for c in forward.collective.chunks):
        return tree  # the copy delivered only to ranks holding partials
    chunk, _, dst, _ = columns
    topology = forward.topology
    kept = tree.kept.tolist()
    at_switch = [topology.is_switch(int(dst[k])) for k in kept]
    needed = [not s and int(dst[k]) in target_pre[chunk_map[int(chunk[k])]] for k, s in zip(kept, at_switch, strict=True)]
    if all(n or s for n, s in zip(needed, at_switch, strict=True)):
        return tree  # (a hop into a switch is kept only where a hop out of it carries it on)
    parent = tree.parent.tolist()
    position = {k: i for i, k in enumerate(kept)}
    children = [0] * len(kept)
    for p in parent:
        if p >= 0 and p in position:
            children[position[p]] += 1
    alive = [True] * len(kept)
    dead_end = [i for i in range(len(kept)) if not needed[i] and not children[i]]
    while dead_end:
        i = dead_end.pop()
        alive[i] = False
        p = parent[i]
        if p >= 0 and p in position:
            j = position[p]
            children[j] -= 1
            if not children[j] and not needed[j] and alive[j]:
                dead_end.append(j)
    keep = np.array(alive, dtype=bool)
    gone = {kept[i] for i in range(len(kept)) if not alive[i]}
    pairs = {key: [(a, d) for a, d in pairs if d not in gone] for key, pairs in tree.switch_pairs.items()}
    return _Tree(tree.kept[keep], tree.parent[keep], {key: p for key, p in pairs.items() if p})


def _switch_feeders(forward: Schedule, into_switch: dict[tuple[int, int], list[int]]) -> dict[int, int]:
    """For each transfer out of a switch, the arrival it forwards (the simulator's token rule)."""
    topo = forward.topology
    transfers = forward.transfers
    feeder: dict[int, int] = {}
    departures: dict[tuple[int, int], list[int]] = defaultdict(list)
    for k, t in enumerate(transfers):
        if topo.is_switch(t.src):
            departures[(t.src, t.chunk)].append(k)
    for key, outs in departures.items():
        arrivals = into_switch.get(key, [])
        used: set[int] = set()
        for k in sorted(outs, key=lambda k: (transfers[k].start_s, k)):
            s = transfers[k].start_s
            # A bufferless switch forwards an arrival the instant it lands; one with a buffer, any held
            earliest = -math.inf if topo.nodes[key[0]].buffer else s - _separation(s)
            ready = [a for a in arrivals if earliest <= transfers[a].end_s <= s + _separation(s)]
            # Copies carry equal values, so any arrived token is right; prefer one not yet
            # forwarded so that plain unicast relays pair up one to one.
            unused = [a for a in ready if a not in used]
            if topo.nodes[key[0]].copy:
                pick = (unused or ready or [None])[-1]
            else:
                pick = unused[0] if unused else None
            used.add(pick)
            if pick is None:
                raise CcvizError(f"schedule: transfer #{k} leaves switch {key[0]} before chunk {key[1]} arrives "
                                 "there; verify the forward schedule before reversing it", "schedule")
            feeder[k] = pick
    return feeder


def _separation(t: float) -> float:
    """The simulator treats an arrival within ``tol`` of a departure as "before" it; an arrival this close
    to a departure out of a switch may be what that departure forwards."""
    return SWITCH_SEPARATION * tol(t)


def reverse_schedule(forward: Schedule, topology: Topology, target: Collective,
                     feeders: dict[int, int] | None = None) -> Schedule:
    """Turn a verified copy schedule of ``mirror_collective(target)`` on ``topology.reversed()``
    into a timed reduction schedule of ``target`` on ``topology``.

    ``feeders`` maps each transfer out of a switch to the index of the arrival it forwards. A
    synthesizer that knows its paths should pass it: inferred from times alone, simultaneous
    arrivals of one chunk at a copy switch are ambiguous and a wrong guess may tangle two paths.
    """
    if not forward.is_timed:
        raise CcvizError("schedule: only a timed schedule can be reversed in time; simulate it first", "schedule")
    chunk_map = _chunk_map(forward.collective, target)
    if not forward.transfers:
        return Schedule(topology, target, [], forward.algorithm, dict(forward.options), forward.status)
    columns = _columns(forward.transfers)
    tree = _forward_tree(forward, feeders, columns)
    tree = _without_dead_ends(tree, columns, forward, target, chunk_map)
    if not len(tree.kept):
        return Schedule(topology, target, [], forward.algorithm, dict(forward.options), forward.status)
    chunk, src, dst, end = (column[tree.kept] for column in columns)
    to_target = np.array([chunk_map[c] for c in range(len(forward.collective.chunks))], dtype=np.int64)
    chunk = to_target[chunk]
    replayed = _replayed(forward, topology, target, tree, chunk, src, dst, end)
    if not costs_alike_both_ways(topology):
        return replayed
    mirrored = _mirrored_in_time(forward, topology, target, tree, chunk, src, dst, end)
    return mirrored if mirrored.estimated_finish_s <= replayed.estimated_finish_s else replayed


def _replayed(forward: Schedule, topology: Topology, target: Collective, tree: _Tree, chunk: np.ndarray,
              src: np.ndarray, dst: np.ndarray, end: np.ndarray) -> Schedule:
    """The kept forward transfers turned around in logical steps (reversed-time order) and replayed ASAP
    by the simulator (``assign_times``)."""
    steps = _reversed_steps(tree, end.max() - end, end)
    order = np.lexsort((tree.kept, steps))
    new = tuple.__new__
    untimed = [new(Transfer, (c, s, d, None, None, "reduce", step)) for c, s, d, step in zip(
        chunk[order].tolist(), dst[order].tolist(), src[order].tolist(), steps[order].tolist(), strict=True)]
    draft = Schedule(topology, target, untimed, forward.algorithm, dict(forward.options), forward.status)
    transfers = assign_times(draft).transfers
    finish = max(map(itemgetter(4), transfers), default=0.0)
    return Schedule(topology, target, transfers, forward.algorithm, dict(forward.options), forward.status,
                    estimated_finish_s=finish,
                    notes=[*forward.notes, "reduction = time-reversed copy schedule on the reversed topology"],
                    cut_short=forward.cut_short)


def costs_alike_both_ways(topology: Topology) -> bool:
    """Every hop costs what its reverse costs (no switch rule discounts a hop out of a switch): then a
    forward schedule mirrored in time is causal as it stands."""
    return topology.switch_hop == "paid" or not topology.switches


def _mirrored_in_time(forward: Schedule, topology: Topology, target: Collective, tree: _Tree, chunk: np.ndarray,
                      src: np.ndarray, dst: np.ndarray, end: np.ndarray) -> Schedule:
    """The kept forward transfers turned around at the forward's last arrival F: a send over [s, e] becomes
    one back over [F - e, F - s]. Each link is busy exactly as long, mirrored, so no two sends overlap;
    a rank's partial leaves after its forward subtree's partials have come in; a chain through a
    bufferless switch stays back to back. Exact, where replaying the reversed order (``assign_times``)
    may lose the forward's interleaving of routes through switches (a slot grid's: 3 x slower)."""
    starts = np.fromiter((forward.transfers[k].start_s for k in tree.kept.tolist()), dtype=float, count=len(end))
    last = float(end.max())
    order = np.argsort(last - end, kind="stable")
    new = tuple.__new__
    transfers = [new(Transfer, (c, s, d, a, b, "reduce", 0.0)) for c, s, d, a, b in zip(
        chunk[order].tolist(), dst[order].tolist(), src[order].tolist(), (last - end[order]).tolist(),
        (last - starts[order]).tolist(), strict=True)]
    finish = max(map(itemgetter(4), transfers))
    return Schedule(topology, target, transfers, forward.algorithm, dict(forward.options), forward.status,
                    estimated_finish_s=finish,
                    notes=[*forward.notes, "reduction = copy schedule on the reversed topology, mirrored in time"],
                    cut_short=forward.cut_short)


def _chunk_map(forward: Collective, target: Collective) -> dict[int, int]:
    """Forward chunk id -> target chunk id, matched by (source, index) and checked for mirror demands."""
    by_key = {(c.source, c.index): c for c in target.chunks}
    out = {}
    for c in forward.chunks:
        t = by_key.get((c.source, c.index))
        if t is None or t.post != c.pre or not t.pre <= c.post:
            raise CcvizError(f"schedule: forward chunk {c.id} does not mirror a chunk of {target.name}; build the "
                             "forward demand with mirror_collective(target)", "schedule")
        out[c.id] = t.id
    return out


def _reversed_steps(tree: _Tree, nominal: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Logical steps of the reversed transfers (aligned with ``tree.kept``), replayed by the simulator
    (``assign_times``); ``nominal`` is each one's reversed start, ``end`` its forward arrival.

    Reversed time orders the transfers: a node sends its partial up only after the partials of its
    whole forward subtree have arrived, which come earlier in reversed time. Steps rank the nominal
    reversed starts, so the untimed rule (a send waits for every earlier-step arrival of its chunk) is
    exactly the tree's waits and no cycle can form.

    Without switches, transfers with the same nominal start share a step: a forward transfer lands
    strictly after the arrival it forwards, so reversed, every child starts strictly before its parent
    and the waits are the same; large step groups let the simulator time the reversal in array work
    instead of one transfer at a time. With switches (or a forward schedule whose hops land no later
    than what they forward), ties are broken by index so passes never share a step; a pass through a
    switch leaves by the reverse of the forward arrival, and its step is put just after the step it
    enters by, so the simulator pairs each pass's entry and exit and moves the chain through the switch
    in one go.
    """
    if not tree.switch_pairs:
        fed = tree.parent >= 0
        position = np.searchsorted(tree.kept, tree.parent[fed])
        if (end[fed] > end[position]).all():
            return np.unique(nominal, return_inverse=True)[1].astype(float)
    ranked = np.empty(len(nominal))
    ranked[np.lexsort((tree.kept, nominal))] = np.arange(len(nominal), dtype=float)
    steps = dict(zip(tree.kept.tolist(), ranked.tolist(), strict=True))
    reversed_start = dict(zip(tree.kept.tolist(), nominal.tolist(), strict=True))
    leaves_by = {departure: arrival for pairs in tree.switch_pairs.values() for arrival, departure in pairs}
    entered = set(leaves_by.values())
    for departure in sorted(leaves_by, key=reversed_start.__getitem__):
        if departure in entered:
            continue  # not a chain's last hop; reached from the hop it feeds
        k = departure
        while k in leaves_by:  # walk the chain back: each exit just after its entry
            exit_hop = leaves_by[k]
            steps[exit_hop] = steps[k] + (math.floor(steps[k]) + 1 - steps[k]) / 2
            k = exit_hop
    return np.array([steps[k] for k in tree.kept.tolist()])


def schedule_end(schedule: Schedule) -> float:
    """When a timed schedule is over: its last arrival, or later if a link is still serializing.

    (Under ``switch_hop="teccl"``/``"free"`` a hop out of a switch can land before its link is free again.)
    """
    transfers = schedule.transfers
    if not transfers:
        return 0.0
    over = np.array([cost.over for cost in link_costs(schedule.topology, schedule.chunk_bytes).values()])
    _, src, dst, _ = _columns(transfers)
    link = _link_index(schedule.topology, src, dst)
    if link is None:
        raise CcvizError("schedule: a transfer uses a link the topology lacks; verify the schedule first", "schedule")
    start = np.fromiter(map(itemgetter(3), transfers), dtype=float, count=len(transfers))
    return float((start + over[link]).max())


def handover_s(first: Schedule, second: Schedule) -> float:
    """The earliest time ``second`` (timed from 0) may start after ``first``: each of its sends finds its link's
    last send of ``first`` over (landed, lane free) and its sender holding everything ``first`` brought it.

    Tighter than ``schedule_end(first)``, which waits for every link: under cut-through switches a hop out of a
    switch lands alpha after it starts but holds its link for the chunk's bytes' time, so the last down-link of a
    ReduceScatter is busy a chunk after the last partial landed, and a next half starting only on GPU up-links
    need not wait for it (a crossbar ReduceScatter's 6 chunks per rank on ``dgxa100``: 1/6 of a shard's time)."""
    if not first.transfers or not second.transfers:
        return schedule_end(first)
    costs = link_costs(first.topology, first.chunk_bytes)
    keys = list(first.topology.links)
    over = np.array([costs[key].over for key in keys])
    _, src, dst, end = _columns(first.transfers)
    link = _link_index(first.topology, src, dst)
    _, src2, dst2, _ = _columns(second.transfers)
    link2 = _link_index(first.topology, src2, dst2)
    if link is None or link2 is None:
        raise CcvizError("schedule: a transfer uses a link the topology lacks; verify the schedule first", "schedule")
    start = np.fromiter(map(itemgetter(3), first.transfers), dtype=float, count=len(first.transfers))
    start2 = np.fromiter(map(itemgetter(3), second.transfers), dtype=float, count=len(second.transfers))
    free = np.full(len(keys), -np.inf)
    np.maximum.at(free, link, start + over[link])  # when each link is over with ``first``
    size = int(max(max(first.topology.nodes), dst.max(), src2.max())) + 1
    held = np.full(size, -np.inf)
    np.maximum.at(held, dst, end)  # when each node has everything ``first`` brought it
    wait = np.maximum(free[link2], held[src2]) - start2  # how far each send of ``second`` must move
    return float(max(0.0, wait.max()) + start2.min())


def concatenate(first: Schedule, second: Schedule, target: Collective, tight: bool = False) -> Schedule:
    """Run ``second`` after ``first`` ends, both re-labelled onto ``target``'s chunks by (source, index).

    AllReduce = ReduceScatter then AllGather: the result's finish time is exactly the sum. ``second`` is
    shifted only as far as needed, so a schedule synthesized to start at ``schedule_end(first)`` keeps
    its exact times (shifting adds float rounding between a switch hop and the arrival it forwards).
    ``tight``: shifted only until each send finds its link and its data ready (``handover_s``), not until
    every link of ``first`` is over. A part that needs neither a shift nor new chunk ids is taken as it is
    (a 512-GPU AllReduce has half a million transfers).
    """
    if not (first.is_timed and second.is_timed):
        raise CcvizError("schedule: only timed schedules can be concatenated; simulate them first", "schedule")
    first_end = handover_s(first, second) if tight else schedule_end(first)
    offset = max(0.0, first_end - min((t.start_s for t in second.transfers), default=first_end))
    transfers: list[Transfer] = []
    for part, shift in ((first, 0.0), (second, offset)):
        transfers += _relabelled(part, target, shift)
    est = (second.estimated_finish_s or schedule_end(second)) + offset
    return Schedule(first.topology, target, transfers, first.algorithm, dict(first.options), first.status,
                    estimated_finish_s=est, notes=[*first.notes, f"then {second.collective.name} from "
                                                   f"{us_text(first_end)}"],
                    cut_short=first.cut_short or second.cut_short)


def onto(part: Schedule, target: Collective) -> Schedule:
    """``part`` (a schedule of some of ``target``'s chunks, e.g. a workload's reductions alone) as a schedule
    of ``target``, its chunks matched by (source, index), its times unchanged."""
    return replace(part, collective=target, transfers=_relabelled(part, target, 0.0))


def _relabelled(part: Schedule, target: Collective, shift: float) -> list[Transfer]:
    """``part``'s transfers on ``target``'s chunks (matched by (source, index)), ``shift`` seconds later."""
    by_key = {(c.source, c.index): c.id for c in target.chunks}
    ids = [by_key.get((c.source, c.index), -1) for c in part.collective.chunks]
    used = sorted({t.chunk for t in part.transfers})
    missing = next((c for c in used if ids[c] < 0), None)
    if missing is not None:
        raise CcvizError(f"schedule: chunk {missing} of {part.collective.name} has no counterpart in {target.name}",
                         "schedule")
    if shift == 0.0 and all(ids[c] == c for c in used):
        return part.transfers
    new = tuple.__new__
    with gc_paused():  # tuples only: nothing to collect, and a collection per 700 tuples costs more than the work
        return [new(Transfer, (ids[t[0]], t[1], t[2], t[3] + shift, t[4] + shift, t[5], t[6]))
                for t in part.transfers]
