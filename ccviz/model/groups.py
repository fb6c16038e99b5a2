"""Process groups: a collective over some of the fabric's GPUs while the others only relay.

A training job runs each collective over a group of ranks (tensor-parallel inside a box, data-parallel
across boxes). The group's chunks have pre- and postconditions on its members only; every other GPU may
still carry its traffic. ``parse_ranks`` reads the CLI's ``0-7,16,18``; ``group_ranks`` checks a group
against a fabric; ``relay_fabric`` is the fabric as the group's limit sees it (ForestColl's
compute-node formulation: GPUs outside the group are relays, like switches that may copy).
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace
from numbers import Integral

from ccviz.errors import CcvizError
from ccviz.model.schedule import Schedule, Transfer
from ccviz.model.topology import Topology
from ccviz.model.validate import MAX_NODES

MAX_RANK_TEXT = 100_000


def parse_ranks(text: str, field: str = "ranks") -> list[int]:
    """``"0-7,16,18"`` -> [0, 1, ..., 7, 16, 18] (ranges inclusive, in the order written)."""
    if not isinstance(text, str) or not text.strip():
        raise CcvizError(f"{field}: give GPU ids as a comma list with ranges, e.g. 0-7,16,18", field)
    if len(text) > MAX_RANK_TEXT:
        raise CcvizError(f"{field}: the rank list is longer than {MAX_RANK_TEXT} characters", field)
    out: list[int] = []
    for part in text.split(","):
        part = part.strip()
        lo, dash, hi = part.partition("-")
        try:
            first = int(lo)
            last = int(hi) if dash else first
        except ValueError:
            raise CcvizError(f"{field}: {part!r} is not a GPU id or a range like 0-7 (write e.g. 0-7,16,18)",
                             field) from None
        if first < 0 or last < first:
            raise CcvizError(f"{field}: {part!r} is not a range of GPU ids from low to high, e.g. 0-7", field)
        if len(out) + last - first + 1 > MAX_NODES:  # refused before a list of a billion ids is built
            raise CcvizError(f"{field}: {part!r} names more than {MAX_NODES:,} GPUs, more than any fabric ccviz "
                             "reads has; name the group's GPUs, e.g. 0-7,16,18", field)
        out.extend(range(first, last + 1))
    return out


def group_ranks(topology: Topology, ranks: Sequence[int] | str, field: str = "ranks") -> tuple[int, ...]:
    """The group's ranks checked against the fabric: GPUs of it, each once, at least two."""
    from ccviz.model import validate as v

    if isinstance(ranks, str):
        group = parse_ranks(ranks, field)
    elif isinstance(ranks, Sequence):  # whole numbers only: 0.5 was read as GPU 0
        group = [int(r) if isinstance(r, Integral) and not isinstance(r, bool) else v.integer(r, f"{field}[{k}]", lo=0)
                 for k, r in enumerate(ranks)]
    else:
        raise CcvizError(f"{field}: expected a list of ranks or a range text like 0-3,8, got {ranks!r}", field)
    seen: set[int] = set()
    for r in group:
        if r not in topology.nodes:
            raise CcvizError(f"{field}: GPU {r} is not in {topology.name!r} (its GPUs are "
                             f"{span_text(topology.gpus)})", field)
        if topology.is_switch(r):
            raise CcvizError(f"{field}: node {r} of {topology.name!r} is a switch, not a GPU; a group holds GPUs "
                             f"only ({span_text(topology.gpus)})", field)
        if r in seen:
            raise CcvizError(f"{field}: GPU {r} is listed twice; name each rank of the group once", field)
        seen.add(r)
    if len(group) < 2:
        raise CcvizError(f"{field}: a group needs at least two GPUs, got {group}", field)
    return tuple(group)


def is_whole(topology: Topology, ranks: Sequence[int]) -> bool:
    """Whether a collective over ``ranks`` is one over every GPU of the fabric (in the fabric's order)."""
    return tuple(ranks) == tuple(topology.gpus)


