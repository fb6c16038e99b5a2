"""TACOS: published checks on meshes, reductions by reversal, switches, seeds, and random topologies."""

from __future__ import annotations

import math
import threading
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ccviz import CcvizError, SynthOptions, load_topology, make_collective, simulate, synthesize
from ccviz.model.topology import Link, Node, Topology
from ccviz.synth.budget import Budget
from ccviz.synth.tacos import Matcher, build_routes, copy_schedule
from tests.paths import REFERENCE

GIB = 2**30
MESH_4X4 = "mesh2d:dims=4x4,bw=53.687091712,alpha=0.5"  # 50 GiB/s, 0.5 us (TACOS defaults)
MESH_3X3 = "mesh2d:dims=3x3,bw=53.687091712,alpha=0.5"


def run(topology: Topology, name: str, size: float = GIB, **options):
    collective = make_collective(name, topology, size)
    schedule = synthesize(topology, collective, "tacos", SynthOptions(**options))
    timeline = simulate(schedule)
    assert timeline.verified, timeline.violations[:3]
    return schedule, timeline


def hop_time(topology: Topology, name: str, size: float = GIB) -> float:
    """alpha + chunk time of one (uniform) link."""
    nbytes = make_collective(name, topology, size).chunk_bytes
    return topology.arrival_delay(0, 1, nbytes)


def test_mesh_4x4_allgather_hits_in_degree_bound() -> None:
    topology = load_topology(MESH_4X4)
    schedule, timeline = run(topology, "allgather", seed=0)
    # a corner has 2 in-links and misses 15 chunks: ceil(15 / 2) = 8 hops
    assert timeline.finish_time_s == pytest.approx(8 * hop_time(topology, "allgather"), rel=1e-12)
    assert schedule.status == "heuristic"
    assert schedule.estimated_finish_s == pytest.approx(timeline.finish_time_s, rel=1e-12)


def test_mesh_3x3_best_of_10_restarts_hits_4_hops() -> None:
    topology = load_topology(MESH_3X3)
    _, best = run(topology, "allgather", seed=0, restarts=10)
    assert best.finish_time_s == pytest.approx(4 * hop_time(topology, "allgather"), rel=1e-12)


def test_restarts_keep_the_best_run_and_seeds_reproduce() -> None:
    topology = load_topology(MESH_3X3)
    one, _ = run(topology, "allgather", seed=7)
    again, _ = run(topology, "allgather", seed=7)
    many, _ = run(topology, "allgather", seed=7, restarts=6)
    assert one.transfers == again.transfers
    assert many.estimated_finish_s <= one.estimated_finish_s
    matchings = {tuple(run(topology, "allgather", seed=s)[0].transfers) for s in range(12)}
    assert len(matchings) > 1, "different seeds should explore different matchings"


@pytest.mark.parametrize("spec", [MESH_3X3, str(REFERENCE / "dgx1.json")])
def test_allreduce_is_reducescatter_then_allgather(spec: str) -> None:
    topology = load_topology(spec)
    rs_schedule, rs = run(topology, "reducescatter", seed=3)
    _, ag = run(topology, "allgather", seed=3)
    ar_schedule, ar = run(topology, "allreduce", seed=3)
    assert all(t.op == "reduce" for t in rs_schedule.transfers)
    assert ar.finish_time_s == pytest.approx(rs.finish_time_s + ag.finish_time_s, rel=1e-12)
    # every rank's partial is counted exactly once: the simulator flags double counts and misses
    assert {t.op for t in ar_schedule.transfers} == {"reduce", "copy"}


def test_reduce_mirrors_broadcast_on_symmetric_links() -> None:
    topology = load_topology(MESH_3X3)
    _, bcast = run(topology, "broadcast", seed=1)
    _, reduce = run(topology, "reduce", seed=1)
    assert reduce.finish_time_s == pytest.approx(bcast.finish_time_s, rel=1e-12)


@pytest.mark.parametrize("name", ["ndv2_1chassis", "ndv2_2chassis_teccl_as_run", "dgx2_2chassis"])
@pytest.mark.parametrize("collective", ["allgather", "reducescatter", "allreduce"])
def test_switched_topologies_verify(name: str, collective: str) -> None:
    run(load_topology(REFERENCE / f"{name}.json"), collective, size=1e6, seed=2)


