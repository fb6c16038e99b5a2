"""AllReduce's limit without sums made in the switches, reported beside the fabric's limit.

On a fabric whose switches reduce (NVLS, SHARP: ``Node.reduce``) the AllReduce limit counts sums made in the
switches, which schedules summing at GPUs as ReduceScatter then AllGather (forestcoll, ring) cannot make:
``dgxh100`` forestcoll ended at 1.800 x that limit while within 1.03 x of ReduceScatter's and AllGather's.
The limit without switch sums is the fabric's limit with the adders off; ``limit_s`` stays the fabric's.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import ccviz
from ccviz import CcvizError, SynthOptions
from ccviz.bounds.limit import switch_sums_sentence
from ccviz.model.schedule import COMBINE

SIZE = 1e9


def test_without_switch_sums_is_the_limit_with_the_adders_off() -> None:
    limit = ccviz.bandwidth_limit(ccviz.load_topology("dgxh100"), "allreduce", SIZE)
    off = ccviz.bandwidth_limit(ccviz.load_topology("dgxh100:reduce=false"), "allreduce", SIZE)
    assert limit.without_switch_sums_s == pytest.approx(off.limit_s, rel=1e-12)
    assert limit.limit_s < off.limit_s  # the fabric's limit still counts the switches' sums
    assert "Without sums made in the switches" in limit.explanation()


@pytest.mark.parametrize(("spec", "collective"), [("dgxh100:reduce=false", "allreduce"), ("dgxh100", "reducescatter"),
                                                   ("dgx1", "allreduce")])
def test_no_limit_without_switch_sums_where_no_switch_sums(spec: str, collective: str) -> None:
    limit = ccviz.bandwidth_limit(ccviz.load_topology(spec), collective, SIZE)
    assert limit.without_switch_sums_s is None
    assert "limit_without_switch_sums_s" not in limit.to_dict()
    assert switch_sums_sentence(1.0, limit.without_switch_sums_s) is None


def test_forestcoll_allreduce_summing_at_gpus_is_bounded_by_it_and_says_inc() -> None:
    topology = ccviz.load_topology("railclos:boxes=4,gpus=2")
    result = ccviz.run(topology, "allreduce", "forestcoll", SIZE, options=SynthOptions(extra={"switch_sums": False}))
    summary = result.summary()
    assert result.timeline.verified
    assert not any(t.op == COMBINE for t in result.schedule.transfers)
    assert summary["limit_s"] < summary["limit_without_switch_sums_s"] <= result.finish_time_s * (1 + 1e-9)
    assert any("`-a inc`" in note for note in summary["notes"])
    assert "`-a inc` sums in the switches" in switch_sums_sentence(result.finish_time_s,
                                                                   summary["limit_without_switch_sums_s"])


def test_forestcoll_allreduce_sums_in_the_switches_and_beats_that_bound() -> None:
    """By default forestcoll books the in-switch schedule where switches reduce, and keeps it where it is faster:
    here faster than any schedule summing at GPUs can be, so no trees are packed (1.56 x the fabric's limit
    summed at GPUs on ``railclos``, 1.02 x in the switches)."""
    topology = ccviz.load_topology("railclos:boxes=4,gpus=2")
    result = ccviz.run(topology, "allreduce", "forestcoll", SIZE)
    summary = result.summary()
    assert result.timeline.verified and result.schedule.algorithm == "forestcoll"
    assert any(t.op == COMBINE for t in result.schedule.transfers)
    assert result.schedule.options["switch_sums"] is True
    assert summary["limit_s"] <= result.finish_time_s < summary["limit_without_switch_sums_s"]
    assert result.finish_time_s <= 1.05 * summary["limit_s"]
    assert any("no trees were packed" in note for note in summary["notes"])
    assert not any("does not use the switches" in note for note in summary["notes"])
    assert "this schedule sums in the switches" in switch_sums_sentence(result.finish_time_s,
                                                                        summary["limit_without_switch_sums_s"])


def test_forestcoll_reducescatter_keeps_the_faster_of_switch_sums_and_trees() -> None:
    topology = ccviz.load_topology("railclos:boxes=4,gpus=2")
    finish = {}
    for choice in (True, False, None):
        extra = {} if choice is None else {"switch_sums": choice}
        result = ccviz.run(topology, "reducescatter", "forestcoll", 1e6, options=SynthOptions(extra=extra))
        assert result.timeline.verified
        assert any(t.op == COMBINE for t in result.schedule.transfers) is (choice is True or (
            choice is None and finish[True] < finish[False]))
        finish[choice] = result.finish_time_s
    assert finish[True] != finish[False]
    assert finish[None] == min(finish[True], finish[False])


def test_forestcoll_switch_sums_asked_where_no_switch_reduces_is_refused() -> None:
    topology = ccviz.load_topology("dgx1")
    with pytest.raises(CcvizError, match="switch_sums: no switch of this fabric reduces"):
        ccviz.synthesize(topology, ccviz.make_collective("allreduce", topology, 1e6), "forestcoll",
                         SynthOptions(extra={"switch_sums": True}))


def test_cli_limit_json_and_text_report_it() -> None:
    command = [sys.executable, "-m", "ccviz.cli", "limit", "dgxh100", "-c", "allreduce", "-s", "1GB"]
    out = json.loads(subprocess.run([*command, "--json"], capture_output=True, text=True, check=True).stdout)
    assert out["limit_without_switch_sums_s"] > out["limit_s"]
    text = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    assert "no sums in switches" in text


def test_synth_json_has_the_key_null_elsewhere() -> None:
    command = [sys.executable, "-m", "ccviz.cli", "synth", "dgx1", "-c", "allreduce", "-a", "ring", "-s", "1MB", "--json"]
    out = json.loads(subprocess.run(command, capture_output=True, text=True, check=True).stdout)
    assert "limit_without_switch_sums_s" in out and out["limit_without_switch_sums_s"] is None


def test_the_app_shows_it_under_the_result() -> None:
    from pathlib import Path

    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(Path(__file__).resolve().parents[1] / "app.py"), default_timeout=300).run()
    at.switch_page("pages/topology.py").run()
    at.selectbox(key="topo_builder").select("dgxh100").run()
    at.button(key="topo_build").click().run()
    at.switch_page("pages/synthesize.py").run()
    at.selectbox(key="syn_collective").select("allreduce").run()
    at.selectbox(key="syn_algorithm").select("ring").run()
    at.button(key="syn_run").click().run()
    assert not at.exception and not at.error, [e.value for e in [*at.exception, *at.error]]
    assert any("Without sums made in the switches" in c.value for c in at.caption), [c.value for c in at.caption]
