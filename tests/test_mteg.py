"""Multicast time-expanded graph synthesizer: validity, slot model, reference figures."""

from __future__ import annotations

import threading
from collections import defaultdict
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ccviz
from ccviz import CcvizError, Link, Node, Topology, make_collective, simulate
from ccviz.bounds.cost import lower_bound
from ccviz.synth import SynthOptions, synthesize
from ccviz.synth.budget import Budget
from ccviz.synth.mteg import (
    MtegPlanner,
    SlotTiming,
    mteg_schedule,
    multicast_order,
    slot_length,
)
from tests.paths import REFERENCE

REF = REFERENCE
AS_RUN = REF / "ndv2_2chassis_teccl_as_run.json"

# TE-CCL's published AllGather optima on the as-run NDv2 (fastest epoch): size -> (epoch us, finish us).
TECCL_AS_RUN = {
    "1GB": (1250, 43750), "256MB": (320, 11200), "64MB": (80, 2800), "16MB": (20, 700), "4MB": (5, 190),
    "1MB": (1.25, 48.75), "256KB": (0.32, 14.72), "64KB": (0.08, 6.08),
}
# The same with the slowest epoch (chunk time on a 12.5 GB/s link).
TECCL_AS_RUN_SLOWEST = {
    "1GB": (5000, 50000), "4MB": (20, 200), "1MB": (5, 70), "256KB": (1.28, 19.2), "64KB": (0.32, 7.68),
    "16KB": (0.08, 4.8),
}


def run(topology: Topology, name: str, size: float = 1e6, **options) -> ccviz.Timeline:
    schedule = synthesize(topology, make_collective(name, topology, size), "mteg", SynthOptions(**options))
    timeline = simulate(schedule)
    assert timeline.verified, [v.message for v in timeline.violations[:3]]
    return timeline


@pytest.mark.parametrize("spec", ["dgx1", "ring:n=6", "ring:n=5,bidirectional=false", "torus2d:dims=3x3",
                                  "mesh2d:dims=2x3", "star:n=6", "star:n=5,copy=false"])
def test_allgather_verifies_on_builders(spec: str) -> None:
    timeline = run(ccviz.load_topology(spec), "allgather")
    assert timeline.schedule.status == "heuristic"


@pytest.mark.parametrize("name", ["ndv2_2chassis_teccl_as_run", "ndv2_4chassis", "dgx2_2chassis", "amd_2chassis"])
def test_allgather_verifies_on_reference_fabrics(name: str) -> None:
    run(ccviz.load_topology(REF / f"{name}.json"), "allgather", 4e6)


@pytest.mark.parametrize("collective", ["broadcast", "gather", "scatter", "alltoall", "reducescatter", "reduce",
                                        "allreduce"])
@pytest.mark.parametrize("spec", ["dgx1", "star:n=5", str(AS_RUN)])
def test_every_collective_verifies(spec: str, collective: str) -> None:
    if spec == str(AS_RUN) and not AS_RUN.is_file():
        pytest.skip("reference topologies not available")
    run(ccviz.load_topology(spec), collective, 2e6)


def test_allreduce_is_reducescatter_then_allgather() -> None:
    topo = ccviz.load_topology("dgx1")
    rs = run(topo, "reducescatter").finish_time_s
    ag = run(topo, "allgather").finish_time_s
    assert run(topo, "allreduce").finish_time_s == pytest.approx(rs + ag, rel=1e-9)


def reserved_slots(schedule: ccviz.Schedule) -> dict[tuple[int, int], list[tuple[int, int]]]:
    """Per link, the slot intervals the schedule's transfers keep it busy."""
    topo, nbytes = schedule.topology, schedule.chunk_bytes
    busy = defaultdict(list)
    for t in schedule.transfers:
        timing = SlotTiming.of(topo, topo.link(t.src, t.dst), nbytes, schedule.epoch_s)
        busy[(t.src, t.dst)].append((int(t.step), int(t.step) + timing.busy))
    return busy


