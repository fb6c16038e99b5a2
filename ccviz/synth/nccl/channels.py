"""NCCL's channels laid on a fabric: as many rings as the fabric has parallel scale-up links per GPU, each ring
on its own switch plane (or its own direct links), crossing boxes rail by rail.

NCCL builds its rings so that every NVLink (and every NIC) carries traffic: on an NVSwitch box a channel's
hops all go through one switch, and the channels are spread over the switches in proportion to the links
a GPU has to each (5/4/4/5 of a DGX H100's 18). Across boxes a ring leaves a box from the GPU of the rail it
enters the next box on (a snake: boxes alternately walked forward and backward), so every inter-box hop is
GPU -> rail leaf -> GPU; channel c starts at local GPU c, so the channels cross on every rail.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from fractions import Fraction
from functools import reduce
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


def plane_slots(topology: Topology, gpu: int) -> list[int]:
    """Switch ids repeated in proportion to the GPU's bandwidth to each: channel c goes through slot c."""
    switches = scaleup_switches(topology, gpu)
    if not switches:
        return []
    weights = [Fraction(bw).limit_denominator(1000) for _, bw in switches]
    unit = reduce(lambda a, b: Fraction(gcd(a.numerator * b.denominator, b.numerator * a.denominator),
                                        a.denominator * b.denominator), weights)
    counts = [min(MAX_CHANNELS, int(w / unit)) for w in weights]
    if sum(counts) > MAX_CHANNELS:  # links of unrelated rates: one slot per switch
        counts = [1] * len(counts)
    slots: list[int] = []
    for (switch, _), k in zip(switches, counts, strict=True):
        slots.extend([switch] * k)
    return slots


def channel_count(topology: Topology, boxes: Boxes) -> int:
    """How many rings NCCL would run: a whole number of rounds over the parallel scale-up links (switch slots,
    or direct-link strides), at least ``MIN_CHANNELS`` as NCCL runs on NVLink systems, at most 32."""
    first = boxes.boxes[0][0]
    slots = plane_slots(topology, first)
    peers = [link.dst for link in topology.out_links.get(first, []) if topology.nodes[link.dst].kind == "gpu"]
    base = len(slots) if slots else len(direct_strides(boxes.per_box)) if len(peers) >= 2 else 1
    rounds = max(1, -(-MIN_CHANNELS // base))
    return max(1, min(MAX_CHANNELS, base * rounds) // base * base)


def direct_strides(n: int) -> list[int]:
    """Strides s with gcd(s, n) = 1: each walks all n GPUs of a directly connected box as a ring."""
    return [s for s in range(1, n) if gcd(s, n) == 1] or [1]


def ring_order(boxes: Boxes, channel: int) -> list[int]:
    """Channel ``channel``'s ring: every box walked from local GPU ``channel`` (alternately backward), so each
    box is left and entered on the same rail; on direct-connected boxes the walk strides through the box."""
    n = boxes.per_box
    strides = direct_strides(n)
    stride = strides[channel % len(strides)]
    start = channel % n
    order: list[int] = []
    for k, box in enumerate(boxes.boxes):
        walk = [box[(start + stride * i) % n] for i in range(n)]
        if k % 2 == 1:  # walked backward: entered on the rail the previous box left from
            walk = [box[(start - stride - stride * i) % n] for i in range(n)]
        order.extend(walk)
    return order


class ChannelLayout(Layout):
    """A ``Layout`` whose sends go the way their channel's ring does: through the channel's switch plane inside
    a box, over the shared rail leaf between boxes, straight over a direct link where there is one."""

    def __init__(self, topology: Topology, collective, channel_of: dict[int, int]) -> None:
        super().__init__(topology, collective)
        self.channel_of = channel_of

    def path(self, src: int, dst: int, channel: int) -> list[int] | None:
        topology = self.topology
        if (src, dst) in topology.links:
            return [src, dst]
        slots = plane_slots(topology, src)
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
