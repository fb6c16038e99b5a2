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
them ASAP (``assign_times``): time reversal alone is causal only when every link costs the same in
both directions, which fails under ``switch_hop="teccl"`` or ``"free"`` (a hop out of a switch is
cheaper than the reversed hop into it); the replay never makes a symmetric schedule slower, repairs
an asymmetric one, and moves chains through switches in one go, as the switch rule requires.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

from ccviz.collectives import Chunk, Collective
from ccviz.errors import CcvizError
from ccviz.physics import link_costs, tol
from ccviz.schedule import Schedule, Transfer
from ccviz.simulate import assign_times
from ccviz.topology import Topology
from ccviz.units import us_text

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


@dataclass
class _Tree:
    """The useful part of a forward schedule: first arrivals and the switch hops that feed them.

    ``children[k]`` lists the kept forward transfers that forward what transfer k
    delivered; reversed, transfer k waits for all of them.
    """

    kept: list[int]
    children: dict[int, list[int]]
    switch_pairs: dict[tuple[int, int], list[tuple[int, int]]]  # (switch, chunk) -> [(arrival, departure)]


def _forward_tree(forward: Schedule, feeders: dict[int, int] | None) -> _Tree:
    """Keep each rank's first arrival of a chunk and prune branches that feed nobody."""
    switches = set(forward.topology.switches)
    transfers = forward.transfers
    pre = [c.pre for c in forward.collective.chunks]
    ends = [t.end_s for t in transfers]
    first_arrival: dict[tuple[int, int], int] = {}
    into_switch: dict[tuple[int, int], list[int]] = defaultdict(list)
    for k in sorted(range(len(transfers)), key=ends.__getitem__):  # stable: ties in list order
        t = transfers[k]
        if t.dst in switches:
            into_switch[(t.dst, t.chunk)].append(k)
        elif t.dst not in pre[t.chunk] and (t.dst, t.chunk) not in first_arrival:
            first_arrival[(t.dst, t.chunk)] = k
    feeder = feeders if feeders is not None else _switch_feeders(forward, into_switch)
    # A transfer is useful when it is a first arrival at a rank, or feeds a switch hop that is.
    useful: set[int] = set(first_arrival.values())
    for k in first_arrival.values():
        while transfers[k].src in switches:
            k = feeder[k]
            useful.add(k)
    children: dict[int, list[int]] = defaultdict(list)
    switch_pairs: dict[tuple[int, int], list[tuple[int, int]]] = defaultdict(list)
    for k in sorted(useful):
        t = transfers[k]
        if t.src in switches:
            parent = feeder[k]
            if children[parent]:
                raise CcvizError(
                    f"schedule: switch {t.src} multicasts chunk {t.chunk}; a multicast cannot be reversed into a "
                    "reduction (a switch cannot add partials) - synthesize the broadcast without switch copies",
                    "schedule",
                )
            children[parent].append(k)
            switch_pairs[(t.src, t.chunk)].append((parent, k))
        else:
            parent = first_arrival.get((t.src, t.chunk))
            if parent is not None:
                children[parent].append(k)
    return _Tree(sorted(useful), children, switch_pairs)


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
            ready = [a for a in arrivals if transfers[a].end_s <= s + _separation(s)]
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
    tree = _forward_tree(forward, feeders)
    if not tree.kept:
        return Schedule(topology, target, [], forward.algorithm, dict(forward.options), forward.status)
    fwd = forward.transfers
    horizon = max(fwd[k].end_s for k in tree.kept)
    steps = _reversed_steps(tree, {k: horizon - fwd[k].end_s for k in tree.kept})
    untimed = [
        Transfer(chunk_map[fwd[k].chunk], fwd[k].dst, fwd[k].src, None, None, "reduce", steps[k])
        for k in sorted(tree.kept, key=lambda k: (steps[k], k))
    ]
    draft = Schedule(topology, target, untimed, forward.algorithm, dict(forward.options), forward.status)
    transfers = assign_times(draft).transfers
    finish = max(t.end_s for t in transfers)
    return Schedule(topology, target, transfers, forward.algorithm, dict(forward.options), forward.status,
                    estimated_finish_s=finish,
                    notes=[*forward.notes, "reduction = time-reversed copy schedule on the reversed topology"])


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


