"""The Workload page under AppTest: two rank orders run side by side, numbers as the library gives them."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

import ccviz
from ccviz.runs.workload import run_workload

APP = str(Path(__file__).resolve().parent.parent / "app.py")


def test_workload_page_runs_two_orders_on_dgx1():
    at = AppTest.from_file(APP, default_timeout=120).run()
    at.switch_page("pages/workload.py").run()
    assert not at.exception and not at.error
    assert at.text_input(key="wl_parallel").value == "tp=4,dp=2"
    at.button(key="wl_run_button").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    shown = [m.value for m in at.metric]
    assert len(shown) == 2
    dgx1 = ccviz.load_topology("dgx1")
    for order, value in zip(("tp-dp", "dp-tp"), shown, strict=True):
        expected = run_workload(dgx1, "tp=4,dp=2", "tp:allreduce:16MB,dp:allreduce:64MB", "ring", order=order)
        assert value == f"{expected.finish_s * 1e3:.4g} ms"
    assert len(at.get("plotly_chart")) == 6  # fabric, bars and timeline per order


def test_workload_page_says_what_is_wrong_in_one_line():
    at = AppTest.from_file(APP, default_timeout=300).run()
    at.switch_page("pages/workload.py").run()
    at.text_input(key="wl_parallel").input("tp=4,dp=4").run()
    at.button(key="wl_run_button").click().run()
    assert not at.exception
    assert any("product of the group sizes" in e.value for e in at.error)


def test_synthesize_page_runs_a_process_group():
    from ccviz.model.units import format_time
    from ccviz.runs.pipeline import run

    at = AppTest.from_file(APP, default_timeout=300).run()
    at.text_input(key="syn_ranks").input("0-3").run()
    at.button(key="syn_run").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    expected = run(ccviz.load_topology("dgx1"), "allgather", "ring", 1e6, ranks="0-3")
    shown = {m.label: m.value for m in at.metric}
    assert shown["finish time"] == format_time(expected.finish_time_s)
    at.text_input(key="syn_ranks").input("0,99").run()
    at.button(key="syn_run").click().run()
    assert not at.exception
    assert any("ranks: GPU 99 is not in" in e.value for e in at.error)


def test_a_workload_link_brings_back_the_same_inputs_and_a_bad_one_says_which():
    inputs = {"parallel": "tp=2,dp=4", "run": "tp:allgather:4MB,dp:allreduce:8MB", "algorithm": "tacos",
              "synthesis": "joint", "orders": "dp-tp,random", "seed": "3"}
    at = AppTest.from_file(APP, default_timeout=300)
    at.query_params.update({"page": "workload", "topology": "dgx1", **inputs})
    at.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert at.title[0].value.startswith("Workload")
    assert (at.text_input(key="wl_parallel").value, at.text_input(key="wl_run").value) == (inputs["parallel"],
                                                                                          inputs["run"])
    assert at.selectbox(key="wl_algorithm").value == "tacos"
    assert at.selectbox(key="wl_synthesis").value == "joint"
    assert (at.selectbox(key="wl_order_a").value, at.selectbox(key="wl_order_b").value) == ("dp-tp", "random")
    assert at.number_input(key="wl_seed").value == 3
    assert {k: at.query_params[k] for k in inputs} == inputs  # the page writes back what it shows
    wrong = AppTest.from_file(APP, default_timeout=300)
    wrong.query_params.update({"page": "workload", "topology": "dgx1", **inputs, "orders": "tp-ep,dp-tp"})
    wrong.run()
    assert not wrong.exception
    assert any("orders" in e.value and "ORDER_A,ORDER_B" in e.value for e in wrong.error)
    unknown = AppTest.from_file(APP, default_timeout=300)
    unknown.query_params.update({"page": "workload", "topology": "dgx1", **inputs, "synthesis": "together"})
    unknown.run()
    assert not unknown.exception
    assert any("synthesis" in e.value and "composed, joint" in e.value for e in unknown.error)


def test_a_process_group_travels_in_synthesize_and_playback_links():
    at = AppTest.from_file(APP, default_timeout=300)
    at.query_params.update({"topology": "torus2d:dims=4x4", "collective": "allreduce", "algorithm": "ring"})
    at.run()
    at.text_input(key="syn_ranks").input("4-7").run()
    assert at.query_params["ranks"] == "4-7"
    pb = AppTest.from_file(APP, default_timeout=300)
    pb.query_params.update({"page": "playback", "topology": "torus2d:dims=4x4", "collective": "allreduce",
                            "algorithm": "ring", "size": "1MB", "ranks": "4-7"})
    pb.run()
    assert not pb.exception and not pb.error, [e.value for e in pb.error]
    assert pb.session_state["ccviz_last_run"].request.ranks == (4, 5, 6, 7)
    assert pb.query_params["ranks"] == "4-7"
    bad = AppTest.from_file(APP, default_timeout=300)
    bad.query_params.update({"topology": "torus2d:dims=4x4", "collective": "allreduce", "ranks": "3,99"})
    bad.run()
    assert not bad.exception
    assert any("ranks" in e.value and "99" in e.value for e in bad.error)
