"""The fabric's limit: exact against a brute force over every cut, cut reported consistently, clear errors."""

from __future__ import annotations

import itertools
import json
import math
import random

import pytest

from ccviz import CcvizError, bandwidth_limit, load_topology
from ccviz.bounds import limit as limit_module
from ccviz.bounds.cost import lower_bound
from ccviz.builders import build
from ccviz.cli import main
from ccviz.model.collectives import make_collective
from ccviz.model.topology import Link, Node, Topology

SMALL = ["ring:n=8", "ring:n=5,bidirectional=false", "dgx1", "star:n=6", "fully_connected:n=5", "hypercube:n=8",
         "mesh2d:dims=3x3", "line:n=6", "torus2d:dims=2x2", "ndv2:chassis=1",
         "leafspine:leaves=2,hosts=2,spines=2", "multidim:dims=2x3,kinds=ring/switch"]


def _random_fabric(seed: int) -> Topology:
    """A strongly connected fabric of up to 10 nodes with uneven one-way bandwidths and a switch or two."""
    rng = random.Random(seed)
    n = rng.randint(4, 10)
    switches = set(rng.sample(range(n), rng.randint(0, 2)))
    nodes = [Node(i, "switch" if i in switches else "gpu", copy=rng.random() < 0.5) for i in range(n)]
    links = {}
    for i in range(n):  # a ring keeps it connected; extra chords in random directions
        links[(i, (i + 1) % n)] = rng.choice([10, 25, 50])
        links[((i + 1) % n, i)] = rng.choice([10, 25, 50, 100])
    for _ in range(rng.randint(0, 2 * n)):
        u, v = rng.sample(range(n), 2)
        links[(u, v)] = rng.choice([5, 12.5, 40, 300])
    return Topology(f"random{seed}", nodes, [Link(u, v, bw, 0.5, rng.choice([1, 1, 2])) for (u, v), bw in links.items()])


def _brute_gather(topo: Topology, reverse: bool) -> float:
    """max |S ∩ GPUs| / B+(S) over every S with a GPU inside and one outside (B- for ReduceScatter)."""
    gpus, nodes = set(topo.gpus), list(topo.nodes)
    best = 0.0
    for r in range(1, len(nodes)):
        for subset in itertools.combinations(nodes, r):
            inside = set(subset)
            if not (inside & gpus) or gpus <= inside:
                continue
            crossing = sum(lk.bandwidth_GBps * lk.lanes for (u, v), lk in topo.links.items()
                           if ((v in inside and u not in inside) if reverse else (u in inside and v not in inside)))
            best = max(best, len(inside & gpus) / crossing)
    return best


def _brute_broadcast(topo: Topology, root: int) -> float:
    """min over S holding the root and missing a GPU of the bandwidth leaving S."""
    gpus, others = set(topo.gpus), [n for n in topo.nodes if n != root]
    best = float("inf")
    for r in range(0, len(others)):
        for subset in itertools.combinations(others, r):
            inside = {root, *subset}
            if gpus <= inside:
                continue
            best = min(best, sum(lk.bandwidth_GBps * lk.lanes for (u, v), lk in topo.links.items()
                                 if u in inside and v not in inside))
    return best


FABRICS = [build(spec) for spec in SMALL] + [_random_fabric(seed) for seed in range(24)]


@pytest.mark.parametrize("topo", FABRICS, ids=lambda t: t.name)
def test_limit_equals_brute_force_over_all_cuts(topo: Topology) -> None:
    assert len(topo.nodes) <= 12
    size = 1e9
    n = topo.n_gpus
    for name, reverse in (("allgather", False), ("reducescatter", True)):
        limit = bandwidth_limit(topo, name, size)
        assert limit.limit_s == pytest.approx(size / n * _brute_gather(topo, reverse) / 1e9, rel=1e-9)
    ar = bandwidth_limit(topo, "allreduce", size)
    assert ar.limit_s == pytest.approx(sum(ar.parts.values()), rel=1e-12)
    root = topo.gpus[-1]
    assert bandwidth_limit(topo, "broadcast", size, root).limit_s == pytest.approx(
        size / (_brute_broadcast(topo, root) * 1e9), rel=1e-9)
    assert bandwidth_limit(topo, "reduce", size, root).limit_s == pytest.approx(
        size / (_brute_broadcast(topo.reversed(), root) * 1e9), rel=1e-9)


