"""Boxes on rails: the closed form's schedule for NVSwitch boxes joined by rail switches (``dgxh100:boxes=N``).

Every box is crossbar planes over its own GPUs (``crossbar``), and rail j is one more crossbar joining GPU j of
every box. A shard then reaches another box's GPU j over its own rail, and the other GPUs of that box through
GPU j, which relays it over the box's planes: every remote shard crosses one rail hop and one plane hop. The
rails book their shifts one per slot like a plane (GPU j of box b sends to GPU j of box b + s); each box's
planes book shifts of the box's own shards at once, and of relayed shards as their chunks land, each unit on the
plane where it ends soonest (list scheduling). All boxes book alike, so a unit is one shift in every box.

Balancing rails and planes: a GPU takes in (G - 1) own-box and (B - 1)(G - 1) relayed shards over its planes
and (B - 1) over its rail, so with every remote shard relayed the planes bind at B (G - 1) / N x M over their
bandwidth, above the cut bound (N - 1) / N x M over planes and rail together (two 8-GPU ``dgxh100`` boxes at
nominal rates 14 / 450 against 15 / 500, 1.037 x; at the judged sustained rates, 0.824 of NVLink's and 0.97 of
the network's, 14 / 370.8 against 15 / 419.3, 1.056 x). So GPU j + r also forwards some chunks of GPU j it took
from a plane over its own rail (``forwarded_count``: as many as make rails and planes end together), and the
remote box's GPU j + r takes them from its rail instead of a relay: every remote chunk still crosses one rail,
and the planes carry fewer relays. The schedule is kept where it ends within ``CROSSBAR_ENOUGH`` x the limit.
"""

from __future__ import annotations

from dataclasses import dataclass

from ccviz.model.collectives import Collective
from ccviz.model.physics import arrival_delay, occupancy
from ccviz.model.schedule import Transfer
from ccviz.model.topology import Topology
from ccviz.model.validate import MIN_CHUNK_BYTES
from ccviz.synth.forestcoll.crossbar import CHUNK_MULTIPLES, FEWER_CHUNKS_SLACK, CrossbarPlanes


@dataclass(frozen=True)
class BoxesOnRails:
    """GPU j of box b (``gpus[b][j]``), each box's plane switches (alike bandwidths across boxes), the rails."""

    gpus: tuple[tuple[int, ...], ...]
    planes: tuple[tuple[int, ...], ...]  # per box, its plane switches in one bandwidth order
    rails: tuple[int, ...]  # rail j joins GPU j of every box

    @property
    def n_gpus(self) -> int:
        return sum(len(box) for box in self.gpus)


def boxes_on_rails(topology: Topology) -> BoxesOnRails | None:
    """The boxes and rails where every link joins a GPU and a switch (one lane, both ways), every switch is a
    plane of one box (cabled to all its GPUs, one bandwidth and alpha per direction) or a rail (one GPU of every
    box, alike for all rails), at least two boxes of two GPUs or more; else None. The directions may differ: a
    hardware link model charges a GPU's send its protocol step and a switch's forward the wire's alpha."""
    members: dict[int, set[int]] = {s: set() for s in topology.switches}
    kinds: dict[int, set[tuple[bool, float, float]]] = {s: set() for s in topology.switches}
    ends: dict[int, int] = {s: 0 for s in topology.switches}
    for (u, v), link in topology.links.items():
        if topology.is_switch(u) == topology.is_switch(v) or link.lanes != 1:
            return None
        switch, gpu = (u, v) if topology.is_switch(u) else (v, u)
        members[switch].add(gpu)
        kinds[switch].add((switch == v, link.bandwidth_GBps, link.alpha_us))
        ends[switch] += 1
    if not members or any(len(kinds[s]) != 2 or ends[s] != 2 * len(members[s]) for s in members):
        return None
    by_set: dict[frozenset[int], list[int]] = {}
    for s, gpus in members.items():
        by_set.setdefault(frozenset(gpus), []).append(s)
    sizes = sorted({len(key) for key in by_set})
    if len(sizes) != 2:
        return None
    rail_size, box_size = sizes
    boxes = [key for key in by_set if len(key) == box_size]
    rails = [s for key, ss in by_set.items() if len(key) == rail_size for s in ss]
    if (len(boxes) != rail_size or len(rails) != box_size or rail_size < 2 or box_size < 2
            or sorted(g for box in boxes for g in box) != sorted(topology.gpus)
            or len({frozenset(kinds[s]) for s in rails}) != 1):
        return None
    rail_of = {g: j for j, s in enumerate(rails) for g in members[s]}
    ordered = []
    for box in boxes:
        at = sorted(box, key=lambda g: rail_of.get(g, -1))
        if [rail_of.get(g) for g in at] != list(range(box_size)):
            return None  # a rail misses this box or meets it twice
        ordered.append(tuple(at))
    planes = [tuple(sorted(by_set[box], key=lambda s: sorted(kinds[s]))) for box in boxes]
    if len({tuple(frozenset(kinds[s]) for s in p) for p in planes}) != 1:
        return None  # boxes whose planes differ
    return BoxesOnRails(tuple(ordered), tuple(planes), tuple(rails))