def test_switch_holds_nothing() -> None:
    """Every hop out of a switch starts the instant its chunk arrives there."""
    topology = load_topology(REFERENCE / "ndv2_1chassis.json")
    schedule, timeline = run(topology, "allgather", size=1e6)
    arrivals_at_switch = {}
    for i, t in enumerate(schedule.transfers):
        if topology.is_switch(t.dst):
            arrivals_at_switch.setdefault(t.chunk, set()).add(float(timeline.arrival_s[i]))
    for t in schedule.transfers:
        if topology.is_switch(t.src):
            assert t.start_s in arrivals_at_switch[t.chunk]


def test_patience_keeps_slow_links_for_rare_chunks() -> None:
    """DGX-2 pair: slow cross-chassis cables should carry chunks the other chassis lacks."""
    topology = load_topology(REFERENCE / "dgx2_2chassis.json")
    greedy = [run(topology, "allgather", seed=s, extra={"patience": "off"})[0].estimated_finish_s for s in range(3)]
    patient = [run(topology, "allgather", seed=s, extra={"patience": "on"})[0].estimated_finish_s for s in range(3)]
    assert min(patient) < min(greedy)


def test_serialization_link_hold_pipelines_alpha() -> None:
    topology = load_topology(MESH_4X4)
    _, arrival = run(topology, "allgather", seed=0)
    _, serial = run(topology, "allgather", seed=0, extra={"link_hold": "serialization"})
    assert serial.finish_time_s <= arrival.finish_time_s


def test_bad_options_and_collectives_are_refused() -> None:
    topology = load_topology("ring:n=4")
    with pytest.raises(CcvizError, match="link_hold"):
        run(topology, "allgather", extra={"link_hold": "forever"})
    with pytest.raises(CcvizError, match="patience"):
        run(topology, "allgather", extra={"patience": "maybe"})
    with pytest.raises(CcvizError, match="restarts"):
        run(topology, "allgather", restarts=0)
    with pytest.raises(CcvizError, match="tacos does not implement alltoall"):
        run(topology, "alltoall")


# ------------------------------------------------------------------ progress, stop, time limit
def test_progress_fractions_climb_from_0_to_1_over_restarts_and_halves() -> None:
    topology = load_topology(MESH_4X4)
    for name in ("allgather", "allreduce"):
        reports = []
        run(topology, name, seed=1, restarts=3, progress=reports.append)
        fractions = [p.fraction for p in reports]
        assert fractions and all(0.0 <= f <= 1.0 for f in fractions)
        assert fractions == sorted(fractions) and fractions[-1] == 1.0
        assert all(p.incumbent_s is not None and p.incumbent_s > 0 for p in reports if "done" in p.message)


def test_progress_inside_a_run_reports_delivered_demands() -> None:
    topology = load_topology(MESH_4X4)
    reports = []
    options = SynthOptions(seed=0, restarts=2, progress=reports.append)
    schedule = copy_schedule(topology, make_collective("allgather", topology, GIB), options,
                             budget=Budget(options, every_s=0.0))  # no throttle: every check reports
    assert simulate(schedule).verified
    inside = [p for p in reports if "delivered" in p.message]
    assert inside, "a run reports while it matches"
    fractions = [p.fraction for p in reports]
    assert all(0.0 <= f <= 1.0 for f in fractions) and fractions == sorted(fractions)


def test_a_preset_stop_or_an_expired_limit_raises_a_clear_error() -> None:
    topology = load_topology(MESH_4X4)
    stop = threading.Event()
    stop.set()
    with pytest.raises(CcvizError, match="no complete schedule yet") as err:
        run(topology, "allgather", stop=stop)
    assert err.value.field == "stop"
    with pytest.raises(CcvizError, match="raise the limit") as err:
        run(topology, "allreduce", time_limit=1e-9)
    assert err.value.field == "time_limit"
    with pytest.raises(CcvizError, match="time_limit"):
        run(topology, "allgather", time_limit=-1.0)


