"""Boxes on rails: the closed form's schedule for NVSwitch boxes joined by rail switches (``dgxh100:boxes=N``).

Every box is crossbar planes over its own GPUs (``crossbar``), and rail j is one more crossbar joining GPU j of
every box. A shard then reaches another box's GPU j over its own rail, and the other GPUs of that box through
GPU j, which relays it over the box's planes: every remote shard crosses one rail hop and one plane hop. The
rails book their shifts one per slot like a plane (GPU j of box b sends to GPU j of box b + s); each box's
planes book shifts of the box's own shards at once, and of relayed shards as their chunks land, each unit on the
plane where it ends soonest (list scheduling). All boxes book alike, so a unit is one shift in every box.

What it cannot reach: a GPU takes in (G - 1) own-box and (B - 1)(G - 1) relayed shards over its planes, so the
planes bind at B (G - 1) / N x M over their bandwidth, above the cut bound (N - 1) / N x M over planes and rail
together (two 8-GPU ``dgxh100`` boxes: 14 / 450 against 15 / 500, 1.037 x). Routing some remote shards plane
first and rail second would balance the two at the bound; that is not built, so the schedule is kept only where
it ends within ``CROSSBAR_ENOUGH`` x the limit.
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
    plane of one box (cabled to all its GPUs, one bandwidth) or a rail (one GPU of every box, one bandwidth for
    all rails), at least two boxes of two GPUs or more; else None."""
    members: dict[int, set[int]] = {s: set() for s in topology.switches}
    kinds: dict[int, set[tuple[float, float]]] = {s: set() for s in topology.switches}
    ends: dict[int, int] = {s: 0 for s in topology.switches}
    for (u, v), link in topology.links.items():
        if topology.is_switch(u) == topology.is_switch(v) or link.lanes != 1:
            return None
        switch, gpu = (u, v) if topology.is_switch(u) else (v, u)
        members[switch].add(gpu)
        kinds[switch].add((link.bandwidth_GBps, link.alpha_us))
        ends[switch] += 1
    if not members or any(len(kinds[s]) != 1 or ends[s] != 2 * len(members[s]) for s in members):
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
            or len({next(iter(kinds[s])) for s in rails}) != 1):
        return None
    rail_of = {g: j for j, s in enumerate(rails) for g in members[s]}
    ordered = []
    for box in boxes:
        at = sorted(box, key=lambda g: rail_of.get(g, -1))
        if [rail_of.get(g) for g in at] != list(range(box_size)):
            return None  # a rail misses this box or meets it twice
        ordered.append(tuple(at))
    planes = [tuple(sorted(by_set[box], key=lambda s: next(iter(kinds[s])))) for box in boxes]
    if len({tuple(next(iter(kinds[s])) for s in p) for p in planes}) != 1:
        return None  # boxes whose planes differ
    return BoxesOnRails(tuple(ordered), tuple(planes), tuple(rails))


def base_chunks(topology: Topology, fabric: BoxesOnRails) -> int:
    """Chunks per rank that split a relayed shard over one box's planes by bandwidth (``CrossbarPlanes``)."""
    box = fabric.planes[0]
    bandwidths = tuple(topology.links[(s, fabric.gpus[0][0])].bandwidth_GBps for s in box)
    return CrossbarPlanes(fabric.gpus[0], box, bandwidths).base_chunks()


def _plan(topology: Topology, fabric: BoxesOnRails, chunk_bytes: float, chunks: int, start_s: float
          ) -> tuple[list[tuple[int, int, int, float]], list[tuple[int, int, int, float]], float]:
    """The rail units (shift, chunk, -, start) and plane units (shift, chunk, box shift or 0 for own, start with
    the plane index packed in), and the finish, all boxes alike."""
    boxes, size = len(fabric.gpus), len(fabric.gpus[0])
    g0 = fabric.gpus[0][0]
    rail_slot = occupancy(topology, g0, fabric.rails[0], chunk_bytes)
    rail_delay = arrival_delay(topology, g0, fabric.rails[0], chunk_bytes) + \
        arrival_delay(topology, fabric.rails[0], fabric.gpus[1][0], chunk_bytes)
    rail_units, ready = [], {}
    for k, (c, s) in enumerate((c, s) for c in range(chunks) for s in range(1, boxes)):
        t = start_s + k * rail_slot
        rail_units.append((s, c, 0, t))
        ready[(s, c)] = t + rail_delay
    planes = fabric.planes[0]
    slots = [occupancy(topology, g0, p, chunk_bytes) for p in planes]
    delays = [arrival_delay(topology, g0, p, chunk_bytes) + arrival_delay(topology, p, fabric.gpus[0][1], chunk_bytes)
              for p in planes]
    units = [(start_s, r, c, 0) for c in range(chunks) for r in range(1, size)]
    units += sorted((ready[(s, c)], r, c, s) for c in range(chunks) for s in range(1, boxes) for r in range(1, size))
    free = [start_s] * len(planes)
    plane_units, finish = [], max(t + rail_delay for *_, t in rail_units)
    for at, r, c, s in units:
        p = min(range(len(planes)), key=lambda q: (max(free[q], at) + slots[q], q))
        t = max(free[p], at)
        free[p] = t + slots[p]
        plane_units.append((r, c, s, p, t))
        finish = max(finish, t + delays[p])
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

    for s, c, _, t in rail_units:
        for b in range(boxes):
            for j, rail in enumerate(fabric.rails):
                g = fabric.gpus[b][j]
                route(chunk_of[(g, c)], g, rail, fabric.gpus[(b + s) % boxes][j], t)
    for r, c, s, p, t in plane_units:
        for b in range(boxes):
            for j in range(size):
                owner = fabric.gpus[(b - s) % boxes][j]
                route(chunk_of[(owner, c)], fabric.gpus[b][j], fabric.planes[b][p], fabric.gpus[b][(j + r) % size], t)
    return transfers, finish