def base_chunks(topology: Topology, fabric: BoxesOnRails) -> int:
    """Chunks per rank that split a relayed shard over one box's planes by bandwidth (``CrossbarPlanes``)."""
    box = fabric.planes[0]
    bandwidths = tuple(topology.links[(s, fabric.gpus[0][0])].bandwidth_GBps for s in box)
    return CrossbarPlanes(fabric.gpus[0], box, bandwidths).base_chunks()


def forwarded_count(boxes: int, size: int, chunks: int, rail_slot: float, plane_slots: list[float]) -> int:
    """How many own-box units (chunk c to GPU j + r) GPU j + r also forwards over its rail, so that the rails
    and the planes end together: each such unit is one more rail send per remote box and one relay fewer on the
    planes of each remote box. A GPU's rail carries (B - 1)(C + D) chunks, its planes (G - 1) B C - (B - 1) D over
    their summed rate; D balances the two (none where the planes are not the slower)."""
    planes_rate = sum(1.0 / slot for slot in plane_slots)  # chunks per second into one GPU over all planes
    rail_rate = 1.0 / rail_slot
    own, relayed = (size - 1) * chunks, (boxes - 1) * (size - 1) * chunks
    per_unit = (boxes - 1) * (1.0 / rail_rate + 1.0 / planes_rate)
    balanced = ((own + relayed) / planes_rate - (boxes - 1) * chunks / rail_rate) / per_unit
    return max(0, min(own, round(balanced)))


def _plan(topology: Topology, fabric: BoxesOnRails, chunk_bytes: float, chunks: int, start_s: float
          ) -> tuple[list[tuple[int, int, int, float]], list[tuple[int, int, int, int, float]], float]:
    """The rail units (box shift, chunk, r, start: r = 0 GPU j sends its own chunk, r > 0 GPU j + r forwards the
    chunk of GPU j it took from a plane) and plane units (shift r, chunk, box shift or 0 for own, plane, start),
    and the finish, all boxes alike."""
    boxes, size = len(fabric.gpus), len(fabric.gpus[0])
    g0 = fabric.gpus[0][0]
    rail_slot = occupancy(topology, g0, fabric.rails[0], chunk_bytes)
    rail_delay = arrival_delay(topology, g0, fabric.rails[0], chunk_bytes) + \
        arrival_delay(topology, fabric.rails[0], fabric.gpus[1][0], chunk_bytes)
    planes = fabric.planes[0]
    slots = [occupancy(topology, g0, p, chunk_bytes) for p in planes]
    delays = [arrival_delay(topology, g0, p, chunk_bytes) + arrival_delay(topology, p, fabric.gpus[0][1], chunk_bytes)
              for p in planes]
    free = [start_s] * len(planes)
    plane_units: list[tuple[int, int, int, int, float]] = []
    finish = start_s

    def book(at: float, r: int, c: int, s: int) -> float:
        """The unit on the plane where it ends soonest (list scheduling); its landing time."""
        p = min(range(len(planes)), key=lambda q: (max(free[q], at) + slots[q], q))
        t = max(free[p], at)
        free[p] = t + slots[p]
        plane_units.append((r, c, s, p, t))
        return t + delays[p]

    landed = {(r, c): book(start_s, r, c, 0) for c in range(chunks) for r in range(1, size)}  # own shards first
    forwarded = sorted(landed, key=lambda unit: (landed[unit], unit))[:forwarded_count(boxes, size, chunks,
                                                                                         rail_slot, slots)]
    rail_units, ready, rail_free = [], {}, start_s
    for c, s in ((c, s) for c in range(chunks) for s in range(1, boxes)):  # each GPU's own chunks first
        rail_units.append((s, c, 0, rail_free))
        ready[(s, c)] = rail_free + rail_delay
        rail_free += rail_slot
    for r, c in forwarded:  # then the chunks it took from its box, as they land
        for s in range(1, boxes):
            t = max(rail_free, landed[(r, c)])
            rail_units.append((s, c, r, t))
            rail_free = t + rail_slot
    finish = max(finish, *landed.values(), *(t + rail_delay for *_, t in rail_units))
    skip = set(forwarded)
    for at, r, c, s in sorted((ready[(s, c)], r, c, s) for c in range(chunks) for s in range(1, boxes)
                              for r in range(1, size) if (r, c) not in skip):
        finish = max(finish, book(at, r, c, s))
    return rail_units, plane_units, finish