def relay_fabric(topology: Topology, ranks: Sequence[int]) -> Topology:
    """The fabric with every GPU outside the group turned into a relay (a switch that may copy and hold).

    Used for the group's limit: the cut argument then counts only the group's shards, and paths may still
    cross the other GPUs. Node ids and links are unchanged.
    """
    members = set(ranks)
    nodes = [n if n.is_switch or n.id in members else replace(n, kind="switch", copy=True, buffer=True)
             for n in topology.nodes.values()]
    meta = {k: v for k, v in topology.meta.items() if k != "buffer_ranks"}
    return topology.with_changes(nodes=nodes, meta=meta, name=f"{topology.name} (group of {len(members)})")


def span_text(ids: Sequence[int]) -> str:
    """GPU ids written compactly: 0-7,16,18."""
    return rank_text(sorted(ids))


def rank_text(ranks: Sequence[int]) -> str:
    """A process group as ``--ranks`` reads it, in its own order (the order places a ring's neighbours): runs
    of consecutive ids as ranges, 0-3,8."""
    parts: list[str] = []
    i = 0
    while i < len(ranks):
        j = i
        while j + 1 < len(ranks) and ranks[j + 1] == ranks[j] + 1:
            j += 1
        parts.append(str(ranks[i]) if i == j else f"{ranks[i]}-{ranks[j]}")
        i = j + 1
    return ",".join(parts)



def judged_on(topology: Topology, schedule: Schedule) -> Schedule:
    """A schedule made on ``relay_fabric`` put back on the real fabric, where the relays are GPUs.

    A partial sum crossing a relay switch is a plain forward; crossing a GPU, the simulator would add it
    into that GPU's holding. So every hop of a partial sum *into* a relay GPU becomes ``relay`` and is
    followed in the list by the hop that carries it on (``ccviz.judge.simulate.relay_continuations``):
    the relay's arrivals and departures of a chunk are paired first come, first served.
    """
    members = set(schedule.collective.ranks)
    relays = {g for g in topology.gpus if g not in members}
    reducing = {c.id for c in schedule.collective.chunks if c.reduce}
    transfers = schedule.transfers
    into: dict[tuple[int, int], list[int]] = defaultdict(list)
    out_of: dict[tuple[int, int], list[int]] = defaultdict(list)
    for i, t in enumerate(transfers):
        if t.chunk in reducing and t.dst in relays:
            into[(t.chunk, t.dst)].append(i)
        if t.chunk in reducing and t.src in relays:
            out_of[(t.chunk, t.src)].append(i)
    follow: dict[int, int] = {}
    for key, arrivals in into.items():
        departures = sorted(out_of.get(key, []), key=lambda i: (transfers[i].start_s or 0.0, i))
        arrivals = sorted(arrivals, key=lambda i: (transfers[i].end_s or 0.0, i))
        if len(departures) != len(arrivals):
            raise CcvizError(f"ranks: the schedule carries partial sums of chunk {key[0]} through GPU {key[1]} "
                             "without forwarding each once; this algorithm cannot run this group", "ranks")
        follow.update(zip(arrivals, departures, strict=True))
    continuation = set(follow.values())
    ordered: list[Transfer] = []
    for i in range(len(transfers)):
        if i in continuation:
            continue
        while True:
            t = transfers[i]
            ordered.append(t._replace(op="relay") if i in follow else t)
            if i not in follow:
                break
            i = follow[i]
    return dataclasses.replace(schedule, topology=topology, transfers=ordered)


def needs_relays(topology: Topology, ranks: Sequence[int]) -> bool:
    """Whether some member reaches another only by crossing a GPU outside the group."""
    from ccviz.model.routing import earliest_arrivals

    members = set(ranks)
    hops = dict.fromkeys(topology.links, 1.0)
    inside = lambda n: n in members or topology.is_switch(n)  # noqa: E731
    first = next(iter(members))
    there = earliest_arrivals(topology, {first: 0.0}, hops, through=inside)
    back = earliest_arrivals(topology, {first: 0.0}, hops, reverse=True, through=inside)
    return any(math.isinf(there[m]) or math.isinf(back[m]) for m in members)
