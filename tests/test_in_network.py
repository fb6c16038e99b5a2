"""Switches that reduce in the network (NVLS, SHARP): the model, the judge's rule, the limit, inc, the builders."""

from __future__ import annotations

import itertools
import json
import random

import pytest

from ccviz import (
    CcvizError,
    bandwidth_limit,
    load_topology,
    make_collective,
    simulate,
    simulate_fast,
    synthesize,
)
from ccviz.builders import build
from ccviz.cli import main
from ccviz.model.schedule import Schedule, Transfer
from ccviz.model.topology import Link, Node, Topology
from tests.test_limit import _brute_gather

GB = 1e9


def _nvls(topo: Topology, size: float = 4e6, drop=None, extra=()) -> Schedule:
    """Hand-written NVLS AllReduce on a reducing star: every GPU combines each chunk up, the sum comes back."""
    coll = make_collective("allreduce", topo, size)
    hub = topo.switches[0]
    transfers = []
    for c in coll.chunks:
        transfers += [Transfer(c.id, g, hub, op="combine", step=c.id) for g in topo.gpus if (c.id, g) != drop]
        transfers += [Transfer(c.id, hub, g, op="copy", step=c.id + 0.5) for g in topo.gpus]
    return Schedule(topo, coll, transfers + list(extra), "hand")


# ------------------------------------------------------------------------------------------------ model
def test_reduce_round_trips_through_json_and_is_checked() -> None:
    topo = build("star:n=4,reduce=true")
    assert topo.reducing_switches == topo.switches
    data = topo.to_dict()
    data["nodes"][-1]["reduce_GBps"] = 200.0
    again = Topology.from_dict(json.loads(json.dumps(data)))
    assert again.nodes[4].reduce and again.nodes[4].reduce_GBps == 200.0
    assert not build("star:n=4").reducing_switches
    bad = json.loads(json.dumps(data))
    bad["nodes"][0]["reduce"] = True  # a GPU
    with pytest.raises(CcvizError, match="only switches reduce"):
        Topology.from_dict(bad)
    bad = json.loads(json.dumps(data))
    bad["nodes"][-1]["reduce"] = False  # a throughput without an engine
    with pytest.raises(CcvizError, match="reduce_GBps"):
        Topology.from_dict(bad)


# ------------------------------------------------------------------------------------------------ the judge
def test_nvls_allreduce_is_valid_and_pipelines() -> None:
    topo = build("star:n=4,reduce=true")
    timeline = simulate(_nvls(topo))
    assert timeline.verified, timeline.violations
    # 4 chunks of 1 MB, 20 us each on 50 GB/s, pipelined: 4 x 20 up, one more down, two alphas of 0.5 us
    assert timeline.finish_time_s == pytest.approx(101e-6)


def test_double_count_names_the_switch() -> None:
    topo = build("star:n=4,reduce=true")
    timeline = simulate(_nvls(topo, extra=[Transfer(0, 1, 4, op="combine", step=0)]))
    rules = {v.rule for v in timeline.violations}
    assert "double_count" in rules
    assert any("switch 4" in v.message and "rank(s) [1]" in v.message for v in timeline.violations)


def test_sum_missing_a_contribution_forwarded_as_a_result_is_named() -> None:
    topo = build("star:n=4,reduce=true")
    timeline = simulate(_nvls(topo, drop=(0, 3)))
    partial = [v for v in timeline.violations if v.rule == "partial_sum"]
    assert partial and "switch 4" in partial[0].message and "rank(s) [3]" in partial[0].message


def test_combine_needs_a_reducing_switch_and_a_sum_must_leave() -> None:
    plain = build("star:n=4")
    timeline = simulate(_nvls(build("star:n=4,reduce=true")).__class__(
        plain, make_collective("allreduce", plain, 4e6), _nvls(build("star:n=4,reduce=true")).transfers, "hand"))
    assert {v.rule for v in timeline.violations} >= {"bad_reduce"}
    topo = build("star:n=4,reduce=true")
    coll = make_collective("allreduce", topo, 4e6)
    only_up = [Transfer(0, g, 4, op="combine", step=0) for g in topo.gpus]
    timeline = simulate(Schedule(topo, coll, only_up, "hand"))
    assert "unforwarded_sum" in {v.rule for v in timeline.violations}


