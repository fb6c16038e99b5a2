"""Simple recursive-doubling AllReduce (the Collectives Explainer's Appendix B.1): log2 N rounds, full buffer each.

In round k every rank exchanges its whole partial sum with the rank 2^k away (rank XOR 2^k) and adds what it
receives, so after round k each rank holds the sum over its 2^(k+1)-rank subcube; after log2 N rounds, everyone
holds the total. Few rounds (log2 N alphas) but the whole buffer every round: log2(N)(a + M/BW). The partner
changes each round, so the rounds cannot pipeline on a fabric with few ports (Appendix B.3): the reason NCCL does
not ship it, and why it beats DBT only below about alpha x BW (506 KB at N = 512; ``ccviz crossover``).
"""

from __future__ import annotations

from ccviz.errors import CcvizError
from ccviz.model.collectives import Collective
from ccviz.model.placement import Layout
from ccviz.model.topology import Topology
from ccviz.synth.classic import ClassicAlgorithm


class RecursiveDoubling(ClassicAlgorithm):
    """Recursive doubling AllReduce: each round, partners 2^k apart swap and add their whole partial sums."""

    name = "rd"
    collectives = frozenset({"allreduce"})
    description = "simple recursive doubling allreduce (log2 N rounds of the whole buffer); power-of-two GPU counts"

    def plan(self, layout: Layout, topology: Topology, collective: Collective) -> None:
        n = collective.n_ranks
        if n & (n - 1):
            raise CcvizError(f"algorithm: rd needs a power-of-two number of GPUs, {topology.name!r} has {n}; use "
                             "ring or rhd", "algorithm")
        ranks = list(collective.ranks)
        for s in range(n.bit_length() - 1):
            bit = 1 << s
            layout.label(s, f"recursive doubling, distance {bit}: every GPU swaps its whole partial sum with the "
                            f"GPU {bit} away and adds it (sums now cover {2 * bit} ranks)")
            for i, rank in enumerate(ranks):
                for c in collective.chunks:
                    layout.send(c.id, rank, ranks[i ^ bit], s, op="reduce")


RecursiveDoubling().register()
