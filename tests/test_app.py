"""The Streamlit app under AppTest: every page renders, and the main flows work through the widgets."""

from __future__ import annotations

import time
from pathlib import Path

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

import ccviz
from ccviz.pipeline import run
from ccviz.topology_tables import link_table, node_table, topology_from_tables
from ccviz.units import format_time

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "app.py")
PAGES = [f"pages/{name}.py" for name in ("synthesize", "topology", "playback", "compare", "learn")]
TIMEOUT = 60


def fresh_app() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT).run()
    assert_clean(at)
    return at


def assert_clean(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def other_algorithm() -> str:
    """A second available AllGather algorithm that is quick (not a MILP)."""
    names = [a for a in ccviz.algorithms_for("allgather") if a != "ring" and ccviz.REGISTRY[a].kind != "optimal"]
    if not names:
        pytest.skip("only ring is registered for allgather")
    return names[0]


def synthesize(at: AppTest, algorithm: str) -> AppTest:
    at.selectbox(key="syn_algorithm").select(algorithm).run()
    at.button(key="syn_run").click().run()
    assert_clean(at)
    return at


@pytest.mark.parametrize("page", PAGES)
def test_every_page_renders_on_defaults(page):
    at = fresh_app()
    at.switch_page(page).run()
    assert_clean(at)
    assert at.title, f"{page} shows no title"


def test_starts_on_dgx1_and_synthesizes_ring_with_animation():
    at = fresh_app()
    assert "dgx1" in at.caption[0].value
    synthesize(at, "ring")
    expected = run(ccviz.load_topology("dgx1"), "allgather", "ring", 1e6)
    shown = metrics(at)
    assert shown["finish time"] == format_time(expected.timeline.finish_time_s)
    assert shown["verified by simulator"] == "yes"
    assert shown["lower bound"] == format_time(expected.lower_bound_s)
    assert at.get("plotly_chart"), "the animation is not shown"
    assert "with **ring**" in " ".join(m.value for m in at.markdown)


def test_synthesize_with_another_algorithm_and_play_it_back():
    algorithm = other_algorithm()
    at = synthesize(fresh_app(), algorithm)
    assert metrics(at)["verified by simulator"] == "yes"
    assert f"with **{algorithm}**" in " ".join(m.value for m in at.markdown)
    at.switch_page("pages/playback.py").run()
    assert_clean(at)
    charts = {}
    for view in at.radio(key="pb_view").options:
        at.radio(key="pb_view").set_value(view).run()
        assert_clean(at)
        charts[view] = len(at.get("plotly_chart"))
    assert all(charts.values()), charts  # every view draws its figure(s)
    assert charts["Utilization"] == 2
    at.radio(key="pb_view").set_value("Step by step").run()
    at.button(key="pb_next").click().run()
    assert at.slider(key="pb_frame").value == 1
    assert any(m.value.startswith("**Frame 2/") for m in at.markdown)
    at.radio(key="pb_view").set_value("Inspect a link or node").run()
    link = next(f"link {u}->{v}" for u, v in sorted(ccviz.load_topology("dgx1").links))
    at.selectbox(key="pb_elem").select(link).run()
    assert_clean(at)
    shown = link.replace("link ", "").replace("->", "→")
    assert any(f"link {shown}" in m.value and "carries" in m.value for m in at.markdown)


def test_compare_two_algorithms_within_the_bound():
    algorithm = other_algorithm()
    at = fresh_app()
    at.switch_page("pages/compare.py").run()
    at.multiselect(key="cmp_algorithms").set_value(["ring", algorithm]).run()
    at.select_slider(key="cmp_sizes").set_range(1e3, 1e6).run()
    at.button(key="cmp_run").click().run()
    assert_clean(at)
    assert any("stay within the lower bound" in s.value for s in at.success)
    table = at.dataframe[0].value
    assert set(table["algorithm"]) == {"ring", algorithm}
    assert len(table) == 2 * 6  # 1, 4, 16, 64, 256 KB and 1 MB
    assert (table["finish_us"] >= table["bound_us"] * (1 - 1e-9)).all()


def test_topology_designer_sample_builder_and_inline_errors():
    at = fresh_app()
    at.switch_page("pages/topology.py").run()
    at.radio(key="topo_source").set_value("sample file").run()
    at.selectbox(key="topo_sample").select("ring8").run()
    at.button(key="topo_load_sample").click().run()
    assert_clean(at)
    assert at.subheader[0].value == "ring8"
    at.radio(key="topo_source").set_value("builder").run()
    at.selectbox(key="topo_builder").select("ring").run()
    at.text_input(key="topo_b_ring_n").input("x").run()
    at.button(key="topo_build").click().run()
    assert not at.exception
    assert any("cannot read n='x'" in e.value for e in at.error)
    assert at.subheader[0].value == "ring8"  # a bad build keeps the current topology
    at.text_input(key="topo_b_ring_n").input("5").run()
    at.button(key="topo_build").click().run()
    assert_clean(at)
    assert at.subheader[0].value == "ring5"
    at.switch_page("pages/synthesize.py").run()  # the topology persists across pages
    assert "ring5" in at.caption[0].value


def test_link_table_edits_round_trip_and_fail_with_the_field_named():
    topo = ccviz.load_topology("ring:n=4")
    nodes, links = node_table(topo), link_table(topo)
    links.loc[0, "bandwidth_GBps"] = 7.0
    extra = pd.DataFrame([{"src": 0, "dst": 2, "bandwidth_GBps": 10.0, "alpha_us": 1.0, "lanes": 1}])
    edited = topology_from_tables(topo, nodes, pd.concat([links, extra], ignore_index=True))
    assert edited.link(0, 2).bandwidth_GBps == 10.0
    assert edited.link(int(links.loc[0, "src"]), int(links.loc[0, "dst"])).bandwidth_GBps == 7.0
    links.loc[1, "dst"] = 99
    with pytest.raises(ccviz.CcvizError, match="unknown node 99"):
        topology_from_tables(topo, nodes, links)


def test_learn_steps_through_a_ring_with_its_formula():
    at = fresh_app()
    at.switch_page("pages/learn.py").run()
    assert_clean(at)
    shown = metrics(at)
    assert shown["simulated finish"] != "n/a" and shown["alpha-beta formula"] != "n/a"
    first = next(m.value for m in at.markdown if m.value.startswith("#### Step"))
    assert first.startswith("#### Step 1 of 3")  # ring of 4 GPUs: three steps
    at.button(key="learn_next").click().run()
    assert any(m.value.startswith("#### Step 2 of 3") for m in at.markdown)
    assert any("transfers start" in m.value for m in at.markdown)


def test_synthesis_job_reports_progress_stops_on_request_and_caches(monkeypatch):
    from ccviz.app_runs import RunRequest, SynthesisJob, cached
    from ccviz.synth.registry import REGISTRY, Algorithm, Progress

    ring = REGISTRY["ring"]

    def slow(topology, collective, options):
        """Improves an incumbent until told to stop (like a MILP), then returns ring's schedule."""
        t0 = time.perf_counter()
        k = 0
        while not options.stopped() and time.perf_counter() - t0 < 20:
            k += 1
            options.report(Progress(time.perf_counter() - t0, "searching", incumbent_s=1e-3 / k, gap=1 / k))
            time.sleep(0.01)
        return ring.synthesize(topology, collective, options)

    monkeypatch.setitem(REGISTRY, "slow-test", Algorithm("slow-test", slow, ring.collectives, "test", "optimal",
                                                         ("time_limit",)))
    topo = ccviz.load_topology("ring:n=4")
    request = RunRequest.make(topo, "allgather", "slow-test", 1e6, time_limit=5.0)
    job = SynthesisJob(request, topo)
    deadline = time.monotonic() + 10
    while len(job.progress) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not job.done and job.latest().gap is not None
    job.stop()
    assert job.wait(10)
    assert job.entry is not None and job.entry.stopped and job.entry.result.timeline.verified
    assert cached(request) is None  # a stopped solve is not remembered as the answer

    quick = RunRequest.make(topo, "allgather", "ring", 1e6)
    first = SynthesisJob(quick, topo)
    assert first.wait(10) and first.error is None
    again = SynthesisJob(quick, topo)
    assert again.done and again.entry is first.entry  # served from the cache, no new thread


def test_sweep_job_shows_solver_progress_stops_marks_the_rest_and_caches_finished_rows(monkeypatch):
    from ccviz.app_runs import SweepJob, SweepRequest, cached_row
    from ccviz.synth.registry import REGISTRY, Algorithm, Progress

    ring = REGISTRY["ring"]

    def slow(topology, collective, options):
        """Searches until told to stop, then returns ring's schedule (as a stopped solver returns its best)."""
        t0 = time.perf_counter()
        while not options.stopped() and time.perf_counter() - t0 < 20:
            options.report(Progress(time.perf_counter() - t0, "searching", fraction=0.5))
            time.sleep(0.01)
        return ring.synthesize(topology, collective, options)

    monkeypatch.setitem(REGISTRY, "slow-test", Algorithm("slow-test", slow, ring.collectives, "test", "optimal",
                                                         ("time_limit", "stop")))
    topo = ccviz.load_topology("ring:n=4")
    request = SweepRequest(topo.to_json(), "allgather", ("ring", "slow-test"), (1e3, 1e6), time_limit=30.0)
    # in-process: the test's algorithm is registered in this process only
    job = SweepJob(request, topo, engine="in-process")
    deadline = time.monotonic() + 30
    while job.progress is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not job.done and job.current == ("slow-test", 1e3) and job.progress.message == "searching"
    assert "slow-test at 1KB: searching" in job.status_line()
    job.stop()
    assert job.wait(20) and job.error is None and job.stopped
    table = job.table()
    assert list(table["algorithm"]) == ["ring", "slow-test", "ring", "slow-test"]
    assert table["verified"].iloc[0]
    assert (table["status"].iloc[1:] == "skipped").all()  # the stopped solve is not a result; the rest never ran
    assert table["error"].iloc[1:].str.contains("stopped after 1 of 4 runs").all()
    assert cached_row(request.row_key(1e3, "ring")) is job.rows[0]
    assert cached_row(request.row_key(1e3, "slow-test")) is None  # a stopped run is not the answer

    quick = SweepRequest(topo.to_json(), "allgather", ("ring",), (1e3, 1e6), time_limit=30.0)
    again = SweepJob(quick, topo, engine="in-process")
    assert again.wait(30) and not again.stopped
    assert again.rows[0] is job.rows[0] and again.table()["verified"].all()


def test_an_algorithm_refusing_the_topology_shows_its_fix_on_the_page():
    at = fresh_app()
    at.switch_page("pages/topology.py").run()
    at.selectbox(key="topo_builder").select("ring").run()
    at.text_input(key="topo_b_ring_n").input("5").run()
    at.button(key="topo_build").click().run()
    at.switch_page("pages/synthesize.py").run()
    if "rhd" not in ccviz.algorithms_for("allgather"):
        pytest.skip("rhd is not registered")
    at.selectbox(key="syn_algorithm").select("rhd").run()
    at.button(key="syn_run").click().run()
    assert not at.exception
    assert any("power-of-two" in e.value for e in at.error), [e.value for e in at.error]
    assert not at.metric  # no stale result from another topology
