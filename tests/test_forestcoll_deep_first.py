"""forestcoll tries deep trees first wherever pipelining by chunk index ends up to 1.25 x the limit.

On a rail-optimized Clos (``railclos``) the ReduceScatter's mirror ended at 1.180 x the limit by chunk index:
the deep trees' last pieces reached the rail leaves late and, with no switch copying in a mirror, the NIC
links stayed about 81 % busy. Deep trees first ends at 1.004 x; it was tried only below 1.1 x.
"""

from __future__ import annotations

import ccviz
from ccviz.synth import forestcoll

SIZE = 1e9
TREES_ONLY = ccviz.SynthOptions(extra={"switch_sums": False})  # its rail leaves reduce: the trees alone


def test_railclos_reducescatter_comes_within_five_percent() -> None:
    topology = ccviz.load_topology("railclos:boxes=4,gpus=2")  # 1.213 x before, 1.004 x deep first
    result = ccviz.run(topology, "reducescatter", "forestcoll", SIZE, options=TREES_ONLY)
    assert result.timeline.verified
    assert result.finish_time_s <= 1.05 * ccviz.bandwidth_limit(topology, "reducescatter", SIZE).limit_s


def test_deep_first_is_not_tried_beyond_its_window(monkeypatch) -> None:
    # the window's upper end still holds: far over the limit crossbar conflicts, not the order, hold it back
    monkeypatch.setattr(forestcoll.tuning, "DEEP_FIRST_BELOW", 1.1)
    topology = ccviz.load_topology("railclos:boxes=4,gpus=2")
    result = ccviz.run(topology, "reducescatter", "forestcoll", SIZE, options=TREES_ONLY)
    assert result.finish_time_s > 1.1 * ccviz.bandwidth_limit(topology, "reducescatter", SIZE).limit_s