def test_slow_reduction_engine_is_timed_and_checked() -> None:
    topo = build("star:n=4,reduce=true")
    data = topo.to_dict()
    data["nodes"][-1]["reduce_GBps"] = 25.0  # half the port rate: the engine sets the pace
    slow = Topology.from_dict(data)
    sched = _nvls(slow)
    sched = Schedule(slow, make_collective("allreduce", slow, 4e6), sched.transfers, "hand")
    timeline = simulate(sched)
    assert timeline.verified, timeline.violations
    assert timeline.finish_time_s == pytest.approx(4 * 40e-6 + 21e-6 + 20e-6, rel=1e-6)  # 4 sums of 40 us
    early = [t._replace(start_s=t.start_s - 10e-6, end_s=None) if t.src == 4 and t.chunk == 3 else t
             for t in timeline.schedule.transfers]
    assert "too_fast" in {v.rule for v in simulate(sched.with_transfers(early)).violations}


def test_fast_path_defers_reducing_switches_to_the_full_judge() -> None:
    topo = build("star:n=4,reduce=true")
    timed = simulate(_nvls(topo)).schedule
    assert simulate_fast.verify(timed) is None


def test_cli_verify_rejects_a_double_count_naming_the_switch(tmp_path, capsys) -> None:
    topo = build("star:n=4,reduce=true")
    path = tmp_path / "hostile.json"
    _nvls(topo, extra=[Transfer(2, 0, 4, op="combine", step=2)]).save(path)
    assert main(["verify", str(path)]) == 1
    out = capsys.readouterr().out
    assert "INVALID" in out and "switch 4" in out and "twice" in out


# ------------------------------------------------------------------------------------------------ the limit
def _brute_in_network(topo: Topology) -> float:
    """min over node sets S with GPUs on both sides of min(B+(S), B-(S)), GB/s."""
    gpus, nodes = set(topo.gpus), list(topo.nodes)
    best = float("inf")
    for r in range(1, len(nodes)):
        for subset in itertools.combinations(nodes, r):
            inside = set(subset)
            if not (inside & gpus) or gpus <= inside:
                continue
            out = sum(lk.bandwidth_GBps * lk.lanes for (u, v), lk in topo.links.items() if u in inside and v not in inside)
            into = sum(lk.bandwidth_GBps * lk.lanes for (u, v), lk in topo.links.items() if v in inside and u not in inside)
            best = min(best, out, into)
    return best


def _random_reducing(seed: int) -> Topology:
    rng = random.Random(seed)
    n = rng.randint(4, 9)
    switches = set(rng.sample(range(n), rng.randint(1, 2)))
    nodes = [Node(i, "switch" if i in switches else "gpu", reduce=i in switches and rng.random() < 0.8)
             for i in range(n)]
    if not any(node.reduce for node in nodes):
        nodes[min(switches)] = Node(min(switches), "switch", reduce=True)
    links = {}
    for i in range(n):
        links[(i, (i + 1) % n)] = rng.choice([10, 25, 50])
        links[((i + 1) % n, i)] = rng.choice([10, 25, 50, 100])
    for _ in range(rng.randint(0, 2 * n)):
        u, v = rng.sample(range(n), 2)
        links[(u, v)] = rng.choice([5, 12.5, 40, 300])
    return Topology(f"reducing{seed}", nodes, [Link(u, v, bw, 0.5) for (u, v), bw in links.items()])


SMALL = [build(s) for s in ("star:n=3,reduce=true", "star:n=6,reduce=true", "leafspine:leaves=2,hosts=2,spines=2,"
                            "reduce=true", "railclos:boxes=2,gpus=2,spines=1")] + [_random_reducing(s) for s in range(12)]


@pytest.mark.parametrize("topo", SMALL, ids=lambda t: t.name)
def test_in_network_allreduce_limit_equals_brute_force(topo: Topology) -> None:
    assert len(topo.nodes) <= 12
    n = topo.n_gpus
    expected = max(1 / _brute_in_network(topo), _brute_gather(topo, True) / n, _brute_gather(topo, False) / n)
    assert bandwidth_limit(topo, "allreduce", GB).limit_s == pytest.approx(expected, rel=1e-9)


