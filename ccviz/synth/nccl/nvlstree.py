"""NCCL's NVLSTree: NVLS inside each box, a tree of the boxes' GPUs over the rail network between them.

NCCL (``src/device/all_reduce.h``, ``RunWorkColl<ncclFuncAllReduce, .., NCCL_ALGO_NVLS_TREE, ..>``: scatter to
the NVLS heads, reduce, up ``nvls->treeUp``, down ``nvls->treeDown``, multicast): each GPU of a box is the NVLS head of its own
share of the data; the box's NVSwitches sum the box's contributions into the head, the heads of one rail form
NCCL's double binary tree across the nodes (``src/graph/trees.cc``, ``ncclGetDtree``: the second tree is the
first mirrored on an even node count, shifted by one on an odd one, so a node inner in one is a leaf in the
other), reduce up it and broadcast the total down it, and each head multicasts the total through its box's
NVSwitches. NCCL's tuner halves the network bandwidth beyond two nodes (``tuning.cc``, ``ncclTopoTuneModel``:
``bwInter/2`` for NVLS_TREE when nNodes > 2): a tree moves each byte twice over an inner node's NIC.

Two boxes: for every chunk, each box sums its GPUs' contributions in its reducing NVSwitch into the chunk's rail GPU
(as NVLS does); with two boxes the tree is one edge: the two rail GPUs send each other their box partial
through their rail leaf (GPU -> leaf -> GPU, the leaf only forwarding) and each adds the other's, and each
multicasts the total through its box's NVSwitch. Every NIC sends and receives its rail's share once.

Built from ``ccviz.synth.inc``'s NVLS+SHARP plan, timed on the hardware model's fabric, on a view whose rail
leaves reduce: the leaf's sum (both partials up at once, the total down at once) is replaced by the exchange
on the same links at the same times; the judge verifies those times on the real fabric.
Known limit: that plan's time is not smooth in the size (2 DGX H100 at 256, 384, 512, 640 MiB, 1 GiB: 4.67,
5.38, 4.56, 5.42, 5.55 ms per GiB). The cause is ``inc``'s gap-filling booking, not the pieces: the hops'
fixed latencies (3.4 us per NVLink step, 14 us per NIC step under Simple) do not scale with the chunk, so
which gap a send fits in changes from size to size; booked with those latencies set to zero the same plan
is exactly linear (4.398 ms per GiB at every size). Replaying that zero-latency plan's order on the real
fabric (each link in the plan's order, a sum's last contribution held until the way out is free) was tried
and did not settle: with the latencies added, the order's loops (a held contribution, the engine's queue,
the next send on the held contribution's link) grow on every pass; replayed without holds (each crossing in
turn) it is linear but 6.15 ms per GiB, slower than the booking it would replace.

More than two boxes (``tree_of_boxes``): an untimed schedule the simulator times. Chunk k of rank r is summed
in its box by one NVSwitch (the planes apportioned by their links, as NCCL's channels are) into the GPU of r's
local index in every box (its rail), goes up and down the double binary tree of the boxes over that rail's
leaf (tree 0 or 1 alternating with k and r's box, so every NIC carries both trees' shares), and is multicast.
The simulator serves each link in step order, so the steps say what goes first on a shared link: every box sum
(a reducing NVSwitch holds no sum, so nothing may delay one), then the tree's reductions, then its broadcasts
and the multicasts, chunk by chunk within each (``readiness.reorder`` then lets ready sends go first where
that ends sooner).
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict

from ccviz.errors import CcvizError
from ccviz.model.collectives import Collective
from ccviz.model.link_model import LinkModel, effective_topology
from ccviz.model.schedule import COMBINE, Schedule, Transfer
from ccviz.model.topology import Topology
from ccviz.synth.nccl.channels import Boxes, plane_slots
from ccviz.synth.nccl.readiness import reorder
from ccviz.synth.nccl.trees import dtree_parents
from ccviz.synth.registry import SynthOptions

MAX_TRANSFERS = 600_000  # pieces per rank are cut down (never below one) to stay under this
LAG = 1  # phases a chunk's steps are apart, in rails' worth of chunks (the simulator serves a link in step order)
PIECES = 8  # chunks per rank at most: enough for the box, tree and multicast phases to pipeline


def sharp_view(topology: Topology, model: LinkModel) -> Topology:
    """The fabric with its rail leaves given reduction engines (only to plan where the sums go)."""
    nodes = [dataclasses.replace(n, reduce=True) if n.kind == "switch" and n.group in model.net_groups else n
             for n in topology.nodes.values()]
    return type(topology)(topology.name, nodes, topology.links.values(), description=topology.description,
                          switch_hop=topology.switch_hop, layout=topology.layout, meta=topology.meta)


def nvls_tree(topology: Topology, collective: Collective, model: LinkModel, options: SynthOptions) -> Schedule:
    """The NVLSTree AllReduce of ``collective`` on two boxes of ``topology`` (see the module docstring)."""
    from ccviz.synth.inc import synthesize_inc

    boxes = Boxes.of(topology, tuple(collective.ranks))
    if collective.name != "allreduce" or len(boxes.boxes) < 2:
        raise CcvizError(f"algo: NCCL runs nvlstree for allreduce across 2 or more nodes (tuning.cc disables it on "
                         f"one), not {collective.name} on {len(boxes.boxes)}; use nvls or ring", "algo")
    if len(boxes.boxes) > 2:
        return tree_of_boxes(topology, collective, boxes)
    view = sharp_view(topology, model)
    plan = synthesize_inc(effective_topology(view, "simple"), collective,
                          SynthOptions(time_limit=options.time_limit, stop=options.stop))
    net = {n.id for n in topology.nodes.values() if n.kind == "switch" and n.group in model.net_groups}
    by_chunk: dict[int, list[Transfer]] = defaultdict(list)
    for t in plan.transfers:
        by_chunk[t.chunk].append(t)
    out: list[Transfer] = []
    for transfers in by_chunk.values():
        ups = [t for t in transfers if t.op == COMBINE and t.dst in net]
        downs = {t.dst: t for t in transfers if t.src in net}
        for t in transfers:
            if t.dst in net or t.src in net:
                continue
            out.append(t)
        for t in ups:  # each box's partial crosses the leaf into the other box's rail GPU, which adds it
            (other,) = [u.src for u in ups if u.src != t.src]
            out.append(t._replace(op="relay"))
            out.append(downs[other]._replace(op="reduce"))
    schedule = Schedule(topology, plan.collective, out, "nccl", status="heuristic",
                        notes=["nccl: nvlstree, NVLS in each box, the two boxes' rail GPUs exchanging their box "
                               "partials through their rail leaf"])
    schedule.options["planned_on"] = "hardware"  # timed on the fabric the judge uses
    return schedule


def _depths(parents: dict[int, int], nodes: int) -> dict[int, int]:
    depth: dict[int, int] = {}
    for r in range(nodes):
        d, v = 0, r
        while v in parents:
            v, d = parents[v], d + 1
        depth[r] = d
    return depth


def tree_of_boxes(topology: Topology, collective: Collective, boxes: Boxes) -> Schedule:
    """NVLSTree on three or more boxes (see the module docstring): NVLS sum, double binary tree, multicast."""
    from ccviz.model.collectives import make_collective

    per_box, count = boxes.per_box, len(boxes.boxes)
    if any(len(b) != per_box for b in boxes.boxes):
        raise CcvizError("algo: nvlstree needs the same number of GPUs in every box (NCCL's NVLS heads are one per "
                         "local GPU); pass --ranks with as many GPUs from each box", "algo")
    per_chunk = 2 * count * per_box + 4 * (count - 1)  # NVLS sum and multicast in every box, tree up and down
    pieces = max(1, min(PIECES, MAX_TRANSFERS // (per_chunk * len(collective.ranks))))
    whole = tuple(collective.ranks) == tuple(topology.gpus)
    refined = make_collective("allreduce", topology if whole else list(collective.ranks), collective.size_bytes,
                              pieces)
    trees = dtree_parents(count)
    depths = [_depths(t, count) for t in trees]
    height = max(max(d.values()) for d in depths)
    where = {g: (b, i) for b, box in enumerate(boxes.boxes) for i, g in enumerate(box)}
    slots = [[plane_slots(topology, box[i], count * pieces) for i in range(per_box)] for box in boxes.boxes]
    up0, down0 = 2, 2 + 2 * height  # the phases the tree's reduction and broadcast start at
    multicast = down0 + 2 * height
    lag = LAG * per_box  # steps between a chunk's phases: later chunks' earlier phases go first on a link
    after_up = len(refined.chunks) + lag * down0  # the tree's broadcast after its reductions, on every link
    after_sums = 2 * len(refined.chunks)  # a reducing switch holds no sum: every box sum is sent before anything else
    out: list[Transfer] = []
    for c in refined.chunks:
        home, rail = where[c.source]
        tree = (c.index + home) % 2
        slot = (c.index * count + home) * per_box + rail  # the order chunks enter the pipeline, rails interleaved

        def step(phase: int, slot: int = slot) -> float:  # the box sums first: no later send delays a sum
            if phase < 2:
                return float(2 * slot + phase)
            return float(after_sums + slot + lag * phase + (after_up if phase >= down0 else 0))

        parents, depth = trees[tree], depths[tree]
        heads = [box[rail] for box in boxes.boxes]
        planes = [slots[b][rail][(home * pieces + c.index) % len(slots[b][rail])] if slots[b][rail] else None
                  for b in range(count)]
        for b, box in enumerate(boxes.boxes):  # NVLS: the box's GPUs sum into the plane, which hands the head
            if planes[b] is None:
                raise CcvizError(f"topology: GPU {heads[b]} has no NVSwitch in its box for NVLS", "topology")
            out.extend(Transfer(c.id, g, planes[b], op=COMBINE, step=step(0)) for g in box if g != heads[b])
            out.append(Transfer(c.id, planes[b], heads[b], op="reduce", step=step(1)))
        for child, parent in sorted(parents.items(), key=lambda e: -depth[e[0]]):  # up: deepest first
            phase = up0 + 2 * (height - depth[child])
            leaf = _rail_leaf(topology, heads[child], heads[parent])
            out.append(Transfer(c.id, heads[child], leaf, op="relay", step=step(phase)))
            out.append(Transfer(c.id, leaf, heads[parent], op="reduce", step=step(phase + 1)))
        for child, parent in sorted(parents.items(), key=lambda e: depth[e[0]]):  # down: the total, root first
            phase = down0 + 2 * (depth[child] - 1)
            leaf = _rail_leaf(topology, heads[parent], heads[child])
            out.append(Transfer(c.id, heads[parent], leaf, step=step(phase)))
            out.append(Transfer(c.id, leaf, heads[child], step=step(phase + 1)))
        for b, box in enumerate(boxes.boxes):  # NVLS multicast of the total
            out.append(Transfer(c.id, heads[b], planes[b], step=step(multicast)))
            out.extend(Transfer(c.id, planes[b], g, step=step(multicast + 1)) for g in box if g != heads[b])
    notes = [f"nccl: nvlstree on {count} boxes: NVLS in each box into the chunk's rail GPU, NCCL's double binary "
             f"tree of the boxes over each rail leaf (depth {height}), NVLS multicast; {pieces} piece(s) per rank",
             "nccl: the simulator serves each link in step order (the box sums first, the tree's reductions, "
             "then its broadcasts and the multicasts), so a chunk late in one phase can hold the next one's link: "
             "this schedule reaches 0.6-0.75 of NCCL's modelled NVLSTree rate (3-8 boxes at 1 GiB), and the "
             "tuner leaves it out beyond two boxes unless forced"]
    return reorder(Schedule(topology, refined, out, "nccl", status="heuristic", notes=notes,
                            options={"protocol": "simple", "nccl_algo": "nvlstree"}), after_sums)


def _rail_leaf(topology: Topology, src: int, dst: int) -> int:
    """The rail leaf two GPUs of one rail share (NCCL's tree crosses nodes rail by rail)."""
    for link in topology.out_links.get(src, []):
        if topology.nodes[link.dst].kind == "switch" and (link.dst, dst) in topology.links:
            return link.dst
    raise CcvizError(f"ranks: GPUs {src} and {dst} share no rail leaf for NCCL's tree across boxes; take the same "
                     "local GPUs in every box (e.g. --ranks 0-3,8-11 on 8-GPU boxes)", "ranks")
