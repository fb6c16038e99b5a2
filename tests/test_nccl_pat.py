"""NCCL's PAT (``-a nccl --opt algo=pat``): built where NCCL enables it (AllGather / ReduceScatter, one GPU per node:
NCCL ``src/graph/tuning.cc`` ``ncclPatEnable``), refused in one line elsewhere, judged by the simulator."""

from __future__ import annotations

import pytest

from ccviz import load_topology
from ccviz.errors import CcvizError
from ccviz.model.collectives import make_collective
from ccviz.runs.pipeline import run
from ccviz.synth.nccl.channels import Boxes
from ccviz.synth.nccl.tuner import estimates, read_fabric
from ccviz.synth.registry import SynthOptions

MIB = 2**20
ONE_PER_NODE = [0, 8, 16, 24]  # GPU 0 of each of dgxh100:nodes=4's boxes: NCCL's nNodes == nRanks


def nccl(collective, **extra: str):
    return run(load_topology("dgxh100:nodes=4"), collective, "nccl", options=SynthOptions(extra=dict(extra)))


@pytest.mark.parametrize("name", ["allgather", "reducescatter"])
def test_pat_runs_where_nccl_enables_it_and_is_verified(name: str) -> None:
    result = nccl(make_collective(name, ONE_PER_NODE, MIB), algo="pat")
    assert result.timeline.verified
    assert result.schedule.options["nccl_algo"] == "pat" and result.schedule.options["protocol"] == "simple"
    assert "binomial trees over the ranks 2^i apart" in " ".join(result.schedule.notes)


def test_pat_partial_sums_flow_to_the_ranks_2_to_the_i_ahead_as_nccls_peers() -> None:
    # proxy.cc, ncclPatternPatUp: sendPeer = (rank + (1<<i)) % nranks
    result = nccl(make_collective("reducescatter", ONE_PER_NODE, MIB), algo="pat")
    position = {g: i for i, g in enumerate(ONE_PER_NODE)}
    transfers = result.schedule.transfers
    sends = [(a.src, b.dst) for a, b in zip(transfers, transfers[1:], strict=False)  # GPU -> rail leaf -> GPU
             if a.op == "relay" and b.op == "reduce" and b.chunk == a.chunk and b.src == a.dst]
    assert len(sends) == 4 * 3  # every rank's chunk gathers the other three's partials, one hop each
    assert {(position[d] - position[s]) % 4 for s, d in sends} == {1, 2}


@pytest.mark.parametrize(("collective", "why"), [
    (make_collective("allgather", list(range(16)), MIB), "up to 8 GPU(s) each"),  # 8 GPUs per node
    (make_collective("allreduce", ONE_PER_NODE, MIB), "this is allreduce"),
])
def test_pat_elsewhere_is_refused_in_one_line_naming_where_nccl_uses_it(collective, why: str) -> None:
    with pytest.raises(CcvizError, match="NCCL runs PAT only for allgather and reducescatter with one GPU per node") \
            as caught:
        nccl(collective, algo="pat")
    assert why in str(caught.value) and "\n" not in str(caught.value)


def test_the_tuner_weighs_pat_only_with_one_gpu_per_node() -> None:
    from ccviz.model.link_model import declared

    topology = load_topology("dgxh100:nodes=4")
    model = declared(topology)

    def algos(ranks: list[int], name: str) -> set[str]:
        boxes = Boxes.of(topology, tuple(ranks))
        fabric = read_fabric(topology, tuple(ranks), list(boxes.boxes), 8, model, 300.0)
        return {e.algo for e in estimates(fabric, name, MIB)}

    assert "pat" in algos(ONE_PER_NODE, "allgather") and "pat" in algos(ONE_PER_NODE, "reducescatter")
    assert "pat" not in algos(list(range(16)), "allgather")
    assert "pat" not in algos(ONE_PER_NODE, "allreduce")
