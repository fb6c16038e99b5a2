"""AllToAll's limit: the concurrent-flow LP against a brute-force per-pair LP, closed forms and its wiring."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest

import ccviz
from ccviz import bandwidth_limit, load_topology
from ccviz.bounds.alltoall_limit import sweep_cut
from ccviz.bounds.concurrent_flow import concurrent_flow
from ccviz.bounds.cost import lower_bound
from ccviz.bounds.limit import limit_sentence
from ccviz.cli import main
from ccviz.model.collectives import make_collective
from ccviz.model.topology import Link, Node, Topology
from tests.flow_brute_force import per_pair_seconds


def brute_force_seconds(topology: Topology) -> float:
    """Seconds to move 1 GB per ordered GPU pair: one commodity per pair, flow on every link, scipy's LP."""
    n = topology.n_gpus
    return per_pair_seconds(topology, np.ones((n, n)))


def _random_fabric(seed: int) -> Topology:
    """A strongly connected fabric of up to 7 nodes, uneven one-way bandwidths, a switch, some lanes."""
    rng = random.Random(seed)
    n = rng.randint(4, 7)
    switch = rng.randrange(n)
    nodes = [Node(i, "switch" if i == switch else "gpu") for i in range(n)]
    links = {}
    for i in range(n):
        links[(i, (i + 1) % n)] = rng.choice([10, 25, 50])
        links[((i + 1) % n, i)] = rng.choice([10, 25, 50, 100])
    for _ in range(rng.randint(0, n)):
        u, v = rng.sample(range(n), 2)
        links[(u, v)] = rng.choice([5, 12.5, 40])
    return Topology(f"random{seed}", nodes, [Link(u, v, bw, 0.5, rng.choice([1, 2])) for (u, v), bw in links.items()])


SMALL = ["ring:n=5", "ring:n=6", "mesh2d:dims=2x3", "dgx1", "star:n=5", "hypercube:n=8", "torus2d:dims=3x3",
         "leafspine:leaves=2,hosts=2,spines=2", "line:n=4"]


@pytest.mark.parametrize("spec", SMALL)
def test_the_lp_equals_a_per_pair_brute_force(spec):
    topology = load_topology(spec)
    exact = brute_force_seconds(topology)
    assert concurrent_flow(topology).seconds_per_pair_GB == pytest.approx(exact, rel=1e-6)
    assert concurrent_flow(topology, symmetry=False).seconds_per_pair_GB == pytest.approx(exact, rel=1e-6)


@pytest.mark.parametrize("seed", range(4))
def test_the_lp_equals_a_per_pair_brute_force_on_random_fabrics(seed):
    topology = _random_fabric(seed)
    assert concurrent_flow(topology).seconds_per_pair_GB == pytest.approx(brute_force_seconds(topology), rel=1e-6)


@pytest.mark.parametrize("n", [4, 7, 8, 9])
def test_ring_closed_form(n):
    # bidirectional ring, B each way: sum of distances from a GPU is n^2/4 (even) or (n^2-1)/4 (odd), spread
    # over 2n links; M/N bytes per pair
    topology = load_topology(f"ring:n={n}")
    size = 1e9
    hops = n * n / 4 if n % 2 == 0 else (n * n - 1) / 4
    expected = n * hops * (size / n) / (2 * n * 50e9)
    assert bandwidth_limit(topology, "alltoall", size).limit_s == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("k", [4, 6])
def test_even_torus_is_its_bisection(k):
    topology = load_topology(f"torus2d:dims={k}x{k}")
    size = 1e9
    limit = bandwidth_limit(topology, "alltoall", size)
    assert limit.limit_s == pytest.approx(k * size / (8 * 50e9), rel=1e-12)
    # the reported cut is a bisection whose own bound is the limit
    assert len([g for g in topology.gpus if g in limit.cut.nodes]) == k * k // 2
    assert len(limit.cut.links) == 2 * k
    assert "explains the whole limit" in limit.cut.words


def test_fully_connected_closed_form():
    topology = load_topology("fully_connected:n=6")
    assert bandwidth_limit(topology, "alltoall", 6e9).limit_s == pytest.approx(1e9 / 50e9, rel=1e-9)


@pytest.mark.parametrize("spec", ["torus2d:dims=4x4", "hypercube:n=16", "fattree:k=4", "ring:n=7"])
def test_symmetry_reduction_changes_nothing(spec):
    topology = load_topology(spec)
    reduced = concurrent_flow(topology, need_flows=True)
    assert reduced.translations is not None
    full = concurrent_flow(topology, symmetry=False)
    assert reduced.seconds_per_pair_GB == pytest.approx(full.seconds_per_pair_GB, rel=1e-6)
    # the translated flows are a feasible flow: every link within the LP's time x bandwidth
    loads = reduced.flows.sum(axis=0)
    assert (loads <= reduced.seconds_per_pair_GB * reduced.capacity_GBps * (1 + 1e-6)).all()


def test_a_mesh_gets_no_symmetry_it_does_not_have():
    flow = concurrent_flow(load_topology("mesh2d:dims=3x3"))
    assert flow.translations is None


