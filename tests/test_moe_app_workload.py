"""MoE AllToAllv in the app (Synthesize with the generator, Compare across skews) and in workloads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from ccviz import load_topology
from ccviz.errors import CcvizError
from ccviz.runs.moe import split_run_entries
from ccviz.runs.workload import parse_run, run_workload

APP = str(Path(__file__).resolve().parent.parent / "app.py")


def clean(at: AppTest) -> AppTest:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    return at


def test_synthesize_an_moe_dispatch_shows_the_matrix_beside_the_link_load():
    at = clean(AppTest.from_file(APP, default_timeout=120).run())
    at.selectbox(key="syn_collective").select("alltoallv").run()
    at.selectbox(key="syn_algorithm").select("mcf").run()
    at.number_input(key="syn_mx_tokens").set_value(256).run()
    at.select_slider(key="syn_mx_skew").set_value(1.5).run()
    clean(at.button(key="syn_run").click().run())
    assert {m.label: m.value for m in at.metric}["verified by simulator"] == "yes"
    charts = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    titles = [c["layout"].get("title", {}).get("text", "") for c in charts]
    assert any(t.startswith("bytes from rank to rank") for t in titles)
    assert any("limit" in m.value for m in at.markdown)
    clean(at.switch_page("pages/playback.py").run())  # the run plays back like any other


def test_compare_across_skews():
    at = clean(AppTest.from_file(APP, default_timeout=240).run())
    at.switch_page("pages/compare.py").run()
    at.number_input(key="cmp_mx_tokens").set_value(128).run()
    at.multiselect(key="cmp_mx_skews").set_value([0.0, 1.5]).run()
    clean(at.button(key="cmp_mx_go").click().run())
    table = at.dataframe[-1].value
    assert list(table["skew"]) == ["uniform", "zipf:1.5"]
    assert (table["mcf x limit"] >= 1 - 1e-9).all()


def test_run_entries_keep_an_moe_entrys_keys_together():
    assert split_run_entries("ep:moe:experts=16,topk=2,skew=zipf:1.2,dp:allreduce:16MB") == [
        "ep:moe:experts=16,topk=2,skew=zipf:1.2", "dp:allreduce:16MB"]
    steps = parse_run("ep:moe:experts=16,topk=2,dp:allreduce:16MB")
    assert [(s.kind, s.collective, s.moe) for s in steps] == [("ep", "moe", "experts=16,topk=2"),
                                                            ("dp", "allreduce", None)]
    with pytest.raises(CcvizError, match="moe: unknown key"):
        parse_run("ep:moe:experts=16,bogus=2")


def test_expert_parallel_groups_run_beside_data_parallel_ones():
    topology = load_topology("dgxh100:boxes=2")
    result = run_workload(topology, "ep=8,dp=2", "ep:moe:experts=16,topk=4,tokens=128,hidden=512,skew=zipf:1.2,"
                                                 "dp:allreduce:1MB", "direct", order="dp-ep")  # 16MB: 8x the work, same point
    assert result.timeline.verified
    moe = [g for g in result.groups if g.kind == "ep"]
    assert len(moe) == 2 and all(g.collective.name == "alltoallv" for g in moe)
    assert moe[0].collective.meta["matrix"].tolist() != moe[1].collective.meta["matrix"].tolist()  # own routing
    for g in result.groups:
        assert g.finish_together_s >= g.finish_alone_s * (1 - 1e-9)
