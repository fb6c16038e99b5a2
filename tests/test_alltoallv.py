"""AllToAllv: traffic matrices checked, the MoE generator, the matrix's exact limit against a per-pair LP,
and its schedules (mcf, twophase, direct) judged by the simulator."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ccviz
from ccviz import load_topology
from ccviz.bounds.demand_flow import alltoallv_limit, demand_flow
from ccviz.bounds.limit import bandwidth_limit
from ccviz.cli import main
from ccviz.errors import CcvizError
from ccviz.judge.simulate import simulate
from ccviz.model.schedule import Schedule
from ccviz.model.topology import Link, Node, Topology
from ccviz.model.traffic import check_matrix, moe_matrix, read_matrix
from ccviz.runs.moe import matrix_collective, run_matrix
from ccviz.runs.pipeline import run
from tests.flow_brute_force import per_pair_seconds


@st.composite
def fabric_and_matrix(draw):
    """A strongly connected fabric of 3-6 nodes (maybe a switch), uneven bandwidths, and a skewed matrix."""
    n = draw(st.integers(3, 6))
    switch = draw(st.sampled_from([None, *range(n)]))
    nodes = [Node(i, "switch" if i == switch else "gpu") for i in range(n)]
    bw = st.sampled_from([5.0, 12.5, 25.0, 50.0, 100.0])
    links = {}
    for i in range(n):
        links[(i, (i + 1) % n)] = draw(bw)
        links[((i + 1) % n, i)] = draw(bw)
    for u, v in draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=n)):
        if u != v:
            links[(u, v)] = draw(bw)
    topology = Topology("random", nodes, [Link(u, v, b, 0.5, draw(st.sampled_from([1, 2])))
                                          for (u, v), b in links.items()])
    g = topology.n_gpus
    cells = draw(st.lists(st.sampled_from([0.0, 0.0, 1e6, 3e6, 2e7, 1e8]), min_size=g * g, max_size=g * g))
    matrix = np.array(cells).reshape(g, g)
    np.fill_diagonal(matrix, 0.0)
    if not matrix.any():
        matrix[0, 1] = 1e6
    return topology, matrix


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fabric_and_matrix())
def test_the_limit_equals_a_per_pair_brute_force_on_random_fabrics(case):
    topology, matrix = case
    collective = matrix_collective(topology, matrix)
    exact = per_pair_seconds(topology, matrix / 1e9)
    assert alltoallv_limit(topology, collective).limit_s == pytest.approx(exact, rel=1e-6)


@pytest.mark.parametrize("spec", ["ring:n=4", "dgxh100:boxes=2,model=alphabeta", "leafspine:leaves=2,hosts=3,spines=2"])
def test_a_uniform_matrix_is_alltoall_to_the_byte_and_to_the_microsecond(spec):
    topology = load_topology(spec)
    n = topology.n_gpus
    size = 48e6
    alltoall = ccviz.make_collective("alltoall", topology, size)
    uniform = ccviz.make_collective("alltoallv", topology, matrix=np.full((n, n), size / n))
    assert uniform.chunks == alltoall.chunks
    assert (uniform.chunk_bytes, uniform.size_bytes) == (alltoall.chunk_bytes, alltoall.size_bytes)
    assert alltoallv_limit(topology, uniform).limit_s == bandwidth_limit(topology, "alltoall", size).limit_s
    for algorithm in ("direct", "mcf"):
        a = run(topology, alltoall, algorithm)
        v = run(topology, uniform, algorithm)
        assert v.timeline.verified and a.timeline.verified
        assert v.finish_time_s == a.finish_time_s
        assert v.collective.chunk_bytes == a.collective.chunk_bytes
        assert v.limit_s == a.limit_s


def test_the_general_lp_agrees_with_alltoalls_on_a_uniform_matrix():
    topology = load_topology("dgxh100:boxes=2,model=alphabeta")  # the textbook judge: ratios to the limit
    n = topology.n_gpus
    flow = demand_flow(topology, tuple(topology.gpus), np.full((n, n), 1.0 / n))
    assert flow.seconds == pytest.approx(bandwidth_limit(topology, "alltoall", 1e9).limit_s, rel=1e-6)


@pytest.mark.parametrize("algorithm", ["mcf", "twophase", "direct"])
def test_every_schedule_of_a_skewed_matrix_is_judged_and_moves_every_pairs_bytes(algorithm):
    topology = load_topology("dgxh100:boxes=2,model=alphabeta")  # the textbook judge: ratios to the limit
    matrix = moe_matrix(16, experts=32, topk=4, tokens=256, hidden=1024, skew="zipf:1.5", seed=3)
    result = run_matrix(topology, "alltoallv", algorithm, matrix)
    assert result.timeline.verified
    delivered = np.zeros_like(matrix)
    landed = {(t.chunk, t.dst) for t in result.timeline.schedule.transfers}
    index = {g: i for i, g in enumerate(topology.gpus)}
    for c in result.collective.chunks:
        (dest,) = c.post
        assert (c.id, dest) in landed
        delivered[index[c.source], index[dest]] += result.collective.chunk_bytes
    np.fill_diagonal(matrix, 0.0)
    assert np.all(delivered >= matrix)
    assert result.finish_time_s >= result.limit_s * (1 - 1e-9)
    if algorithm != "direct":
        assert result.finish_time_s <= 1.3 * result.limit_s


def test_moe_runs_dispatch_then_combine_its_transpose():
    topology = load_topology("dgxh100:boxes=2,model=alphabeta")  # the textbook judge: ratios to the limit
    matrix = moe_matrix(16, experts=16, topk=2, tokens=128, hidden=512, skew="zipf:1.2", seed=1)
    result = run_matrix(topology, "moe", "mcf", matrix)
    assert np.array_equal(result.combine.collective.meta["matrix"], matrix.T)
    assert result.finish_time_s == result.dispatch.finish_time_s + result.combine.finish_time_s
    assert result.summary()["verified"]


def test_the_moe_generator():
    a = moe_matrix(8, experts=16, topk=4, tokens=100, hidden=10, dtype="fp32", skew="zipf:1.2", seed=5)
    assert np.array_equal(a, moe_matrix(8, experts=16, topk=4, tokens=100, hidden=10, dtype="fp32",
                                        skew="zipf:1.2", seed=5))
    assert np.allclose(a.sum(axis=1), 100 * 4 * 10 * 4)  # every token to topk experts, hidden x 4 bytes each
    flat = moe_matrix(8, experts=16, topk=4, tokens=2000, hidden=1, skew="uniform", seed=0).sum(axis=0)
    hot = moe_matrix(8, experts=16, topk=4, tokens=2000, hidden=1, skew="zipf:1.5", seed=0).sum(axis=0)
    assert flat.max() / flat.mean() < 1.1 < 2 < hot.max() / hot.mean()
    with pytest.raises(CcvizError, match="moe.experts"):
        moe_matrix(8, experts=12)
    with pytest.raises(CcvizError, match="moe.skew"):
        moe_matrix(8, experts=16, skew="pareto")


@pytest.mark.parametrize("text, named", [
    ("0,1,2\n1,0,-3\n1,1,0\n", r"matrix\[1\]\[2\].*negative"),
    ("0,1,2\n1,0,nan\n1,1,0\n", r"matrix\[1\]\[2\].*finite"),
    ("0,1,2\n1,0,x\n1,1,0\n", r"matrix\[1\]\[2\].*'x'.*not a number"),
    ("0,1,2\n1,0\n1,1,0\n", r"matrix\[1\]: row 1 has 2 cells"),
])
def test_a_bad_csv_is_refused_naming_the_cell(tmp_path, text, named):
    path = tmp_path / "m.csv"
    path.write_text(text)
    with pytest.raises(CcvizError, match=named):
        read_matrix(path)


def test_npy_json_and_caps(tmp_path):
    np.save(tmp_path / "m.npy", np.array([[0, 5], [7, 0]]))
    assert read_matrix(tmp_path / "m.npy").tolist() == [[0, 5], [7, 0]]
    (tmp_path / "s.json").write_text(json.dumps({"ranks": 3, "bytes": [[0, 2, 9]]}))
    assert read_matrix(tmp_path / "s.json")[0, 2] == 9
    (tmp_path / "huge.json").write_text(json.dumps({"ranks": 10**12, "bytes": [[0, 1, 1]]}))
    with pytest.raises(CcvizError, match="1,000,000,000,000 ranks"):
        read_matrix(tmp_path / "huge.json")
    with pytest.raises(CcvizError, match="a 2x2 matrix for 3 ranks"):
        check_matrix([[0, 1], [1, 0]], 3)
    with pytest.raises(CcvizError, match=r"matrix\[0\]\[1\].*not a number"):
        check_matrix([[0, "1"], [1, 0]])


def test_a_schedule_file_keeps_its_matrix(tmp_path):
    topology = load_topology("ring:n=4")
    matrix = np.array([[0, 3e6, 0, 1e6], [0, 0, 2e6, 0], [5e6, 0, 0, 0], [0, 1e6, 1e6, 0]])
    result = run(topology, matrix_collective(topology, matrix), "mcf")
    again = Schedule.from_dict(json.loads(json.dumps(result.timeline.schedule.to_dict())))
    assert np.array_equal(again.collective.meta["matrix"], matrix)
    assert simulate(again).finish_time_s == pytest.approx(result.finish_time_s)


def test_cli_limit_and_synth(tmp_path, capsys):
    path = tmp_path / "m.csv"
    path.write_text("0,4e6,0,0\n1e6,0,1e6,1e6\n0,0,0,8e6\n2e6,0,0,0\n")
    assert main(["limit", "ring:n=4", "-c", "alltoallv", "--matrix", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["collective"] == "alltoallv" and out["binding_links"] and out["limit_s"] > 0
    assert main(["synth", "ring:n=4", "-c", "moe", "-a", "twophase", "--moe", "experts=4,topk=2,tokens=16,hidden=64",
                 "--json"]) == 2  # a ring has no boxes: refused in one line
    assert "twophase balances the traffic between boxes, and ring4 has no boxes" in capsys.readouterr().err
    assert main(["synth", "dgxh100", "-c", "alltoall", "-a", "twophase", "-s", "1MB"]) == 2
    assert "dgxh100_x1 is one box of 8 GPUs: nothing between boxes to balance" in capsys.readouterr().err
    assert main(["synth", "dgxh100:boxes=2", "-c", "moe", "-a", "mcf", "--moe",
                 "experts=16,topk=2,tokens=64,hidden=256,skew=zipf:1.2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["verified"] and set(out["steps"]) == {"dispatch", "combine"}
    assert out["finish_time_s"] >= out["limit_s"]


@pytest.mark.slow
@pytest.mark.parametrize("spec", ["railclos:boxes=4,gpus=8", "dgxh100:boxes=4,model=alphabeta"])
def test_the_acceptance_case_mcf_within_5_percent_and_twophase_within_15(spec):
    """4 boxes of 8 GPUs with rails, the issue's MoE dispatch (railclos: mcf's chains through leaf and spine
    ended 1.143 x the limit before the least-flow tie-break preferred relaying through GPUs)."""
    topology = load_topology(spec)
    matrix = moe_matrix(32, experts=64, topk=8, tokens=4096, hidden=7168, skew="zipf:1.2")
    for algorithm, most in (("mcf", 1.05), ("twophase", 1.15)):
        result = run_matrix(topology, "alltoallv", algorithm, matrix)
        assert result.timeline.verified
        assert result.finish_time_s <= most * result.limit_s, (algorithm, result.finish_time_s / result.limit_s)


def test_twophase_balances_only_where_a_box_has_fast_links_inside():
    from ccviz.synth.alltoallv import boxes_of, fast_inside

    dgx, leafspine = load_topology("dgxh100:boxes=2"), load_topology("leafspine:leaves=4,spines=2,hosts=4")
    assert fast_inside(dgx, boxes_of(dgx)) and not fast_inside(leafspine, boxes_of(leafspine))
    matrix = moe_matrix(16, experts=16, topk=4, tokens=128, hidden=256, skew="zipf:1.5")
    result = run_matrix(leafspine, "alltoallv", "twophase", matrix)
    assert result.timeline.verified and "nothing to balance over" in result.schedule.notes[0]
    gpus = set(leafspine.gpus)
    relayed = [t for t in result.timeline.schedule.transfers
               if t.dst in gpus and t.dst not in result.collective.chunks[t.chunk].post]
    assert not relayed  # straight to the destination: no GPU relays


def test_msccl_export_refuses_an_alltoallv_in_one_line():
    from ccviz.interop.export import msccl_xml

    topology = load_topology("ring:n=4")
    result = run(topology, matrix_collective(topology, np.array([[0, 2e6, 0, 0], [0, 0, 1e6, 0], [0, 0, 0, 1e6],
                                                                 [3e6, 0, 0, 0]])), "direct")
    with pytest.raises(CcvizError, match="alltoallv"):
        msccl_xml(result.timeline)


def test_a_flow_lp_too_big_to_solve_is_refused_up_front(monkeypatch):
    import ccviz.bounds.demand_flow as demand

    monkeypatch.setattr(demand, "MAX_LP_VARIABLES", 100)
    topology = load_topology("dgxh100:boxes=2,model=alphabeta")  # the textbook judge: ratios to the limit
    with pytest.raises(CcvizError, match="variables; at most 100"):
        demand_flow(topology, tuple(topology.gpus), np.ones((16, 16)))
