"""TE-CCL (Pyomo + HiGHS): optimal epochs on small fabrics, every collective verified, published NDv2 figures."""

from __future__ import annotations

import re
import threading
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ccviz import load_topology
from ccviz.errors import CcvizError
from ccviz.judge.simulate import simulate
from ccviz.model.collectives import make_collective
from ccviz.synth import SynthOptions, synthesize
from ccviz.synth.teccl.epochs import EpochGrid
from ccviz.synth.teccl.synthesizer import EpochSolver
from tests.paths import REFERENCE as REFERENCE_TOPOLOGIES

RING4 = "ring:n=4,alpha=0"
CHUNK = 1e6  # bytes per chunk in the small cases: 20 us on a 50 GB/s link


def run(topo_spec, collective, algorithm="teccl", chunks=1, **options):
    topo = load_topology(topo_spec)
    per_rank = chunks if collective in ("broadcast", "reduce") else topo.n_gpus * chunks
    coll = make_collective(collective, topo, CHUNK * per_rank, chunks_per_rank=chunks)
    options.setdefault("time_limit", 60)
    schedule = synthesize(topo, coll, algorithm, SynthOptions(**options))
    timeline = simulate(schedule)
    assert timeline.verified, timeline.violations[:3]
    return schedule, timeline


def test_epoch_grid_on_ndv2_fastest_matches_the_paper():
    topo = load_topology(REFERENCE_TOPOLOGIES / "ndv2_2chassis_teccl_as_run.json")
    grid = EpochGrid.build(topo, 1e9 / 16, "fastest")
    assert grid.tau_s == pytest.approx(1250e-6)
    slow = grid.links[(8, 1)]
    assert (slow.kappa, slow.window_slots, slow.offset) == (4, 1, 4)  # alpha/tau < 0.1 is ignored
    # the switch hop pays alpha (0.7 us < 0.1 epoch: ignored) and no serialization, yet still occupies the link
    assert grid.links[(0, 9)].offset == 0 and grid.links[(0, 9)].kappa == 4
    assert grid.links[(1, 0)].offset == 1
    tiny = EpochGrid.build(topo, 64e3 / 16, "fastest")
    assert tiny.links[(8, 1)].offset == 4 + 17  # 1.3 us of alpha = 16.25 epochs of 0.08 us, rounded up


def test_bad_epoch_is_a_clear_error():
    with pytest.raises(CcvizError, match="epoch"):
        run(RING4, "allgather", epoch="sometimes")


def test_ring4_allgather_is_two_epochs_and_proven():
    # Hand-derived: 3 missing chunks per GPU over 2 in-links at 1 chunk per epoch need 2 epochs,
    # and 2 suffice (own chunk both ways, then forward the left neighbour's chunk to the right).
    schedule, timeline = run(RING4, "allgather")
    assert (schedule.status, schedule.epochs) == ("optimal", 2)
    assert timeline.finish_time_s == pytest.approx(2 * CHUNK / 50e9)


def test_fixed_horizon_solves_the_milp_and_rejects_too_few_epochs():
    schedule, _ = run(RING4, "allgather", epochs=3)
    assert schedule.status == "optimal" and schedule.epochs == 2  # early-arrival objective uses 2 of 3
    assert any("horizon 3" in note for note in schedule.notes)
    with pytest.raises(CcvizError, match="epochs"):
        run(RING4, "allgather", epochs=1)


def test_dgx1_one_chunk_optimum_and_milp_infeasible_one_epoch_below():
    schedule, _ = run(REFERENCE_TOPOLOGIES / "dgx1.json", "allgather")
    assert (schedule.status, schedule.epochs) == ("optimal", 3)
    # Independent of the arithmetic bound: HiGHS proves no schedule fits in 2 epochs.
    topo = load_topology(REFERENCE_TOPOLOGIES / "dgx1.json")
    coll = make_collective("allgather", topo, CHUNK * topo.n_gpus)
    solver = EpochSolver(topo, coll, SynthOptions(epoch="fastest"), deadline=float("inf"), started=0.0)
    plan, result = solver.solve_at(2, 0, solver.greedy_plan())
    assert plan is None and result.termination == "infeasible"