@pytest.mark.parametrize("topo", FABRICS[:6] + FABRICS[-4:], ids=lambda t: t.name)
@pytest.mark.parametrize("collective", ["allgather", "reducescatter", "broadcast", "reduce"])
def test_reported_cut_sets_the_limit(topo: Topology, collective: str) -> None:
    """The links listed leave cut_nodes, their bandwidth is the one reported, and it gives the limit."""
    limit = bandwidth_limit(topo, collective, 1e9)
    out = limit.to_dict()
    inside = set(out["cut_nodes"])
    leaving = sorted([u, v] for (u, v) in topo.links if u in inside and v not in inside)
    assert sorted(out["cut_links"]) == leaving
    assert out["cut_bandwidth_GBps"] == pytest.approx(sum(topo.links[(u, v)].bandwidth_GBps * topo.links[(u, v)].lanes
                                                          for u, v in leaving))
    if collective == "allgather":  # the shards of the GPUs inside leave over these links
        count = len(inside & set(topo.gpus))
        assert out["limit_s"] == pytest.approx(1e9 / topo.n_gpus * count / (out["cut_bandwidth_GBps"] * 1e9))


GIB_GB = 53.6870912  # 50 GiB/s in GB/s: whole only in units of itself


def _odd_bandwidths(topo: Topology, bandwidths: list[float]) -> Topology:
    """The same fabric with bandwidths drawn from ``bandwidths`` (irrational ones force the float path)."""
    rng = random.Random(len(topo.links))
    links = [Link(u, v, rng.choice(bandwidths), lk.alpha_us, lk.lanes) for (u, v), lk in topo.links.items()]
    return Topology(topo.name + "-odd", list(topo.nodes.values()), links)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("bandwidths", [[math.pi, 10.0, math.e * 7], [1e6, 1e-4, 3.0], [1 / 3, 2 / 7, 12.5],
                                        [GIB_GB, 2 * GIB_GB, GIB_GB / 2]],
                         ids=["irrational", "int32-overflow", "thirds", "gibibytes"])
def test_float_and_integer_paths_agree_with_brute_force(seed: int, bandwidths: list[float]) -> None:
    """Bandwidths with no small common denominator, or too wide for scipy's int32 (1 PB/s beside 0.1 MB/s), take networkx's float
    path; thirds take the integer path with D = 21, 25/50/100 GiB/s in units of the smallest. All equal
    the brute force."""
    topo = _odd_bandwidths(_random_fabric(100 + seed), bandwidths)
    whole = limit_module._whole_bandwidths(limit_module._capacities(topo))
    if bandwidths[0] in (1 / 3, GIB_GB):  # these two take the integer path
        assert whole is not None
    if bandwidths[0] == math.pi:
        assert whole is None
    for name, reverse in (("allgather", False), ("reducescatter", True)):
        expected = 1e9 / topo.n_gpus * _brute_gather(topo, reverse) / 1e9
        assert bandwidth_limit(topo, name, 1e9).limit_s == pytest.approx(expected, rel=1e-9)
    root = topo.gpus[0]
    assert bandwidth_limit(topo, "broadcast", 1e9, root).limit_s == pytest.approx(
        1e9 / (_brute_broadcast(topo, root) * 1e9), rel=1e-9)


@pytest.mark.parametrize("spec", ["dgx2:chassis=4", "a100:boxes=4", "rfs3d:dims=2x2x8", "fattree:k=6",
                                  "leafspine:leaves=6,hosts=4,spines=2,oversub=3", "ndv2:chassis=4",
                                  f"torus3d:dims=4x4x4,bw={GIB_GB}", f"dgx2:chassis=2,bw={GIB_GB}"])
