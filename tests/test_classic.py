"""Textbook algorithms laid on real topologies (ccviz.synth.classic, ccviz.model.routing)."""

from __future__ import annotations

import pytest

import ccviz
from ccviz.bounds.cost import formula
from ccviz.errors import CcvizError
from ccviz.model.placement import Layout
from ccviz.model.routing import ring_order, router_for
from tests.paths import REFERENCE

BW, ALPHA_US = 50.0, 0.5
CLASSIC = ["ring", "ring-bidir", "direct", "dbt", "rhd", "tree", "bruck"]


def run(spec, collective: str, algorithm: str, size: float = 1e6, chunks: int = 1):
    topo = ccviz.load_topology(spec)
    coll = ccviz.make_collective(collective, topo, size, chunks_per_rank=chunks)
    schedule = ccviz.synthesize(topo, coll, algorithm)
    return schedule, ccviz.simulate(schedule)


@pytest.mark.parametrize("n", [3, 5, 8])
def test_ring_allgather_on_a_one_way_ring_equals_the_closed_form(n: int) -> None:
    size = 4e6
    _, timeline = run(f"ring:n={n},bidirectional=false,bw={BW},alpha={ALPHA_US}", "allgather", "ring", size)
    expected = (n - 1) * (ALPHA_US * 1e-6 + size / (n * BW * 1e9))
    assert timeline.verified
    assert timeline.finish_time_s == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("n", [3, 8])
def test_ring_allreduce_on_a_one_way_ring_equals_the_closed_form(n: int) -> None:
    size = 4e6
    _, timeline = run(f"ring:n={n},bidirectional=false,bw={BW},alpha={ALPHA_US}", "allreduce", "ring", size)
    expected = 2 * (n - 1) * (ALPHA_US * 1e-6 + size / (n * BW * 1e9))
    assert timeline.verified
    assert timeline.finish_time_s == pytest.approx(expected, rel=1e-9)
    cost = formula("allreduce", "ring", n, size, ALPHA_US, BW)
    assert timeline.finish_time_s == pytest.approx(cost.time_s, rel=1e-9)


def test_pipelined_ring_broadcast_overlaps_alpha_with_the_next_segment() -> None:
    # Links are free again after serialization, so segments follow each other every beta/S while the
    # last one crosses N-1 hops: (S-1) beta/S + (N-1)(alpha + beta/S), below the textbook (N+S-2)(alpha+beta/S).
    n, segments, size = 6, 4, 8e6
    _, timeline = run(f"ring:n={n},bidirectional=false", "broadcast", "ring", size, chunks=segments)
    seg = size / segments / (BW * 1e9)
    assert timeline.finish_time_s == pytest.approx((segments - 1) * seg + (n - 1) * (ALPHA_US * 1e-6 + seg),
                                                   rel=1e-9)
    textbook = (n - 1 + segments - 1) * (ALPHA_US * 1e-6 + seg)
    assert timeline.finish_time_s <= textbook


def test_ring_over_a_ring_topology_uses_only_physical_neighbours() -> None:
    schedule, timeline = run("ring:n=8", "allreduce", "ring")
    assert timeline.verified
    assert all((t.dst - t.src) % 8 == 1 for t in schedule.transfers)  # one direction, one hop each


@pytest.mark.parametrize("spec", ["dgx1", REFERENCE / "ndv2_2chassis.json", REFERENCE / "dgx2_2chassis.json",
                                  "torus2d:dims=4x4"], ids=str)
def test_ring_order_is_a_cycle_of_neighbours_on_paper_topologies(spec) -> None:
    topo = ccviz.load_topology(spec)
    order, physical = ring_order(topo)
    assert physical and sorted(order) == topo.gpus
    router = router_for(topo, 1.0)
    for a, b in zip(order, order[1:] + order[:1], strict=True):
        route = router.route(a, b, relay_ok=lambda _gpu: False)
        assert route is not None and all(topo.is_switch(x) for x in route[1:-1])


def test_dgx1_ring_prefers_the_fast_nvlinks() -> None:
    topo = ccviz.load_topology("dgx1")
    order, _ = ring_order(topo, 1e6)
    router = router_for(topo, 1e6)

    def cycle_time(cycle: list[int]) -> float:
        return sum(router.route_time(router.route(a, b)) for a, b in zip(cycle, cycle[1:] + cycle[:1], strict=True))

    assert cycle_time(order) < cycle_time(topo.gpus)


