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
    at = AppTest.from_file(APP, default_timeout=60).run()
    at.switch_page("pages/workload.py").run()
    at.text_input(key="wl_parallel").input("tp=4,dp=4").run()
    at.button(key="wl_run_button").click().run()
    assert not at.exception
    assert any("product of the group sizes" in e.value for e in at.error)


def test_synthesize_page_runs_a_process_group():
    from ccviz.model.units import format_time
    from ccviz.runs.pipeline import run

    at = AppTest.from_file(APP, default_timeout=60).run()
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