def _reversed_steps(tree: _Tree, nominal: dict[int, float]) -> dict[int, float]:
    """Logical steps of the reversed transfers, replayed by the simulator (``assign_times``).

    Reversed time orders the transfers: a node sends its partial up only after the partials of its
    whole forward subtree have arrived, which come earlier in reversed time. Steps are the distinct
    ranks of the nominal reversed starts (ties broken by index, so passes never share a step), so the untimed rule (a send waits for every earlier-step arrival of
    its chunk) is exactly the tree's waits and no cycle can form. A pass through a switch leaves by
    the reverse of the forward arrival; its step is put just after the step it enters by, so the
    simulator pairs each pass's entry and exit and moves the chain through the switch in one go.
    """
    steps = {k: float(i) for i, k in enumerate(sorted(nominal, key=lambda k: (nominal[k], k)))}
    leaves_by = {departure: arrival for pairs in tree.switch_pairs.values() for arrival, departure in pairs}
    entered = set(leaves_by.values())
    for departure in sorted(leaves_by, key=nominal.__getitem__):
        if departure in entered:
            continue  # not a chain's last hop; reached from the hop it feeds
        k = departure
        while k in leaves_by:  # walk the chain back: each exit just after its entry
            exit_hop = leaves_by[k]
            steps[exit_hop] = steps[k] + (math.floor(steps[k]) + 1 - steps[k]) / 2
            k = exit_hop
    return steps


def schedule_end(schedule: Schedule) -> float:
    """When a timed schedule is over: its last arrival, or later if a link is still serializing.

    (Under ``switch_hop="teccl"``/``"free"`` a hop out of a switch can land before its link is free again.)
    """
    costs = link_costs(schedule.topology, schedule.chunk_bytes)
    return max((t.start_s + costs[(t.src, t.dst)].over for t in schedule.transfers), default=0.0)


def concatenate(first: Schedule, second: Schedule, target: Collective) -> Schedule:
    """Run ``second`` after ``first`` ends, both re-labelled onto ``target``'s chunks by (source, index).

    AllReduce = ReduceScatter then AllGather: the result's finish time is exactly the sum. ``second`` is
    shifted only as far as needed, so a schedule synthesized to start at ``schedule_end(first)`` keeps
    its exact times (shifting adds float rounding between a switch hop and the arrival it forwards).
    """
    if not (first.is_timed and second.is_timed):
        raise CcvizError("schedule: only timed schedules can be concatenated; simulate them first", "schedule")
    by_key = {(c.source, c.index): c.id for c in target.chunks}
    first_end = schedule_end(first)
    offset = max(0.0, first_end - min((t.start_s for t in second.transfers), default=first_end))
    transfers = []
    for part, shift in ((first, 0.0), (second, offset)):
        for t in part.transfers:
            c = part.collective.chunks[t.chunk]
            if (c.source, c.index) not in by_key:
                raise CcvizError(f"schedule: chunk {t.chunk} of {part.collective.name} has no counterpart in "
                                 f"{target.name}", "schedule")
            transfers.append(t._replace(chunk=by_key[(c.source, c.index)], start_s=t.start_s + shift,
                                        end_s=t.end_s + shift))
    est = (second.estimated_finish_s or schedule_end(second)) + offset
    return Schedule(first.topology, target, transfers, first.algorithm, dict(first.options), first.status,
                    estimated_finish_s=est, notes=[*first.notes, f"then {second.collective.name} from "
                                                   f"{us_text(first_end)}"])
