"""Hierarchies that compose anything (inc at a tier, three latency classes, compounded oversubscription) and the
SuperPOD / Leiserson builders."""

import pytest

from ccviz.bounds.explained import explained_cost
from ccviz.builders.loading import load_topology
from ccviz.errors import CcvizError


def test_inner_inc_is_a_tier():
    c = explained_cost("allreduce", "hierarchical", 16e6, "0.5/2", "900/50", tiers="72x2", inner="inc")
    inner = [p for p in c.phases if p["tier"] == "inner"]
    assert [p["algorithm"] for p in inner] == ["inc", "inc"]
    ring = explained_cost("allreduce", "hierarchical", 16e6, "0.5/2", "900/50", tiers="72x2")
    assert c.time_s < ring.time_s


def test_outer_inc_pays_two_alphas():
    c = explained_cost("allreduce", "hierarchical", 16e6, "0.5/2", "900/50", tiers="72x2", outer="inc")
    outer = next(p for p in c.phases if p["tier"] == "outer")
    assert outer["n_alpha"] == 2


def test_three_class_alltoall_is_the_reference_16906_us():
    c = explained_cost("alltoall", "hierarchical", 16e6, "0.5/2/8", "900/50", tiers="72x32", pods_per_leaf=4)
    assert c.time_s * 1e6 == pytest.approx(16906, rel=0.001)
    assert [p["tier"] for p in c.phases] == ["inner", "leaf", "spine"]


def test_three_alphas_need_pods_per_leaf():
    with pytest.raises(CcvizError, match="pods-per-leaf"):
        explained_cost("alltoall", "hierarchical", 16e6, "0.5/2/8", "900/50", tiers="72x32")


def test_oversub_and_clos_eta_do_not_count_twice():
    with pytest.raises(CcvizError, match="count twice"):
        explained_cost("allreduce", "hierarchical", 16e6, "0.5/2", "900/50", tiers="72x2", oversub=2,
                       eta="crossbar/clos:2")


def test_per_tier_oversubscription_compounds():
    one = explained_cost("allgather", "hierarchical", 16e6, "0.5/2", "900/50", tiers="8x4", oversub=4)
    two = explained_cost("allgather", "hierarchical", 16e6, "0.5/2", "900/50", tiers="8x4", oversub="2/2")
    assert two.time_s == pytest.approx(one.time_s) and "compounded" in two.assumptions


def test_superpod_l32_is_8_leaves_and_4_spines_per_rail():
    t = load_topology("superpod:racks=32")
    assert t.n_gpus == 2304
    assert (t.meta["leaves_per_rail"], t.meta["spines_per_rail"]) == (8, 4)
    leaf_spine = [lk for lk in t.links.values() if "leaf" in t.nodes[lk.src].label and "spine" in
                  t.nodes[lk.dst].label]
    assert leaf_spine and {lk.lanes for lk in leaf_spine} == {18}


def test_superpod_answers_limit():
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "ccviz.cli", "limit", "superpod:racks=4", "-c", "allreduce", "-s",
                          "16MB", "--json"], capture_output=True, text=True, check=True)
    assert '"limit_s"' in out.stdout


def test_leiserson_bandwidth_grows_toward_the_root():
    from ccviz.bounds.limit import bandwidth_limit

    thin, fat = load_topology("leiserson:levels=3,growth=1"), load_topology("leiserson:levels=3,growth=2")
    assert max(lk.bandwidth_GBps for lk in fat.links.values()) == 200
    t_thin = bandwidth_limit(thin, "alltoall", 16e6).limit_s
    t_fat = bandwidth_limit(fat, "alltoall", 16e6).limit_s
    assert t_fat == pytest.approx(7 / 8 * 16e6 / 50e9)  # full bisection: each GPU's own link binds
    assert t_thin > 2 * t_fat  # a plain tree's root is the bottleneck


def test_three_tier_clos_with_per_tier_oversubscription_compounds():
    from ccviz.bounds.limit import bandwidth_limit

    full = load_topology("leiserson:levels=3,arity=4,growth=4")
    top_only = load_topology("leiserson:levels=3,arity=4,growth=4/2")
    both = load_topology("leiserson:levels=3,arity=4,growth=2/2")
    assert both.meta["oversubscription_per_tier"] == [2.0, 2.0]
    t_full, t_top, t_both = (bandwidth_limit(t, "alltoall", 16e6).limit_s for t in (full, top_only, both))
    assert t_full < t_top < t_both  # each oversubscribed tier adds to what crosses the root
