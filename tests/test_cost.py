"""Closed-form alpha-beta costs and lower bounds (ccviz.bounds.cost)."""

from __future__ import annotations

import math

import pytest

import ccviz
from ccviz.bounds.cost import FORMULAS, _Demands, formula, formula_table, lower_bound
from ccviz.errors import CcvizError
from tests.paths import REFERENCE

ALPHA_US = 2.0
BW = 25.0
SIZE = 64e6
A = ALPHA_US * 1e-6
BETA = SIZE / (BW * 1e9)


@pytest.mark.parametrize("n", [2, 4, 8, 64])
def test_classic_closed_forms_are_reproduced_exactly(n: int) -> None:
    log = math.log2(n)
    expected = {
        ("allreduce", "ring"): (2 * (n - 1), 2 * (n - 1) / n),
        ("allreduce", "rhd"): (2 * log, 2 * (n - 1) / n),
        ("alltoall", "bruck"): (log, log / 2),
        ("allgather", "ring"): (n - 1, (n - 1) / n),
        ("reducescatter", "rhd"): (log, (n - 1) / n),
        ("allgather", "rd"): (log, (n - 1) / n),
        ("broadcast", "tree"): (log, log),
    }
    for (collective, algorithm), (n_alpha, n_beta) in expected.items():
        r = formula(collective, algorithm, n, SIZE, ALPHA_US, BW)
        assert r.n_alpha == pytest.approx(n_alpha, rel=1e-12)
        assert r.n_beta == pytest.approx(n_beta, rel=1e-12)
        assert r.time_s == pytest.approx(n_alpha * A + n_beta * BETA, rel=1e-12)
        assert algorithm in r.text


def test_ring_allgather_is_n_minus_one_hops_of_one_slice() -> None:
    n = 8
    r = formula("allgather", "ring", n, SIZE, ALPHA_US, BW)
    assert r.time_s == pytest.approx((n - 1) * (A + SIZE / (n * BW * 1e9)), rel=1e-12)


def test_bruck_alltoall_for_a_non_power_of_two_counts_the_blocks_moved() -> None:
    n = 6  # distances 1..5; bits set: stage0 {1,3,5}, stage1 {2,3}, stage2 {4,5}
    r = formula("alltoall", "bruck", n, SIZE, ALPHA_US, BW)
    assert r.n_alpha == 3
    assert r.n_beta == pytest.approx(7 / 6)


def test_pipelined_costs_are_consistent_and_beat_the_unpipelined_tree_for_big_messages() -> None:
    piped = formula("broadcast", "pipelined-tree", 64, 1e9, 1.0, 50)
    plain = formula("broadcast", "tree", 64, 1e9, 1.0, 50)
    assert piped.time_s == pytest.approx(piped.n_alpha * 1e-6 + piped.n_beta * 1e9 / 50e9, rel=1e-12)
    assert piped.time_s < plain.time_s
    dbt = formula("allreduce", "dbt", 64, 1e9, 1.0, 50)
    assert dbt.time_s < formula("allreduce", "pipelined-tree", 64, 1e9, 1.0, 50).time_s


def test_every_listed_formula_evaluates() -> None:
    table = formula_table()
    assert {(row["collective"], row["algorithm"]) for row in table} == set(FORMULAS)
    for row in table:
        r = formula(row["collective"], row["algorithm"], 16, SIZE, ALPHA_US, BW)
        assert r.time_s > 0 and r.n_alpha > 0 and r.n_beta > 0


@pytest.mark.parametrize(
    ("collective", "algorithm", "n", "field"),
    [
        ("allreduce", "rhd", 6, "n"),
        ("alltoall", "ring-of-doom", 8, "algorithm"),
        ("alltoall", "rhd", 8, "algorithm"),
        ("allreduce", "ring", 1, "n"),
    ],
)
def test_bad_requests_name_the_field(collective: str, algorithm: str, n: int, field: str) -> None:
    with pytest.raises(CcvizError) as info:
        formula(collective, algorithm, n, SIZE, ALPHA_US, BW)
    assert info.value.field == field