@pytest.mark.parametrize("spec", ["dgx1", "star:n=6", str(AS_RUN)])
def test_slots_never_double_book_a_link_and_switches_hold_nothing(spec: str) -> None:
    if spec == str(AS_RUN) and not AS_RUN.is_file():
        pytest.skip("reference topologies not available")
    topo = ccviz.load_topology(spec)
    schedule = mteg_schedule(topo, make_collective("allgather", topo, 1e6))
    for intervals in reserved_slots(schedule).values():
        intervals.sort()
        assert all(a[1] <= b[0] for a, b in zip(intervals, intervals[1:], strict=False))
    # A chunk leaves a switch in the very slot one of its arrivals lands there.
    nbytes = schedule.chunk_bytes
    landings = defaultdict(set)
    for t in schedule.transfers:
        if topo.is_switch(t.dst):
            delay = SlotTiming.of(topo, topo.link(t.src, t.dst), nbytes, schedule.epoch_s).delay
            landings[(t.dst, t.chunk)].add(int(t.step) + delay)
    for t in schedule.transfers:
        if topo.is_switch(t.src):
            assert int(t.step) in landings[(t.src, t.chunk)]


def test_slot_timing_rounds_like_teccl() -> None:
    topo = ccviz.load_topology("ring:n=4,bw=25,alpha=0.7")
    link = topo.link(0, 1)
    # 1 MB on 25 GB/s = 40 us: 2 slots of 20 us; alpha 0.7 us < 0.1 slot adds nothing.
    assert SlotTiming.of(topo, link, 1e6, 20e-6) == SlotTiming(2, 2)
    # 1 KB = 0.04 us: alpha is 17.5 slots of 0.04 us -> 18 extra slots.
    assert SlotTiming.of(topo, link, 1e3, 0.04e-6) == SlotTiming(1, 19)
    free = ccviz.load_topology("star:n=4").with_changes(switch_hop="free")
    hub = free.switches[0]
    out = free.link(hub, free.gpus[0])
    assert SlotTiming.of(free, out, 1e6, out.serialization_s(1e6) / 2).delay == 0


def test_order_puts_larger_sources_first() -> None:
    topo = ccviz.load_topology("ring:n=4")
    coll = ccviz.custom_collective(topo, {(0, 1): 1, (2, 3): 3, (1, 0): 2}, 1e3)
    sources = [c.source for c in multicast_order(coll)]
    assert sources[:3] == [2, 1, 0] and sources.count(2) == 3


def test_restarts_never_worse_and_seed_reproducible() -> None:
    topo = ccviz.load_topology("torus2d:dims=3x3")
    coll = make_collective("allgather", topo, 1e6, chunks_per_rank=2)
    single = mteg_schedule(topo, coll)
    best = mteg_schedule(topo, coll, restarts=4, seed=3)
    assert best.epochs <= single.epochs
    again = mteg_schedule(topo, coll, restarts=4, seed=3)
    assert again.transfers == best.transfers


def test_bad_options_raise_clear_errors() -> None:
    topo = ccviz.load_topology("ring:n=4")
    coll = make_collective("allgather", topo, 1e6)
    with pytest.raises(CcvizError) as err:
        mteg_schedule(topo, coll, epoch_s="soon")
    assert err.value.field == "epoch"
    with pytest.raises(CcvizError) as err:
        mteg_schedule(topo, coll, restarts=0)
    assert err.value.field == "restarts"


# ----------------------------------------------------------------------------- progress, stop, time limit
def test_progress_counts_trees_and_never_goes_back() -> None:
    topo = ccviz.load_topology("torus2d:dims=3x3")
    for name in ("allgather", "allreduce"):
        reports = []
        run(topo, name, restarts=2, seed=1, progress=reports.append)
        fractions = [p.fraction for p in reports]
        assert fractions and all(0.0 <= f <= 1.0 for f in fractions)
        assert fractions == sorted(fractions) and fractions[-1] == 1.0
    coll = make_collective("allgather", topo, 1e6)
    reports = []
    options = SynthOptions(progress=reports.append)
    mteg_schedule(topo, coll, budget=Budget(options, every_s=0.0), growth="sequential")  # one report per tree
    trees = [p for p in reports if "tree" in p.message]
    assert [p.fraction for p in trees] == pytest.approx([k / 9 for k in range(9)])
    reports.clear()
    mteg_schedule(topo, coll, budget=Budget(options, every_s=0.0))  # interleaved: one report per search
    searches = [p.fraction for p in reports if "tree" in p.message]
    assert searches[0] == 0.0 and searches == sorted(searches) and len(searches) > 9 and searches[-1] < 1.0