def test_a_run_checks_its_budget_while_matching() -> None:
    topology = load_topology(MESH_4X4)
    collective = make_collective("allgather", topology, GIB)
    routes = build_routes(topology, collective.chunk_bytes, "arrival")
    seen = []

    def stop_at_once(fraction: float) -> bool:
        seen.append(fraction)
        return True

    assert Matcher(topology, collective, routes, seed=0).run(stop_at_once) is None
    assert len(seen) == 1 and 0.0 <= seen[0] < 1.0  # ended mid-run, at its first check


def test_stop_between_restarts_keeps_the_best_complete_run() -> None:
    topology = load_topology(MESH_3X3)
    two, _ = run(topology, "allgather", seed=5, restarts=2)
    stop = threading.Event()
    finished = []

    def stop_after_two_runs(p) -> None:
        if p.message.endswith("done"):
            finished.append(p)
            if len(finished) == 2:
                stop.set()

    schedule, timeline = run(topology, "allgather", seed=5, restarts=10, stop=stop, progress=stop_after_two_runs)
    assert len(finished) == 2
    assert schedule.status == "heuristic"
    assert any("stopped after 2 of 10 TACOS restarts" in note for note in schedule.notes)
    assert timeline.finish_time_s == pytest.approx(simulate(two).finish_time_s)


def test_stop_during_a_later_run_returns_the_earlier_runs_best() -> None:
    topology = load_topology(MESH_4X4)
    collective = make_collective("allgather", topology, GIB)
    stop = threading.Event()

    def stop_in_run_2(p) -> None:
        if p.message.startswith("TACOS run 2/") and "delivered" in p.message:
            stop.set()

    options = SynthOptions(seed=0, restarts=3, stop=stop, progress=stop_in_run_2)
    schedule = copy_schedule(topology, collective, options, budget=Budget(options, every_s=0.0))
    assert stop.is_set() and simulate(schedule).verified
    assert any("stopped after 1 of 3 TACOS restarts" in note for note in schedule.notes)
    single = copy_schedule(topology, collective, SynthOptions(seed=0, restarts=1))
    assert schedule.transfers == single.transfers


def one_slow_direction(topology: Topology) -> Topology:
    """The fabric with one link slower than its twin: no longer its own reversal."""
    first = min(topology.links)
    return topology.with_changes(links=[replace(lk, bandwidth_GBps=lk.bandwidth_GBps / 2) if key == first else lk
                                        for key, lk in topology.links.items()])


def test_a_stop_after_the_reducescatter_half_still_yields_a_whole_allreduce() -> None:
    # An asymmetric fabric: the AllGather half is a run of its own, which completes despite the stop.
    topology = one_slow_direction(load_topology(MESH_4X4))
    stop = threading.Event()

    def stop_after_first_run(p) -> None:
        if p.message.endswith("done"):
            stop.set()

    schedule, _ = run(topology, "allreduce", seed=0, restarts=4, stop=stop, progress=stop_after_first_run)
    assert any("stopped after 1 of 4 TACOS restarts" in note for note in schedule.notes)
    assert any("completed anyway" in note for note in schedule.notes)


def test_allreduce_on_a_self_reverse_fabric_solves_the_copy_once() -> None:
    """The ReduceScatter's mirror is the AllGather: one matching run serves both halves, and the AllGather
    half is that run shifted past the first half (so it cannot differ from a fresh run on the same routes)."""
    topology = load_topology(MESH_4X4)
    runs = []
    original = Matcher.run

    def counted(self, check=None):
        runs.append(self.topology.name)
        return original(self, check)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Matcher, "run", counted)
        schedule, timeline = run(topology, "allreduce", seed=0, restarts=2)
    assert timeline.verified and len(runs) == 2 and all(name.endswith("-reversed") for name in runs)
    rs = [t for t in schedule.transfers if t.op == "reduce"]
    ag = [t for t in schedule.transfers if t.op == "copy"]
    assert len(rs) == len(ag) and min(t.start_s for t in ag) >= max(t.end_s for t in rs) - 1e-12
    asymmetric = one_slow_direction(topology)
    runs.clear()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Matcher, "run", counted)
        _, timeline = run(asymmetric, "allreduce", seed=0, restarts=2)
    assert timeline.verified and len(runs) == 4 and sum(not name.endswith("-reversed") for name in runs) == 2