# ----------------------------------------------------------------- lower bounds
def test_bound_is_tight_for_ring_allgather_on_a_one_way_ring() -> None:
    topo = ccviz.load_topology("ring:n=8,bidirectional=false,bw=50,alpha=0.5")
    coll = ccviz.make_collective("allgather", topo, 1e6)
    bound = lower_bound(topo, coll)
    assert bound.time_s == pytest.approx(7 * (0.5e-6 + 1e6 / 8 / 50e9), rel=1e-9)
    # Ingress: 7 chunks of 125 KB through one 50 GB/s link, plus one alpha; latency: 7 hops of alpha + chunk.
    assert bound.bandwidth_s == pytest.approx(7 * 1e6 / 8 / 50e9 + 0.5e-6, rel=1e-9)
    assert bound.latency_s == pytest.approx(7 * (0.5e-6 + 1e6 / 8 / 50e9), rel=1e-9)
    assert bound.explanation


def test_ingress_bound_counts_every_missing_chunk() -> None:
    # A star: each GPU has one 50 GB/s in-link from the switch; allgather of 8 chunks -> 7 must arrive.
    topo = ccviz.load_topology("star:n=8")
    coll = ccviz.make_collective("allgather", topo, 8e6)
    link = topo.links[(topo.switches[0], topo.gpus[0])]
    per_chunk = 1e6 / (link.bandwidth_GBps * 1e9)
    assert lower_bound(topo, coll).bandwidth_s >= 7 * per_chunk * (1 - 1e-12)


@pytest.mark.parametrize("hop", ["paid", "teccl", "free"])
def test_every_switch_hop_rule_keeps_the_bound_below_a_valid_schedule(hop: str) -> None:
    topo = ccviz.load_topology(REFERENCE / "ndv2_2chassis_teccl_as_run.json").with_changes(switch_hop=hop)
    for name in ("allgather", "alltoall", "allreduce"):
        coll = ccviz.make_collective(name, topo, 1e6)
        bound = lower_bound(topo, coll).time_s
        sim = ccviz.simulate(ccviz.synthesize(topo, coll, "ring"))
        assert sim.verified
        assert 0 < bound <= sim.finish_time_s * (1 + 1e-9)


def test_published_teccl_allgather_time_respects_the_bound() -> None:
    # TE-CCL's optimal 1MB AllGather on the as-run NDv2 2-chassis took 48.75 us.
    topo = ccviz.load_topology(REFERENCE / "ndv2_2chassis_teccl_as_run.json")
    bound = lower_bound(topo, ccviz.make_collective("allgather", topo, 1e6))
    assert 20e-6 < bound.time_s <= 48.75e-6


TOPOLOGIES = ["ring:n=6", "mesh2d:dims=3x3", "dgx1", "star:n=8", REFERENCE / "ndv2_2chassis.json",
              REFERENCE / "dgx2_2chassis.json", REFERENCE / "ndv2_2chassis_teccl_as_run.json"]


@pytest.mark.parametrize("spec", TOPOLOGIES, ids=str)
def test_every_classic_schedule_is_no_faster_than_the_bound(spec) -> None:
    topo = ccviz.load_topology(spec)
    for name in ("allgather", "reducescatter", "allreduce", "alltoall", "broadcast"):
        for chunks in (1, 2) if topo.n_gpus <= 16 else (2,):  # the 32-GPU ones: 2 chunks, half the work
            coll = ccviz.make_collective(name, topo, 1e6, chunks_per_rank=chunks)
            bound = lower_bound(topo, coll).time_s
            for algorithm in ccviz.algorithms_for(name):
                if ccviz.get_algorithm(algorithm).kind != "classic":
                    continue
                try:
                    timeline = ccviz.simulate(ccviz.synthesize(topo, coll, algorithm))
                except CcvizError:
                    continue
                assert timeline.verified, (algorithm, name, timeline.violations[:2])
                assert timeline.finish_time_s >= bound * (1 - 1e-9), (algorithm, name)


