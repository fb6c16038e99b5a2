"""NCCL's channels laid on a fabric: as many rings as the fabric has parallel scale-up links per GPU, each ring
on its own switch plane (or its own direct links), crossing boxes rail by rail.

NCCL builds its rings so that every NVLink (and every NIC) carries traffic: on an NVSwitch box a channel's
hops all go through one switch, and the channels are spread over the switches in proportion to the links
a GPU has to each (5/4/4/5 of a DGX H100's 18). Across boxes a ring leaves a box from the GPU of the rail it
enters the next box on (a snake: boxes alternately walked forward and backward), so every inter-box hop is
GPU -> rail leaf -> GPU; channel c starts at local GPU c, so the channels cross on every rail.
"""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import dataclass
from functools import lru_cache
from math import gcd

from ccviz.model.placement import Layout
from ccviz.model.routing import router_for
from ccviz.model.topology import Topology

MAX_CHANNELS = 32  # NCCL's MAXCHANNELS
MIN_CHANNELS = 16  # NCCL runs 16 to 32 channels on NVLink systems (its ring graphs on DGX H100 / A100)


@dataclass(frozen=True)
class Boxes:
    """The fabric's GPUs grouped by box (node group), in id order; one box when the builder set none."""

    boxes: tuple[tuple[int, ...], ...]

    @classmethod
    def of(cls, topology: Topology, ranks: tuple[int, ...]) -> Boxes:
        groups: dict[str, list[int]] = defaultdict(list)
        for r in ranks:
            groups[topology.nodes[r].group or ""].append(r)
        return cls(tuple(tuple(sorted(g)) for g in groups.values()))

    @property
    def per_box(self) -> int:
        return min(len(b) for b in self.boxes)


def scaleup_switches(topology: Topology, gpu: int) -> list[tuple[int, float]]:
    """The switches of a GPU's own box it is cabled to, with the link bandwidth to each."""
    group = topology.nodes[gpu].group
    return [(link.dst, link.bandwidth_GBps) for link in topology.out_links.get(gpu, [])
            if topology.nodes[link.dst].kind == "switch" and topology.nodes[link.dst].group == group]


def apportion(channels: int, weights: list[float]) -> list[int]:
    """Channels per switch plane in proportion to the GPU's bandwidth to each (largest remainders)."""
    total = sum(weights)
    exact = [channels * w / total for w in weights]
    counts = [int(x) for x in exact]
    for i in sorted(range(len(weights)), key=lambda i: counts[i] - exact[i])[:channels - sum(counts)]:
        counts[i] += 1
    return counts


def plane_slots(topology: Topology, gpu: int, channels: int) -> list[int]:
    """The switch each of ``channels`` channels crosses from ``gpu`` (its planes apportioned by bandwidth)."""
    switches = scaleup_switches(topology, gpu)
    if not switches:
        return []
    counts = apportion(channels, [bw for _, bw in switches])
    return [switch for (switch, _), k in zip(switches, counts, strict=True) for _ in range(k)]


