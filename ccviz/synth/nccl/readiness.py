"""Re-order an untimed schedule's steps by when each send's data is ready, so every link serves what is ready.

The simulator serves each link in step order (``ccviz.judge.simulate.assign_times``): a send whose step comes
first holds the link until its data arrives, even while later-step sends wait ready. A pipeline whose stages run
at different rates (an NVSwitch box sum, a tree over NICs, a multicast) then idles its slowest links. NCCL's
channels have no such order across phases (each phase has its own thread groups and FIFOs). This pass times the
schedule as the judge would, gives every send the moment its data was ready as its step (a send a bufferless
switch forwards keeps its feeding send's step plus a hair), and repeats while the finish improves; the judge
then times and verifies the re-ordered schedule on its own.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict

from ccviz.judge.simulate import assign_times, relay_continuations, switch_forwards
from ccviz.model import link_model
from ccviz.model.schedule import RELAY, Schedule

ROUNDS = 2  # passes at most (each one simulation of the schedule)


def reorder(schedule: Schedule, first_step: float = 0.0, rounds: int = ROUNDS) -> Schedule:
    """``schedule`` with the steps from ``first_step`` on set to ``first_step`` + their sends' ready times (in
    seconds), kept only while the judged finish improves; earlier steps stay first, as they were."""
    best, best_finish = schedule, None
    current = schedule
    for _ in range(rounds + 1):
        timed = _timed(current)
        finish = max((t.end_s for t in timed.transfers), default=0.0)  # finish_s, keeping the timed transfers
        if best_finish is not None and finish >= best_finish * (1 - 1e-3):
            break
        best, best_finish = current, finish
        current = current.with_transfers(_restepped(current, timed, first_step))
    return best


def finish_s(schedule: Schedule) -> float:
    """When ``schedule`` ends as the judge times it (without the operation's fixed latency, the same for all)."""
    return max((t.end_s for t in _timed(schedule).transfers), default=0.0)


def _timed(schedule: Schedule) -> Schedule:
    """Timed as the judge times it: on the fabric's effective links for the schedule's protocol."""
    effective = link_model.effective_topology(schedule.topology, link_model.protocol_of(schedule))
    return assign_times(dataclasses.replace(schedule, topology=effective, release="asap"))


def _restepped(schedule: Schedule, timed: Schedule, first_step: float) -> list:
    transfers, times = schedule.transfers, timed.transfers
    fed_by = {j: i for i, js in switch_forwards(schedule).items() for j in js}
    relayed_from = relay_continuations(transfers)
    arrivals: dict[tuple[int, int], list[tuple[float, float]]] = defaultdict(list)  # (node, chunk) -> (step, end)
    for t, s in zip(transfers, times, strict=True):
        if t.op != RELAY:
            arrivals[(t.dst, t.chunk)].append((t.step, s.end_s))
    step = [t.step for t in transfers]
    order = sorted(range(len(transfers)), key=lambda i: transfers[i].step)
    hair = 1e-12
    for i in order:
        t = transfers[i]
        if i in fed_by or t.step < first_step:
            continue
        j = relayed_from.get(i)
        if j is not None:
            ready = times[j].end_s
        else:
            ready = max((end for s, end in arrivals[(t.src, t.chunk)] if s < t.step), default=0.0)
        step[i] = first_step + ready
    for i in order:  # forwarded hops: their feeding hop's step and a hair per hop after it
        if i in fed_by and transfers[i].step >= first_step:
            k, depth = i, 0
            while k in fed_by:
                k, depth = fed_by[k], depth + 1
            step[i] = step[k] + depth * hair
    return [t._replace(step=s) for t, s in zip(transfers, step, strict=True)]
