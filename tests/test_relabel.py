"""Fabric symmetries carrying one process group's schedule onto another group, judged like any schedule."""

from __future__ import annotations

import json

import pytest

import ccviz
from ccviz.cli import main
from ccviz.judge.simulate import simulate
from ccviz.model.collectives import make_collective
from ccviz.model.relabel import group_automorphism, relabel_schedule
from ccviz.runs.workload import run_workload
from ccviz.synth.registry import synthesize

TORUS = ccviz.load_topology("torus2d:dims=4x4")
NDV2 = ccviz.load_topology("ndv2:chassis=2")  # GPUs 0-15, two boxes; the boxes' one link each way: 0 -> 9, 8 -> 1


def test_a_row_of_a_torus_maps_onto_another_and_its_relabeled_ring_verifies():
    mapping = group_automorphism(TORUS, (0, 1, 2, 3), (8, 9, 10, 11))
    assert mapping is not None and [mapping[r] for r in (0, 1, 2, 3)] == [8, 9, 10, 11]
    assert sorted(mapping.values()) == sorted(TORUS.nodes)
    for (u, v), link in TORUS.links.items():
        assert TORUS.links[(mapping[u], mapping[v])].bandwidth_GBps == link.bandwidth_GBps
    row = simulate(synthesize(TORUS, make_collective("allreduce", [0, 1, 2, 3], 1e6), "ring"))
    carried = simulate(relabel_schedule(row.schedule, mapping))
    assert carried.verified, carried.violations[:1]
    assert carried.finish_time_s == pytest.approx(row.finish_time_s)
    assert {r for t in carried.schedule.transfers for r in (t.src, t.dst)} <= {8, 9, 10, 11}
    wanted = make_collective("allreduce", [8, 9, 10, 11], 1e6)
    assert [(c.pre, c.post) for c in carried.schedule.collective.chunks] == [(c.pre, c.post) for c in wanted.chunks]


def test_no_symmetry_where_the_fabric_has_none():
    assert group_automorphism(NDV2, (0, 8), (1, 9)) is None  # 0 and 8 send to the other box, 1 and 9 receive
    assert group_automorphism(NDV2, (0, 2), (2, 0)) is None
    assert group_automorphism(NDV2, (1, 2, 3), (9, 10)) is None
    assert group_automorphism(NDV2, tuple(range(8)), tuple(range(8, 16))) is not None  # box 0 <-> box 1


def test_a_wrong_relabeling_is_refused_by_the_judge():
    """The judge, not the search, has the last word: a map that is not a symmetry gives a schedule that
    fails (here a ring over one row sent as if row 0's links ran from GPU 0 to GPU 5)."""
    row = synthesize(TORUS, make_collective("allgather", [0, 1, 2, 3], 1e6), "ring")
    swap = {n: n for n in TORUS.nodes} | {1: 5, 5: 1}
    assert not simulate(relabel_schedule(row, swap)).verified


def test_workload_relabels_symmetric_groups_and_synthesizes_the_others():
    relabeled = run_workload(NDV2, "tp=8,dp=2", "tp:allreduce:4MB,dp:allreduce:8MB", "ring")
    each = run_workload(NDV2, "tp=8,dp=2", "tp:allreduce:4MB,dp:allreduce:8MB", "ring", relabel=False)
    assert relabeled.timeline.verified and each.timeline.verified
    source = {g.label: g.relabeled_from for g in relabeled.groups}
    assert source["tp1"] == "tp0" and source["tp0"] is None
    assert source["dp0"] is None and source["dp1"] is None  # GPUs (0, 8) and (1, 9) are not images
    assert all(g.relabeled_from is None for g in each.groups)
    for a, b in zip(relabeled.groups, each.groups, strict=True):  # ring is deterministic: the same times
        assert a.finish_alone_s == pytest.approx(b.finish_alone_s)
    assert relabeled.finish_s == pytest.approx(each.finish_s)
    from ccviz.viz.workload import groups_table  # the Workload page's table says which schedules were carried

    shown = dict(zip(groups_table(relabeled)["group"], groups_table(relabeled)["schedule"], strict=True))
    assert shown["tp0"] == "synthesized" and shown["tp1"] == "relabeled from tp0"


def test_cli_reports_the_relabeling_and_can_synthesize_each(capsys):
    args = ["workload", "ndv2:chassis=2", "--parallel", "tp=8,dp=2", "--run", "tp:allgather:4MB", "--json"]
    assert main(args) == 0
    groups = json.loads(capsys.readouterr().out)["groups"]
    assert [g["relabeled_from"] for g in groups] == [None, "tp0"]
    assert main([*args, "--synthesize-each"]) == 0
    assert [g["relabeled_from"] for g in json.loads(capsys.readouterr().out)["groups"]] == [None, None]


def test_an_image_the_judge_refuses_is_synthesized_instead(monkeypatch):
    """Should the search ever return a map that is no symmetry, the image fails the judge and the group is
    synthesized, so a workload never reports a schedule the simulator did not verify."""
    import ccviz.model.relabel as relabel

    def not_a_symmetry(topology, source, target, budget=relabel.SEARCH_BUDGET):
        return {n: n for n in topology.nodes} | dict(zip(source, target, strict=True)) | dict(
            zip(target, source, strict=True))

    monkeypatch.setattr(relabel, "group_automorphism", not_a_symmetry)
    groups = {"tp": [[0, 1, 2, 3], [4, 9, 14, 15]]}  # the second is no row: 4 -> 9 is not a link
    result = run_workload(TORUS, "tp=4,dp=4", "tp:allgather:1MB", "ring", groups=groups)
    assert result.timeline.verified
    assert [g.relabeled_from for g in result.groups] == [None, None]
    assert all(simulate(g.schedule).verified for g in result.groups)


def test_the_yaml_form_turns_relabeling_off_and_refuses_a_non_boolean(tmp_path, capsys):
    job = tmp_path / "job.yaml"
    job.write_text("topology: ndv2:chassis=2\nparallel: tp=8,dp=2\nrun: tp:allgather:4MB\nrelabel: false\n")
    assert main(["workload", "--config", str(job), "--json"]) == 0
    assert [g["relabeled_from"] for g in json.loads(capsys.readouterr().out)["groups"]] == [None, None]
    job.write_text("topology: ndv2:chassis=2\nparallel: tp=8,dp=2\nrun: tp:allgather:4MB\nrelabel: 'no'\n")
    assert main(["workload", "--config", str(job), "--json"]) != 0
    assert "relabel should be true or false" in capsys.readouterr().err