def test_integer_newton_equals_float_newton_on_larger_fabrics(spec: str) -> None:
    """Beyond brute force: scipy's exact integer Newton and networkx's float Newton find the same ratio."""
    topo = load_topology(spec)
    for fabric in (topo, topo.reversed()):
        capacity = limit_module._capacities(fabric)
        whole = limit_module._whole_bandwidths(capacity)
        start, _ = limit_module._single_gpu_start(fabric, capacity)
        assert whole is not None
        exact = limit_module._integer_gather(fabric, start, *whole)
        floating = limit_module._float_gather(fabric, capacity, start)
        assert exact is not None and exact[0] == pytest.approx(floating[0], rel=1e-12)


def test_issue_numbers_and_words() -> None:
    """The limits quoted in the issue (AllGather of 1 GB) and the cut in words."""
    expected = {"dgx1": 5833.3, "ring:n=8": 8750.0, "torus2d:dims=4x4": 4687.5, "dgx2:chassis=2": 7750.0,
                "rfs3d:dims=2x4x4": 1875.0, "a100": 2884.6}
    for spec, us in expected.items():
        assert bandwidth_limit(load_topology(spec), "allgather", 1e9).limit_s * 1e6 == pytest.approx(us, abs=0.06)
    words = bandwidth_limit(load_topology("dgx1"), "allgather", 1e9).cut.words
    assert words == "everything but GPU 0 must reach GPU 0 over its 4 links, 150 GB/s in all"


def test_lower_bound_never_below_the_limit_and_names_a_chunk_count() -> None:
    topo = load_topology("dgx1")
    for name in ("allgather", "reducescatter", "broadcast", "reduce"):
        for chunks in (1, 4):
            bound = lower_bound(topo, make_collective(name, topo, 1e9, chunks))
            assert bound.bandwidth_s >= bound.limit_s * (1 - 1e-12)
    one = lower_bound(topo, make_collective("allgather", topo, 1e9, 1))
    assert one.time_s > one.limit_s * 1.2 and one.chunks_to_limit == 6  # TE-CCL reaches it with 6 (issue 17)
    assert "fabric's limit" in one.explanation and "6 chunks per rank" in one.explanation


def test_cli_limit_json_and_text(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["limit", "dgx1", "--collective", "allgather", "--size", "1GB", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {"limit_s", "algbw_GBps", "collective", "size_bytes", "cut_nodes", "cut_links",
            "cut_bandwidth_GBps"} <= set(out)
    assert out["limit_s"] == pytest.approx(0.0058333333) and out["cut_bandwidth_GBps"] == 150.0
    assert main(["limit", "a100", "--collective", "allreduce", "--size", "1GB"]) == 0
    text = capsys.readouterr().out
    assert "alpha is not part of it" in text and "reducescatter" in text


def test_synth_json_has_limit_s(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["synth", "ring:n=4", "--algorithm", "ring", "--size", "1MB", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["limit_s"] == pytest.approx(1e6 / 4 * 3 / 100e9) and out["finish_time_s"] >= out["limit_s"]
    assert main(["synth", "ring:n=4", "--algorithm", "direct", "--collective", "alltoall", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)  # AllToAll's limit: the concurrent flow LP (ring: N^2 d / 8B)
    assert out["limit_s"] == pytest.approx(16 * (out["size_bytes"] / 4) / (8 * 50e9))
    assert out["finish_time_s"] >= out["limit_s"]
    assert main(["synth", "ring:n=4", "--algorithm", "direct", "--collective", "gather", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["limit_s"] is None


@pytest.mark.parametrize("argv, words", [
    (["limit", "ring:n=4", "--collective", "gather"], "no exact limit for gather"),
    (["limit", "ring:n=4", "--size", "0"], "size"),
    (["limit", "ring:n=4", "--collective", "broadcast", "--root", "9"], "root"),
    (["limit", "ring:n=4,bw=0"], "bandwidth"),
])
def test_bad_input_is_one_line(argv: list[str], words: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert words in err and err.count("\n") == 1


def test_unreachable_gpu_is_refused() -> None:
    nodes = [Node(0), Node(1), Node(2)]
    links = [Link(0, 1, 10, 0), Link(1, 0, 10, 0), Link(1, 2, 10, 0)]
    with pytest.raises(CcvizError, match="cannot"):
        bandwidth_limit(Topology("oneway", nodes, links), "allgather", 1e9)
