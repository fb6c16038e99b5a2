"""PAT, parallel aggregated trees (NCCL 2.23; Collectives Explainer 01 App. A): AllGather and ReduceScatter.

Every rank s roots one binomial tree over the ranks at offsets from it, and all N trees advance one level per
round with the offsets taken farthest first (N/2, N/4, ..., 1): the rank at offset d from s receives s's chunk
in the round of d's lowest set bit, from the rank at offset d - lowbit(d) (offsets are XOR distances when N is a power
of two, as in the reference's schedule, else distances mod N). ceil(log2 N) rounds, every rank
forwards each chunk it does not own once, so the cost is ceil(log2 N) alpha + (N-1)/N M/BW on a full-duplex
fabric. Round r carries 2^(r-1) chunks per link (the reference's "one chunk per link per round" cannot deliver
N-1 chunks in log2 N rounds; NCCL bounds the buffer by splitting rounds into steps). ReduceScatter runs the
same trees backwards, partial sums flowing to the root, nearest offset first.
"""

from __future__ import annotations

from ccviz.errors import CcvizError
from ccviz.model.collectives import Collective
from ccviz.model.placement import Layout
from ccviz.model.schedule import Schedule
from ccviz.model.topology import Topology
from ccviz.synth.phased import synchronized_rounds
from ccviz.synth.registry import SynthOptions


def _lowbit(d: int) -> int:
    return d & -d


def synthesize(topology: Topology, collective: Collective, options: SynthOptions) -> Schedule:
    if collective.name not in ("allgather", "reducescatter"):
        raise CcvizError(f"algorithm: pat implements allgather and reducescatter, not {collective.name}",
                         "algorithm")
    n = collective.n_ranks
    layout = Layout(topology, collective)
    stages = lay_trees(layout, collective, xor=n & (n - 1) == 0)
    transfers = layout.transfers()
    rounds, labels = layout.numbered_rounds()
    schedule = Schedule(topology, collective, transfers, "pat", status="heuristic", rounds=rounds,
                        round_labels=labels,
                        notes=[f"{n} binomial trees, offsets farthest first, {stages} rounds in lockstep"])
    return synchronized_rounds(schedule)


def lay_trees(layout: Layout, collective: Collective, xor: bool, sign: int = 1) -> int:
    """Every rank's binomial tree (see the module docstring) laid on ``layout``; the number of rounds. ``xor``:
    partners i XOR offset (N a power of two), else i + ``sign`` x offset mod N (Bruck's; ``sign=-1``: a tree's
    nodes behind its root, so partial sums flow to higher ranks, NCCL's PAT peers)."""
    ranks = list(collective.ranks)
    n = len(ranks)
    stages = (n - 1).bit_length()  # ceil(log2 n)
    index = {r: i for i, r in enumerate(ranks)}
    gather = collective.name == "allgather"
    for k in range(stages):
        offset = 1 << (stages - 1 - k) if gather else 1 << k
        layout.label(k, (f"offset {offset}: every tree grows one level, each rank forwards to the rank {offset} "
                         "ahead the chunks it received for it") if gather else
                     (f"offset {offset}: every rank adds its subtree's partial sums into the rank {offset} behind"))
    for c in collective.chunks:
        root = index[min(c.pre)] if gather else index[c.source]
        for d in range(1, n):
            low = _lowbit(d)
            if xor:  # N = 2^k: partners i XOR offset, as the reference's schedule (neighbours on a hypercube)
                parent, child = ranks[root ^ (d - low)], ranks[root ^ d]
            else:  # any N: partners i + offset (Bruck's offsets), taken farthest first
                parent, child = ranks[(root + sign * (d - low)) % n], ranks[(root + sign * d) % n]
            level = low.bit_length() - 1  # offset 2^level
            if gather:
                layout.send(c.id, parent, child, stages - 1 - level)
            else:
                layout.send(c.id, child, parent, level, op="reduce")
    return stages