def test_a_preset_stop_or_an_expired_limit_raises_a_clear_error() -> None:
    topo = ccviz.load_topology("ring:n=4")
    stop = threading.Event()
    stop.set()
    with pytest.raises(CcvizError, match=r"0 of 4 multicast trees built\); no complete schedule yet") as err:
        run(topo, "allgather", stop=stop)
    assert err.value.field == "stop"
    with pytest.raises(CcvizError, match="raise the limit") as err:
        run(topo, "reducescatter", time_limit=1e-9)
    assert err.value.field == "time_limit"


def test_stop_during_a_later_attempt_keeps_the_best_complete_one() -> None:
    topo = ccviz.load_topology("mesh2d:dims=4x4")
    coll = make_collective("allgather", topo, 1e6)
    first = mteg_schedule(topo, coll, restarts=1, seed=3)
    stop = threading.Event()

    def stop_in_attempt_2(p) -> None:
        if p.message.startswith("MTEG attempt 2/") and "tree 5/" in p.message:
            stop.set()

    options = SynthOptions(restarts=6, seed=3, stop=stop, progress=stop_in_attempt_2)
    schedule = mteg_schedule(topo, coll, restarts=6, seed=3, budget=Budget(options, every_s=0.0))
    assert stop.is_set()
    assert any("stopped after 1 of 6 MTEG restarts" in note for note in schedule.notes)
    assert schedule.transfers == first.transfers and schedule.status == "heuristic"
    assert simulate(schedule).verified


def test_stop_between_restarts_via_synthesize_verifies() -> None:
    topo = ccviz.load_topology("mesh2d:dims=4x4")
    stop = threading.Event()

    def stop_after_first(p) -> None:
        if p.message.endswith("done"):
            stop.set()

    timeline = run(topo, "allgather", restarts=5, seed=2, stop=stop, progress=stop_after_first)
    assert any("stopped after 1 of 5 MTEG restarts" in note for note in timeline.schedule.notes)
    assert "time_limit" in ccviz.REGISTRY["mteg"].options_used and "stop" in ccviz.REGISTRY["mteg"].options_used


def test_a_stop_after_the_reducescatter_half_still_yields_a_whole_allreduce() -> None:
    # One link slower than its twin: the fabric is not its own reversal, so the AllGather half is planned anew.
    mesh = ccviz.load_topology("mesh2d:dims=3x3")
    topo = mesh.with_changes(links=[replace(lk, bandwidth_GBps=lk.bandwidth_GBps / 2) if key == (0, 1) else lk
                                    for key, lk in mesh.links.items()])
    stop = threading.Event()

    def stop_after_first_attempt(p) -> None:
        if p.message.endswith("done"):
            stop.set()

    timeline = run(topo, "allreduce", restarts=3, seed=0, stop=stop, progress=stop_after_first_attempt)
    assert any("stopped after 1 of 3 MTEG restarts" in note for note in timeline.schedule.notes)
    assert any("completed anyway" in note for note in timeline.schedule.notes)


# ----------------------------------------------------------------------------- reference figures
@pytest.mark.parametrize("size", ["1MB", "64KB"])
def test_as_run_allgather_within_5_percent_of_teccl_optimum(size: str) -> None:
    topo = ccviz.load_topology(AS_RUN)
    nbytes = ccviz.parse_size(size)
    coll = make_collective("allgather", topo, nbytes)
    assert coll.chunk_bytes == pytest.approx(nbytes / 16)  # the published runs split buffers by 16
    timeline = simulate(synthesize(topo, coll, "mteg"))
    assert timeline.verified
    assert timeline.finish_time_s * 1e6 <= 1.05 * TECCL_AS_RUN[size][1]


@pytest.mark.parametrize(("epoch", "size"), [("fastest", s) for s in TECCL_AS_RUN]
                         + [("slowest", s) for s in TECCL_AS_RUN_SLOWEST])
def test_epoch_bound_is_an_upper_bound_near_the_teccl_optimum(epoch: str, size: str) -> None:
    """Our slots are TE-CCL epochs: never fewer than the proven optimum, and within 5% of it."""
    topo = ccviz.load_topology(AS_RUN)
    epoch_us, finish_us = (TECCL_AS_RUN if epoch == "fastest" else TECCL_AS_RUN_SLOWEST)[size]
    coll = make_collective("allgather", topo, ccviz.parse_size(size))
    assert slot_length(topo, coll.chunk_bytes, epoch) == pytest.approx(epoch_us * 1e-6)
    optimum = round(finish_us / epoch_us)
    bound = synthesize(topo, coll, "mteg", SynthOptions(epoch=epoch_us * 1e-6)).epochs
    assert optimum <= bound <= 1.05 * optimum