def test_limit_cli_with_and_without_reduce(capsys) -> None:
    assert main(["limit", "star:n=8,reduce=true", "-c", "allreduce", "-s", "1GB", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["limit_s"] == pytest.approx(1e9 / 50e9)
    assert main(["limit", "star:n=8", "-c", "allreduce", "-s", "1GB", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["limit_s"] == pytest.approx(2 * 7 / 8 * 1e9 / 50e9)
    for name in ("reducescatter", "reduce", "allgather", "broadcast"):  # only AllReduce changes
        with_inc = bandwidth_limit(build("star:n=8,reduce=true"), name, GB).limit_s
        assert with_inc == pytest.approx(bandwidth_limit(build("star:n=8"), name, GB).limit_s)


# ------------------------------------------------------------------------------------------------ inc
def test_inc_allreduce_on_a_reducing_star_reaches_the_limit(capsys) -> None:
    assert main(["synth", "star:n=8,reduce=true", "-c", "allreduce", "-a", "inc", "-s", "1GB", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["verified"]
    assert out["limit_s"] == pytest.approx(1e9 / 50e9)
    assert out["finish_time_s"] <= 1.05 * out["limit_s"]


@pytest.mark.parametrize("collective", ["allreduce", "reducescatter", "reduce", "allgather", "broadcast"])
@pytest.mark.parametrize("spec", ["star:n=4,reduce=true", "dgxh100", "railclos:boxes=2,gpus=4,spines=1"])
def test_inc_verifies_every_collective(spec: str, collective: str) -> None:
    topo = build(spec)
    sched = synthesize(topo, make_collective(collective, topo, 64e6), "inc")
    timeline = simulate(sched)
    assert timeline.verified, timeline.violations[:3]
    assert any(t.op == "combine" for t in sched.transfers) == (collective in ("allreduce", "reducescatter", "reduce"))


def test_inc_refuses_a_fabric_without_reducing_switches() -> None:
    topo = build("star:n=4")
    with pytest.raises(CcvizError, match="reduce"):
        synthesize(topo, make_collective("allreduce", topo, 1e6), "inc")


# ------------------------------------------------------------------------------------------------ builders
@pytest.mark.parametrize("spec, gpus, limit_gbps", [
    ("dgxh100:model=alphabeta", 8, 450.0), ("dgxh100:boxes=2,model=alphabeta", 16, 400.0),
    ("railclos:boxes=2", 16, 400.0), ("nvl72:model=alphabeta", 72, 900.0),
])
def test_builders_load_and_answer_the_limit(spec: str, gpus: int, limit_gbps: float) -> None:
    topo = load_topology(spec)
    assert topo.n_gpus == gpus and topo.reducing_switches
    assert all(node.pos is not None for node in topo.nodes.values())
    assert bandwidth_limit(topo, "allreduce", GB).limit_s == pytest.approx(1 / limit_gbps)


def test_the_limit_of_a_hardware_fabric_is_at_its_sustained_rates() -> None:
    """Where the fabric declares the hardware link model, the simulator judges its links at their sustained rates,
    so the limit is computed there too (a schedule's ratio to it then means the same on every fabric)."""
    from ccviz.model.link_model import declared

    spec = load_topology("dgxh100:model=alphabeta")
    hardware = load_topology("dgxh100")
    share = declared(hardware).efficiency["scaleup"]
    assert bandwidth_limit(hardware, "allgather", GB).limit_s == pytest.approx(
        bandwidth_limit(spec, "allgather", GB).limit_s / share)


def test_builders_refuse_bad_sizes() -> None:
    for spec in ("dgxh100:boxes=0", "nvl72:racks=9", "railclos:oversub=0"):
        with pytest.raises(CcvizError):
            build(spec)


def test_software_algorithms_say_why_they_do_not_reduce_in_the_switch() -> None:
    topo = build("star:n=4,reduce=true")
    for algorithm in ("ring", "tacos"):
        sched = synthesize(topo, make_collective("allreduce", topo, 1e6), algorithm)
        assert simulate(sched).verified
        assert sum("in-network reduction" in note for note in sched.notes) == 1
    inc = synthesize(topo, make_collective("allreduce", topo, 1e6), "inc")
    assert not any("does not use" in note for note in inc.notes)


def test_msccl_export_refuses_in_switch_sums(tmp_path, capsys) -> None:
    topo = build("star:n=4,reduce=true")
    path = tmp_path / "rs.json"
    synthesize(topo, make_collective("reducescatter", topo, 1e6), "inc").save(path)
    assert main(["export", str(path), "--format", "msccl", "--out", str(tmp_path / "rs.xml")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "inside switch 4" in err[0]
    assert not (tmp_path / "rs.xml").exists()


@pytest.mark.parametrize("collective", ["allreduce", "reducescatter"])
def test_inc_paces_sums_to_a_slow_reduction_engine(collective: str) -> None:
    data = build("star:n=4,reduce=true").to_dict()
    data["nodes"][-1]["reduce_GBps"] = 25.0  # half the port rate
    slow = Topology.from_dict(data)
    sched = synthesize(slow, make_collective(collective, slow, 64e6), "inc")
    timeline = simulate(sched)
    assert timeline.verified, timeline.violations[:3]
    engine_bound = sched.collective.chunk_bytes * len(sched.collective.chunks) / 25e9  # every sum through one engine
    assert engine_bound <= timeline.finish_time_s <= 1.1 * engine_bound


def test_learn_rounds_follow_contributions_into_the_switch_and_the_sum_out() -> None:
    from ccviz.synth.registry import SynthOptions
    from ccviz.viz.rounds import rounds

    topo = build("star:n=4,reduce=true")
    sched = synthesize(topo, make_collective("allreduce", topo, 4e6), "inc", SynthOptions(extra={"pieces": 1}))
    steps = rounds(simulate(sched))
    assert len(steps) == 4  # one round per chunk: combine up, multicast down
    assert all(steps[0].coverage[g][0] == 4 for g in topo.gpus)  # every GPU holds chunk 0's whole sum
    assert steps[-1].delivered == 16 and "combine" in steps[0].label


def test_animation_marks_sums_inside_reducing_switches() -> None:
    from ccviz.viz.animation import schedule_animation
    from ccviz.viz.topology_fig import topology_figure

    topo = build("star:n=4,reduce=true")
    fig = schedule_animation(simulate(synthesize(topo, make_collective("allreduce", topo, 4e6), "inc")))
    sums = [t for frame in fig.frames for t in frame.data if t.name == "partial sums in switches"]
    assert sums and any(any(text for text in t.text) for t in sums)  # some frame shows contributions combining
    names = {t.name for t in topology_figure(topo).data}
    assert "switches that reduce (NVLS/SHARP)" in names and "switches" not in names


def test_topology_tables_keep_a_switch_that_reduces() -> None:
    from ccviz.app.tables import link_table, node_table, topology_from_tables

    topo = build("star:n=4,reduce=true")
    nodes = node_table(topo)
    assert nodes["reduce"].tolist() == [False] * 4 + [True]
    assert topology_from_tables(topo, nodes, link_table(topo)).reducing_switches == [4]
    nodes.loc[4, "reduce"] = False
    assert not topology_from_tables(topo, nodes, link_table(topo)).reducing_switches


def test_inc_allreduce_under_a_reducing_spine_adds_switch_into_switch() -> None:
    topo = build("leafspine:leaves=2,hosts=4,spines=1,reduce=true")
    sched = synthesize(topo, make_collective("allreduce", topo, 64e6), "inc")
    timeline = simulate(sched)
    assert timeline.verified, timeline.violations[:3]
    spine = topo.switches[-1]
    assert any(t.op == "combine" and t.dst == spine and topo.is_switch(t.src) for t in sched.transfers)
    assert timeline.finish_time_s <= 1.1 * bandwidth_limit(topo, "allreduce", 64e6).limit_s
    with pytest.raises(CcvizError, match="allreduce only"):
        synthesize(topo, make_collective("reducescatter", topo, 1e6), "inc")


def test_inc_refuses_to_multicast_through_a_switch_that_cannot_copy() -> None:
    topo = build("star:n=4,reduce=true,copy=false")
    with pytest.raises(CcvizError, match="cannot copy"):
        synthesize(topo, make_collective("allreduce", topo, 1e6), "inc")
    sched = synthesize(topo, make_collective("reducescatter", topo, 1e6), "inc")  # no multicast needed
    assert simulate(sched).verified