def test_dgx1_two_chunks_milp_beats_greedy_and_is_certified():
    reports = []
    schedule, _ = run(REFERENCE_TOPOLOGIES / "dgx1.json", "allgather", chunks=2, progress=reports.append)
    assert (schedule.status, schedule.epochs) == ("optimal", 5)
    topo = load_topology(REFERENCE_TOPOLOGIES / "dgx1.json")
    coll = make_collective("allgather", topo, CHUNK * topo.n_gpus * 2, chunks_per_rank=2)
    greedy = EpochSolver(topo, coll, SynthOptions(epoch="fastest"), deadline=float("inf"), started=0.0).greedy_plan()
    assert greedy.epochs > schedule.epochs  # the MILP found what the greedy missed
    elapsed = [r.elapsed_s for r in reports]
    assert reports and elapsed == sorted(elapsed) and elapsed[-1] <= schedule.synth_time_s
    assert any(re.search(r"epoch greedy \([a-z ]+ order\) \d+ epochs", note) for note in schedule.notes)


def test_ring4_alltoall_uses_the_flow_model_and_is_optimal():
    # 16 chunk-hops (4 neighbour pairs each way + 4 opposite chunks over 2 hops) on 8 links: >= 2 epochs.
    schedule, timeline = run(RING4, "alltoall")
    assert any(note.startswith("LP (flow)") for note in schedule.notes)
    assert (schedule.status, schedule.epochs) == ("optimal", 2)
    assert timeline.finish_time_s == pytest.approx(2 * CHUNK / 50e9)


@pytest.mark.parametrize("collective", ["broadcast", "gather", "scatter", "reduce"])
def test_rooted_collectives_are_verified(collective):
    schedule, _ = run(RING4, collective)
    assert schedule.epochs == 2  # the opposite rank is 2 hops away
    if collective == "reduce":
        assert {t.op for t in schedule.transfers} == {"reduce"}


def test_reducescatter_and_allreduce_reduce_every_contribution_once():
    rs, rs_timeline = run(RING4, "reducescatter")
    assert {t.op for t in rs.transfers} == {"reduce"} and rs.epochs == 2
    ar, ar_timeline = run(RING4, "allreduce")
    assert {t.op for t in ar.transfers} == {"reduce", "copy"} and ar.epochs == 4
    assert ar_timeline.finish_time_s == pytest.approx(2 * rs_timeline.finish_time_s)


def test_switch_models_free_teccl_and_paid_hop_and_no_copy_switch():
    topo = load_topology(REFERENCE_TOPOLOGIES / "ndv2_1chassis.json")
    coll = make_collective("allgather", topo, CHUNK * topo.n_gpus)
    finishes = {}
    for hop in ("paid", "teccl", "free"):
        variant = topo.with_changes(switch_hop=hop)
        finishes[hop] = simulate(synthesize(variant, coll, "teccl", SynthOptions(time_limit=30))).finish_time_s
    assert finishes["free"] <= finishes["teccl"] <= finishes["paid"]
    no_copy = topo.with_changes(nodes=[replace(n, copy=False) for n in topo.nodes.values()])
    schedule = synthesize(no_copy, coll, "teccl", SynthOptions(time_limit=30))
    assert simulate(schedule).verified


def test_buffer_limit_is_respected_or_refused():
    schedule, _ = run(RING4, "allgather", extra={"buffer_limit": 3})
    assert schedule.epochs == 2
    with pytest.raises(CcvizError, match="buffer_limit"):
        run(RING4, "allgather", extra={"buffer_limit": 2}, time_limit=10)


def test_stop_event_returns_a_verified_schedule_at_once():
    stop = threading.Event()
    stop.set()
    schedule, _ = run(REFERENCE_TOPOLOGIES / "dgx1.json", "allgather", chunks=2, stop=stop)
    assert schedule.status == "time_limit"


