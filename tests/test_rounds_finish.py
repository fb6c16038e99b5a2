"""Learn's round sentences and its 'simulated finish' tell one time (issue 40, item 5: rhd on a ring of 8 read
'simulated finish 63 us' and 'its last send lands at 65 us')."""

from __future__ import annotations

import ccviz
from ccviz.model.units import format_time
from ccviz.viz.rounds import rounds


def test_the_last_round_names_the_simulated_finish_and_explains_later_hops():
    result = ccviz.run(ccviz.load_topology("ring:n=8"), "allreduce", "rhd", size_bytes=1e6)
    timeline = result.timeline
    assert timeline.last_arrival_s > timeline.finish_time_s  # relays pass GPUs that already hold the data
    last = rounds(timeline)[-1]
    finish = format_time(timeline.finish_time_s)
    assert f"every GPU holds its result, at {finish} in the simulation (its finish)" in last.sentence
    assert f"up to {format_time(timeline.last_arrival_s)}" in last.sentence
    assert "its last send lands" not in last.sentence


def test_a_round_ending_at_the_finish_keeps_its_plain_sentence():
    result = ccviz.run(ccviz.load_topology("ring:n=4"), "allgather", "ring", size_bytes=1e6)
    last = rounds(result.timeline)[-1]
    assert result.timeline.last_arrival_s == result.timeline.finish_time_s
    assert f"its last send lands at {format_time(result.timeline.finish_time_s)}" in last.sentence
