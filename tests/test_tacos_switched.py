"""TACOS on switch boxes says it is the wrong tool and names the right one (issue 41): on ``dgxh100`` its
one-chunk-per-route greedy ended AllGather 1 GB at 4.6 x the limit (0.22 of it) with nothing said."""

from __future__ import annotations

import ccviz
from ccviz.synth.tacos import SWITCHED_NOTE_ABOVE

SIZE = 1e8


def test_tacos_on_an_nvswitch_box_names_forestcoll() -> None:
    topology = ccviz.load_topology("dgxh100:model=alphabeta")  # the hardware model adds its own note after
    result = ccviz.run(topology, "allgather", "tacos", SIZE)
    ratio = result.finish_time_s / ccviz.bandwidth_limit(topology, "allgather", SIZE).limit_s
    assert result.timeline.verified and ratio > SWITCHED_NOTE_ABOVE
    note = result.schedule.notes[-1]
    assert "-a forestcoll" in note and f"{ratio:.2f} x the limit" in note
    better = ccviz.run(topology, "allgather", "forestcoll", SIZE)
    assert better.finish_time_s <= 1.05 * ccviz.bandwidth_limit(topology, "allgather", SIZE).limit_s


def test_no_such_note_on_direct_links() -> None:
    result = ccviz.run(ccviz.load_topology("dgx1"), "allgather", "tacos", SIZE)
    assert not any("forestcoll" in note for note in result.schedule.notes)