def test_swept_cut_is_a_lower_bound():
    for spec in ["dgx1", "mesh2d:dims=3x4", "leafspine:leaves=2,hosts=2,spines=2"]:
        topology = load_topology(spec)
        flow = concurrent_flow(topology)
        _, ratio = sweep_cut(topology, flow)
        assert ratio <= flow.seconds_per_pair_GB * (1 + 1e-6)


def test_binding_links_carry_their_full_capacity():
    topology = load_topology("mesh2d:dims=3x3")
    flow = concurrent_flow(topology, need_flows=True)
    loads = dict(zip(flow.links, flow.flows.sum(axis=0), strict=True))
    capacity = dict(zip(flow.links, flow.capacity_GBps, strict=True))
    for link in flow.binding_links():
        assert loads[link] == pytest.approx(flow.seconds_per_pair_GB * capacity[link], rel=1e-5)


def test_lower_bound_uses_the_limit():
    topology = load_topology("torus2d:dims=4x4")
    collective = make_collective("alltoall", topology, 1e9, 1)
    bound = lower_bound(topology, collective)
    assert bound.limit_s == pytest.approx(4 * 1e9 / (8 * 50e9))
    assert bound.time_s >= bound.limit_s


def test_cli_json(capsys):
    assert main(["limit", "torus2d:dims=4x4", "-c", "alltoall", "-s", "1GB", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)  # one JSON object: HiGHS's banner kept off stdout
    for key in ("limit_s", "algbw_GBps", "collective", "size_bytes", "cut_nodes", "cut_links",
                "cut_bandwidth_GBps", "binding_links"):
        assert key in out
    assert out["collective"] == "alltoall"
    assert out["limit_s"] == pytest.approx(0.01)


def test_cli_text_says_how_the_limit_was_found(capsys):
    assert main(["limit", "torus2d:dims=4x4", "-c", "alltoall", "-s", "1GB"]) == 0
    out = capsys.readouterr().out
    assert "found by    maximum concurrent flow LP (HiGHS)" in out, out


def test_the_designer_draws_the_alltoall_bottleneck():
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(Path(__file__).resolve().parents[1] / "app.py"), default_timeout=120).run()
    at.switch_page("pages/topology.py").run()
    at.selectbox(key="topo_cut_of").select("alltoall").run()
    assert not at.exception and not at.error
    assert any("alltoall of 1GB cannot finish before" in c.value and "bind in the flow LP" in c.value
               for c in at.caption), [c.value for c in at.caption]


def test_the_words_say_how_the_limit_was_found_and_name_the_cut_and_binding_links():
    explanation = bandwidth_limit(load_topology("dragonfly:groups=4,routers=4,gpus=2"), "alltoall", 1e9).explanation()
    assert "maximum concurrent flow LP" in explanation  # how it was computed, not only a cut
    assert "(32->36, 33->40, 34->44)" in explanation  # the cut's three global cables by name
    assert "pairs from the 8 GPUs 0-7 to the 24 GPUs outside" in explanation  # which GPUs: group 0
    assert "12 link(s) bind in the flow LP" in explanation


def test_a_missing_alltoall_limit_is_not_called_undefined():
    # AllToAll has a limit; summaries skip its LP on big fabrics without symmetry, and must say so
    words = limit_sentence(1e-3, None, 300, "alltoall")
    assert "not computed automatically" in words and "no fabric limit is defined" not in words
    assert "no fabric limit is defined" in limit_sentence(1e-3, None, 16, "gather")


def test_the_lower_bounds_reason_gives_its_times_in_a_readable_unit():
    # the CLI said "data crossing first half of the ranks needs 1e+04 us" beside "lower bound 10 ms"
    topology = load_topology("torus2d:dims=4x4")
    reason = lower_bound(topology, make_collective("alltoall", topology, 1e9)).explanation
    assert "e+" not in reason and " ms" in reason, reason


def test_the_limit_is_certified_by_the_duals_not_the_solvers_tolerance() -> None:
    """A 3-GPU line (links of 25 and 12.5 GB/s): direct AllToAll finished 1.4e-8 under the interior point's value,
    which is exact only to its tolerance. The limit is now the bound the duals certify, never above a schedule."""
    links = [Link(0, 1, 25.0, 0.0), Link(1, 0, 12.5, 0.0), Link(1, 2, 25.0, 0.0), Link(2, 1, 12.5, 0.0)]
    topology = Topology("line", [Node(i, "gpu") for i in range(3)], links)
    collective = ccviz.make_collective("alltoall", topology, 1e6)
    limit = ccviz.bandwidth_limit(topology, "alltoall", 1e6).limit_s
    finish = ccviz.simulate(ccviz.synthesize(topology, collective, "direct")).finish_time_s
    assert limit <= finish
    assert limit >= finish * (1 - 1e-6)  # still the optimum up to the solver's tolerance: direct reaches it here


def test_a_cut_and_binding_links_on_a_twin_cut_are_not_told_as_one():
    # star: every GPU's up-link is a cut as tight; the LP's prices may single out another GPU's (issue 40, item 12:
    # the words named the cut 0->8 and then 'bind (7->8)' as if the same)
    limit = bandwidth_limit(load_topology("star:n=8"), "alltoall", 1e9)
    assert "(0->8)" in limit.cut.words
    twin = (0, 8) not in limit.binding_links
    assert ("and so do others as tight" in limit.cut.words) == twin
    assert ("on another of them" in limit.cut.words) == twin
