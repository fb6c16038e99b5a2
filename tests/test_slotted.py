"""The slot grid for cut-through routes: who it applies to, that its schedules verify, that matching a
slot's senders together beats first-come booking on a saturated leaf-spine, and its refusals."""

from __future__ import annotations

import json

import pytest

import ccviz
from ccviz.cli import main
from ccviz.errors import CcvizError
from ccviz.synth.registry import SynthOptions
from ccviz.synth.slotted import SlotMatching, slot_capacities, slot_eligible

SLOTS = SynthOptions(extra={"slots": True})


@pytest.mark.parametrize(("spec", "eligible"), [
    ("leafspine", True), ("fattree", True), ("star", True), ("switch2d", True), ("dgx2", True),
    ("dragonfly", True),  # 25 GB/s global cables behind 50 GB/s up-links: their hops span two slots
    ("a100", False),  # 300 GB/s NVSwitch and 25 GB/s NIC up-links
    ("dgx1", False),  # no switches
])
def test_slot_grid_applies_where_up_links_are_alike(spec: str, eligible: bool) -> None:
    assert slot_eligible(ccviz.load_topology(spec)) is eligible


def test_a_fast_spine_link_gives_slotted_routes_one_up_link_of_capacity() -> None:
    topology = ccviz.load_topology("leafspine")  # 50 GB/s to the GPUs, 100 GB/s to the spines
    links = sorted(topology.links)
    capacity = dict(zip(links, slot_capacities(topology, links), strict=True))
    assert {capacity[key] for key in links} == {50.0}


# The 12-GPU dragonfly: routes cross two switches and more as on the 32-GPU one, at a tenth of the work
@pytest.mark.parametrize("spec", ["leafspine", "fattree", "star", "switch2d", "dragonfly:groups=3,routers=2,gpus=2"])
@pytest.mark.parametrize("collective", ["allgather", "reducescatter", "allreduce", "broadcast", "reduce"])
def test_slotted_schedules_verify_and_respect_the_limit(spec: str, collective: str) -> None:
    options = SynthOptions(extra={"slots": True, "trees": 2, "pieces": 2})  # 4 x 4: 3x the work, the same grid
    result = ccviz.run(ccviz.load_topology(spec), collective, "forestcoll", 64e6, options=options)
    assert result.timeline.verified, [v.message for v in result.timeline.violations[:3]]
    assert result.finish_time_s >= result.limit_s * (1 - 1e-9)
    assert "slot grid" in result.schedule.notes[1]


def test_matching_a_slot_together_beats_first_come_on_a_saturated_leaf_spine() -> None:
    """ReduceScatter saturates every GPU's links both ways; one sender at a time left ~18 % idle.
    Auto tries the grid there (first come ends over 1.03 x the limit) and keeps the faster."""
    topology = ccviz.load_topology("leafspine")
    first = ccviz.run(topology, "reducescatter", "forestcoll", 1e9, options=SynthOptions(extra={"slots": False, "pieces": 4,
                                                                                              "trees": 12}))
    auto = ccviz.run(topology, "reducescatter", "forestcoll", 1e9, options=SynthOptions(extra={"trees": 12, "pieces": 4}))
    assert auto.timeline.verified
    assert "slot grid" in auto.schedule.notes[1]
    assert auto.finish_time_s < 0.9 * first.finish_time_s
    assert auto.finish_time_s <= 1.06 * auto.limit_s


def test_kuhn_moves_a_sender_to_free_a_slot_for_another() -> None:
    """Sender A's first choice blocks B's only one; A has a second: both go."""
    a_first = ((0, 0, 1, 0, 0, [0]), [(("r1",), 0.0, 1.0)])
    a_second = ((0, 1, 2, 0, 0, [0]), [(("r2",), 0.0, 1.0)])
    b_only = ((0, 0, 3, 0, 0, [1]), [(("r1",), 0.0, 1.0)])
    matching = SlotMatching([0, 1], {0: [a_first, a_second], 1: [b_only]}, lambda key, a, b: 1)
    chosen = {item[2] for item in matching.solve()}
    assert chosen == {2, 3}


def test_parts_of_a_slot_that_do_not_overlap_both_fit() -> None:
    first_half = ((0, 0, 1, 0, 0, [0]), [(("spine",), 0.0, 0.5)])
    second_half = ((0, 0, 2, 0, 0, [1]), [(("spine",), 0.5, 1.0)])
    matching = SlotMatching([0, 1], {0: [first_half], 1: [second_half]}, lambda key, a, b: 1)
    assert len(matching.solve()) == 2


def test_slots_where_the_grid_cannot_apply_is_one_clear_line(capsys) -> None:
    with pytest.raises(CcvizError) as error:
        ccviz.run(ccviz.load_topology("a100:buffer=false"), "allgather", "forestcoll", 1e9, options=SLOTS)
    assert error.value.field == "slots"
    assert main(["synth", "dgx1", "-a", "forestcoll", "-c", "allgather", "-s", "1GB", "--opt", "slots=true"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "slots" in err and "Traceback" not in err
    assert "has no switches" in err  # DGX-1: GPU links only (its vacuous 'every switch buffers' is no reason)


def test_slots_option_is_listed(capsys) -> None:
    assert main(["list", "--json"]) == 0
    listing = json.loads(capsys.readouterr().out)
    entry = next(a for a in listing["algorithms"] if a["name"] == "forestcoll")
    assert "slots" in json.dumps(entry)


@pytest.mark.parametrize("spec", ["dgx2", "leafspine"])
def test_small_sizes_keep_first_come_booking(spec: str) -> None:
    """At 1 KB a slot would be mostly alpha: auto does not split pieces for the grid (it once asked for
    chunks under a byte on DGX-2), and slots=true falls back with a note saying why."""
    topology = ccviz.load_topology(spec)
    for options in (SynthOptions(), SLOTS):
        result = ccviz.run(topology, "allgather", "forestcoll", 1e3, options=options)
        assert result.timeline.verified
        assert "first come" in result.schedule.notes[1]
    assert "pieces too small" in result.schedule.notes[1]


def test_chunks_given_are_kept_on_the_grid() -> None:
    result = ccviz.run(ccviz.load_topology("leafspine"), "reducescatter", "forestcoll", 1e9, chunks=8,
                       options=SynthOptions(extra={"slots": True, "trees": 4}))
    assert result.timeline.verified and result.schedule.collective.chunks_per_rank == 8
    assert "slot grid" in result.schedule.notes[1]
