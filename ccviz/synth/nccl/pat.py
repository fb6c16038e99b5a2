"""NCCL's PAT (Parallel Aggregated Trees, NCCL 2.23+): AllGather and ReduceScatter where every node holds one
GPU of the communicator.

Where NCCL uses it (``src/graph/tuning.cc``, ``ncclPatEnable``): one GPU per node (``nNodes == nRanks``), SM60 or
newer, no network device offload; Simple protocol only; AllGather and ReduceScatter only. Its peers are the
ranks 2^i away (``src/proxy.cc``, ``ncclPatternPatUp``: ``sendPeer = (rank + (1<<i)) % nranks``, ``recvPeer =
(rank - (1<<i) + nranks) % nranks``), the schedule ``PatRSAlgorithm`` / ``PatAGAlgorithm`` of
``src/include/collectives.h``: every rank roots a binomial tree over the ranks 2^i apart, and all trees advance
together, log2 N steps. ccviz lays those trees with its textbook ``pat`` (``ccviz.synth.pat.lay_trees``, Bruck's
offsets, partial sums flowing to higher ranks as NCCL's do) and lets the simulator time them on the fabric;
NCCL's aggregation of several trees' pieces into one message (its buffer-bounded steps) is not modelled.
"""

from __future__ import annotations

from ccviz.errors import CcvizError
from ccviz.model.collectives import Collective
from ccviz.model.placement import Layout
from ccviz.model.schedule import Schedule
from ccviz.model.topology import Topology
from ccviz.synth.nccl.channels import Boxes
from ccviz.synth.pat import lay_trees

WHERE = ("NCCL runs PAT only for allgather and reducescatter with one GPU per node (tuning.cc, ncclPatEnable: "
         "nNodes == nRanks), e.g. dgxh100:nodes=4 with --ranks 0,8,16,24")


def enabled(collective: Collective, boxes: Boxes) -> bool:
    """Whether NCCL would consider PAT: AllGather or ReduceScatter, one rank in every box, two boxes or more."""
    return (collective.name in ("allgather", "reducescatter") and len(boxes.boxes) > 1
            and all(len(b) == 1 for b in boxes.boxes))


def refusal(collective: Collective, boxes: Boxes) -> CcvizError:
    per_box = max(len(b) for b in boxes.boxes)
    return CcvizError(f"algo: {WHERE}; this is {collective.name} over {len(boxes.boxes)} box(es) with up to "
                      f"{per_box} GPU(s) each", "algo")


def build(topology: Topology, collective: Collective) -> Schedule:
    """PAT's trees for ``collective`` (one rank per box), untimed: the simulator times them."""
    layout = Layout(topology, collective)
    stages = lay_trees(layout, collective, xor=False, sign=-1)
    transfers = layout.transfers()
    rounds, labels = layout.numbered_rounds()
    return Schedule(topology, collective, transfers, "nccl", status="heuristic", rounds=rounds, round_labels=labels,
                    notes=[f"nccl: pat, {collective.n_ranks} binomial trees over the ranks 2^i apart, {stages} steps, "
                           "one GPU per node"])