def test_relayed_sends_use_increasing_steps_and_copy_until_the_last_hop() -> None:
    topo = ccviz.load_topology("line:n=4")
    coll = ccviz.make_collective("reduce", topo, 1e3, root=3)
    layout = Layout(topo, coll)
    layout.send(0, 0, 1, step=0, op="reduce")
    layout.send(0, 1, 3, step=1, op="reduce")  # crosses 2, which still holds its own partial
    hops = layout.transfers()
    assert [(t.src, t.dst, t.op) for t in hops] == [(0, 1, "reduce"), (1, 2, "relay"), (2, 3, "reduce")]
    assert layout.rounds == [0, 1, 1]
    layout = Layout(topo, ccviz.make_collective("broadcast", topo, 1e3, root=0))
    layout.send(0, 0, 3, step=0)
    hops = layout.transfers()
    assert [(t.src, t.dst) for t in hops] == [(0, 1), (1, 2), (2, 3)]
    assert [t.step for t in hops] == sorted({t.step for t in hops})


def test_ring_reductions_relay_through_gpus_still_holding_their_partial() -> None:
    # A line has no cycle of neighbours: the ring falls back to rank order, so the wrap-around hop relays
    # partial sums through GPUs that have not contributed yet; the relay keeps both values intact.
    topo = ccviz.load_topology("line:n=5")
    schedule = ccviz.synthesize(topo, ccviz.make_collective("reducescatter", topo, 1e6), "ring")
    assert any(t.op == "relay" for t in schedule.transfers)
    assert ccviz.simulate(schedule).verified


def test_rhd_refuses_non_power_of_two() -> None:
    topo = ccviz.load_topology("ring:n=6")
    with pytest.raises(CcvizError, match="power-of-two") as info:
        ccviz.synthesize(topo, ccviz.make_collective("allreduce", topo, 1e6), "rhd")
    assert info.value.field == "algorithm"


def test_rhd_on_a_hypercube_uses_direct_links_and_log_stages() -> None:
    schedule, timeline = run("hypercube:n=8", "allreduce", "rhd")
    assert timeline.verified
    topo = schedule.topology
    assert all((t.src, t.dst) in topo.links for t in schedule.transfers)
    assert len({t.step for t in schedule.transfers}) == 2 * 3  # 3 halving + 3 doubling stages


def test_concurrent_partial_sums_through_one_switch_are_relayed_apart() -> None:
    for algorithm in ("direct", "ring", "rhd"):
        schedule, timeline = run("star:n=4", "reducescatter", algorithm)
        assert timeline.verified, (algorithm, timeline.violations[:1])
    assert any(t.op == "relay" for t in schedule.transfers)


def test_bidirectional_ring_halves_the_time_of_big_allgathers_on_a_ring() -> None:
    _, one_way = run("ring:n=8", "allgather", "ring", size=64e6, chunks=2)
    _, two_way = run("ring:n=8", "allgather", "ring-bidir", size=64e6, chunks=2)
    assert two_way.verified
    assert two_way.finish_time_s < 0.6 * one_way.finish_time_s


@pytest.mark.parametrize("algorithm", CLASSIC)
def test_every_algorithm_covers_its_collectives_on_a_fully_connected_fabric(algorithm: str) -> None:
    topo = ccviz.load_topology("fully_connected:n=8")
    for name in sorted(ccviz.get_algorithm(algorithm).collectives):
        for root in (None, 5):
            coll = ccviz.make_collective(name, topo, 1e6, chunks_per_rank=2, root=root if name in
                                         ("broadcast", "reduce", "gather", "scatter") else None)
            timeline = ccviz.simulate(ccviz.synthesize(topo, coll, algorithm))
            assert timeline.verified, (algorithm, name, timeline.violations[:2])


def test_direct_alltoall_on_a_fully_connected_fabric_takes_one_hop_per_chunk() -> None:
    schedule, timeline = run("fully_connected:n=4", "alltoall", "direct")
    assert timeline.verified and len(schedule.transfers) == 12


def test_classic_algorithms_are_registered_as_classic() -> None:
    for name in CLASSIC:
        alg = ccviz.get_algorithm(name)
        assert alg.kind == "classic" and alg.collectives
    assert "allgather" in ccviz.get_algorithm("ring").collectives