def test_ndv2_4chassis_allgather_1gb_near_teccl_optimum() -> None:
    topo = ccviz.load_topology(REF / "ndv2_4chassis.json")
    timeline = run(topo, "allgather", 1e9)
    assert timeline.finish_time_s * 1e6 <= 1.05 * 66250


# ----------------------------------------------------------------------------- random fabrics
@st.composite
def small_fabrics(draw) -> Topology:
    """A few GPUs on a random connected graph, maybe one switch (copy or not, paid or free hops)."""
    n = draw(st.integers(2, 6))
    bandwidth = st.sampled_from([12.5, 25.0, 50.0])
    alpha = st.sampled_from([0.0, 0.7, 1.3])
    nodes = [Node(i) for i in range(n)]
    cables = {(draw(st.integers(0, i - 1)), i) for i in range(1, n)}  # a spanning tree
    cables |= {tuple(sorted(p)) for p in draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)),
                                                         max_size=n)) if p[0] != p[1]}
    if draw(st.booleans()):
        hub = n
        nodes.append(Node(hub, "switch", copy=draw(st.booleans())))
        cables |= {(g, hub) for g in draw(st.sets(st.integers(0, n - 1), min_size=2))}
    links = []
    for u, v in sorted(cables):
        links.append(Link(u, v, draw(bandwidth), draw(alpha)))
        links.append(Link(v, u, draw(bandwidth), draw(alpha)))
    return Topology("random", nodes, links, switch_hop=draw(st.sampled_from(["paid", "teccl", "free"])))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    topology=small_fabrics(),
    collective=st.sampled_from(["allgather", "broadcast", "alltoall", "scatter", "reducescatter", "allreduce"]),
    size=st.sampled_from([1e3, 64e3, 1e6, 1e9]),
    chunks=st.integers(1, 2),
    restarts=st.integers(1, 2),
    epoch=st.sampled_from(["fastest", "slowest"]),
)
def test_random_fabrics_always_verify(topology: Topology, collective: str, size: float, chunks: int,
                                      restarts: int, epoch: str) -> None:
    coll = make_collective(collective, topology, size, chunks_per_rank=chunks)
    schedule = synthesize(topology, coll, "mteg", SynthOptions(epoch=epoch, restarts=restarts, seed=1))
    timeline = simulate(schedule)
    assert timeline.verified, [v.message for v in timeline.violations[:3]]


def test_planner_reaches_every_gpu_through_a_no_copy_switch() -> None:
    topo = ccviz.load_topology("star:n=4,copy=false")
    coll = make_collective("broadcast", topo, 1e6)
    planner = MtegPlanner(topo, coll, slot_length(topo, coll.chunk_bytes, "fastest"))
    (tree,) = planner.plan(list(coll.chunks))
    assert set(tree.gpu_slot) == set(topo.gpus)
    hub = topo.switches[0]
    # Without copies every arrival at the hub is forwarded exactly once.
    into = sum(1 for e in tree.edges if e[1] == hub)
    out = sum(1 for e in tree.edges if e[0] == hub)
    assert into == out


@pytest.mark.parametrize(("dims", "sequential_slots", "bound_slots"), [("4x4", 12, 8), ("6x6", 30, 18)])
def test_interleaved_trees_reach_the_mesh_bound_where_sequential_trees_queue(dims, sequential_slots,
                                                                              bound_slots) -> None:
    """Grown together (the tree furthest behind first), the trees keep every corner's two in-links busy:
    (n*n - 1) / 2 slots, the bound; grown one after another, the last trees queue behind the first."""
    topo = ccviz.load_topology(f"mesh2d:dims={dims},bw=53.6870912,alpha=0.5")
    coll = make_collective("allgather", topo, 2**30)
    sequential = mteg_schedule(topo, coll, growth="sequential")
    interleaved = mteg_schedule(topo, coll)
    assert (sequential.epochs, interleaved.epochs) == (sequential_slots, bound_slots)
    timeline = simulate(interleaved)
    assert timeline.verified
    assert timeline.finish_time_s <= 1.001 * lower_bound(topo, coll).time_s


