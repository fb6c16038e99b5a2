"""The booking floor: how early any booking of a schedule's own routes and pieces could end.

A schedule fixes two things a booking cannot change: which links each piece crosses (its trees and their routes
through switches) and how large the pieces are (the chunking). Its booking decides only *when*. This bounds the
finish of every booking of those routes and pieces, in continuous time, whatever order or slot grid it uses:

- a send cannot start before the sends that bring its data: a copy leaves a GPU after the piece's arrival there,
  a partial sum after every partial summed into it (its subtree), a pass through a switch after some arrival of
  the piece at that switch (the earliest, as the switch may forward any); each hop lasts its delay
  (``physics.arrival_delay``), so ``head`` (the earliest start) is a longest path from the sources;
- after a send lands, what it feeds must still run: ``tail`` (the send's delay and, where the send is the only
  way its data reaches the next node, the longest chain after it; through a switch, the shortest);
- a link serializes its pieces (``LinkCost.busy`` each, ``lanes`` at once): its last piece starts no earlier than
  its earliest head plus the others' busy time, and the schedule then lasts at least the shortest tail among its
  pieces.

The floor is the largest of those link bounds and of every send's head + tail. It counts no alpha as link time
(alpha is latency, not occupancy) and ignores conflicts between links, so it is a *lower* bound only: a schedule
ending near it books its routes about as well as they can be booked; one far above it loses time to its booking
(or to conflicts the bound cannot see), not to its trees. It bounds bookings of these routes and pieces only,
not other trees or another chunking: it is never a bound on the collective.
"""

from __future__ import annotations

import math
from collections import defaultdict

from ccviz.judge.simulate import on_declared_hardware
from ccviz.model.physics import link_costs
from ccviz.model.schedule import COMBINE, Schedule


def booking_floor(schedule: Schedule) -> float | None:
    """Seconds before which no booking of ``schedule``'s routes and pieces can end (see the module); None for an
    untimed schedule, an empty one or one that sums in switches (``combine``: its passes are not one route). On a
    fabric with a hardware link model, on the fabric the judge uses, plus the operation's fixed latency."""
    schedule, latency_s = on_declared_hardware(schedule)
    transfers = schedule.transfers
    if not transfers or not schedule.is_timed or any(t.op == COMBINE for t in transfers):
        return None
    topology, collective = schedule.topology, schedule.collective
    costs = link_costs(topology, schedule.chunk_bytes)
    is_gpu = {n: not topology.is_switch(n) for n in topology.nodes}
    holders = {c.id: c.pre for c in collective.chunks}
    summing = {c.id: c.reduce for c in collective.chunks}
    arrivals: dict[tuple[int, int], list[int]] = defaultdict(list)  # (chunk, node) -> sends landing there
    departures: dict[tuple[int, int], list[int]] = defaultdict(list)  # (chunk, node) -> sends leaving it
    for i, t in enumerate(transfers):
        arrivals[(t.chunk, t.dst)].append(i)
        departures[(t.chunk, t.src)].append(i)
    delay = [costs[(t.src, t.dst)].delay for t in transfers]
    order = sorted(range(len(transfers)), key=lambda i: (transfers[i].start_s, transfers[i].end_s))
    head = [0.0] * len(transfers)
    for i in order:  # a valid schedule starts every send after the sends it needs
        t = transfers[i]
        head[i] = _earliest(t, transfers, arrivals.get((t.chunk, t.src), ()), head, delay,
                            is_gpu[t.src], summing[t.chunk], t.src in holders[t.chunk])
    tail = [0.0] * len(transfers)
    for i in reversed(order):
        t = transfers[i]
        tail[i] = delay[i] + _after(t, transfers, arrivals[(t.chunk, t.dst)], departures.get((t.chunk, t.dst), ()),
                                    tail, is_gpu[t.dst], summing[t.chunk])
    floor = max(h + q for h, q in zip(head, tail, strict=True))
    by_link: dict[tuple[int, int], list[int]] = defaultdict(list)
    for i, t in enumerate(transfers):
        by_link[(t.src, t.dst)].append(i)
    for key, sends in by_link.items():
        cost = costs[key]
        waves = math.ceil(len(sends) / cost.lanes)
        floor = max(floor, min(head[i] for i in sends) + (waves - 1) * cost.busy + min(tail[i] for i in sends))
    return floor + latency_s


def _earliest(send, transfers: list, fed_by, head: list[float], delay: list[float], at_gpu: bool, summing: bool,
              holds: bool) -> float:
    """The earliest start of ``send``: after the arrival of its piece at its sender (a copy: the first; a GPU's
    partial sum: every partial summed into it before it left; a pass through a switch: the first)."""
    if at_gpu and summing:
        if any(transfers[j].op == "relay" for j in fed_by):
            return 0.0  # a relayed partial and the GPU's own leave apart: which send carries which is not fixed
        done = [head[j] + delay[j] for j in fed_by if transfers[j].end_s <= send.start_s]
        return max(done, default=0.0)
    if at_gpu and holds:
        return 0.0  # a copy's source holds its piece from the start
    return min((head[j] + delay[j] for j in fed_by), default=0.0)


def _after(send, transfers: list, landed, leaving, tail: list[float], at_gpu: bool, summing: bool) -> float:
    """How long the schedule must run after ``send`` lands: the longest chain it feeds at a GPU (every later
    partial sum leaving it; every copy leaving it where this is the piece's only arrival), the shortest through a
    switch (any of its passes may be this one's)."""
    if not leaving:
        return 0.0
    if not at_gpu:
        return min(tail[j] for j in leaving)
    if summing:
        if any(transfers[j].op == "relay" for j in landed):
            return 0.0
        return max((tail[j] for j in leaving if transfers[j].start_s >= send.end_s), default=0.0)
    return max(tail[j] for j in leaving) if len(landed) == 1 else 0.0
