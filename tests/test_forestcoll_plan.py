"""forestcoll's plan table (``forestcoll.plan``): which plan each fabric takes, the notes naming it, the table
that ``--opt explain=true`` adds, and ratios pinned on small rows of ``bench/limit.py`` (measured 2026-11-29
before the package split: dgx1 AllGather 1.005, mesh2d 1.001, line AllReduce 1.000 x the limit at 1 GB)."""

from __future__ import annotations

import pytest

import ccviz
from ccviz.synth.forestcoll.plan import PLANS, choose_plan, fabric_traits
from ccviz.synth.registry import SynthOptions

SIZE = 1e9


@pytest.mark.parametrize(("spec", "plan"), [
    ("dgxh100", "crossbar planes"), ("nvl72", "crossbar planes"), ("dgx1", "direct links"),
    ("torus3d", "direct links"), ("a100", "switch queues"), ("dragonfly:groups=3,routers=2,gpus=6", "grid first"),
    ("rfs3d:dims=2x4x8", "trees, then the tight grid"), ("dgx2", "trees, then the grid"),
    ("railclos", "trees, cut-through"), ("dgxh100:boxes=2", "boxes on rails"), ("dgxh100:boxes=4", "boxes on rails"),
])
def test_each_fabric_takes_the_plan_its_traits_name(spec: str, plan: str) -> None:
    assert choose_plan(fabric_traits(ccviz.load_topology(spec))).name == plan


def test_the_last_plan_fits_every_fabric_so_one_is_always_taken() -> None:
    assert PLANS[-1].fits(fabric_traits(ccviz.load_topology("dgx1")))


@pytest.mark.parametrize(("spec", "collective", "pinned"), [
    ("dgx1", "allgather", 1.005), ("mesh2d", "allgather", 1.001), ("line", "allreduce", 1.000),
])
def test_ratios_stay_where_the_benchmark_left_them(spec: str, collective: str, pinned: float) -> None:
    topology = ccviz.load_topology(spec)
    result = ccviz.run(topology, collective, "forestcoll", SIZE)
    ratio = result.finish_time_s / ccviz.bandwidth_limit(topology, collective, SIZE).limit_s
    assert result.timeline.verified and ratio <= pinned + 0.0005
    assert any(note.startswith("plan 'direct links'") for note in result.schedule.notes)
    # torus3d's notes spoke of "routes through switches" on a fabric that has none
    assert not any("through switches" in note or "switch's queue" in note for note in result.schedule.notes)


def test_explain_adds_the_table_with_the_plan_taken() -> None:
    result = ccviz.run(ccviz.load_topology("dgxh100"), "allgather", "forestcoll", 1e8,
                       options=SynthOptions(extra={"explain": True}))
    table = [note for note in result.schedule.notes if note[:1].isdigit()]
    assert len(table) == len(PLANS) and "crossbar planes [TAKEN]" in table[0]
    assert "trees, cut-through [fits]" in table[-1]


def test_the_congestion_note_counts_a_copy_once() -> None:
    # NVL72's notes read "packing congestion 4.5000 x the limit" for a schedule at 1.030 x: each of a GPU's tree
    # edges through one copying switch counted on its up-link; counted once, a packed box is near 1.0
    result = ccviz.run(ccviz.load_topology("dgxh100"), "allgather", "forestcoll", 1e8,
                       options=SynthOptions(extra={"trees": 8}))
    figure = float(result.schedule.notes[0].split("packing congestion ")[1].split(" x")[0])
    assert result.timeline.verified and figure < 1.1 and "counted once" in result.schedule.notes[0]
