"""bench/limit.py's default set: its cheapest forestcoll rows (a second of CPU or less each), pinned at what they
measured on 2026-11-29 (docs/limit.md, "Third pass"), with a little room for float ties. The whole set takes
about 40 minutes; these keep a change to the packing, the bookings or the closed forms that moves them visible."""

from __future__ import annotations

import pytest

import ccviz

SIZE = 1e9
PINNED = [("leiserson", "allgather", 1.006), ("line", "allreduce", 1.000), ("fully_connected", "reducescatter", 1.000),
          ("hypercube", "allgather", 1.006), ("ring", "allreduce", 1.004), ("hgxb200", "reducescatter", 1.020),
          ("dgxa100", "allreduce", 1.004), ("mi300x", "allreduce", 1.006)]


@pytest.mark.parametrize("spec, collective, measured", PINNED)
def test_the_benchmarks_cheap_default_rows_keep_their_ratio(spec: str, collective: str, measured: float) -> None:
    topology = ccviz.load_topology(spec)
    result = ccviz.run(topology, collective, "forestcoll", SIZE)
    ratio = result.finish_time_s / ccviz.bandwidth_limit(topology, collective, SIZE).limit_s
    assert result.timeline.verified and ratio <= measured + 0.002, ratio
