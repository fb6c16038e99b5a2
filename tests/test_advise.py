"""The fabric advisor: plans equal a brute force over every combination, bounds bound, one-line errors."""

from __future__ import annotations

import itertools
import json
import math
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ccviz import CcvizError, load_topology
from ccviz.advise import CostTable, advise, apply_upgrades, parse_mix, upgrades_from_list
from ccviz.advise.candidates import generate
from ccviz.advise.scoring import Scorer
from ccviz.advise.upgrades import Upgrade
from ccviz.bounds.limit import bandwidth_limit
from ccviz.cli import main
from ccviz.model.topology import Link, Node, Topology

MIXES = ["allreduce:1GB:1", "alltoall:256MB:1", "allreduce:1GB:0.5,alltoall:256MB:0.3,allgather:64MB:0.2"]


def _weighted(topology: Topology, mix, chosen) -> float:
    """The mix's weighted time on the fabric with ``chosen`` bought, solved from scratch (the brute force's own
    evaluation: no cache, no bound)."""
    fabric = apply_upgrades(topology, chosen)
    return sum(m.weight * bandwidth_limit(fabric, m.collective, m.size_bytes).limit_s for m in mix)


def _brute_force(topology: Topology, mix, candidates, budget: float, max_steps: int) -> float:
    best = _weighted(topology, mix, [])
    for k in range(1, max_steps + 1):
        for combo in itertools.combinations(candidates, k):
            if sum(c.cost for c in combo) <= budget:
                best = min(best, _weighted(topology, mix, combo))
    return best


def _random_fabric(seed: int) -> Topology:
    """Up to 7 nodes, uneven bandwidths, sometimes a switch: connected by a two-way ring plus chords."""
    rng = random.Random(seed)
    n = rng.randint(4, 7)
    switch = rng.random() < 0.4
    nodes = [Node(i, "switch" if switch and i == n - 1 else "gpu") for i in range(n)]
    links = {}
    for i in range(n):
        bw = rng.choice([10, 25, 50])
        links[(i, (i + 1) % n)] = bw
        links[((i + 1) % n, i)] = bw
    for _ in range(rng.randint(0, n)):
        u, v = rng.sample(range(n), 2)
        bw = rng.choice([12.5, 25, 100])
        links[(u, v)] = bw
        links[(v, u)] = bw
    return Topology(f"random{seed}", nodes, [Link(u, v, bw, 0.5) for (u, v), bw in links.items()])


@pytest.mark.parametrize("mix_text", MIXES)
@pytest.mark.parametrize("budget", [1_100.0, 3_400.0])
def test_plan_equals_brute_force_on_dgx1(mix_text, budget):
    topology = load_topology("dgx1")
    mix = parse_mix(mix_text)
    candidates = generate(topology, CostTable(), max_candidates=12)
    assert len(candidates) == 12
    advice = advise(topology, mix, budget=budget, max_steps=3, candidates=candidates)
    assert advice.proven
    best = _brute_force(topology, mix, candidates, budget, 3)
    assert math.isclose(advice.weighted_time_s[-1], best, rel_tol=1e-6)
    assert sum(candidates[i].cost for i in advice.plan) <= budget
    # the plan's times are the fabric's, re-solved from scratch
    assert math.isclose(advice.weighted_time_s[-1], _weighted(topology, mix, [candidates[i] for i in advice.plan]),
                        rel_tol=1e-6)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), mix_index=st.integers(0, 2), budget_cables=st.integers(2, 3))
def test_plan_equals_brute_force_on_random_fabrics(seed, mix_index, budget_cables):
    topology = _random_fabric(seed)
    mix = parse_mix(MIXES[mix_index])
    candidates = generate(topology, CostTable(), max_candidates=12)
    budget = budget_cables * 1_100.0
    advice = advise(topology, mix, budget=budget, max_steps=3, candidates=candidates)
    best = _brute_force(topology, mix, candidates, budget, 3)
    assert advice.proven
    assert math.isclose(advice.weighted_time_s[-1], best, rel_tol=1e-6)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), picks=st.lists(st.integers(0, 11), min_size=1, max_size=3, unique=True))
def test_lower_bounds_never_exceed_the_exact_time(seed, picks):
    """The certificates the planner prunes with are bounds: never above the exact weighted time of any set."""
    topology = _random_fabric(seed)
    mix = parse_mix(MIXES[2])
    candidates = generate(topology, CostTable(), max_candidates=12)
    chosen = [p for p in picks if p < len(candidates)]
    scorer = Scorer(topology, mix, candidates)
    scorer.exact(())
    for i in range(min(3, len(candidates))):
        scorer.exact([i])  # certificates from other fabrics too
    bound = scorer.lower(chosen)
    exact = _weighted(topology, mix, [candidates[i] for i in chosen])
    assert bound <= exact * (1 + 1e-6)  # both certified by duals, to the LP's tolerance