@pytest.mark.parametrize("spec", ["dgx1", REFERENCE / "ndv2_2chassis.json", "mesh2d:dims=3x3"], ids=str)
def test_double_binary_tree_follows_physical_links_even_when_they_are_one_way(spec) -> None:
    schedule, timeline = run(spec, "allreduce", "dbt", size=64e6)
    assert timeline.verified
    assert "physical" in " ".join(schedule.notes)
    assert all((t.src, t.dst) in schedule.topology.links for t in schedule.transfers)
    inner = [set(), set()]
    for t in schedule.transfers:
        if t.op == "reduce":
            inner[t.chunk % 2].add(t.dst)  # one chunk per rank: chunks alternate between the two trees
    assert inner[0] != inner[1]


# ------------------------------------------------------------------ relay rule (ccviz.judge.simulate)
def _line_reduce(transfers):
    topo = ccviz.load_topology("line:n=3")
    coll = ccviz.make_collective("reduce", topo, 1e3, root=2)
    return ccviz.Schedule(topo, coll, transfers, "hand")


def test_a_relay_keeps_the_relaying_gpus_own_partial() -> None:
    from ccviz.model.schedule import Transfer

    # 0's partial crosses 1 (which still holds its own) to 2, then 1 adds its own partial at 2.
    relayed = [Transfer(0, 0, 1, None, None, "relay", 0), Transfer(0, 1, 2, None, None, "reduce", 1),
               Transfer(0, 1, 2, None, None, "reduce", 2)]
    assert ccviz.simulate(_line_reduce(relayed)).verified
    copied = [t._replace(op="copy") if t.op == "relay" else t for t in relayed]  # a copy overwrites 1's partial
    assert not ccviz.simulate(_line_reduce(copied)).verified


def test_a_relay_without_its_continuation_is_flagged() -> None:
    from ccviz.model.schedule import Transfer

    dangling = [Transfer(0, 1, 2, None, None, "reduce", 1), Transfer(0, 0, 1, None, None, "relay", 0)]
    rules = {v.rule for v in ccviz.simulate(_line_reduce(dangling)).violations}
    assert "bad_transfer" in rules


# ------------------------------------------------------------------ logical rounds
TEXTBOOK_ROUNDS = {  # (algorithm, collective) -> rounds on N = 8 ranks
    ("ring", "allreduce"): 2 * 7, ("ring", "allgather"): 7, ("ring", "reducescatter"): 7,
    ("rhd", "allreduce"): 2 * 3, ("rhd", "allgather"): 3, ("rhd", "reducescatter"): 3,
    ("tree", "allreduce"): 2 * 3, ("tree", "broadcast"): 3, ("tree", "reduce"): 3,
    ("direct", "allgather"): 1, ("direct", "allreduce"): 2, ("bruck", "allgather"): 3, ("bruck", "alltoall"): 3,
}


@pytest.mark.parametrize(("algorithm", "collective"), sorted(TEXTBOOK_ROUNDS))
@pytest.mark.parametrize("fabric", ["ring:n=8", "hypercube:n=8", "star:n=8"])
def test_textbook_algorithms_label_their_rounds(fabric: str, algorithm: str, collective: str) -> None:
    schedule, timeline = run(fabric, collective, algorithm)
    assert timeline.verified
    assert schedule.n_rounds == TEXTBOOK_ROUNDS[(algorithm, collective)]
    assert len(schedule.round_labels) == schedule.n_rounds
    back = ccviz.Schedule.from_dict(schedule.to_dict())
    assert back.rounds == schedule.rounds and back.round_labels == schedule.round_labels


def test_schedules_without_rounds_keep_their_old_json() -> None:
    schedule, _ = run("ring:n=4", "allgather", "ring")
    schedule.rounds = None
    assert "rounds" not in schedule.to_dict()
    assert ccviz.Schedule.from_dict(schedule.to_dict()).rounds is None


def test_rounds_that_no_longer_match_the_transfers_are_dropped_on_load() -> None:
    schedule, _ = run("ring:n=4", "allgather", "ring")
    data = schedule.to_dict()
    data["transfers"] = data["transfers"][1:]  # a hand-edited file
    assert ccviz.Schedule.from_dict(data).rounds is None