def test_growth_is_an_mteg_option_with_a_clear_error() -> None:
    topo = ccviz.load_topology("mesh2d:dims=3x3")
    coll = make_collective("allgather", topo, 1e6)
    paper = synthesize(topo, coll, "mteg", SynthOptions(extra={"growth": "sequential"}))
    assert simulate(paper).verified
    with pytest.raises(CcvizError, match=r"growth: 'later' is not one of interleaved, sequential") as err:
        synthesize(topo, coll, "mteg", SynthOptions(extra={"growth": "later"}))
    assert err.value.field == "growth"


# Interleaved AllGather (1 GiB, bw 53.6870912, alpha 0.5) as grown before the search got its fast paths
# (issue 14): (finish slot, transfers, sum of departure slots). Faster searches must grow the same trees.
INTERLEAVED_PINNED = {
    "mesh2d:dims=8x8": (32, 4032, 39796),
    "torus2d:dims=8x8": (17, 4032, 29771),
    "mesh3d:dims=4x4x4": (21, 4032, 28553),
    "leafspine": (32, 379, 5806),
    "dgx2": (32, 1124, 14970),
    "ndv2": (11, 240, 712),
}


@pytest.mark.parametrize("spec", sorted(INTERLEAVED_PINNED))
def test_interleaved_trees_are_the_ones_grown_before_the_fast_paths(spec: str) -> None:
    topo = ccviz.load_topology(spec + ("," if ":" in spec else ":") + "bw=53.6870912,alpha=0.5")
    schedule = mteg_schedule(topo, make_collective("allgather", topo, 2**30))
    assert (schedule.epochs, len(schedule.transfers),
            sum(int(t.step) for t in schedule.transfers)) == INTERLEAVED_PINNED[spec]


@pytest.mark.parametrize("spec", ["mesh2d:dims=4x4", "torus2d:dims=3x3", "star:n=4", "star:n=4,copy=false",
                                  "mesh3d:dims=2x2x3"])
@pytest.mark.parametrize("interleave", [True, False])
def test_one_link_moves_grow_the_trees_of_the_chain_search(spec: str, interleave: bool) -> None:
    """Out of a node whose out-neighbours are all GPUs the search takes one-link moves without ``hops``;
    with that fast path switched off (every move from the chain search) the trees are the same."""
    topo = ccviz.load_topology(spec)
    coll = make_collective("allgather", topo, 1e6, chunks_per_rank=2)
    slot_s = slot_length(topo, coll.chunk_bytes, "fastest")
    fast = MtegPlanner(topo, coll, slot_s, interleave=interleave)
    chains = MtegPlanner(topo, coll, slot_s, interleave=interleave)
    assert any(links is not None for links in fast.direct_links.values())
    chains.direct_links = dict.fromkeys(chains.direct_links)
    order = multicast_order(coll)
    assert [tree.edges for tree in fast.plan(order)] == [tree.edges for tree in chains.plan(order)]


def test_a_pair_the_switches_alone_do_not_join_relays_only_through_gpus_next_to_its_destination():
    # two NVL72 racks: GPU 0 reaches a GPU of the other rack on another NIC rail only through a relay GPU; the
    # search then relayed through every GPU (0.3 s a search at 144 GPUs, no tree planned in 60 s)
    from ccviz.synth.mteg import MtegPlanner, SteinerSearch, slot_length

    fabric = ccviz.load_topology("nvl72:gpus=8,racks=2")
    coll = make_collective("alltoall", fabric, 1e9)
    planner = MtegPlanner(fabric, coll, slot_length(fabric, coll.chunk_bytes, None))
    far = next(c for c in coll.chunks if c.source == 0 and not planner.one_pass.to(set(c.post)) >= {0})
    search = SteinerSearch(planner, far.id, sorted(far.pre), sorted(far.post))
    settled, order = search.reach()
    assert order and search.relays == "near"
    entered = {node for node, _ in settled if not fabric.is_switch(node)}
    assert entered <= planner.one_pass.to(set(far.post)) | set(far.post) | {0}
    assert len(entered) < fabric.n_gpus - 1  # not every GPU (the search before this one entered all 15)
    timeline = simulate(ccviz.synthesize(fabric, coll, "mteg"))
    assert timeline.verified, timeline.violations[:1]
