"""NCCL's trees beyond two boxes: NVLSTree on N boxes (NVLS in each, NCCL's double binary tree across them), its
tree shapes (``ncclGetBtree`` / ``ncclGetDtree`` of NCCL ``src/graph/trees.cc``), judged by the simulator."""

from __future__ import annotations

import pytest

from ccviz import load_topology
from ccviz.errors import CcvizError
from ccviz.runs.pipeline import run
from ccviz.synth.nccl.nvlstree import btree_parent, dtree_parents
from ccviz.synth.registry import SynthOptions

MIB = 2**20


def nccl(spec: str, size: float, collective: str = "allreduce", **extra: str):
    return run(load_topology(spec), collective, "nccl", size, options=SynthOptions(extra=dict(extra)))


def test_btree_is_nccls_binary_tree() -> None:
    # ncclGetBtree on 8 ranks: 0 -> 4; 4 -> 2, 6; 2 -> 1, 3; 6 -> 5, 7
    assert {r: btree_parent(8, r) for r in range(8)} == {0: None, 1: 2, 2: 4, 3: 2, 4: 0, 5: 6, 6: 4, 7: 6}
    assert {r: btree_parent(5, r) for r in range(5)} == {0: None, 1: 2, 2: 4, 3: 2, 4: 0}  # 4's parent out of range


@pytest.mark.parametrize("nodes", [3, 4, 5, 8])
def test_double_binary_tree_spans_and_the_second_tree_turns_leaves_inside(nodes: int) -> None:
    first, second = dtree_parents(nodes)
    for tree in (first, second):
        assert len(tree) == nodes - 1  # a spanning tree: every node but the root has a parent
        assert all(list(tree.values()).count(p) <= 2 for p in tree.values())  # binary
    if nodes % 2 == 0:  # mirrored: a node forwards in one tree only (NCCL's point: each NIC loaded once)
        inner = [{p for p in tree.values()} for tree in (first, second)]
        assert not inner[0] & inner[1]


@pytest.mark.parametrize("spec", ["dgxh100:nodes=3", "dgxh100:nodes=4"])
def test_nvlstree_beyond_two_boxes_is_built_and_verified(spec: str) -> None:
    result = nccl(spec, 64 * MIB, algo="nvlstree")
    assert result.timeline.verified
    assert result.schedule.options["nccl_algo"] == "nvlstree"
    assert any("double binary tree of the boxes" in n for n in result.schedule.notes)
    t = result.schedule.topology
    rails = {n for n, node in t.nodes.items() if node.group == "rails"}
    crossing = [tr for tr in result.schedule.transfers if tr.dst in rails]
    # every chunk crosses the network 2 x (boxes - 1) times: up and down the tree, never more
    boxes = len({t.nodes[g].group for g in t.gpus})
    assert len(crossing) == 2 * (boxes - 1) * len(result.schedule.collective.chunks)


def test_the_tuner_leaves_nvlstree_out_beyond_two_boxes_unless_forced() -> None:
    auto = nccl("dgxh100:nodes=3", 256 * MIB)
    assert auto.schedule.options["nccl_algo"] != "nvlstree"
    assert nccl("dgxh100:nodes=2", 256 * MIB).schedule.options["nccl_algo"] == "nvlstree"


def test_nvlstree_on_one_box_is_refused_in_one_line() -> None:
    with pytest.raises(CcvizError, match="NCCL has no nvlstree"):
        nccl("dgxh100", MIB, algo="nvlstree")
