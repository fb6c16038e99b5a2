"""A workload's groups synthesized together: one demand (the union of every group's chunks), one synthesis,
one timeline judged by the simulator."""

from __future__ import annotations

import json
from collections import Counter

import pytest
import yaml

import ccviz
from ccviz.cli import main
from ccviz.errors import CcvizError
from ccviz.judge.simulate import simulate
from ccviz.model.collectives import make_collective
from ccviz.model.schedule import Schedule
from ccviz.model.workload_demand import MAX_UNION_CHUNKS, common_chunk_bytes, part_of_chunk, union_collective
from ccviz.runs.workload import run_workload
from ccviz.synth.joint import relay_gpus, synthesize_joint
from ccviz.synth.reversal import split_demand

LEAFSPINE = ccviz.load_topology("leafspine")  # 16 GPUs, 4 leaves
RING4 = ccviz.load_topology("ring:n=4")


def _demands(collective, ids=None):
    """(pre, post, reduce) of every chunk, counted (ids: only these chunks)."""
    return Counter((c.pre, c.post, c.reduce) for c in collective.chunks if ids is None or c.id in ids)


def test_the_union_covers_exactly_each_groups_demands():
    unit, pieces = common_chunk_bytes({"tp": 64e6 / 8, "dp": 256e6 / 4})
    assert (unit, pieces) == (8e6, {"tp": 1, "dp": 8})
    unit, pieces = common_chunk_bytes({"tp": 6e6, "dp": 4e6})  # neither divides the other: 2 MB pieces
    assert (unit, pieces) == (2e6, {"tp": 3, "dp": 2})
    parts = [make_collective("allreduce", (0, 1, 2, 3), 8e6, 1), make_collective("alltoall", (0, 4, 8, 12), 32e6, 4),
             make_collective("allgather", (1, 5), 4e6, 1)]
    union = union_collective(parts, ["tp0", "ep0", "dp0"])
    assert union.name == "custom" and union.chunk_bytes == 2e6
    owner = part_of_chunk(union)
    assert len(owner) == len(union.chunks) == sum(len(p.chunks) for p in parts)
    for i, part in enumerate(parts):
        mine = {c.id for c in union.chunks if owner[c.id] == i}
        assert _demands(union, mine) == _demands(part)
    assert len({(c.source, c.index) for c in union.chunks}) == len(union.chunks)  # one name per chunk
    reductions, copies = split_demand(union)
    assert all(c.reduce and c.post == {c.source} for c in reductions.chunks) and len(reductions.chunks) == 4
    assert not any(c.reduce for c in copies.chunks) and len(copies.chunks) == 4 + 48 + 2


