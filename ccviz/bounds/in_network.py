"""The AllReduce limit on fabrics whose switches add in the network (``Node.reduce``: NVLS, SHARP).

Without such switches AllReduce is ReduceScatter then AllGather, 2(N-1)/N M/BW on a star. A reducing
switch fuses the two halves: each GPU sends its M bytes up once and receives the M-byte result down once,
on the two directions of its full-duplex link at the same time. The bound behind it holds for any
schedule: cut the nodes into S and the rest with GPUs on both sides; every GPU outside S needs, for each
byte of the result, information from the GPUs inside S (a partial sum is as small as the data, never
smaller), so M bytes must leave S and M bytes must enter it:

    T >= M / min over such S of min(B+(S), B-(S))

The smallest B+(S) is the smallest GPU->GPU max flow from one fixed GPU or into it (every such S
separates it from some GPU one way or the other), so 2(N-1) max flows settle it exactly. AllReduce also
solves ReduceScatter and AllGather, so their limits bound it too; the limit is the largest of the three.
On a reducing star it is M/BW, reached (up to pipelining, where the switch can also copy) by NVLS-style in-switch reduction and multicast
(``ccviz.synth.inc``); on fabrics where only some switches reduce, or sit where no aggregation tree can
use them, it is a lower bound that schedules may not reach.
"""

from __future__ import annotations

from collections.abc import Callable

from ccviz.topology import Topology


def in_network_allreduce_limit(topology: Topology, size_bytes: float, rs, ag, broadcast_cut: Callable):
    """AllReduce's limit with reducing switches: the worst of M over the min cut, ReduceScatter's and
    AllGather's limits (``rs``/``ag`` are their cuts), with the cut that sets it."""
    from ccviz.limit import BandwidthLimit, Cut

    root = topology.gpus[0]
    out_cut = broadcast_cut(topology, root, False)  # smallest flow out of GPU root: a set holding it
    in_cut = broadcast_cut(topology, root, True)  # smallest flow into it: a set without it, seen from outside
    worst = max(out_cut, in_cut, key=lambda c: c.ratio)
    inside = sorted(g for g in topology.gpus if g in worst.nodes)
    words = (f"every GPU's result needs all M bytes from both sides of the cut, even with switches adding in the "
             f"network: M must leave the set {{{_short(topology, worst.nodes)}}} ({len(inside)} of "
             f"{topology.n_gpus} GPUs) over its {len(worst.links)} link(s), {worst.bandwidth_GBps:g} GB/s in all")
    cut = Cut(worst.nodes, worst.links, worst.bandwidth_GBps, worst.ratio, words)
    candidates = [("in-network", cut, cut.ratio), ("reducescatter", rs, rs.ratio), ("allgather", ag, ag.ratio)]
    _, binding, ratio = max(candidates, key=lambda c: c[2])
    return BandwidthLimit("allreduce", size_bytes, ratio * size_bytes, binding, {},
                          {"in-network": cut, "reducescatter": rs, "allgather": ag})


def _short(topology: Topology, nodes) -> str:
    labels = [topology.nodes[n].label for n in sorted(nodes)]
    return ", ".join(labels) if len(labels) <= 8 else ", ".join(labels[:6]) + f", ... ({len(labels)} nodes)"
