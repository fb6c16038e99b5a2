"""Huge inputs are refused up front and failures always say something (issue 40, item 17)."""

from __future__ import annotations

import json
import resource

import pytest

from ccviz.builders.loading import load_topology
from ccviz.cli import main
from ccviz.errors import CcvizError
from ccviz.judge import replay_ns3
from ccviz.judge.replay_result import Replay
from ccviz.judge.simulate import simulate
from ccviz.model.groups import parse_ranks
from ccviz.runs.pipeline import run


def test_a_billion_ranks_are_refused_before_they_are_listed() -> None:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(CcvizError, match="more than 10,000 GPUs") as caught:
        parse_ranks("0-1000000000")
    assert caught.value.field == "ranks"
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 100_000  # KB: no 4 GB list


def test_a_replay_of_a_petabyte_is_refused_before_ns3_loads(monkeypatch) -> None:
    monkeypatch.setattr(replay_ns3, "engine_module", lambda *_: pytest.fail("ns-3 was loaded"))
    schedule = run(load_topology("ring:n=4"), "allgather", "ring", 1e15).schedule
    with pytest.raises(CcvizError, match="replay a smaller size") as caught:
        replay_ns3.replay_ns3(schedule)
    assert caught.value.field == "schedule"


def test_an_incomplete_replay_says_so_under_quiet_json(tmp_path, monkeypatch, capsys) -> None:
    result = run(load_topology("ring:n=4"), "allgather", "ring", 1e6)
    path = tmp_path / "s.json"
    from ccviz.interop.export import write_schedule

    write_schedule(result.timeline, path)
    timeline = simulate(result.schedule)

    def cut_short(schedule, *_args, **_kwargs):  # noqa: ANN001, ANN202 - the engine stopped at its time limit
        n = len(schedule.transfers)
        return Replay("ns3", timeline, None, False, 100, 40, 0, [None] * n, [None] * n, {}, {}, 1.0,
                      {"mtu": 65000}, [], "time limit")

    monkeypatch.setattr("ccviz.judge.replay.replay", cut_short)
    assert main(["replay", str(path), "--quiet", "--json"]) == 1
    out, err = capsys.readouterr()
    assert json.loads(out)["complete"] is False
    assert "incomplete: 40 of 100 bytes delivered" in err