def test_greedy_takes_the_best_value_each_step():
    """Where the sets are too many to try, each step buys what solving every candidate would pick."""
    topology = load_topology("torus2d:dims=3x3")
    mix = parse_mix("allgather:1GB:0.5,alltoall:256MB:0.5")
    advice = advise(topology, mix, max_steps=2, max_candidates=40)
    assert not advice.proven and "greedy" in advice.method
    chosen = []
    for step in advice.steps:
        now = _weighted(topology, mix, [advice.candidates[i] for i in chosen])
        rates = {i: (now - _weighted(topology, mix, [advice.candidates[j] for j in [*chosen, i]])) / c.cost
                 for i, c in enumerate(advice.candidates) if i not in chosen}
        assert math.isclose(rates[step.index], max(rates.values()), rel_tol=1e-6)
        chosen.append(step.index)


def test_upgrades_apply_as_the_fabric_edits_they_name():
    topology = load_topology("dgx1")
    lanes_before = topology.links[(0, 1)].lanes
    fabric = apply_upgrades(topology, [
        Upgrade("add_link", 1.0, 0, 1, topology.links[(0, 1)].bandwidth_GBps),
        Upgrade("add_link", 1.0, 0, 5, 40.0),
        Upgrade("set_bw", 1.0, 2, 3, 100.0),
    ])
    assert fabric.links[(0, 1)].lanes == lanes_before + 1 and fabric.links[(1, 0)].lanes == lanes_before + 1
    assert fabric.links[(0, 5)].bandwidth_GBps == 40.0 and fabric.links[(5, 0)].bandwidth_GBps == 40.0
    assert fabric.links[(2, 3)].bandwidth_GBps == 100.0 and fabric.links[(3, 2)].bandwidth_GBps == 100.0
    star = load_topology("star:n=4")
    switch = star.switches[0]
    assert apply_upgrades(star, [Upgrade("reduce_switch", 1.0, switch)]).nodes[switch].reduce


def test_a_reducing_switch_is_offered_and_pays_for_allreduce():
    topology = load_topology("star:n=8")
    pricey_cables = CostTable(bandwidth_per_GBps=100.0, cable_per_GBps=100.0)  # faster cables cost more than a switch
    advice = advise(topology, parse_mix("allreduce:1GB:1"), budget=20_000, max_steps=1, costs=pricey_cables)
    bought = advice.candidates[advice.plan[0]]
    assert bought.kind == "reduce_switch"
    assert advice.weighted_time_s[-1] < advice.weighted_time_s[0] * 0.6  # 2(N-1)/N M/BW -> M/BW