# ------------------------------------------------------------------ textbook naming and schedule parameters
def test_every_textbook_algorithm_and_collective_it_lists_has_a_formula() -> None:
    from ccviz.bounds.cost import FORMULAS
    from ccviz.synth.registry import REGISTRY

    shaped = {"dimdecomp", "hierarchical"}  # their formulas take the grid or the tiers (ccviz.bounds.explained)
    listed = {(c, name) for name, alg in REGISTRY.items() if alg.kind == "classic" and name not in shaped
              for c in alg.collectives if c != "alltoallv"}  # a traffic matrix has no closed form
    assert listed and listed <= set(FORMULAS), sorted(listed - set(FORMULAS))


def test_rhd_allgather_is_found_under_its_own_name() -> None:
    from ccviz.bounds.cost import formula

    rhd = formula("allgather", "rhd", 8, 1e6, 0.5, 50.0)
    assert rhd.n_alpha == 3 and rhd.n_beta == pytest.approx(7 / 8)
    assert rhd.time_s == formula("allgather", "rd", 8, 1e6, 0.5, 50.0).time_s


def test_pipelined_formulas_use_the_schedules_segments() -> None:
    import ccviz
    from ccviz.bounds.cost import formula
    from ccviz.bounds.schedule_formula import schedule_formula

    best = formula("broadcast", "ring", 16, 1e9, 0.5, 50.0)
    one = formula("broadcast", "ring", 16, 1e9, 0.5, 50.0, segments=1)
    assert one.n_alpha == 15 and one.n_beta == 15 and best.time_s < one.time_s
    topo = ccviz.load_topology("torus2d:dims=4x4")
    coll = ccviz.make_collective("broadcast", topo, 1e9)
    schedule = ccviz.synthesize(topo, coll, "ring")
    used = schedule_formula(topo, coll, "ring", {(t.src, t.dst) for t in schedule.transfers})
    assert used is not None and used.time_s == pytest.approx(one.time_s)
    assert ccviz.simulate(schedule).finish_time_s == pytest.approx(used.time_s, rel=0.05)


def test_bidirectional_ring_halves_the_bytes_only_with_two_or_more_chunks() -> None:
    from ccviz.bounds.cost import formula

    ring = formula("allgather", "ring", 8, 1e6, 0.5, 50.0)
    assert formula("allgather", "ring-bidir", 8, 1e6, 0.5, 50.0, segments=1).n_beta == ring.n_beta
    assert formula("allgather", "ring-bidir", 8, 1e6, 0.5, 50.0, segments=2).n_beta == ring.n_beta / 2


def test_a_single_holder_counts_as_a_sender_on_every_per_gpu_cut() -> None:
    """A scatter's root holds every chunk alone: its own cut must see all of them leave, one chunk each
    (as the receivers' cuts see one arrive), whether the chunks share a signature or not."""
    topo = ccviz.load_topology("ring:n=8")
    for chunks in (1, 3):
        coll = ccviz.make_collective("scatter", topo, 8e6, chunks_per_rank=chunks, root=0)
        receive, send = _Demands(coll).per_rank_crossings()
        assert dict(send) == {0: 7 * chunks}
        assert dict(receive) == {r: chunks for r in range(1, 8)}
    # A 4x4 mesh's corner has two links: 15 chunks leave it in 8 chunk times (farthest GPU: 6 hops).
    mesh = ccviz.load_topology("mesh2d:dims=4x4,alpha=0")
    coll = ccviz.make_collective("scatter", mesh, 16e6, root=0)
    chunk_s = mesh.links[(0, 1)].serialization_s(coll.chunk_bytes)
    assert len(mesh.out_links[0]) == 2
    assert lower_bound(mesh, coll).time_s == pytest.approx(8 * chunk_s)