# ------------------------------------------------------------------ property test
@st.composite
def small_topologies(draw) -> Topology:
    """A random connected fabric: a spanning path plus extra cables, uneven directions, maybe a switch."""
    n = draw(st.integers(2, 6))
    order = draw(st.permutations(range(n)))
    pairs = {tuple(sorted(p)) for p in zip(order, order[1:], strict=False)}
    extra = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=5))
    pairs |= {tuple(sorted(p)) for p in extra if p[0] != p[1]}
    speed = st.sampled_from([12.5, 25.0, 50.0, 200.0])
    latency = st.sampled_from([0.0, 0.35, 0.7, 2.6])
    links = []
    for u, v in sorted(pairs):
        links += [Link(u, v, draw(speed), draw(latency)), Link(v, u, draw(speed), draw(latency))]
    nodes = [Node(i) for i in range(n)]
    if draw(st.booleans()):
        switch = n
        nodes.append(Node(switch, "switch", copy=draw(st.booleans())))
        for g in draw(st.sets(st.integers(0, n - 1), min_size=2)):
            links += [Link(g, switch, draw(speed), draw(latency)), Link(switch, g, draw(speed), draw(latency))]
    return Topology("random", nodes, links, switch_hop=draw(st.sampled_from(["paid", "teccl", "free"])))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    topology=small_topologies(),
    name=st.sampled_from(["allgather", "broadcast", "reducescatter", "reduce", "allreduce"]),
    chunks=st.integers(1, 2),
    seed=st.integers(0, 1000),
    hold=st.sampled_from(["arrival", "serialization"]),
    patience=st.sampled_from(["on", "off"]),
    root_pick=st.integers(0, 5),
)
def test_every_schedule_verifies(topology: Topology, name: str, chunks: int, seed: int, hold: str,
                                 patience: str, root_pick: int) -> None:
    root = topology.gpus[root_pick % topology.n_gpus] if name in ("broadcast", "reduce") else None
    collective = make_collective(name, topology, 1e6, chunks_per_rank=chunks, root=root)
    options = SynthOptions(seed=seed, extra={"link_hold": hold, "patience": patience})
    schedule = synthesize(topology, collective, "tacos", options)
    timeline = simulate(schedule)
    assert timeline.verified, timeline.violations[:3]
    assert math.isclose(timeline.finish_time_s, schedule.estimated_finish_s, rel_tol=1e-9)


def test_restarts_in_parallel_processes_keep_the_sequential_answer() -> None:
    topology = load_topology("torus2d:dims=4x4")
    coll = make_collective("allgather", topology, 1e6)
    sequential = synthesize(topology, coll, "tacos", SynthOptions(seed=3, restarts=4, extra={"pick": "random"}))
    parallel = synthesize(topology, coll, "tacos",
                          SynthOptions(seed=3, restarts=4, extra={"pick": "random", "workers": 2}))
    assert parallel.transfers == sequential.transfers
    assert simulate(parallel).verified
    with pytest.raises(CcvizError, match="workers"):
        synthesize(topology, coll, "tacos", SynthOptions(extra={"workers": 0}))


def test_switched_routes_come_from_the_shared_search_with_fewest_hops_on_ties() -> None:
    """Under switch_hop='free' a hop out of a switch costs nothing, so 0->2->3 and 0->2->1->3 land together;
    the route is the one with fewer hops (it books fewer links), though switch 1 < 2 would win a tie by id."""
    nodes = [Node(0), Node(1, "switch"), Node(2, "switch"), Node(3)]
    pairs = [(0, 2), (2, 3), (2, 1), (1, 3), (3, 2), (2, 0), (1, 2), (3, 1)]
    topology = Topology("tie", nodes, [Link(u, v, 50.0, 1.0) for u, v in pairs], switch_hop="free")
    routes = build_routes(topology, 1e6, "arrival")
    by_pair = {(h[0][0], h[-1][1]): h for h in routes.hops}
    assert by_pair[(0, 3)] == ((0, 2), (2, 3))
    assert by_pair[(3, 0)] in (((3, 2), (2, 0)), ((3, 1), (1, 2), (2, 0)))  # 3->1 and 3->2 cost the same
