"""forestcoll beyond its benchmark set: the tight slot grid, and 24 trees on small fabrics.

Where every route through switches crosses one switch (GPU -> switch -> GPU), slots last an up-link's
bytes' time, so a saturated crossbar's links send back to back and no slot pays alpha.
rfs3d:dims=2x4x4 is the fabric it was built for (bench/limit.py --odd): its binding cut is a slice's 8
switch -> GPU links, which must be busy from the first microsecond to the last. On the grid of an up-link's
delay (alpha + bytes) that fabric's AllGather ended at 1.093 x the limit (8 pieces per tree, alpha 10 % of
a slot); on the tight grid at 1.022 x.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

import ccviz
from ccviz.model.physics import link_costs
from ccviz.model.topology import Topology
from ccviz.synth.registry import SynthOptions
from ccviz.synth.slotted import one_switch_routes, slot_length

SIZE = 1e9
TIGHT_FACTOR = 1.04  # asserted; measured 1.022 (the grid of a delay per slot: 1.093)


@pytest.mark.parametrize(("spec", "expected"), [
    ("rfs3d:dims=2x4x4", True),  # GPU -> NVSwitch -> GPU in each slice
    ("switch2d:dims=4x4", True),
    ("dragonfly", False),  # router -> router cables
    ("fattree", False),
    ("torus2d:dims=4x4", False),  # no switches at all
])
def test_one_switch_routes_means_no_switch_to_switch_link(spec: str, expected: bool) -> None:
    assert one_switch_routes(ccviz.load_topology(spec)) is expected


def test_a_tight_slot_is_the_up_links_bytes_time_and_a_slot_its_delay() -> None:
    topology = ccviz.load_topology("rfs3d:dims=2x4x4")
    chunk = 244_140.625
    uplink = next(key for key in topology.links if topology.is_switch(key[1]))
    cost = link_costs(topology, chunk)[uplink]
    assert slot_length(topology, chunk, tight=True) == pytest.approx(cost.busy)
    assert slot_length(topology, chunk) == pytest.approx(cost.delay)
    assert cost.delay > cost.busy  # the difference is the alpha every delay slot pays


def test_rfs3d_allgather_on_the_tight_grid_is_near_the_limit() -> None:
    """The grid alone (``slots=true``), so the test measures it and not first-come booking."""
    topology = ccviz.load_topology("rfs3d:dims=2x4x4")
    limit = ccviz.bandwidth_limit(topology, "allgather", SIZE).limit_s
    result = ccviz.run(topology, "allgather", "forestcoll", SIZE, options=SynthOptions(extra={"slots": True}))
    assert result.timeline.verified, [v.message for v in result.timeline.violations[:3]]
    assert limit * (1 - 1e-9) <= result.finish_time_s <= TIGHT_FACTOR * limit, result.finish_time_s / limit
    assert any("bytes' time" in note for note in result.schedule.notes), result.schedule.notes


def _random_boxes(seed: int) -> Topology:
    """bench/limit.py's ``odd_fabric`` (bench is a folder of scripts, not a package: loaded from its file)."""
    spec = importlib.util.spec_from_file_location("bench_limit", Path(__file__).resolve().parent.parent / "bench"
                                                  / "limit.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench.odd_fabric(seed)


def test_a_small_fabric_that_8_or_12_trees_cannot_pack_gets_24() -> None:
    """odd2: shares of 1/8 or 1/12 of a shard pack its 12.5 GB/s NIC cables at 1.042 x the limit (the
    schedule ended at 1.050 x); 24 trees per root pack at 1.007 and end at 1.018 x."""
    topology = _random_boxes(2)
    limit = ccviz.bandwidth_limit(topology, "allgather", SIZE).limit_s
    result = ccviz.run(topology, "allgather", "forestcoll", SIZE)
    assert result.timeline.verified, [v.message for v in result.timeline.violations[:3]]
    assert limit * (1 - 1e-9) <= result.finish_time_s <= 1.03 * limit, result.finish_time_s / limit
    assert result.schedule.notes[0].startswith("24 tree(s) per root"), result.schedule.notes[0]
