"""Every schedule file ccviz writes loads, verifies, replays and plays back (issue 40, items 1 and 13).

A process group's file (``--ranks``) names a subset of the fabric's GPUs; a joint workload's file is a
``custom`` union whose chunks keep each group's order. Both were refused on reading back. An MSCCL export
of a group that relays through a GPU outside it crashed (KeyError) and lost the run's JSON.
"""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ccviz.app.imports import Upload, imported_run
from ccviz.builders.loading import load_topology
from ccviz.cli import main
from ccviz.errors import CcvizError
from ccviz.interop.export import msccl_xml, schedule_json
from ccviz.interop.importers import import_text
from ccviz.judge.simulate import simulate
from ccviz.model.schedule import Schedule
from ccviz.runs.pipeline import run
from ccviz.runs.workload import run_workload
from ccviz.synth.registry import SynthOptions, algorithms_for
from ccviz.viz.steps import schedule_steps


def reads_back(timeline) -> Schedule:  # noqa: ANN001 - a Timeline
    """Write the run's file as the CLI does, read it, judge it again: same verdict, same finish."""
    text = schedule_json(timeline)
    again = Schedule.from_dict(json.loads(text))
    judged = simulate(again)
    assert judged.verified, [v.message for v in judged.violations[:3]]
    assert abs(judged.finish_time_s - timeline.finish_time_s) <= 1e-9 * max(1.0, timeline.finish_time_s * 1e9)
    played = imported_run(Upload("s.json", text, True, timeline.collective.size_bytes, "", False), None)
    assert played.result.timeline.verified
    assert schedule_steps(played.result.timeline)
    return again


def test_group_file_verifies_with_the_cli(tmp_path, capsys) -> None:
    path = tmp_path / "s.json"
    assert main(["synth", "hypercube:n=4", "-c", "broadcast", "-a", "ring", "--ranks", "1,2", "-s", "1MB",
                 "--out", str(path), "--json"]) == 0
    capsys.readouterr()
    assert main(["verify", str(path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["verified"] and report["transfers"] >= 1


def test_group_msccl_export_refuses_in_one_line_and_keeps_the_json(tmp_path, capsys) -> None:
    xml = tmp_path / "x.xml"
    code = main(["synth", "dgx1", "-c", "allgather", "-a", "ring", "--ranks", "0-3,5", "-s", "1MB",
                 "--msccl", str(xml), "--json"])
    out, err = capsys.readouterr()
    assert code == 2 and not xml.exists()
    assert json.loads(out)["verified"]  # the run is printed although its export is refused
    assert err.count("\n") == 1 and "msccl:" in err and "not one of its 5 ranks" in err and "KeyError" not in err


def test_group_without_relays_exports_msccl_that_imports(tmp_path) -> None:
    result = run(load_topology("dgx1"), "allgather", "ring", 1e6, ranks="0-3")
    schedule = import_text(msccl_xml(result.timeline), "g.xml", None, 1e6)
    assert simulate(schedule).verified and schedule.collective.n_ranks == 4


def test_joint_workload_file_reads_back() -> None:
    result = run_workload(load_topology("railclos:boxes=2,gpus=4"), "tp=4,dp=2", "tp:allgather:4MB,dp:allreduce:4MB",
                          "tacos", synthesis="joint")
    again = reads_back(result.timeline)
    assert again.collective.meta["part_chunks"] == result.timeline.collective.meta["part_chunks"]


def test_a_union_file_with_a_wrong_part_count_is_refused() -> None:
    result = run_workload(load_topology("railclos:boxes=2,gpus=4"), "tp=4,dp=2", "tp:allgather:4MB,dp:allgather:4MB",
                          "tacos", synthesis="joint")
    data = json.loads(schedule_json(result.timeline))
    data["collective"]["meta"]["part_chunks"][0] += 1
    try:
        Schedule.from_dict(data)
    except CcvizError as exc:
        assert exc.field == "collective.meta"
    else:
        raise AssertionError("a union whose parts do not add up was read")


FABRICS = ["ring:n=4", "hypercube:n=8", "dgx1", "star:n=4,reduce=true", "mesh2d:dims=2x3", "leafspine:leaves=2,hosts=2"]
COLLECTIVES = ["allgather", "reducescatter", "allreduce", "alltoall", "broadcast", "reduce", "gather", "scatter"]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fabric=st.sampled_from(FABRICS), collective=st.sampled_from(COLLECTIVES), pick=st.integers(0, 1000),
       members=st.lists(st.integers(0, 7), min_size=2, max_size=6, unique=True), whole=st.booleans(),
       chunks=st.integers(1, 2))
def test_random_runs_round_trip_through_their_file(fabric: str, collective: str, pick: int, members: list[int],
                                                    whole: bool, chunks: int) -> None:
    topology = load_topology(fabric)
    gpus = topology.gpus
    ranks = None if whole else [gpus[m % len(gpus)] for m in dict.fromkeys(m % len(gpus) for m in members)]
    if ranks is not None and len(ranks) < 2:
        ranks = gpus[:2]
    names = algorithms_for(collective)
    algorithm = names[pick % len(names)]
    try:
        result = run(topology, collective, algorithm, 1e6, chunks, ranks=ranks,
                     options=SynthOptions(time_limit=5.0))
    except CcvizError:
        return  # refused in one line (an algorithm that does not fit this fabric or group)
    assert result.timeline.verified, (algorithm, collective, fabric, ranks)
    reads_back(result.timeline)


WORKLOAD_FABRICS = {"ring:n=4": "tp=2,dp=2", "leafspine:leaves=2,hosts=2": "tp=2,dp=2", "dgx1": "tp=4,dp=2"}


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fabric=st.sampled_from(sorted(WORKLOAD_FABRICS)), algorithm=st.sampled_from(["ring", "direct", "tacos", "mteg"]),
       joint=st.booleans(), tp=st.sampled_from(["allgather", "reducescatter", "allreduce"]),
       dp=st.sampled_from(["allgather", "reducescatter", "allreduce"]))
def test_random_workloads_round_trip_through_their_file(fabric: str, algorithm: str, joint: bool, tp: str,
                                                         dp: str) -> None:
    try:
        result = run_workload(load_topology(fabric), WORKLOAD_FABRICS[fabric], f"tp:{tp}:2MB,dp:{dp}:2MB", algorithm,
                              synthesis="joint" if joint else "composed")
    except CcvizError:
        return  # refused in one line (an algorithm that cannot synthesize groups together)
    assert result.timeline.verified
    reads_back(result.timeline)


def test_synthesize_page_names_why_a_relaying_group_has_no_msccl_export() -> None:
    from ccviz.app.ui import msccl_or_reason

    result = run(load_topology("dgx1"), "allgather", "ring", 1e6, ranks="0-3,5")
    xml, reason = msccl_or_reason(result.timeline)
    assert xml is None and "not one of its 5 ranks" in reason and "unexpectedly" not in reason