def rails_chunk_count(topology: Topology, fabric: BoxesOnRails, per_rank_bytes: float,
                      max_transfers: int) -> int | None:
    """The fewest chunks per rank (multiples of ``base_chunks``) whose finish is within ``FEWER_CHUNKS_SLACK`` of
    the best candidate's and whose transfers fit ``max_transfers``; None where none fits."""
    n, boxes, size = fabric.n_gpus, len(fabric.gpus), len(fabric.gpus[0])
    per_chunk = 2 * n * ((boxes - 1) + (size - 1) * boxes)
    base = base_chunks(topology, fabric)
    fits = [m * base for m in CHUNK_MULTIPLES
            if per_chunk * m * base <= max_transfers and per_rank_bytes / (m * base) >= MIN_CHUNK_BYTES]
    if not fits:
        return None
    finish = {c: _plan(topology, fabric, per_rank_bytes / c, c, 0.0)[2] for c in fits}
    best = min(finish.values())
    return min(c for c in fits if finish[c] <= (1.0 + FEWER_CHUNKS_SLACK) * best)


def rails_allgather(topology: Topology, fabric: BoxesOnRails, collective: Collective,
                    start_s: float = 0.0) -> tuple[list[Transfer], float]:
    """Every shard over its rail to the other boxes and through the planes inside each box; transfers, finish."""
    boxes, size = len(fabric.gpus), len(fabric.gpus[0])
    chunk_of = {(next(iter(c.pre)), c.index): c.id for c in collective.chunks}
    nbytes = collective.chunk_bytes
    rail_units, plane_units, finish = _plan(topology, fabric, nbytes, collective.chunks_per_rank, start_s)
    transfers: list[Transfer] = []

    def route(cid: int, g: int, switch: int, v: int, t: float) -> None:
        up = t + arrival_delay(topology, g, switch, nbytes)
        transfers.append(Transfer(cid, g, switch, t, up))
        transfers.append(Transfer(cid, switch, v, up, up + arrival_delay(topology, switch, v, nbytes)))

    for s, c, r, t in rail_units:
        for b in range(boxes):
            for j in range(size):
                k = (j + r) % size  # GPU k sends over its rail the chunk of GPU j (its own where r = 0)
                route(chunk_of[(fabric.gpus[b][j], c)], fabric.gpus[b][k], fabric.rails[k],
                      fabric.gpus[(b + s) % boxes][k], t)
    for r, c, s, p, t in plane_units:
        for b in range(boxes):
            for j in range(size):
                owner = fabric.gpus[(b - s) % boxes][j]
                route(chunk_of[(owner, c)], fabric.gpus[b][j], fabric.planes[b][p], fabric.gpus[b][(j + r) % size], t)
    return transfers, finish
