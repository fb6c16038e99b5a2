"""Crossbar planes: the closed-form schedule for a box of GPUs cabled to parallel single-switch planes.

An NVSwitch box (``dgxh100``: 8 GPUs on 4 NVSwitches, 2 x 125 + 2 x 100 GB/s a GPU; ``nvl72``: 72 GPUs on 18
switch chips, 50 GB/s each) is one crossbar per switch: every GPU has one cable to every switch and no other.
The AllGather limit there is the cut "everything but v": (N - 1) / N x M over a GPU's summed in-bandwidth B.
No tree packing is needed to reach it: every GPU sends its shard to every other GPU directly (one star per
root), split over the planes in proportion to their bandwidths, and each plane is a complete bipartite
crossbar whose N - 1 shifts (in round r, GPU i sends to GPU i + r) are perfect matchings. So each plane books
one shift per slot of one chunk's bytes' time, every up-link and down-link busy in every slot, and ends
(units on the plane) x (a chunk's bytes' time) + one route's delay after it starts. Alpha is paid once per
route, not per slot (a link is busy for the bytes' time; a chunk lands alpha later).

Which (shift, chunk) unit goes to which plane is the classic makespan of identical jobs on machines of
different speeds: each unit to the plane that would end it soonest, which is optimal for unit jobs.
The chunk count is chosen from a few candidates by the closed form (more chunks: a shorter last route,
more transfers; kept under the transfer budget). A ReduceScatter is this AllGather's mirror turned around
in time (``reversal``), an AllReduce the two in a row; neither needs a switch that copies or reduces.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from fractions import Fraction
from math import gcd, lcm

from ccviz.model.collectives import Collective
from ccviz.model.physics import arrival_delay, occupancy
from ccviz.model.schedule import Transfer
from ccviz.model.topology import Topology
from ccviz.model.validate import MIN_CHUNK_BYTES

CHUNK_MULTIPLES = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512)  # chunk counts tried:
# these x the planes' base count, within the transfer budget
FEWER_CHUNKS_SLACK = 0.001  # the fewest chunks ending within this of the best candidate (at 0.005, the one-switch
# `star` AllGather 1 GB read 1.006 x the limit against the packed trees' 1.002)
BASE_FRACTION_DENOMINATOR = 64  # plane bandwidths are matched as ratios of at most this denominator


@dataclass(frozen=True)
class CrossbarPlanes:
    """The switches of a fabric that is nothing but crossbar planes, with each plane's GPU link bandwidth."""

    gpus: tuple[int, ...]
    planes: tuple[int, ...]
    bandwidths: tuple[float, ...]  # GB/s of every GPU's cable into (and out of) each plane

    def base_chunks(self) -> int:
        """Chunks per rank that split a shard over the planes in proportion to their bandwidths."""
        ratios = [Fraction(b / self.bandwidths[0]).limit_denominator(BASE_FRACTION_DENOMINATOR)
                  for b in self.bandwidths]
        scale = lcm(*(r.denominator for r in ratios))
        counts = [int(r * scale) for r in ratios]
        return sum(counts) // gcd(*counts)


def crossbar_planes(topology: Topology) -> CrossbarPlanes | None:
    """The planes where every link joins a GPU and a switch, every switch has one cable each way to every GPU,
    one alpha per plane and direction (a hardware link model charges a GPU's send its protocol step, a switch's
    forward the wire's alpha), one lane; else None (direct GPU links, switch tiers, NICs, rails). A plane's
    cables may differ in bandwidth (a designer's edit of one cable): its slot is then the slowest's
    (``plane_slots``), which loses nothing where the slow cables are one GPU's and that GPU binds the limit
    (every GPU then gets what it has), and little where one cable is faster (the others bind as before)."""
    gpus, switches = tuple(topology.gpus), tuple(topology.switches)
    if len(gpus) < 2 or not switches:
        return None
    rates: dict[int, set[float]] = {s: set() for s in switches}  # a plane's cables may differ (one edited)
    alphas: dict[tuple[int, bool], set[float]] = {(s, up): set() for s in switches for up in (True, False)}
    touched: dict[int, set[tuple[int, int]]] = {s: set() for s in switches}
    for (u, v), link in topology.links.items():
        if topology.is_switch(u) == topology.is_switch(v) or link.lanes != 1:
            return None
        switch, gpu = (u, v) if topology.is_switch(u) else (v, u)
        rates[switch].add(link.bandwidth_GBps)
        alphas[(switch, switch == v)].add(link.alpha_us)
        touched[switch].add((u, v))
    every = len(gpus)
    for s in switches:
        if len(alphas[(s, True)]) != 1 or len(alphas[(s, False)]) != 1 or len(touched[s]) != 2 * every:
            return None
    return CrossbarPlanes(gpus, switches, tuple(min(rates[s]) for s in switches))


def _assign(units: int, slots: list[float]) -> list[int]:
    """Units per plane: each unit to the plane that would end it soonest (optimal for identical units)."""
    counts = [0] * len(slots)
    heap = [(slot, p) for p, slot in enumerate(slots)]
    heapq.heapify(heap)
    for _ in range(units):
        _, p = heapq.heappop(heap)
        counts[p] += 1
        heapq.heappush(heap, ((counts[p] + 1) * slots[p], p))
    return counts


