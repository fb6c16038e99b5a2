"""`ccviz replay --engine ns3`: schedules replayed packet by packet on the real ns-3, beside the alpha-beta judge.

One module-scoped fixture pays ns-3's import (about 20 s) once; the cases are small (the large sizes and
the 64-GPU run are measured by bench/replay.py).
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

import ccviz
from ccviz.cli import main
from ccviz.errors import CcvizError
from ccviz.interop.importers import import_schedule
from ccviz.judge import replay_ns3
from ccviz.judge.replay import replay
from ccviz.model.collectives import make_collective
from ccviz.model.schedule import Schedule, Transfer

FIXTURES = Path(__file__).parent / "fixtures"
REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def ns3():
    if not replay_ns3.available():
        pytest.skip("the ns-3 Python bindings are not installed (pip install -e \".[ns3]\")")
    return replay_ns3.engine_module()


def chain_schedule(hops: int, size_bytes: float) -> Schedule:
    """A broadcast down a line of GPUs, one store-and-forward hop after another."""
    topology = ccviz.load_topology(f"line:n={hops + 1}")
    collective = make_collective("broadcast", topology, size_bytes, root=0)
    transfers = [Transfer(0, k, k + 1, step=k) for k in range(hops)]
    return Schedule(topology, collective, transfers, "chain")


@pytest.mark.parametrize("hops", [1, 3])
@pytest.mark.parametrize("size", [1e3, 1e6, 1e9])
def test_link_and_chain_match_alpha_beta_within_one_percent(ns3, hops, size):
    result = replay(chain_schedule(hops, size))
    assert result.complete and result.bytes_lost == 0
    assert result.bytes_delivered == result.bytes_expected == round(size) * hops
    assert abs(result.ratio - 1) < 0.01, result.summary()
    # every hop starts when the previous one has fully landed (store and forward at GPUs)
    for k in range(1, hops):
        assert result.start_s[k] == pytest.approx(result.end_s[k - 1], rel=1e-9)


def test_ring_allgather_on_ring8_within_two_percent(ns3):
    run = ccviz.run(ccviz.load_topology("ring:n=8"), "allgather", "ring", size_bytes=1e6)
    result = replay(run.timeline.schedule)
    assert result.complete
    assert abs(result.ratio - 1) < 0.02
    assert result.judge_finish_time_s == pytest.approx(run.timeline.finish_time_s)
    assert len(result.link_utilization()) == 16


def test_msccl_ring_on_dgx1_at_64mb_delivers_every_byte(ns3):
    schedule = import_schedule(FIXTURES / "msccl" / "allgather_ring_8.xml",
                               str(FIXTURES / "dgx1_ring_order.json"), 64e6)
    result = replay(schedule)
    assert result.complete and result.bytes_lost == 0
    assert result.bytes_delivered == 56 * 8_000_000
    assert result.ratio is not None and 0.9 < result.ratio < 1.1
    edges, series = result.utilization_over_time(bins=10)
    assert len(edges) == 11 and series["replay"] and series["judge"]
    assert max(max(v) for v in series["replay"].values()) > 0.9  # the ring's links run flat out


def test_copy_switch_multicasts(ns3):
    """MTEG on a fat tree sends one arrival on several out-links of a copy switch: ns-3 forwards every frame
    on each as it arrives; frames of converging trees queue at switch ports instead of waiting at their
    source, as the judge's bufferless switches make them, so the replay finishes earlier."""
    run = ccviz.run(ccviz.load_topology("fattree:k=4"), "allgather", "mteg", size_bytes=1e6)
    result = replay(run.timeline.schedule)
    assert result.complete
    assert any("multicast" in note for note in result.notes)
    assert result.ratio < 0.9


