"""Property tests: every classic algorithm on random small fabrics verifies or refuses clearly."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ccviz
from ccviz.bounds.cost import lower_bound
from ccviz.errors import CcvizError
from ccviz.model.collectives import COLLECTIVES, ROOTED
from ccviz.model.topology import Link, Node, Topology
from tests.paths import REFERENCE_FILES

CLASSIC = ["ring", "ring-bidir", "direct", "dbt", "rhd", "tree", "bruck"]
BANDWIDTHS = st.sampled_from([12.5, 25.0, 50.0, 100.0])
ALPHAS = st.sampled_from([0.0, 0.5, 1.3])


@st.composite
def small_fabrics(draw) -> Topology:
    """A connected fabric of 2..8 GPUs: a random spanning tree, extra (maybe one-way) links, maybe a switch."""
    n = draw(st.integers(2, 8))
    links: dict[tuple[int, int], Link] = {}

    def add(u: int, v: int) -> None:
        links[(u, v)] = Link(u, v, draw(BANDWIDTHS), draw(ALPHAS))

    for v in range(1, n):
        u = draw(st.integers(0, v - 1))
        add(u, v)
        add(v, u)
    for u, v in draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=6)):
        if u != v:
            add(u, v)
    nodes = [Node(i, "gpu") for i in range(n)]
    if draw(st.booleans()):
        switch = n
        nodes.append(Node(switch, "switch", copy=draw(st.booleans())))
        for g in draw(st.sets(st.integers(0, n - 1), min_size=min(2, n))):
            add(g, switch)
            add(switch, g)
    hop = draw(st.sampled_from(["paid", "teccl", "free"]))
    return Topology("random", nodes, links.values(), switch_hop=hop)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(topology=small_fabrics(), chunks=st.integers(1, 2), root_pick=st.integers(0, 7))
def test_every_classic_algorithm_verifies_or_refuses(topology: Topology, chunks: int, root_pick: int) -> None:
    root = topology.gpus[root_pick % topology.n_gpus]
    for name in COLLECTIVES:
        coll = ccviz.make_collective(name, topology, 1e6, chunks_per_rank=chunks,
                                     root=root if name in ROOTED else None)
        bound = lower_bound(topology, coll).time_s
        for algorithm in CLASSIC:
            if not ccviz.get_algorithm(algorithm).supports(name):
                continue
            try:
                schedule = ccviz.synthesize(topology, coll, algorithm)
            except CcvizError as exc:
                assert exc.field and str(exc).startswith(exc.field + ":"), str(exc)
                continue
            timeline = ccviz.simulate(schedule)
            assert timeline.verified, (algorithm, name, [v.message for v in timeline.violations[:3]])
            assert timeline.finish_time_s >= bound * (1 - 1e-9), (algorithm, name, timeline.finish_time_s, bound)


@pytest.mark.parametrize("path", REFERENCE_FILES, ids=lambda p: p.stem)
def test_ring_allgather_verifies_on_every_reference_topology(path) -> None:
    topology = ccviz.load_topology(path)
    coll = ccviz.make_collective("allgather", topology, ccviz.parse_size("1MB"))
    timeline = ccviz.simulate(ccviz.synthesize(topology, coll, "ring"))
    assert timeline.verified
    assert timeline.finish_time_s >= lower_bound(topology, coll).time_s * (1 - 1e-9)


def test_ring_allgather_verifies_on_every_builder() -> None:
    from ccviz.builders import BUILDERS

    for name in sorted(BUILDERS):
        topology = ccviz.load_topology(name)
        coll = ccviz.make_collective("allgather", topology, 1e6)
        assert ccviz.simulate(ccviz.synthesize(topology, coll, "ring")).verified, name
