"""TE-CCL extended with in-switch reduction (ccviz.synth.teccl.in_switch): small reducing stars, short limits."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from ccviz import CcvizError, make_collective, simulate, synthesize
from ccviz.builders import build
from ccviz.cli import main
from ccviz.model.schedule import COMBINE
from ccviz.model.topology import Link, Node, Topology
from ccviz.synth.registry import SynthOptions
from ccviz.synth.teccl.epochs import EpochGrid
from ccviz.synth.teccl.in_switch import InSwitchGraph, in_switch_model

OPTIONS = SynthOptions(time_limit=10)


def _teccl(spec: str, collective: str, size: float = 1e9):
    topo = build(spec)
    schedule = synthesize(topo, make_collective(collective, topo, size), "teccl", OPTIONS)
    return schedule, simulate(schedule)


@pytest.fixture(scope="module")
def fused():
    return _teccl("star:n=4,reduce=true", "allreduce")


def test_fused_allreduce_adds_in_the_switch_and_beats_the_software_split(fused) -> None:
    schedule, timeline = fused
    assert timeline.verified, timeline.violations[:1]
    hub = schedule.topology.switches[0]
    ups = Counter(t.src for t in schedule.transfers if t.dst == hub)
    assert all(t.op == COMBINE for t in schedule.transfers if t.dst == hub)
    # fused: every GPU sends each chunk up once (no ReduceScatter + AllGather split: that sends more)
    assert set(ups.values()) == {len(schedule.collective.chunks)}
    assert schedule.status == "optimal" and schedule.bound_epochs == schedule.epochs
    software, soft_timeline = _teccl("star:n=4", "allreduce")
    assert not any(t.op == COMBINE for t in software.transfers)
    assert timeline.finish_time_s < 0.75 * soft_timeline.finish_time_s


@pytest.mark.parametrize("collective", ["reducescatter", "reduce"])
def test_reductions_sum_in_the_switch_and_verify(collective: str) -> None:
    schedule, timeline = _teccl("star:n=4,reduce=true", collective)
    assert timeline.verified, timeline.violations[:1]
    assert any(t.op == COMBINE for t in schedule.transfers)
    assert not any("does not use" in note for note in schedule.notes)
    assert any("in-switch reduction model" in note for note in schedule.notes)


def test_the_judge_rejects_the_schedule_with_a_contribution_combined_twice(fused) -> None:
    schedule, _ = fused
    first = next(t for t in schedule.transfers if t.op == COMBINE)
    doubled = schedule.with_transfers([*schedule.transfers, first._replace(step=first.step + 0.1)])
    assert any(v.rule == "double_count" for v in simulate(doubled).violations)


def test_the_model_names_its_constraint_families_and_offers_the_switch_as_total_site() -> None:
    topo = build("star:n=4,reduce=true")
    coll = make_collective("allreduce", topo, 1e9)
    grid = EpochGrid.build(topo, coll.chunk_bytes)
    graph = InSwitchGraph(topo, grid, coll, 5)
    model = in_switch_model(graph)
    for name in ("contribution_leaves_once", "partial_added_before_sent", "switch_sends_one_sum",
                 "switch_adds_every_partial", "switch_sums_a_chunk_once", "one_total", "total_held_grows",
                 "copy_switch_forwards_total", "demand_holds_total", "link_capacity"):
        assert hasattr(model, name), name
    roots_at_switch = [r for r in graph.roots if topo.is_switch(r[1])]
    assert roots_at_switch, "a reducing star that copies is offered as the site of the total"


def test_fabrics_without_reducing_switches_keep_the_reversal() -> None:
    schedule, timeline = _teccl("star:n=4", "reducescatter")
    assert timeline.verified
    assert not any("in-switch" in note for note in schedule.notes)
    assert any("reversed" in note for note in schedule.notes)


def test_cli_teccl_allreduce_on_a_reducing_star(capsys) -> None:
    assert main(["synth", "star:n=4,reduce=true", "-c", "allreduce", "-a", "teccl", "-s", "1MB",
                 "--time-limit", "10", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["verified"] is True
    assert out["finish_time_s"] < 2 * out["limit_s"]


def test_fixed_epochs_too_few_is_one_clear_error() -> None:
    topo = build("star:n=4,reduce=true")
    with pytest.raises(CcvizError, match="epochs: no in-switch schedule fits in 1 epochs"):
        synthesize(topo, make_collective("allreduce", topo, 1e9), "teccl", SynthOptions(time_limit=10, epochs=1))


def test_a_switch_that_only_forwards_carries_partials_beside_one_that_adds() -> None:
    """Four GPUs on two switches, one adding (NVLS-like), one that neither adds nor copies: the MILP routes
    partials through both and beats the greedy pipeline, which uses only the adding switch."""
    nodes = [Node(i) for i in range(4)] + [Node(4, "switch", reduce=True), Node(5, "switch", copy=False)]
    links = [link for g in range(4) for s in (4, 5) for link in (Link(g, s, 50.0, 1.0), Link(s, g, 50.0, 1.0))]
    topo = Topology("two_switches", nodes, links)
    schedule = synthesize(topo, make_collective("reducescatter", topo, 1e9), "teccl", OPTIONS)
    assert simulate(schedule).verified
    ops = {(t.dst, t.op) for t in schedule.transfers}
    assert (4, COMBINE) in ops and (5, "reduce") in ops
    greedy = next(note for note in schedule.notes if note.startswith("epoch greedy"))
    assert schedule.epochs < int(greedy.split(": ")[1].split()[0])


def test_the_in_switch_greedy_stops_at_its_deadline_and_says_how_far_it_got() -> None:
    # NVL72 AllReduce 81448 B --time-limit 10: the greedy could not be interrupted and the run took 13 s
    import time

    from ccviz.synth.teccl.in_switch_solve import InSwitchGreedy, solve_in_switch

    topo = build("nvl72:gpus=12")
    coll = make_collective("allreduce", topo, 1e6)
    grid = EpochGrid.build(topo, coll.chunk_bytes, "fastest")
    late = InSwitchGreedy(topo, grid, coll, deadline=time.perf_counter() - 1)
    assert late.run() is None and late.cut_short and late.routed == 0
    on_time = InSwitchGreedy(topo, grid, coll)  # no deadline: the whole pipeline, every chunk placed
    assert on_time.run() is not None and not on_time.cut_short and on_time.routed == len(coll.chunks)
    started = time.perf_counter()
    schedule, notes = solve_in_switch(topo, coll, SynthOptions(), started - 1, started - 2)
    assert schedule is None and any("had placed 0 chunks when the time limit ran out" in n for n in notes)


def test_the_greedy_schedule_stands_when_the_model_finds_none_better_in_time() -> None:
    # the greedy's schedule is judged at once; a search cut short keeps it (status says the time ran out or
    # the search ended; never a lost run)
    schedule, timeline = _teccl("nvl72:gpus=12", "allreduce", 1e6)
    assert timeline.verified and schedule.algorithm == "teccl"
    assert any("epoch greedy (NVLS pipeline)" in n for n in schedule.notes)
    assert schedule.epochs is not None and schedule.status in ("optimal", "feasible", "time_limit")
