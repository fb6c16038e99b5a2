"""Exports read the simulator's Timeline: JSON round-trips, MSCCL XML is well-formed and complete."""

from __future__ import annotations

import json
from xml.etree import ElementTree as ET

from ccviz import Link, Node, Schedule, Topology, Transfer, make_collective, simulate
from ccviz.export import gpu_hops, msccl_xml, schedule_json
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


def test_msccl_allgather_has_one_send_and_one_recv_per_hop_and_valid_deps():
    timeline = simulate(ring_allgather(4))
    algo = parse(timeline)
    assert algo.get("coll") == "allgather" and algo.get("ngpus") == "4"
    hops = len(timeline.schedule.transfers)
    assert len(steps_of(algo, "s")) == hops and len(steps_of(algo, "r")) == hops
    for gpu in algo.findall("gpu"):
        assert gpu.get("o_chunks") == "4"
        tbs = {tb.get("id"): tb for tb in gpu.findall("tb")}
        for tb in tbs.values():
            assert (tb.get("send") == "-1") != (tb.get("recv") == "-1")  # one peer, one direction per tb
            for st in tb.findall("step"):
                if st.get("depid") != "-1":
                    target = tbs[st.get("depid")].findall("step")[int(st.get("deps"))]
                    assert target.get("type") == "r" and target.get("hasdep") == "1"
    # Forwarded chunks wait for their receive: every send but the first ring step depends on one.
    assert sum(1 for _, _, st in steps_of(algo, "s") if st.get("depid") != "-1") == hops - 4


def test_msccl_reductions_use_receive_reduce_copy():
    algo = parse(simulate(ring_reducescatter(4)))
    assert len(steps_of(algo, "rrc")) == 12 and not steps_of(algo, "r")


def test_switch_paths_collapse_to_gpu_hops():
    nodes = [Node(0, "switch")] + [Node(i) for i in (1, 2, 3)]
    links = [lk for g in (1, 2, 3) for lk in (Link(g, 0, 50.0, 0.5), Link(0, g, 50.0, 0.5))]
    topo = Topology("star3", nodes, links)
    coll = make_collective("broadcast", topo, 1e6, root=1)
    timeline = simulate(Schedule(topo, coll, [Transfer(0, 1, 0, step=0), Transfer(0, 0, 2, step=1),
                                              Transfer(0, 0, 3, step=1)], "hand"))
    hops = gpu_hops(timeline)
    assert sorted((h.src, h.dst) for h in hops) == [(1, 2), (1, 3)]
    algo = parse(timeline)
    assert {g.get("id") for g in algo.findall("gpu")} == {"0", "1", "2"}
    assert len(steps_of(algo, "s")) == 2