def test_a_union_past_its_cap_or_of_two_sizes_is_refused_in_one_line():
    big = make_collective("alltoall", tuple(range(16)), 1e6, MAX_UNION_CHUNKS // 240 + 1)
    with pytest.raises(CcvizError, match="over the 20,000 one synthesis takes") as info:
        union_collective([big])
    assert "\n" not in str(info.value)
    with pytest.raises(CcvizError, match="cut every group into one chunk size"):
        union_collective([make_collective("allgather", (0, 1), 1e6), make_collective("allgather", (2, 3), 2e6)])
    assert common_chunk_bytes({"tp": 64e6 / 3, "dp": 64e6}) == (pytest.approx(64e6 / 3), {"tp": 1, "dp": 3})
    with pytest.raises(CcvizError, match="cut dp's 1000001 B chunks into 1,000,001 pieces") as info:
        common_chunk_bytes({"tp": 1.0, "dp": 1e6 + 1})
    assert "\n" not in str(info.value)


def test_joint_tacos_verifies_and_is_compared_with_composed():
    job = dict(parallel="tp=4,dp=4", steps="tp:allreduce:16MB,dp:allreduce:64MB", algorithm="tacos")
    composed = run_workload(LEAFSPINE, **job)
    joint = run_workload(LEAFSPINE, **job, synthesis="joint")
    assert joint.timeline.verified, joint.timeline.violations[:1]
    assert joint.synthesis.startswith("joint") and composed.synthesis.startswith("composed")
    assert joint.joint_synth_time_s is not None and composed.joint_synth_time_s is None
    for g_joint, g_composed in zip(joint.groups, composed.groups, strict=True):
        assert g_joint.finish_alone_s == pytest.approx(g_composed.finish_alone_s)  # alone is alone in both
    ends = {}  # each group's last delivery: when the last of its (chunk, rank) demands held
    for (chunk, _), when in joint.timeline.completion_s.items():
        i = joint.group_of_chunk()[chunk]
        ends[i] = max(ends.get(i, 0.0), when)
    assert [g.finish_together_s for g in joint.groups] == [ends[i] for i in range(len(joint.groups))]
    assert joint.finish_s == pytest.approx(max(ends.values()))
    if joint.finish_s > composed.finish_s:
        print(f"joint {joint.finish_s * 1e3:.3f} ms > composed {composed.finish_s * 1e3:.3f} ms: the union's "
              "copies wait for their sums and the matching is greedy")


def test_joint_tacos_routes_through_other_groups_gpus():
    """On a ring, dp groups {0, 2} and {1, 3} reach each other only through the other group's GPUs; TACOS (which
    moves a chunk only to ranks that want it) is asked to deliver there too, and the reduction's reversal drops
    the branches that end there."""
    assert relay_gpus(RING4, frozenset({0}), frozenset({2})) in ({1}, {3})  # one way round the ring
    assert relay_gpus(RING4, frozenset({0}), frozenset({0, 1})) == frozenset()
    result = run_workload(RING4, "tp=2,dp=2", "tp:allreduce:1MB,dp:allreduce:2MB", "tacos", synthesis="joint")
    assert result.timeline.verified, result.timeline.violations[:1]
    assert {g.ranks for g in result.groups if g.kind == "dp"} == {(0, 2), (1, 3)}
    reread = simulate(Schedule.from_dict(result.schedule.to_dict()))  # a custom collective any tool can load
    assert reread.verified and reread.finish_time_s == pytest.approx(result.finish_s)


def test_joint_tacos_moves_an_alltoall_group_as_plain_copies():
    """TACOS has no AllToAll of its own (composed refuses); joint moves its chunks as copies, alone and together."""
    job = ("tp=2,ep=2", "tp:allreduce:1MB,ep:alltoall:2MB", "tacos")
    with pytest.raises(CcvizError, match="tacos does not implement alltoall"):
        run_workload(RING4, *job)
    result = run_workload(RING4, *job, synthesis="joint")
    assert result.timeline.verified, result.timeline.violations[:1]
    ep = [g for g in result.groups if g.kind == "ep"]
    assert [g.collective.name for g in ep] == ["alltoall", "alltoall"]
    assert all(0 < g.finish_alone_s <= g.finish_together_s * (1 + 1e-9) for g in ep)


def test_joint_teccl_on_a_tiny_ring_verifies():
    two = run_workload(RING4, "tp=2,dp=2", "tp:allreduce:2MB", "teccl", synthesis="joint",
                       options=ccviz.SynthOptions(time_limit=20))  # 2 groups of 2: one multi-commodity problem
    assert two.timeline.verified, two.timeline.violations[:1]
    assert [g.ranks for g in two.groups] == [(0, 1), (2, 3)]
    result = run_workload(RING4, "tp=2,dp=2", "tp:allreduce:1MB,dp:alltoall:2MB", "teccl",
                          synthesis="joint", options=ccviz.SynthOptions(time_limit=20))
    assert result.timeline.verified, result.timeline.violations[:1]
    # 0.5 MB chunks: 2 per allreduce group, each alltoall chunk of 1 MB in 2 pieces (2 x 2 per group)
    assert len(result.schedule.collective.chunks) == 2 * 2 + 2 * 4
    assert all(g.finish_together_s > 0 for g in result.groups)


@pytest.mark.parametrize("name", ["allgather", "reducescatter"])
@pytest.mark.parametrize("algorithm", ["mteg", "tacos"])
def test_a_union_of_only_copies_or_only_reductions(name, algorithm):
    parts = [make_collective(name, (0, 2), 1e6), make_collective(name, (1, 3), 1e6)]  # each crosses the other
    union = union_collective(parts)
    timeline = simulate(synthesize_joint(RING4, union, algorithm))
    assert timeline.verified, timeline.violations[:1]
    assert timeline.schedule.collective is union


def test_bad_joint_input_is_one_line(capsys, tmp_path):
    with pytest.raises(CcvizError, match="take tacos, mteg, teccl, teccl-astar"):
        run_workload(RING4, "tp=2,dp=2", "tp:allreduce:1MB", "ring", synthesis="joint")
    with pytest.raises(CcvizError, match="synthesis: 'both' is not one of composed, joint"):
        run_workload(RING4, "tp=2,dp=2", "tp:allreduce:1MB", "tacos", synthesis="both")
    args = ["workload", "ring:n=4", "--parallel", "tp=2,dp=2", "--run", "tp:allreduce:1MB,dp:allgather:2MB"]
    assert main([*args, "-a", "direct", "--synthesis", "joint"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "direct synthesizes one collective at a time" in err
    assert main([*args, "-a", "tacos", "--synthesis", "joint", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["verified"] is True and data["synthesis"].startswith("joint")
    assert {"groups", "finish_s", "busiest_links", "joint_synth_time_s"} <= set(data)
    config = tmp_path / "job.yaml"
    config.write_text(yaml.safe_dump({"topology": "ring:n=4", "parallel": "tp=2,dp=2", "algorithm": "mteg",
                                      "run": "tp:allreduce:1MB", "synthesis": "joint"}))
    assert main(["workload", "--config", str(config), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["synthesis"].startswith("joint")
    config.write_text(yaml.safe_dump({"topology": "ring:n=4", "parallel": "tp=2,dp=2", "algorithm": "mteg",
                                      "run": "tp:allreduce:1MB", "synthesis": "together"}))
    assert main(["workload", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "synthesis: 'together'" in err


def test_workload_page_offers_joint_beside_the_algorithm():
    from pathlib import Path

    from streamlit.testing.v1 import AppTest

    app = str(Path(__file__).resolve().parent.parent / "app.py")
    at = AppTest.from_file(app, default_timeout=120).run()
    at.switch_page("pages/workload.py").run()
    at.selectbox(key="wl_synthesis").select("joint").run()
    at.selectbox(key="wl_order_b").select("tp-dp").run()  # one order: one run per press
    at.button(key="wl_run_button").click().run()  # the default algorithm, ring, cannot take a union
    assert not at.exception
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and "ring synthesizes one collective at a time" in errors[0] and "\n" not in errors[0]
    at.selectbox(key="wl_algorithm").select("tacos").run()
    at.button(key="wl_run_button").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    dgx1 = ccviz.load_topology("dgx1")
    expected = run_workload(dgx1, "tp=4,dp=2", "tp:allreduce:16MB,dp:allreduce:64MB", "tacos", order="tp-dp",
                            synthesis="joint")
    assert at.metric[0].value == f"{expected.finish_s * 1e3:.4g} ms"
    assert any("joint: every group's chunks" in c.value for c in at.caption)


def test_joint_teccl_with_gaps_between_candidate_epochs_builds_its_lp():
    """A window of a link with no candidate send in it read 0 <= limit, which Pyomo refuses (issue 40, item 15:
    'constraint expression resolved to a trivial Boolean' on railclos, dp AllGather, 2 chunks)."""
    result = run_workload(ccviz.load_topology("railclos:boxes=2,gpus=2"), "tp=2,dp=2", "dp:allgather:32MB", "teccl",
                          synthesis="joint", chunks=2, options=ccviz.SynthOptions(time_limit=30))
    assert result.timeline.verified, result.timeline.violations[:1]