def test_json_contract_and_candidates_file_round_trip(tmp_path, capsys):
    assert main(["advise", "dgx1", "--mix", "allreduce:1GB:0.5,alltoall:256MB:0.5", "--budget", "2500",
                 "--max-candidates", "12", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    for key in ("candidates", "plan", "weighted_time_s", "curve", "steps", "method", "proven_best"):
        assert key in out
    for c in out["candidates"]:
        assert c["kind"] in ("add_link", "set_bw", "reduce_switch", "add_nic")
        assert {"src", "dst", "bw_GBps", "cost"} <= set(c)
    assert len(out["weighted_time_s"]) == len(out["plan"]) + 1
    assert all(0 <= i < len(out["candidates"]) for i in out["plan"])
    assert out["weighted_time_s"] == sorted(out["weighted_time_s"], reverse=True)
    assert out["curve"][0]["cost"] == 0.0
    path = tmp_path / "candidates.json"
    path.write_text(json.dumps(out["candidates"]))
    assert main(["advise", "dgx1", "--mix", "allreduce:1GB:0.5,alltoall:256MB:0.5", "--budget", "2500",
                 "--candidates", str(path), "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["plan"] == out["plan"] and again["weighted_time_s"] == pytest.approx(out["weighted_time_s"])


def test_confirmed_gains_are_realized_by_verified_schedules(capsys):
    assert main(["advise", "dgx1", "--mix", "allgather:256MB:0.5,alltoall:64MB:0.5", "--budget", "1700",
                 "--max-candidates", "10", "--confirm", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert len(out["confirmed"]) == len(out["plan"]) + 1
    for row in out["confirmed"]:
        assert row["verified"]
        assert 1 - 1e-9 <= row["ratio"] <= 1.05


@pytest.mark.parametrize("argv, field", [
    (["--mix", "allreduce:1GB:0.5,alltoall:1GB:0.4"], "sum to 0.9"),
    (["--mix", "allfoo:1GB:1"], "unknown collective"),
    (["--mix", "allreduce:1GB"], "collective:size:weight"),
    (["--mix", "allreduce:1GB:1", "--budget", "1"], "below every candidate"),
    (["--mix", "allreduce:1GB:1", "--budget", "-5"], "budget"),
    (["--mix", "allreduce:1GB:1", "--max-steps", "0"], "max-steps"),
])
def test_bad_input_gets_one_line(argv, field, capsys):
    assert main(["advise", "dgx1", *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and field in err


def test_bad_cost_and_candidate_files_are_named(tmp_path, capsys):
    costs = tmp_path / "costs.yaml"
    costs.write_text("cable_per_GBps: -3\n")
    assert main(["advise", "dgx1", "--mix", "allreduce:1GB:1", "--costs", str(costs)]) == 2
    assert "cable_per_GBps is negative" in capsys.readouterr().err
    costs.write_text("cable_price: 3\n")
    assert main(["advise", "dgx1", "--mix", "allreduce:1GB:1", "--costs", str(costs)]) == 2
    assert "unknown key(s) cable_price" in capsys.readouterr().err
    topology = load_topology("dgx1")
    with pytest.raises(CcvizError, match=r"candidates\[0\].cost"):
        upgrades_from_list([{"kind": "add_link", "src": 0, "dst": 1, "bw_GBps": 25, "cost": -1}], topology)
    with pytest.raises(CcvizError, match=r"candidates\[0\] has unknown key"):
        upgrades_from_list([{"kind": "add_link", "src": 0, "dst": 1, "bw_GBps": 25, "cost": 1, "x": 2}], topology)
    with pytest.raises(CcvizError, match=r"candidates\[0\].kind"):
        upgrades_from_list([{"kind": "buy_gpu", "src": 0, "cost": 1}], topology)


def test_a_plan_fabric_does_not_depend_on_the_order_of_purchases():
    topology = load_topology("dgx1")
    cable = Upgrade("add_link", 1.0, 0, 3, 25.0)
    faster = Upgrade("set_bw", 1.0, None, None, 50.0, links=((0, 3), (1, 2)))
    one, two = apply_upgrades(topology, [cable, faster]), apply_upgrades(topology, [faster, cable])
    assert one.to_json() == two.to_json()
    assert one.links[(0, 3)].bandwidth_GBps * one.links[(0, 3)].lanes == 75.0  # 25 raised to 50, then 25 more


def test_switches_are_made_to_reduce_together_and_schedules_reach_the_gain():
    """One reducing switch among others promises an AllReduce limit no schedule reaches; the advisor offers
    the whole network's switches at once, and inc realizes the gain."""
    from ccviz.advise.confirm import confirm

    topology = load_topology("leafspine:leaves=2,hosts=4,spines=2")
    pricey_cables = CostTable(bandwidth_per_GBps=1e4, cable_per_GBps=1e4, nic=1e6)
    advice = advise(topology, parse_mix("allreduce:256MB:1"), budget=60_000, max_steps=1, costs=pricey_cables)
    reduce = [c for c in advice.candidates if c.kind == "reduce_switch"]
    assert len(reduce) == 1 and set(reduce[0].switches) == set(topology.switches)
    assert advice.candidates[advice.plan[0]].kind == "reduce_switch"
    realized = confirm(topology, advice, time_limit=30)
    assert all(r.verified and r.ratio <= 1.05 for r in realized), [r.to_dict() for r in realized]


@pytest.mark.parametrize("collective", ["allgather", "reducescatter"])
def test_the_bound_on_a_hardware_preset_is_ccviz_limits_judged_value(collective, capsys):
    """On a fabric that declares the hardware link model the limit is counted at sustained rates
    (``judged_fabric``); the bound must divide by the same rates, or it stays valid but falls short of the
    limit by the protocol's factor (dgxh100: nominal 125 GB/s, judged 103) and prunes nothing."""
    topology = load_topology("dgxh100")
    mix = parse_mix(f"{collective}:1GB:1")
    scorer = Scorer(topology, mix, generate(topology, CostTable(), max_candidates=4))
    scorer.exact(())
    scorer._cache.clear()  # the bound from the certificate alone, not the cached exact answer
    assert main(["limit", "dgxh100", "-c", collective, "-s", "1GB", "--json"]) == 0
    judged = json.loads(capsys.readouterr().out)["limit_s"]
    assert math.isclose(scorer.lower(()), judged, rel_tol=1e-9)