@pytest.mark.parametrize("greedy", [True, False])
@pytest.mark.parametrize(("chunks", "optimum"), [(1, 3), (2, 5)])
def test_astar_is_within_20_percent_of_the_optimum_on_dgx1(chunks, optimum, greedy):
    # greedy=False: the rounds alone, without the greedy continuation as MIP start and fallback.
    schedule, _ = run(REFERENCE_TOPOLOGIES / "dgx1.json", "allgather", algorithm="teccl-astar", chunks=chunks,
                      extra={"astar_greedy": greedy})
    assert schedule.algorithm == "teccl-astar"
    assert optimum <= schedule.epochs <= int(1.2 * optimum)


def test_astar_short_rounds_carry_chunks_in_flight_and_report_progress():
    # Rounds commit 1 epoch looking 3 ahead: sends land in later rounds and links stay busy across rounds.
    reports = []
    schedule, _ = run(REFERENCE_TOPOLOGIES / "dgx1.json", "allgather", algorithm="teccl-astar", chunks=2,
                      extra={"astar_greedy": False, "astar_round": 1, "astar_horizon": 3}, progress=reports.append)
    rounds = int(schedule.notes[-1].split("A*: ")[1].split(" rounds")[0])
    assert rounds >= 3 and "best = rounds" in schedule.notes[-1]
    assert 5 <= schedule.epochs <= 6
    assert any("round from epoch" in r.message for r in reports)


def test_astar_is_never_worse_than_the_greedy_and_stops_at_once():
    topo = load_topology(REFERENCE_TOPOLOGIES / "dgx1.json")
    coll = make_collective("allgather", topo, CHUNK * topo.n_gpus * 2, chunks_per_rank=2)
    greedy = EpochSolver(topo, coll, SynthOptions(), 0.0, 0.0).greedy_plan().epochs
    schedule, _ = run(REFERENCE_TOPOLOGIES / "dgx1.json", "allgather", algorithm="teccl-astar", chunks=2)
    assert schedule.epochs <= greedy
    stop = threading.Event()
    stop.set()
    stopped, _ = run(REFERENCE_TOPOLOGIES / "dgx1.json", "allgather", algorithm="teccl-astar", chunks=2, stop=stop)
    assert stopped.status == "time_limit" and stopped.epochs == greedy


@pytest.mark.parametrize(("size", "epoch", "epochs", "published_us"), [
    (1e9, "slowest", 10, 50000.0),
    (16e6, "slowest", 10, 800.0),
    (1e9, "fastest", 35, 43750.0),
    (1e6, "fastest", 39, 48.75),
    (64e3, "fastest", 76, 6.08),  # alpha-dominated: certified by the release-time cut bound
])
def test_ndv2_as_run_allgather_meets_the_published_optimum(size, epoch, epochs, published_us):
    topo = load_topology(REFERENCE_TOPOLOGIES / "ndv2_2chassis_teccl_as_run.json")
    coll = make_collective("allgather", topo, size)
    assert coll.chunk_bytes == size / 16  # the published runs' chunk (the topology counts 16 buffer ranks)
    schedule = synthesize(topo, coll, "teccl", SynthOptions(epoch=epoch, time_limit=60))
    timeline = simulate(schedule)
    assert timeline.verified
    assert (schedule.status, schedule.epochs) == ("optimal", epochs)
    assert schedule.epochs * schedule.epoch_s * 1e6 == pytest.approx(published_us)
    # The replay pays the alpha the epoch model ignores below 0.1 epoch (at most a few us here).
    assert timeline.finish_time_s * 1e6 <= published_us + 3 * 1.3


def _star_with_switch(n: int, bandwidths: list[float], alpha: float, copy: bool, hop: str):
    from ccviz.model.topology import Link, Node, Topology

    nodes = [Node(0, "switch", copy=copy)] + [Node(i, "gpu") for i in range(1, n + 1)]
    links = []
    for i in range(1, n + 1):
        bw = bandwidths[i % len(bandwidths)]
        links += [Link(0, i, bw, alpha), Link(i, 0, bw, alpha)]
    links += [Link(1, 2, 50.0, alpha), Link(2, 1, 50.0, alpha)]
    return Topology("star", nodes, links, switch_hop=hop)


