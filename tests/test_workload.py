"""Workloads: every group of a parallel job at once, each alone and together, judged by the simulator."""

from __future__ import annotations

import json

import pytest
import yaml

import ccviz
from ccviz.bounds.cost import lower_bound
from ccviz.cli import main
from ccviz.errors import CcvizError
from ccviz.judge.simulate import simulate
from ccviz.model.collectives import make_collective
from ccviz.runs.workload import GroupRun, compose, parse_parallel, parse_run, place_groups, run_workload
from ccviz.synth.registry import synthesize

DGX1 = ccviz.load_topology("dgx1")


def test_groups_follow_the_rank_order():
    tp_first = place_groups(DGX1, {"tp": 4, "dp": 2}, "tp-dp")
    assert tp_first == {"tp": [(0, 1, 2, 3), (4, 5, 6, 7)], "dp": [(0, 4), (1, 5), (2, 6), (3, 7)]}
    dp_first = place_groups(DGX1, {"tp": 4, "dp": 2}, "dp-tp")
    assert dp_first == {"tp": [(0, 2, 4, 6), (1, 3, 5, 7)], "dp": [(0, 1), (2, 3), (4, 5), (6, 7)]}
    shuffled = place_groups(DGX1, {"tp": 4, "dp": 2}, "random", seed=3)
    for kind, count in (("tp", 2), ("dp", 4)):
        members = [r for g in shuffled[kind] for r in g]
        assert sorted(members) == DGX1.gpus and len(shuffled[kind]) == count
    assert shuffled != tp_first


def test_bad_input_is_one_clear_error():
    with pytest.raises(CcvizError, match="parallel: tp=4 x dp=4 = 16 GPUs"):
        place_groups(DGX1, {"tp": 4, "dp": 4})
    with pytest.raises(CcvizError, match="unknown kind 'xp'"):
        parse_parallel("xp=2")
    with pytest.raises(CcvizError, match="KIND:COLLECTIVE:SIZE"):
        parse_run("tp:allreduce")
    with pytest.raises(CcvizError, match="has a root"):
        parse_run("tp:broadcast:1MB")
    with pytest.raises(CcvizError, match="must not overlap"):
        run_workload(DGX1, "tp=4,dp=2", "tp:allgather:1MB", "ring", groups={"tp": [[0, 1, 2, 3], [3, 4, 5, 6]]})
    ndv2 = ccviz.load_topology("ndv2:chassis=4")
    with pytest.raises(CcvizError, match="switch"):
        run_workload(ndv2, "tp=8,dp=4", "tp:allgather:1MB", "ring", groups={"tp": [[0, 1, 2]]})


def test_one_group_composed_alone_keeps_its_meaning():
    """One group put through the composition still verifies, no later than as synthesized (each hop goes as
    soon as its inputs and its links allow, gaps filled) and never below the collective's lower bound."""
    ndv2 = ccviz.load_topology("ndv2:chassis=4")
    coll = make_collective("allreduce", [1, 9, 17, 25], 4e6, 2)  # partial sums relayed by other GPUs and a switch
    alone = simulate(synthesize(ndv2, coll, "tacos"))
    group = GroupRun("dp", 0, coll.ranks, coll, alone.schedule, alone.finish_time_s, 0.0, None)
    together = simulate(compose(ndv2, [group], "tacos"))
    assert together.verified, together.violations[:1]
    assert together.finish_time_s <= alone.finish_time_s * (1 + 1e-9)
    assert together.finish_time_s >= lower_bound(ndv2, coll).time_s


@pytest.mark.parametrize("algorithm", ["ring", "tacos", "mteg", "direct"])
def test_groups_judged_together(algorithm):
    result = run_workload(DGX1, "tp=4,dp=2", "tp:allreduce:4MB,dp:allreduce:8MB", algorithm)
    assert result.timeline.verified, result.timeline.violations[:1]
    assert [g.kind for g in result.groups] == ["tp", "tp", "dp", "dp", "dp", "dp"]
    assert {g.collective.chunks_per_rank for g in result.groups if g.kind == "dp"} == {4}  # 4 MB chunks, one size
    for g in result.groups:
        assert g.finish_together_s >= g.finish_alone_s * (1 - 1e-9)
        assert 0 < g.eta_beta <= 1 + 1e-9
    assert result.finish_s == pytest.approx(max(g.finish_together_s for g in result.groups))
    busiest = result.busiest_links()
    assert busiest[0]["busy_s"] >= busiest[-1]["busy_s"] > 0


def test_cli_prints_one_object_and_refuses_bad_input(capsys, tmp_path):
    args = ["workload", "dgx1", "--parallel", "tp=4,dp=2", "--run", "tp:allreduce:4MB,dp:allgather:8MB", "-a", "ring",
            "--json"]
    assert main(args) == 0
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if line.strip()]
    assert len(lines) == 1
    data = json.loads(lines[0])
    assert data["verified"] is True
    assert {"finish_s", "groups", "busiest_links"} <= set(data)
    assert {"kind", "ranks", "collective", "finish_alone_s", "finish_together_s", "eta_beta"} <= set(data["groups"][0])
    config = tmp_path / "job.yaml"
    config.write_text(yaml.safe_dump({"topology": "dgx1", "parallel": {"tp": 4, "dp": 2}, "algorithm": "ring",
                                      "run": [{"kind": "tp", "collective": "allreduce", "size": "4MB"}],
                                      "groups": {"tp": [[0, 1, 2, 3], [4, 5, 6, 7]]}}))
    assert main(["workload", "--config", str(config), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["order"] == "explicit"
    config.write_text(yaml.safe_dump({"topology": "dgx1", "colour": "red"}))
    assert main(["workload", "--config", str(config)]) == 2
    assert "unknown key(s) ['colour']" in capsys.readouterr().err
    assert main(["workload", "dgx1", "--parallel", "tp=4,dp=4", "--run", "tp:allreduce:4MB"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "product of the group sizes" in err


def test_groups_with_chunks_of_different_sizes_share_one_timeline():
    """A group whose chunks are k times another's is cut into k pieces each (here through NDv2's NIC switch,
    where each piece must leave the bufferless switch as it lands)."""
    ndv2 = ccviz.load_topology("ndv2:chassis=4")
    runs = []
    for n, (ranks, chunks) in enumerate((((1, 9, 17, 25), 1), ((2, 10, 18, 26), 3))):
        coll = make_collective("allreduce", ranks, 12e6, chunks)
        alone = simulate(synthesize(ndv2, coll, "tacos"))
        runs.append(GroupRun("dp", n, coll.ranks, coll, alone.schedule, alone.finish_time_s, 0.0, None))
    joint = compose(ndv2, runs, "tacos")
    assert joint.collective.chunk_bytes == runs[1].collective.chunk_bytes  # the smaller chunks
    assert len(joint.collective.chunks) == 2 * len(runs[1].collective.chunks)
    together = simulate(joint)
    assert together.verified, together.violations[:1]
    cut_alone = simulate(compose(ndv2, runs[:1], "tacos", unit=joint.collective.chunk_bytes))
    assert cut_alone.verified, cut_alone.violations[:1]
    assert cut_alone.finish_time_s <= together.finish_time_s