def predicted_finish(topology: Topology, planes: CrossbarPlanes, chunk_bytes: float, chunks: int) -> float:
    """The closed form: the latest plane's units x its slot + one route's delay (from time 0)."""
    n = len(planes.gpus)
    slots = plane_slots(topology, planes, chunk_bytes)
    counts = _assign((n - 1) * chunks, slots)
    return max((c - 1) * slot + _route_delay(topology, planes.gpus, s, chunk_bytes)
               for c, slot, s in zip(counts, slots, planes.planes, strict=True) if c)


def _route_delay(topology: Topology, gpus: tuple[int, ...], switch: int, chunk_bytes: float) -> float:
    """The longest route through ``switch``: the slowest up-link's delay and the slowest down-link's."""
    return max(arrival_delay(topology, g, switch, chunk_bytes) for g in gpus) + \
        max(arrival_delay(topology, switch, v, chunk_bytes) for v in gpus)


def plane_slots(topology: Topology, planes: CrossbarPlanes, chunk_bytes: float) -> list[float]:
    """Each plane's slot: its slowest cable's time for one chunk (one chunk's bytes' time where all are alike).
    Senders with faster up-links start later in the slot (``_send_offsets``), so every chunk of a shift lands on
    its down-link at the same moment and a slow sender's chunk never meets the next shift's on a down-link."""
    return [max(max(occupancy(topology, g, s, chunk_bytes), occupancy(topology, s, g, chunk_bytes))
                for g in planes.gpus) for s in planes.planes]


def _send_offsets(topology: Topology, gpus: tuple[int, ...], switch: int, chunk_bytes: float) -> dict[int, float]:
    """How long after its slot starts each GPU sends into ``switch``: the slowest up-link's delay less its own."""
    up = {g: arrival_delay(topology, g, switch, chunk_bytes) for g in gpus}
    slowest = max(up.values())
    return {g: slowest - d for g, d in up.items()}


def chunk_count(topology: Topology, planes: CrossbarPlanes, per_rank_bytes: float, max_transfers: int) -> int | None:
    """The chunks per rank whose closed-form finish is least, among multiples of the planes' base count that
    keep 2 (N - 1) N transfers per chunk within ``max_transfers``; None where not even one fits."""
    n = len(planes.gpus)
    base = planes.base_chunks()
    fits = [m * base for m in CHUNK_MULTIPLES
            if 2 * n * (n - 1) * m * base <= max_transfers and per_rank_bytes / (m * base) >= MIN_CHUNK_BYTES]
    if not fits:
        fits = [c for c in (1,) if 2 * n * (n - 1) <= max_transfers]
    if not fits:
        return None
    finish = {c: predicted_finish(topology, planes, per_rank_bytes / c, c) for c in fits}
    best = min(finish.values())
    return min(c for c in fits if finish[c] <= (1.0 + FEWER_CHUNKS_SLACK) * best)


def crossbar_allgather(topology: Topology, planes: CrossbarPlanes, collective: Collective,
                       start_s: float = 0.0) -> tuple[list[Transfer], float]:
    """Every GPU's shard to every other GPU over the planes, one shift per plane per slot; the transfers and
    the finish. ``collective`` is an AllGather over every GPU (its chunks per rank as given), or a ReduceScatter:
    then every GPU sends its part of GPU v's shard to v in the same shifts, and v adds it to its own (the switch
    only passes it on), so no switch copies or sums and no hop depends on another GPU's partial sum."""
    gpus = planes.gpus
    n, index = len(gpus), {g: i for i, g in enumerate(gpus)}
    reduce = collective.name == "reducescatter"
    if reduce:  # chunk (v, c): GPU v's shard, summed at v
        chunk_at = {(next(iter(c.post)), c.index): c.id for c in collective.chunks}
    else:  # chunk (g, c): GPU g's shard, copied from g
        chunk_at = {(next(iter(c.pre)), c.index): c.id for c in collective.chunks}
    up_op, down_op = ("relay", "reduce") if reduce else ("copy", "copy")
    size = collective.chunk_bytes
    slots = plane_slots(topology, planes, size)
    counts = _assign((n - 1) * collective.chunks_per_rank, slots)
    units = [(r, c) for c in range(collective.chunks_per_rank) for r in range(1, n)]
    transfers: list[Transfer] = []
    finish = start_s
    taken = 0
    for switch, slot, count in zip(planes.planes, slots, counts, strict=True):
        offset = _send_offsets(topology, gpus, switch, size)
        for k, (shift, c) in enumerate(units[taken:taken + count]):
            for g in gpus:
                t = start_s + k * slot + offset[g]
                v = gpus[(index[g] + shift) % n]
                up_end = t + arrival_delay(topology, g, switch, size)
                down_end = up_end + arrival_delay(topology, switch, v, size)
                cid = chunk_at[(v if reduce else g, c)]
                transfers.append(Transfer(cid, g, switch, t, up_end, up_op))
                transfers.append(Transfer(cid, switch, v, up_end, down_end, down_op))
                finish = max(finish, down_end)
        taken += count
    return transfers, finish
