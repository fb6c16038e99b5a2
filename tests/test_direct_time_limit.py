"""`direct` AllToAll honours a time limit and a Stop (found: two NVL72 racks planned 162 s past a 60 s limit).

Its sends are planned in several orders, the best kept: once the limit passes after the first order is complete,
that plan is the answer (cut short, and the notes say so); before, the run ends in one line naming the limit.
"""

from __future__ import annotations

import threading

import pytest

import ccviz
from ccviz.errors import CcvizError
from ccviz.model.paths import GIVE_UP_EVERY, plan_sends
from ccviz.synth.registry import SynthOptions

FABRIC = "ring:n=24"  # 552 sends: the planner looks at its limit twice in the first order


def _alltoall(topology):
    return ccviz.make_collective("alltoall", topology, 1e6)


def test_a_limit_passed_before_the_first_order_is_planned_ends_in_one_line() -> None:
    topology = ccviz.load_topology(FABRIC)
    with pytest.raises(CcvizError, match=r"time_limit: its time limit passed after 255 of 552 sends were planned"):
        ccviz.synthesize(topology, _alltoall(topology), "direct", SynthOptions(time_limit=1e-9))


def test_a_stop_before_the_first_order_is_planned_says_stop() -> None:
    topology = ccviz.load_topology(FABRIC)
    stop = threading.Event()
    stop.set()
    with pytest.raises(CcvizError, match=r"stopped: Stop was pressed after 255 of 552 sends"):
        ccviz.synthesize(topology, _alltoall(topology), "direct", SynthOptions(stop=stop))


def test_a_limit_passed_after_the_first_order_keeps_that_plan_and_says_so() -> None:
    topology = ccviz.load_topology(FABRIC)
    collective = _alltoall(topology)
    sends = [(c.id, c.source, dst) for c in collective.chunks for dst in sorted(c.post) if dst != c.source]
    looks = iter([None] * (len(sends) // GIVE_UP_EVERY) + ["time_limit"] * 100)
    plan, order, ended = plan_sends(topology, collective.chunk_bytes, sends, list(collective.ranks),
                                    lambda: next(looks))
    assert ended == "time_limit" and order == "pairwise" and len(plan) == len(sends)
    whole, _, none = plan_sends(topology, collective.chunk_bytes, sends, list(collective.ranks))
    assert none is None and len(whole) == len(sends)


def test_without_a_limit_nothing_is_cut() -> None:
    topology = ccviz.load_topology(FABRIC)
    result = ccviz.run(topology, "alltoall", "direct", 1e6, options=SynthOptions(time_limit=600))
    assert result.timeline.verified and result.schedule.cut_short is None


def test_the_schedule_cut_after_its_first_order_says_so_and_verifies(monkeypatch) -> None:
    from ccviz.synth import classic

    class FirstOrderOnly:  # the limit passes once the first order is planned in full
        def __init__(self, options) -> None:
            self.looks = 0

        def reason(self) -> str | None:
            self.looks += 1
            return "time_limit" if self.looks > 552 // GIVE_UP_EVERY else None

    monkeypatch.setattr(classic, "Budget", FirstOrderOnly)
    result = ccviz.run(ccviz.load_topology(FABRIC), "alltoall", "direct", 1e6)
    assert result.timeline.verified and result.schedule.cut_short == "time_limit"
    assert "time limit reached after planning the sends in the 'pairwise' order: other orders were not tried" \
        in result.schedule.notes