@settings(max_examples=12, deadline=None)
@given(
    kind=st.sampled_from(["ring", "line", "mesh", "star"]),
    n=st.integers(3, 5),
    bandwidths=st.lists(st.sampled_from([12.5, 25.0, 50.0]), min_size=1, max_size=3),
    alpha=st.sampled_from([0.0, 0.7, 5.0]),
    collective=st.sampled_from(["allgather", "alltoall", "reducescatter", "allreduce", "broadcast", "gather"]),
    epoch=st.sampled_from(["fastest", "slowest"]),
    copy=st.booleans(),
    hop=st.sampled_from(["paid", "teccl", "free"]),
)
def test_random_small_fabrics_give_verified_schedules(kind, n, bandwidths, alpha, collective, epoch, copy, hop):
    if kind == "star":
        topo = _star_with_switch(n, bandwidths, alpha, copy, hop)
    else:
        spec = {"ring": f"ring:n={n}", "line": f"line:n={n}", "mesh": f"mesh2d:dims=2x{n - 1}"}[kind]
        base = load_topology(f"{spec},alpha={alpha}")
        links = [replace(link, bandwidth_GBps=bandwidths[k % len(bandwidths)])
                 for k, link in enumerate(sorted(base.links.values(), key=lambda x: (x.src, x.dst)))]
        topo = base.with_changes(links=links)
    coll = make_collective(collective, topo, 1e6 * topo.n_gpus)
    schedule = synthesize(topo, coll, "teccl", SynthOptions(epoch=epoch, time_limit=5))
    timeline = simulate(schedule)
    assert timeline.verified, timeline.violations[:3]
    assert schedule.status in ("optimal", "feasible", "time_limit")


def test_epoch_synchronous_replay_is_offered_and_never_faster():
    topo = load_topology(REFERENCE_TOPOLOGIES / "dgx1.json")
    coll = make_collective("allgather", topo, 1e6)
    asap = synthesize(topo, coll, "teccl", SynthOptions(epoch="slowest", time_limit=30))
    synced = synthesize(topo, coll, "teccl", SynthOptions(epoch="slowest", time_limit=30, extra={"replay": "epoch"}))
    assert (asap.release, synced.release) == ("asap", "epoch")
    fast, slow = simulate(asap), simulate(synced)
    assert fast.verified and slow.verified
    assert fast.finish_time_s <= slow.finish_time_s <= synced.estimated_finish_s + 3 * 0.7e-6
    with pytest.raises(CcvizError, match="replay"):
        synthesize(topo, coll, "teccl", SynthOptions(extra={"replay": "later"}))


def test_a_stop_while_the_model_is_built_returns_the_best_verified_schedule_with_a_note():
    from ccviz.runs.pipeline import run

    stop = threading.Event()
    seen: list[str] = []

    def progress(p):
        seen.append(p.text())
        if "building" in p.message:
            stop.set()

    result = run(load_topology("dgx1"), "alltoall", "teccl", 1e6, 1, None,
                 SynthOptions(stop=stop, progress=progress))
    assert result.timeline.verified
    assert any(n.startswith("stopped early") for n in result.schedule.notes), result.schedule.notes
    assert not any("gap -" in line for line in seen)
    assert any("proven at least" in line for line in seen)


def test_astar_reduces_over_a_process_group_through_relays() -> None:
    # solved on the fabric directly, its mirror let relay GPU 1 send a partial sum before it held one (refused by
    # the judge); solved with the non-members as relay switches it verifies on the real fabric
    from ccviz.runs.pipeline import run

    for collective in ("reducescatter", "reduce"):
        result = run(load_topology("hypercube:n=8"), collective, "teccl-astar", 1e6, 1, ranks=[0, 3, 5],
                     options=SynthOptions(time_limit=60))
        assert result.timeline.verified and result.schedule.collective.ranks == (0, 3, 5), collective
