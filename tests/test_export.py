"""Exports read the simulator's Timeline: JSON round-trips, MSCCL XML is well-formed and complete."""

from __future__ import annotations

import json
from xml.etree import ElementTree as ET

import pytest

from ccviz import CcvizError, Link, Node, Schedule, Topology, Transfer, make_collective, simulate
from ccviz.interop.export import gpu_hops, msccl_xml, schedule_json
from tests.test_simulate import ring_allgather, ring_reducescatter


def parse(timeline) -> ET.Element:
    return ET.fromstring(msccl_xml(timeline))


def steps_of(algo: ET.Element, kind: str) -> list[tuple[str, ET.Element, ET.Element]]:
    return [(g.get("id"), tb, st) for g in algo.findall("gpu") for tb in g.findall("tb") for st in tb.findall("step")
            if st.get("type") == kind]


def test_json_export_carries_simulated_times_and_verdict():
    timeline = simulate(ring_allgather(4))
    data = json.loads(schedule_json(timeline))
    assert data["simulation"]["verified"] is True
    starts = [row[3] for row in data["transfers"]]
    assert all(s is not None for s in starts)
    assert Schedule.from_dict(data).is_timed


def test_msccl_ring_allgather_is_one_fused_thread_block_per_gpu_like_msccl_tools():
    timeline = simulate(ring_allgather(4))
    algo = parse(timeline)
    assert algo.get("coll") == "allgather" and algo.get("ngpus") == "4"
    for gpu in algo.findall("gpu"):
        assert gpu.get("o_chunks") == "4"
        (tb,) = gpu.findall("tb")  # receives from the previous GPU, forwards to the next
        assert tb.get("send") != "-1" and tb.get("recv") != "-1"
        assert [st.get("type") for st in tb.findall("step")] == ["s", "rcs", "rcs", "r"]


def test_msccl_ring_reducescatter_reduces_and_forwards_in_one_step():
    algo = parse(simulate(ring_reducescatter(4)))
    assert algo.get("coll") == "reducescatter"
    assert len(steps_of(algo, "rrcs")) == 8 and len(steps_of(algo, "rrc")) == 4 and len(steps_of(algo, "s")) == 4
    assert {(g.get("i_chunks"), g.get("o_chunks")) for g in algo.findall("gpu")} == {("4", "1")}


def test_switch_paths_collapse_to_gpu_hops():
    nodes = [Node(0, "switch", copy=False)] + [Node(i) for i in (1, 2, 3)]
    links = [lk for g in (1, 2, 3) for lk in (Link(g, 0, 50.0, 0.5), Link(0, g, 50.0, 0.5))]
    topo = Topology("star3", nodes, links)
    coll = make_collective("broadcast", topo, 1e6, root=1)
    timeline = simulate(Schedule(topo, coll, [Transfer(0, 1, 0, step=0), Transfer(0, 0, 2, step=1),
                                              Transfer(0, 1, 0, step=1), Transfer(0, 0, 3, step=2)], "hand"))
    hops = gpu_hops(timeline)
    assert sorted((h.src, h.dst) for h in hops) == [(1, 2), (1, 3)]
    algo = parse(timeline)
    assert {g.get("id") for g in algo.findall("gpu")} == {"0", "1", "2"}
    assert len(steps_of(algo, "s")) == 2


def test_a_copying_switch_is_refused_but_still_collapses():
    nodes = [Node(0, "switch")] + [Node(i) for i in (1, 2, 3)]
    links = [lk for g in (1, 2, 3) for lk in (Link(g, 0, 50.0, 0.5), Link(0, g, 50.0, 0.5))]
    topo = Topology("star3", nodes, links)
    coll = make_collective("broadcast", topo, 1e6, root=1)
    timeline = simulate(Schedule(topo, coll, [Transfer(0, 1, 0, step=0), Transfer(0, 0, 2, step=1),
                                              Transfer(0, 0, 3, step=1)], "hand"))
    assert sorted((h.src, h.dst) for h in gpu_hops(timeline)) == [(1, 2), (1, 3)]
    with pytest.raises(CcvizError, match="no switch multicast"):
        msccl_xml(timeline)
