"""A process group's schedule moves data only to where a member needs it (relays excepted).

A synthesizer that plans over the whole fabric may deliver a group's chunks to GPUs outside the group:
ForestColl's trees span every GPU, so ``synth leafspine -c allgather -a forestcoll --ranks 0,1`` sent
7,168 of its 17,049 transfers to non-members, and the group's finish counted them (a workload's job then
finished before one of its groups). Those transfers are dead: no member needs what they deliver and
nothing leaves their destination on the way to a member. ``members_only`` drops them, for any
algorithm, and the simulator judges the result again; the schedule as synthesized is kept where the
pruned one would not verify or would finish later.
"""

from __future__ import annotations

import dataclasses

from ccviz.judge.simulate import Timeline, simulate
from ccviz.model.groups import is_whole
from ccviz.model.physics import tol
from ccviz.model.schedule import Schedule


def useful_transfers(timeline: Timeline) -> list[int]:
    """Indices of the transfers that deliver a chunk to a member needing it, or carry it (a relay hop)
    toward such a delivery: one that leaves their destination with the chunk no earlier than they land.

    Walked latest start first, so every departure that could use a transfer's arrival is decided before it.
    """
    schedule = timeline.schedule
    needs = {c.id: (c.post if c.reduce else c.post - c.pre) for c in schedule.collective.chunks}
    start, arrival = timeline.start_s, timeline.arrival_s
    transfers = schedule.transfers
    latest_use: dict[tuple[int, int], float] = {}  # (node, chunk) -> latest start of a useful departure
    keep: list[int] = []
    for i in sorted(range(len(transfers)), key=lambda i: (float(start[i]), i), reverse=True):
        t = transfers[i]
        lands = float(arrival[i])
        if t.dst in needs[t.chunk] or latest_use.get((t.dst, t.chunk), -1.0) >= lands - tol(lands):
            keep.append(i)
            key = (t.src, t.chunk)
            latest_use[key] = max(latest_use.get(key, -1.0), float(start[i]))
    return sorted(keep)


def members_only(schedule: Schedule, timeline: Timeline) -> tuple[Schedule, Timeline]:
    """The group's schedule without its dead transfers, judged again; ``(schedule, timeline)`` unchanged for a
    collective over every GPU, when nothing is dead, or when the pruned schedule is not better."""
    if is_whole(schedule.topology, schedule.collective.ranks) or not timeline.verified:
        return schedule, timeline
    keep = useful_transfers(timeline)
    dropped = len(schedule.transfers) - len(keep)
    if not dropped:
        return schedule, timeline
    rounds = [schedule.rounds[i] for i in keep] if schedule.rounds else None
    pruned = dataclasses.replace(schedule, transfers=[schedule.transfers[i] for i in keep], rounds=rounds,
                                 notes=[*schedule.notes, f"{dropped:,} of {len(schedule.transfers):,} transfers "
                                        "dropped: they delivered only to GPUs outside the group (no member needs "
                                        "their data, no relay carries it on)"])
    judged = simulate(pruned)
    if not judged.verified or judged.finish_time_s > timeline.finish_time_s * (1 + 1e-9):
        return schedule, timeline
    return pruned, judged
