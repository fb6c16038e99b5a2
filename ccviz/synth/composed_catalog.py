"""Catalog entries of the composed textbook algorithms (Collectives Explainer): dimdecomp, hierarchical, pat.

Declared like ``ccviz.synth.catalog``: options dataclasses here, code named ``"module:function"`` and loaded on
the first synthesis, so listing them imports nothing heavy.
"""

from __future__ import annotations

from dataclasses import dataclass

from ccviz.synth.options import AlgorithmOptions, option
from ccviz.synth.phased import METHODS
from ccviz.synth.registry import Algorithm, register


@dataclass(frozen=True)
class DimdecompOptions(AlgorithmOptions):
    """How each dimension's lines run their phase (``ccviz.synth.dimdecomp``)."""

    per_dim: str = option("ring", "the algorithm inside every line: ring (the two-way chain where a line has no "
                          "wrap-around), rhd (recursive halving/doubling, power-of-two lines) or direct",
                          choices=METHODS)
    sync: bool = option(True, "rounds in lockstep, one message per chunk group per round as the formula counts "
                        "(false: every chunk goes on as soon as it lands, pipelining groups across rounds)")


@dataclass(frozen=True)
class HierarchicalOptions(AlgorithmOptions):
    """The tiers and each tier's algorithm (``ccviz.synth.hierarchical``)."""

    group_size: int | None = option(None, "GPUs per inner group, consecutive ranks (auto: the GPUs joined by the "
                                    "fastest link class)", minimum=2)
    inner: str = option("ring", "algorithm inside each group (ring, rhd, direct)", choices=METHODS)
    outer: str = option("ring", "algorithm across groups, between GPUs of equal local index (ring, rhd, direct)",
                        choices=METHODS)
    sync: bool = option(True, "rounds in lockstep, one message per chunk group per round as the formula counts "
                        "(false: every chunk goes on as soon as it lands, pipelining groups across rounds)")


for _algorithm in (
    Algorithm("dimdecomp", "ccviz.synth.dimdecomp:synthesize",
              frozenset({"allreduce", "allgather", "reducescatter", "alltoall", "broadcast", "reduce"}),
              "dimension-decomposed: one phase per grid dimension (tori, meshes, hypercubes, multidim), "
              "2 sum(d_i - 1) rounds for AllReduce", kind="classic", options=DimdecompOptions),
    Algorithm("hierarchical", "ccviz.synth.hierarchical:synthesize",
              frozenset({"allreduce", "allgather", "reducescatter", "alltoall", "broadcast", "reduce"}),
              "two tiers: inner reduce-scatter -> outer sub-allreduce on M/n -> inner all-gather (and the AG/RS/"
              "A2A forms); groups = GPUs joined by the fastest links", kind="classic", options=HierarchicalOptions),
    Algorithm("pat", "ccviz.synth.pat:synthesize", frozenset({"allgather", "reducescatter"}),
              "parallel aggregated trees (NCCL 2.23): one binomial tree per rank, farthest offset first, "
              "ceil(log2 N) rounds", kind="classic"),
):
    register(_algorithm)
