"""The options of ``-a nccl`` (light: the catalog lists them without loading the synthesizer)."""

from __future__ import annotations

from dataclasses import dataclass

from ccviz.synth.options import AlgorithmOptions, option

ALGOS = ("ring", "tree", "nvls", "nvlstree", "collnet", "pat")  # NCCL's algorithms (NCCL_ALGO), all built
PROTOS = ("ll", "ll128", "simple")  # NCCL's protocols (NCCL_PROTO)
NCCL_COLLECTIVES = frozenset({"allreduce", "allgather", "reducescatter", "broadcast", "reduce"})


@dataclass(frozen=True)
class NcclOptions(AlgorithmOptions):
    """Force NCCL's algorithm or protocol (``NCCL_ALGO`` / ``NCCL_PROTO``); auto = what its tuner picks."""

    algo: str = option("auto", "NCCL's algorithm (auto: its tuner's choice for the size)", choices=("auto",) + ALGOS)
    proto: str = option("auto", "NCCL's protocol (auto: its tuner's choice)", choices=("auto",) + PROTOS)
    channels: int | None = option(None, "rings (channels) to run (auto: 16-32, spread over the switch planes and NICs)",
                                  minimum=1, maximum=32)
