"""NCCL's tree: a chain through each box's GPUs from the GPU of the channel's NIC, and the double binary tree of
the boxes over those GPUs (NCCL ``src/graph/trees.cc``, ``ncclGetBtree`` / ``ncclGetDtree``; the chains are its
tree graph's intra-node pattern, ``src/graph/search.cc``, ``NCCL_TOPO_PATTERN_TREE``; ``connect.cc``,
``connectTrees``: the second half of the channels runs on the second tree).

Channel c leaves and enters its box on local GPU ``c mod (GPUs per box)`` (its rail), so the channels spread
over every NIC and, through ``ChannelLayout``, over every switch plane; channels alternate between the two trees
every box's worth, so a box inner in one tree is a leaf in the other (even box counts). AllReduce reduces each
chunk up its channel's tree and broadcasts the sum down it, as NCCL's ``ncclPatternTreeUpDown`` does.
"""

from __future__ import annotations

from ccviz.model.collectives import Collective
from ccviz.model.placement import Layout
from ccviz.synth.classic import Tree
from ccviz.synth.nccl.channels import Boxes, direct_cycles


def btree_parent(nodes: int, rank: int) -> int | None:
    """The parent of ``rank`` in NCCL's binary tree over ``nodes`` (``ncclGetBtree``): a rank hangs under the
    rank with its lowest set bit cleared and the next bit set (that bit alone cleared when the former is out of
    range); rank 0 is the root."""
    if rank == 0:
        return None
    bit = rank & -rank
    up = (rank ^ bit) | (bit << 1)
    return up if up < nodes else rank ^ bit


def dtree_parents(nodes: int) -> tuple[dict[int, int], dict[int, int]]:
    """NCCL's double binary tree (``ncclGetDtree``): the binary tree, and its mirror (even ``nodes``) or its
    shift by one (odd), as child -> parent maps."""
    first = {r: p for r in range(nodes) if (p := btree_parent(nodes, r)) is not None}
    if nodes % 2 == 0:
        second = {nodes - 1 - r: nodes - 1 - p for r, p in first.items()}
    else:
        second = {(r + 1) % nodes: (p + 1) % nodes for r, p in first.items()}
    return first, second


def channel_tree(boxes: Boxes, channel: int, direct: bool = False) -> Tree:
    """Channel ``channel``'s tree: each box a chain from its rail GPU, the rail GPUs in the boxes' tree. On
    direct-connected boxes (``direct``) the chain follows the channel's own link-disjoint cycle
    (``channels.direct_cycles``), so the channels' chains spread over every link as the rings do."""
    rail = channel % boxes.per_box
    count = len(boxes.boxes)
    box_parent = dtree_parents(count)[(channel // boxes.per_box) % 2] if count > 1 else {}
    heads = [box[rail % len(box)] for box in boxes.boxes]
    parent: dict[int, int] = {}
    cycles = direct_cycles(boxes.per_box) if direct else ()
    for b, box in enumerate(boxes.boxes):
        walk = cycles[channel % len(cycles)] if direct else tuple(range(len(box)))
        at = walk.index(rail % len(box))
        chain = [box[i] for i in walk[at:] + walk[:at]]
        parent.update(zip(chain[1:], chain[:-1], strict=True))
        if b in box_parent:
            parent[heads[b]] = heads[box_parent[b]]
    (root,) = [heads[b] for b in range(count) if b not in box_parent]
    return Tree(root, parent)


def plan_allreduce(layout: Layout, collective: Collective, boxes: Boxes, channels: int,
                   direct: bool = False) -> list[str]:
    """Every chunk up its channel's tree (chunk index c rides channel c mod ``channels``) and its sum down."""
    trees = [channel_tree(boxes, c, direct) for c in range(channels)]
    for chunk in collective.chunks:
        tree = trees[chunk.index % channels]
        done = tree.reduce_up(layout, chunk.id)
        tree.broadcast_down(layout, chunk.id, done + 1)
    shape = (f"the double binary tree of {len(boxes.boxes)} boxes over their rail GPUs" if len(boxes.boxes) > 1
             else "one box")
    return [f"nccl tree: a chain through each box's {boxes.per_box} GPUs from the channel's rail GPU, {shape}"]
