"""A group's schedule moves data only to where a member needs it, relays excepted (issue 40, item 14)."""

from __future__ import annotations

from ccviz.builders.loading import load_topology
from ccviz.runs.pipeline import run
from ccviz.runs.workload import run_workload


def test_forestcoll_for_two_gpus_of_a_leafspine_feeds_no_stray_gpu() -> None:
    topology = load_topology("leafspine:leaves=2,hosts=4")
    result = run(topology, "allgather", "forestcoll", 1e6, ranks="0,1")
    assert result.timeline.verified
    assert any("delivered only to GPUs outside the group" in n for n in result.schedule.notes)
    transfers, start = result.timeline.schedule.transfers, result.timeline.start_s
    arrival = result.timeline.arrival_s
    for i, t in enumerate(transfers):
        if t.dst in (0, 1) or topology.is_switch(t.dst):
            continue
        # a GPU outside the group only relays: the chunk leaves it again after it lands
        assert any(u.src == t.dst and u.chunk == t.chunk and start[j] >= arrival[i] - 1e-12
                   for j, u in enumerate(transfers)), (i, t)


def test_no_group_of_a_workload_finishes_after_the_job() -> None:
    result = run_workload(load_topology("leafspine:leaves=2,hosts=2"), "tp=2,dp=2",
                          "tp:allgather:2MB,dp:allgather:2MB", "forestcoll")
    job = result.to_dict()
    assert job["verified"]
    for group in job["groups"]:
        assert group["finish_together_s"] <= job["finish_s"] * (1 + 1e-12), group
