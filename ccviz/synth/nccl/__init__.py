"""NCCL's algorithms as they run: rings over channels, double binary trees, NVLS, the protocol, and the
choice NCCL's tuner makes per size (``ccviz.synth.nccl.tuner``); ``synthesize_nccl`` is the registry's
entry (``-a nccl``, ``--opt algo=..,proto=..``)."""