def test_bufferless_switches_cut_through_frame_by_frame(ns3):
    """A chunk of many frames crosses a bufferless switch in about one serialization (the judge's 'paid'
    rule charges two, 'teccl' one)."""
    topology = ccviz.load_topology("star:n=2")
    collective = make_collective("broadcast", topology, 64e6, root=0)
    switch = next(n for n in topology.nodes if topology.nodes[n].is_switch)
    schedule = Schedule(topology, collective, [Transfer(0, 0, switch, step=0), Transfer(0, switch, 1, step=1)],
                        "through a switch")
    result = replay(schedule)
    assert result.complete and 0.49 < result.ratio < 0.52
    cut = replay(Schedule(topology.with_changes(switch_hop="teccl"), collective, schedule.transfers, "teccl"))
    assert abs(cut.ratio - 1) < 0.01


def test_converging_flows_lose_frames_in_a_tiny_switch_queue_and_say_so(ns3):
    run = ccviz.run(ccviz.load_topology("star:n=3"), "gather", "direct", size_bytes=3e6, root=0)
    lossy = replay(run.timeline.schedule, switch_queue_frames=1)
    assert not lossy.complete and lossy.bytes_lost > 0 and lossy.finish_time_s is None and lossy.ratio is None
    assert any("DATA LOST" in note for note in lossy.notes)
    deep = replay(run.timeline.schedule)  # the default queue holds them: both flows share the port
    assert deep.complete and deep.ratio < 1


def test_stop_cuts_a_long_replay_short(ns3):
    run = ccviz.run(ccviz.load_topology("ring:n=8"), "allgather", "ring", size_bytes=4e9)
    stop = threading.Event()
    stop.set()
    reports = []
    result = replay(run.timeline.schedule, stop=stop, progress=reports.append)
    assert result.stopped == "stop" and not result.complete and result.finish_time_s is None
    assert 0 < result.bytes_delivered < result.bytes_expected
    assert any(p.fraction is not None for p in reports)
    limited = replay(run.timeline.schedule, time_limit_s=0.01)
    assert limited.stopped == "time limit" and not limited.complete
    assert any("time limit" in note for note in limited.notes)


def test_bad_settings_name_the_field(ns3):
    schedule = chain_schedule(1, 1e3)
    with pytest.raises(CcvizError, match="mtu"):
        replay(schedule, mtu=70000)
    with pytest.raises(CcvizError, match="switch_queue_frames"):
        replay(schedule, switch_queue_frames=0)
    with pytest.raises(CcvizError, match="engine"):
        replay(schedule, engine="omnet")


def test_cli_replay_json(ns3, tmp_path, capsys):
    path = tmp_path / "chain.json"
    chain_schedule(2, 1e6).save(path)
    assert main(["replay", str(path), "--json", "--quiet", "--mtu", "9000"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["settings"]["mtu"] == 9000 and out["complete"]
    assert abs(out["ratio"] - 1) < 0.01 and out["judge_finish_time_s"] > 0
    assert {(r["src"], r["dst"]) for r in out["link_utilization"]} >= {(0, 1), (1, 2)}
    assert len(out["transfer_times"]) == 2


def test_cli_without_ns3_says_how_to_install(tmp_path, capsys, monkeypatch):
    path = tmp_path / "chain.json"
    chain_schedule(1, 1e3).save(path)
    monkeypatch.setattr(replay_ns3, "available", lambda: False)
    monkeypatch.setattr(replay_ns3, "_loaded", {})
    assert main(["replay", str(path), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "pip install" in err[0] and "ns3" in err[0]


def test_only_the_replay_module_imports_ns3():
    importers = [p.relative_to(REPO).as_posix() for p in (REPO / "ccviz").rglob("*.py")
                 if "from ns import" in p.read_text() or "import ns\n" in p.read_text()]
    assert importers == ["ccviz/judge/replay_ns3.py"]


def test_app_replays_a_result_beside_the_judge(ns3):
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=120).run()
    at.selectbox(key="syn_algorithm").select("ring").run()
    at.button(key="syn_run").click().run()
    at.button(key="replay_run").click().run()
    assert not at.exception and not at.error, [e.value for e in [*at.exception, *at.error]]
    shown = {m.label: m.value for m in at.metric}
    assert shown["bytes delivered"] == "100.0%"
    assert abs(float(shown["ns-3 / α-β"]) - 1) < 0.01
    assert len(at.get("plotly_chart")) >= 3  # the animation and the two timelines
    assert at.dataframe, "the links that differ most are not listed"