def channel_count(topology: Topology, boxes: Boxes) -> int:
    """How many rings NCCL would run: between 16 and 32 (NCCL's counts on NVLink systems), a multiple of the
    rails across boxes (each NIC carries as many), the count whose slowest switch plane leaves the most
    bandwidth (the fewest such); on direct-connected boxes one per GPU-walking stride (16 at least)."""
    first = boxes.boxes[0][0]
    switches = scaleup_switches(topology, first)
    if not switches:
        base = len(direct_cycles(boxes.per_box))
        return max(1, min(MAX_CHANNELS, -(-MIN_CHANNELS // base) * base))
    bws = [bw for _, bw in switches]
    multiple = boxes.per_box if len(boxes.boxes) > 1 else 1
    counts = [c for c in range(MIN_CHANNELS, MAX_CHANNELS + 1) if c % multiple == 0] or [MIN_CHANNELS]

    def rate(c: int) -> float:
        return c * min(bw / k for bw, k in zip(bws, apportion(c, bws), strict=True) if k)

    best = max(rate(c) for c in counts)
    return min(c for c in counts if rate(c) >= best * (1 - 1e-9))


@lru_cache(maxsize=32)
def direct_cycles(n: int) -> tuple[tuple[int, ...], ...]:
    """n - 1 Hamiltonian cycles of the complete directed graph on n GPUs that share no link (every GPU's
    n - 1 out-links each carry one ring, as RCCL's rings cover an MI300X's 7 Infinity Fabric links; such a
    decomposition exists for every n but 4 and 6, Tillson 1980). Found by a seeded randomized search; where it
    fails, the rings that stride through the GPUs (strides coprime with n)."""
    rng = random.Random(0)
    for _ in range(2000 if 2 < n <= 16 else 0):
        used: set[tuple[int, int]] = set()
        cycles: list[tuple[int, ...]] = []
        for _ in range(n - 1):
            cycle = _free_cycle(n, used, rng)
            if cycle is None:
                break
            cycles.append(cycle)
            used |= {(cycle[i], cycle[(i + 1) % n]) for i in range(n)}
        if len(cycles) == n - 1:
            return tuple(cycles)
    return tuple(tuple((s * i) % n for i in range(n)) for s in range(1, n) if gcd(s, n) == 1) or (tuple(range(n)),)


def _free_cycle(n: int, used: set[tuple[int, int]], rng: random.Random) -> tuple[int, ...] | None:
    for _ in range(200):
        path, seen = [0], {0}
        while len(path) < n:
            options = [v for v in range(n) if v not in seen and (path[-1], v) not in used]
            if not options:
                break
            path.append(rng.choice(options))
            seen.add(path[-1])
        if len(path) == n and (path[-1], 0) not in used:
            return tuple(path)
    return None


def ring_order(boxes: Boxes, channel: int, direct: bool = False) -> list[int]:
    """Channel ``channel``'s ring: every box walked from local GPU ``channel`` (alternately backward), so each
    box is left and entered on the same rail; on direct-connected boxes the walk follows the channel's own
    link-disjoint cycle (``direct_cycles``)."""
    n = boxes.per_box
    if direct:
        cycles = direct_cycles(n)
        cycle = cycles[channel % len(cycles)]
    else:
        cycle = tuple(range(n))
    at = cycle.index(channel % n)
    walk_local = list(cycle[at:] + cycle[:at])
    order: list[int] = []
    for k, box in enumerate(boxes.boxes):
        local = walk_local if k % 2 == 0 else walk_local[::-1]  # backward: in where the last box left
        order.extend(box[i] for i in local)
    return order


class ChannelLayout(Layout):
    """A ``Layout`` whose sends go the way their channel's ring does: through the channel's switch plane inside
    a box, over the shared rail leaf between boxes, straight over a direct link where there is one."""

    def __init__(self, topology: Topology, collective, channel_of: dict[int, int], channels: int) -> None:
        super().__init__(topology, collective)
        self.channel_of = channel_of
        self.channels = channels

    def path(self, src: int, dst: int, channel: int) -> list[int] | None:
        topology = self.topology
        if (src, dst) in topology.links:
            return [src, dst]
        slots = plane_slots(topology, src, self.channels)
        if slots:
            switch = slots[channel % len(slots)]
            if (switch, dst) in topology.links:
                return [src, switch, dst]
        shared = [link.dst for link in topology.out_links.get(src, [])
                  if topology.nodes[link.dst].kind == "switch" and (link.dst, dst) in topology.links]
        if shared:
            return [src, shared[channel % len(shared)], dst]
        return router_for(topology, self.collective.chunk_bytes).route(src, dst)

    def routes(self) -> list[list[int]]:
        routes = []
        for s in self.sends:
            route = self.path(s.src, s.dst, self.channel_of.get(s.chunk, 0))
            if route is None:
                from ccviz.errors import CcvizError

                raise CcvizError(f"topology: no route from GPU {s.src} to GPU {s.dst} for NCCL's ring", "topology")
            routes.append(route)
        return routes
