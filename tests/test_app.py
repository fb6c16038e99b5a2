"""The Streamlit app under AppTest: every page renders, and the main flows work through the widgets."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

import ccviz
from ccviz.app.tables import link_table, node_table, topology_from_tables
from ccviz.model.units import format_size, format_time
from ccviz.runs.pipeline import run

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "app.py")
PAGES = [f"pages/{name}.py" for name in ("synthesize", "topology", "playback", "compare", "learn", "papers")]
TIMEOUT = 300  # a script run's limit, not its expected time: generous, so a loaded machine does not fail a test


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
    # the bound shown is the tighter of the lower bound and the fabric's limit (DGX-1 has no switches)
    assert shown["bound"] == format_time(max(expected.lower_bound_s, expected.limit_s))
    assert at.get("plotly_chart"), "the animation is not shown"
    assert "with **ring**" in " ".join(m.value for m in at.markdown)
    # the wall time says what it counts (a first run's worker start read as an 18 s "server time" for 6 ms)
    assert "waiting for a worker process" in " ".join(m.value for m in at.markdown)


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
    steps = figure_spec(at, 0)
    assert steps["layout"]["sliders"][0]["active"] == 0  # a new schedule opens at its first frame
    assert "▶ Play" in [b["label"] for b in steps["layout"]["updatemenus"][0]["buttons"]]
    at.radio(key="pb_view").set_value("Inspect a link or node").run()
    link = next(f"link {u}->{v}" for u, v in sorted(ccviz.load_topology("dgx1").links))
    at.selectbox(key="pb_elem").select(link).run()
    assert_clean(at)
    shown = link.replace("link ", "").replace("->", "→")
    assert any(f"link {shown}" in m.value and "carries" in m.value for m in at.markdown)


def figure_spec(at: AppTest, index: int) -> dict:
    """The plotly figure of the page's ``index``-th chart, as the browser gets it."""
    import json

    return json.loads(at.get("plotly_chart")[index].proto.spec)


def last_schedule(at: AppTest) -> ccviz.Schedule:
    return at.session_state["ccviz_last_run"].result.schedule


def test_the_options_expander_draws_each_algorithms_own_options_and_the_run_uses_them():
    at = fresh_app()
    at.selectbox(key="syn_algorithm").select("teccl").run()
    assert at.selectbox(key="syn_opt_teccl_replay").options == ["asap", "epoch"]
    assert at.number_input(key="syn_opt_teccl_max_variables").value == 250_000
    at.selectbox(key="syn_algorithm").select("teccl-astar").run()
    assert at.checkbox(key="syn_opt_teccl-astar_astar_greedy").value is True
    at.selectbox(key="syn_algorithm").select("tacos").run()
    assert at.selectbox(key="syn_opt_tacos_pick").value == "spread"
    at.selectbox(key="syn_opt_tacos_pick").select("random").run()
    synthesize(at, "tacos")
    schedule = last_schedule(at)
    assert schedule.algorithm == "tacos" and schedule.options["pick"] == "random"
    assert metrics(at)["verified by simulator"] == "yes"
    at.selectbox(key="syn_algorithm").select("forestcoll").run()
    assert at.selectbox(key="syn_opt_forestcoll_switch_queue").options == ["auto", "true", "false"]
    at.number_input(key="syn_opt_forestcoll_trees").set_value(2).run()
    synthesize(at, "forestcoll")
    assert last_schedule(at).options["trees"] == 2
    at.number_input(key="syn_opt_forestcoll_trees").set_value(0).run()  # back to automatic: the default's run
    synthesize(at, "forestcoll")
    assert "trees" not in dict(at.session_state["ccviz_last_run"].request.options)
    assert last_schedule(at).options["trees"] != 2


def test_bandwidths_on_the_page_are_never_in_e_notation():
    from ccviz.app.ui import _gbps

    assert (_gbps(1730.4), _gbps(876.2), _gbps(15.93), _gbps(None)) == ("1,730 GB/s", "876 GB/s", "15.9 GB/s", "n/a")


def test_compare_two_algorithms_within_the_bound():
    algorithm = other_algorithm()
    at = fresh_app()
    at.switch_page("pages/compare.py").run()
    at.multiselect(key="cmp_algorithms_allgather").set_value(["ring", algorithm]).run()
    at.select_slider(key="cmp_sizes").set_range(1e3, 1e6).run()
    at.button(key="cmp_run").click().run()
    assert_clean(at)
    assert any("stay within the bound" in s.value for s in at.success)
    table = at.dataframe[0].value
    assert set(table["algorithm"]) == {"ring", algorithm}
    assert len(table) == 2 * 6  # 1, 4, 16, 64, 256 KB and 1 MB
    assert (table["finish_us"] >= table["bound_us"] * (1 - 1e-9)).all()
    # the bound shown is the tighter of the lower bound and the fabric's limit (DGX-1: no switches)
    assert (table["bound_us"] >= table["limit_us"] * (1 - 1e-9)).all()
    # every number's header says what it is and its unit ("limit_pct" was read as a share of time)
    config = json.loads(at.dataframe[0].proto.columns)
    numbers = [c for c in table.columns if c not in ("algorithm", "size", "verified", "status", "error")]
    assert all(config.get(c, {}).get("help") for c in numbers), {c: config.get(c) for c in numbers}
    assert "share of the limit's speed" in config["limit_pct"]["help"]


def test_compare_forestcoll_beside_ring_stays_within_each_runs_bound():
    # the walkthrough's researcher saw "2 result(s) beat the lower bound, which is impossible: <ArrowStringArray>"
    at = fresh_app()
    at.switch_page("pages/compare.py").run()
    at.multiselect(key="cmp_algorithms_allgather").set_value(["ring", "forestcoll"]).run()
    at.select_slider(key="cmp_sizes").set_range(4e6, 4e6).run()
    at.button(key="cmp_run").click().run()
    assert_clean(at)
    assert any("stay within the bound" in s.value for s in at.success)
    table = at.dataframe[0].value
    assert (table["finish_us"] >= table["bound_us"] * (1 - 1e-9)).all()


def test_a_bad_dask_scheduler_is_named_by_its_box_and_not_called_a_stop():
    at = fresh_app()
    at.switch_page("pages/compare.py").run()
    at.multiselect(key="cmp_algorithms_allgather").set_value(["ring"]).run()
    at.text_input(key="cmp_scheduler").input("foo:bar").run()
    at.button(key="cmp_run").click().run()
    assert not at.exception
    errors = [e.value for e in at.error]
    assert any("Dask scheduler (Compare)" in e and "tcp://HOST:8786" in e for e in errors), errors
    assert not any("--scheduler" in e for e in errors)
    assert not any("Sweep stopped" in i.value for i in at.info)
    assert at.text_input(key="cmp_scheduler").value == "foo:bar"  # what the user typed stays to be fixed


def test_workload_errors_name_the_pages_boxes_not_the_cli_flags():
    # the fabric designer typed a collective for a kind the parallelism does not have and read "--parallel"
    at = fresh_app()
    at.switch_page("pages/workload.py").run()
    at.text_input(key="wl_run").input("tp:allreduce:16MB,pp:allreduce:1MB").run()
    at.button(key="wl_run_button").click().run()
    assert not at.exception
    errors = [e.value for e in at.error]
    assert any("the parallelism box has no pp" in e for e in errors), errors
    assert not any("--" in e for e in errors)
    at.text_input(key="wl_run").input("tp:allreduce:16MB").run()
    at.text_input(key="wl_parallel").input("tp=4,dp=3").run()
    at.button(key="wl_run_button").click().run()
    errors = [e.value for e in at.error]
    assert any(e.startswith("workload: parallelism (product = GPUs): ") for e in errors), errors
    assert at.text_input(key="wl_parallel").value == "tp=4,dp=3"  # what was typed stays to be fixed


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
    at.run()  # any later rerun (a component, a widget) keeps the error on screen
    assert any("cannot read n='x'" in e.value for e in at.error)
    at.text_input(key="topo_b_ring_n").input("5").run()
    at.button(key="topo_build").click().run()
    assert_clean(at)
    assert at.subheader[0].value == "ring5"
    at.switch_page("pages/synthesize.py").run()  # the topology persists across pages
    assert "ring5" in at.caption[0].value


def test_apply_edits_with_nothing_changed_keeps_the_named_fabric_and_its_short_link():
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params.update({"page": "topology", "topology": "torus2d:dims=3x3"})
    at.run()
    at.button(key="topo_apply").click().run()
    assert_clean(at)
    assert at.query_params["topology"] == "torus2d:dims=3x3" and "fabric" not in at.query_params
    assert not any("table edit" in c.value for c in at.caption)


def test_the_designer_starts_on_the_builder_of_the_fabric_on_screen():
    """A link to a fat tree opened the designer with "dgx1" in the builder picker, so "Build" would have
    thrown the fat tree away; the picker and its values now start from the fabric on screen."""
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params.update({"topology": "torus2d:dims=3x5"})
    at.run()
    at.switch_page("pages/topology.py").run()
    assert_clean(at)
    assert at.selectbox(key="topo_builder").value == "torus2d"
    assert at.text_input(key="topo_b_torus2d_dims").value == "3x5"
    at.button(key="topo_build").click().run()
    assert_clean(at)
    assert at.subheader[0].value == "torus2d_3x5"


def test_switch_hop_control_changes_the_current_topology():
    at = fresh_app()
    at.switch_page("pages/topology.py").run()
    at.radio(key="topo_source").set_value("builder").run()
    at.selectbox(key="topo_builder").select("star").run()
    at.button(key="topo_build").click().run()
    at.selectbox(key="topo_switch_hop_paid").select("teccl").run()
    assert_clean(at)
    assert at.session_state["ccviz_topology"].switch_hop == "teccl"
    assert at.selectbox(key="topo_switch_hop_teccl").value == "teccl"


def test_papers_page_reproduces_a_published_row_and_opens_it_in_playback():
    at = fresh_app()
    at.switch_page("pages/papers.py").run()
    at.text_input(key="papers_filter").input("NDv2 Slow 1GB").run()
    at.button(key="papers_run").click().run()
    assert_clean(at)
    table = at.dataframe[0].value
    assert list(table["instance"]) == ["NDv2 Slow 1GB"]
    assert table["verdict"][0] == "equal" and table["ccviz ep"][0] == "10"
    assert any("1 equal" in s.value for s in at.success)
    at.button(key="papers_open").click().run()
    assert_clean(at)
    assert at.title[0].value == "Playback"
    assert "ndv2_2chassis_teccl_as_run" in at.caption[0].value


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


def test_learn_shows_the_rounds_of_a_ring_with_its_formula():
    at = fresh_app()
    at.switch_page("pages/learn.py").run()
    assert_clean(at)
    shown = metrics(at)
    assert shown["simulated finish"] != "n/a" and shown["alpha-beta formula"] != "n/a"
    assert any(c.value.startswith("14 rounds") for c in at.caption)  # ring AllReduce on 8 GPUs: 2(N-1)


def test_learns_nvls_table_says_why_dbt_takes_twice_its_formula():
    # the lecturer's table showed DBT at 971 us beside a 486 us formula with no word on why
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.switch_page("pages/learn.py").run()
    assert_clean(at)
    said = [m.value for m in at.markdown if m.value.startswith("**Why ")]
    dbt = [m for m in said if m.startswith("**Why dbt differs from its formula:**")]
    assert dbt and "cross a switch" in dbt[0] and "slower than the formula" in dbt[0]
    assert not any(m.startswith("**Why inc") for m in said)  # INC's closed form is what the judge measures


def test_synthesis_job_reports_progress_stops_on_request_and_caches(monkeypatch):
    from ccviz.app.runs import RunRequest, SynthesisJob, cached
    from ccviz.synth.registry import REGISTRY, Algorithm, Progress

    ring = REGISTRY["ring"]

    def slow(topology, collective, options):
        """Improves an incumbent until told to stop (like a MILP), then returns ring's schedule."""
        t0 = time.perf_counter()
        k = 0
        while not options.stopped() and time.perf_counter() - t0 < 120:
            k += 1
            options.report(Progress(time.perf_counter() - t0, "searching", incumbent_s=1e-3 / k, gap=1 / k))
            time.sleep(0.01)
        return ring.synthesize(topology, collective, options)

    monkeypatch.setitem(REGISTRY, "slow-test", Algorithm("slow-test", slow, ring.collectives, "test", "optimal",
                                                         ("time_limit",)))
    topo = ccviz.load_topology("ring:n=4")
    request = RunRequest.make(topo, "allgather", "slow-test", 1e6, time_limit=5.0)
    job = SynthesisJob(request, topo)
    deadline = time.monotonic() + 120  # generous: waits end when their event comes (a loaded machine)
    while len(job.progress) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not job.done and job.latest().gap is not None
    job.stop()
    assert job.wait(120)
    assert job.entry is not None and job.entry.stopped and job.entry.result.timeline.verified
    assert cached(request) is None  # a stopped solve is not remembered as the answer

    quick = RunRequest.make(topo, "allgather", "ring", 1e6)
    first = SynthesisJob(quick, topo)
    assert first.wait(120) and first.error is None
    again = SynthesisJob(quick, topo)
    assert again.done and again.entry is first.entry  # served from the cache, no new thread


def test_sweep_job_shows_solver_progress_stops_marks_the_rest_and_caches_finished_rows(monkeypatch):
    from ccviz.app.runs import SweepJob, SweepRequest, cached_row
    from ccviz.synth.registry import REGISTRY, Algorithm, Progress

    ring = REGISTRY["ring"]

    def slow(topology, collective, options):
        """Searches until told to stop, then returns ring's schedule (as a stopped solver returns its best)."""
        t0 = time.perf_counter()
        while not options.stopped() and time.perf_counter() - t0 < 120:
            options.report(Progress(time.perf_counter() - t0, "searching", fraction=0.5))
            time.sleep(0.01)
        return ring.synthesize(topology, collective, options)

    monkeypatch.setitem(REGISTRY, "slow-test", Algorithm("slow-test", slow, ring.collectives, "test", "optimal",
                                                         ("time_limit", "stop")))
    topo = ccviz.load_topology("ring:n=4")
    request = SweepRequest(topo.to_json(), "allgather", ("ring", "slow-test"), (1e3, 1e6), time_limit=30.0)
    # in-process: the test's algorithm is registered in this process only
    job = SweepJob(request, topo, engine="in-process")
    deadline = time.monotonic() + 120
    while job.progress is None and time.monotonic() < deadline:
        time.sleep(0.01)
    # Dask chooses the order of the rows; the slow solver is running at one of the two sizes
    assert not job.done and job.current[0] == "slow-test" and job.progress.message == "searching"
    assert f"slow-test at {format_size(job.current[1])}: searching" in job.status_line()
    # rows that arrived before Stop are results to keep; one landing in the instant of the stop may not be
    before_stop = [row for row in list(job.rows) if row.get("status") != "skipped"]
    job.stop()
    assert job.wait(120) and job.error is None and job.stopped
    table = job.table()
    assert list(table["algorithm"]) == ["ring", "slow-test", "ring", "slow-test"]
    ran = table[table["status"] != "skipped"]
    assert (ran["algorithm"] == "ring").all() and ran["verified"].all()  # zero, one or both ring rows
    skipped = table[table["status"] == "skipped"]  # the stopped solve is not a result; the rest never ran
    assert (table.loc[table["algorithm"] == "slow-test", "status"] == "skipped").all()
    assert skipped["error"].str.contains(f"stopped after {len(ran)} of 4 runs").all()
    finished = {float(row["size_bytes"]): row for row in before_stop}
    for size, row in finished.items():
        assert cached_row(request.row_key(size, "ring")) is row
    assert cached_row(request.row_key(1e3, "slow-test")) is None  # a stopped run is not the answer

    quick = SweepRequest(topo.to_json(), "allgather", ("ring",), (1e3, 1e6), time_limit=30.0)
    again = SweepJob(quick, topo, engine="in-process")
    assert again.wait(120) and not again.stopped
    assert all(any(r is row for r in again.rows) for row in finished.values()) and again.table()["verified"].all()


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


def test_results_show_the_share_of_the_fabric_limit_and_the_designer_draws_the_cut():
    at = fresh_app()
    synthesize(at, "ring")
    expected = run(ccviz.load_topology("dgx1"), "allgather", "ring", 1e6)
    ratio = expected.timeline.finish_time_s / expected.limit_s
    assert any(f"finish = {ratio:.3f} x the fabric's limit" in m.value
               and f"{expected.limit_fraction:.1%} of the limit's speed" in m.value for m in at.markdown)
    at.switch_page("pages/topology.py").run()
    assert_clean(at)
    assert any("everything but GPU 0 must reach GPU 0 over its 4 links, 150 GB/s in all" in c.value
               for c in at.caption)
    at.selectbox(key="topo_cut_of").select("broadcast").run()
    assert_clean(at)
    assert any("smallest flow out of the root" in c.value for c in at.caption)


@pytest.mark.parametrize("page", ["synthesize", "playback"])
def test_an_alltoall_run_says_how_far_it_is_from_the_limit_how_the_limit_was_found_and_which_links_bind(page):
    # a lecturer on AllToAll: the page said "95.2% of the fabric's limit" (of what? the time?) and named
    # neither the maximum concurrent flow LP nor a binding link
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params.update({"page": page, "topology": "torus2d:dims=4x4", "collective": "alltoall",
                            "algorithm": "direct", "size": "1MB"})
    at.run()
    if page == "synthesize":
        at.button(key="syn_run").click().run()
    assert_clean(at)
    expected = run(ccviz.load_topology("torus2d:dims=4x4"), "alltoall", "direct", 1e6)
    ratio = expected.timeline.finish_time_s / expected.limit_s
    assert ratio > 1.01  # direct is off the limit here: the words below must say by how much
    assert any(f"finish = {ratio:.3f} x the fabric's limit" in m.value and "of the limit's speed" in m.value
               for m in at.markdown), [m.value for m in at.markdown]
    how = [c.value for c in at.caption if "maximum concurrent flow LP" in c.value]
    assert how and "0->12" in how[0] and "bind in the flow LP" in how[0], [c.value for c in at.caption]


def test_mcf_refusing_a_process_group_names_the_pages_box_not_the_cli_flag():
    # the page said "drop --ranks or use direct / mteg"; its box is "process group (optional)"
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params.update({"topology": "torus2d:dims=4x4", "collective": "alltoall", "algorithm": "mcf",
                            "size": "1MB"})
    at.run()
    at.text_input(key="syn_ranks").input("0-7").run()
    at.button(key="syn_run").click().run()
    assert not at.exception
    errors = [e.value for e in at.error]
    assert any("empty the process group box" in e for e in errors) and not any("--" in e for e in errors), errors


def test_the_designer_first_draws_the_cut_of_the_collective_the_verdict_sent_the_user_for():
    # the verdict says "the Topology designer draws the bottleneck cut"; the designer drew AllGather's
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params.update({"topology": "torus2d:dims=4x4", "collective": "alltoall", "algorithm": "direct",
                            "size": "1MB"})
    at.run()
    at.button(key="syn_run").click().run()
    assert any("the Topology designer draws the bottleneck cut" in m.value for m in at.markdown)
    at.switch_page("pages/topology.py").run()
    assert_clean(at)
    assert at.selectbox(key="topo_cut_of").value == "alltoall"
    assert any("maximum concurrent flow LP" in c.value for c in at.caption), [c.value for c in at.caption]


def test_the_compare_csv_measures_its_ratios_against_the_bound_the_page_shows():
    # a researcher's export said bound_ratio 5.08 where the page's table said 2.77: the file's ratio was
    # against the lower bound alone, the page's against the tighter fabric's limit
    from ccviz.app.ui import comparison_export, tighter_bounds
    from ccviz.runs.compare import compare

    topology = ccviz.load_topology("dragonfly:groups=3,routers=2,gpus=2")
    table = compare(topology, "allreduce", ["ring"], [1e9])
    assert (table["limit_s"] > table["lower_bound_s"] * 1.5).all()  # the fabric's limit is the tighter bound
    export = comparison_export(table, topology)
    shown = tighter_bounds(table, topology)
    assert export["bound_s"].tolist() == pytest.approx(table["limit_s"].tolist())
    assert export["bound_ratio"].tolist() == pytest.approx((table["finish_time_s"] / shown).tolist())
    assert export["bound_algbw_GBps"].tolist() == pytest.approx((1e9 / shown / 1e9).tolist())
    assert list(export.columns).index("bound_s") == list(export.columns).index("lower_bound_s") + 1


def test_link_table_has_one_row_per_cable_and_blank_values_take_the_fabric_defaults():
    topo = ccviz.load_topology("ring:n=4,bw=25,alpha=0.7")
    nodes, links = node_table(topo), link_table(topo)
    assert len(links) == len(topo.links) // 2 and set(links["direction"]) == {"both"}
    links.loc[0, "bandwidth_GBps"] = 7.0  # one edit: both directions of that cable change
    u, v = int(links.loc[0, "src"]), int(links.loc[0, "dst"])
    edited = topology_from_tables(topo, nodes, links)
    assert edited.link(u, v).bandwidth_GBps == edited.link(v, u).bandwidth_GBps == 7.0
    per_direction = link_table(edited, per_direction=True)
    assert len(per_direction) == len(edited.links) and set(per_direction["direction"]) == {"one way"}
    new = pd.DataFrame([{"src": 0, "dst": 2}])  # a new cable with blank bandwidth and alpha
    grown = topology_from_tables(topo, nodes, pd.concat([link_table(topo), new], ignore_index=True))
    assert (grown.link(0, 2).bandwidth_GBps, grown.link(2, 0).alpha_us) == (25.0, 0.7)
    shown = link_table(edited.with_changes(links=[*edited.links.values()][1:]))  # one direction removed
    assert "one way" in set(shown["direction"])
    for bad in (0.0, -3.0):
        zero = link_table(topo)
        zero.loc[0, "bandwidth_GBps"] = bad
        with pytest.raises(ccviz.CcvizError, match="bandwidth_GBps: link row 1"):
            topology_from_tables(topo, nodes, zero)


def test_progress_text_is_in_words_and_never_shows_a_negative_gap():
    from ccviz.synth.registry import Progress

    assert "gap" not in Progress(1.0, "TE-CCL: solving", gap=-1.0).text()
    assert Progress(1.0, "x", incumbent_s=2e-6, gap=0.25).text() == "x, best finish so far 2 us, gap 25.0%"


def test_a_link_with_query_parameters_restores_topology_collective_algorithm_size_and_chunks():
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params.update({"topology": "torus2d:dims=3x3", "collective": "alltoall", "algorithm": "direct",
                            "size": "4MB", "chunks": "2"})
    at.run()
    assert_clean(at)
    assert "torus2d" in at.caption[0].value
    assert at.selectbox(key="syn_collective").value == "alltoall"
    assert at.selectbox(key="syn_algorithm").value == "direct"
    assert at.select_slider(key="syn_size").value == 4e6
    assert at.number_input(key="syn_chunks").value == 2
    at.selectbox(key="syn_algorithm").select("ring").run()  # the page writes its state back
    assert at.query_params["algorithm"] == "ring" and at.query_params["topology"] == "torus2d:dims=3x3"


def test_a_bad_link_says_what_is_wrong_and_applies_the_rest():
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params.update({"topology": "ring:n=5", "collective": "nosuch"})
    at.run()
    assert not at.exception
    assert any("collective" in e.value and "nosuch" in e.value for e in at.error)
    assert "ring" in " ".join(c.value for c in at.caption)


def test_settings_survive_leaving_a_page_and_coming_back():
    at = fresh_app()
    at.selectbox(key="syn_collective").select("allreduce").run()
    at.selectbox(key="syn_algorithm").select("rhd").run()
    at.switch_page("pages/learn.py").run()
    at.selectbox(key="learn_topology").select("4x4 torus").run()
    at.selectbox(key="learn_algorithm").select("rhd").run()
    at.switch_page("pages/topology.py").run()
    at.radio(key="topo_source").set_value("sample file").run()
    for page in ("pages/compare.py", "pages/synthesize.py"):
        at.switch_page(page).run()
    assert_clean(at)
    assert (at.selectbox(key="syn_collective").value, at.selectbox(key="syn_algorithm").value) == ("allreduce", "rhd")
    at.switch_page("pages/learn.py").run()
    assert (at.selectbox(key="learn_topology").value, at.selectbox(key="learn_algorithm").value) == ("4x4 torus",
                                                                                                    "rhd")
    at.switch_page("pages/topology.py").run()
    assert at.radio(key="topo_source").value == "sample file"


def test_a_link_carries_an_edited_fabric_and_opens_it_elsewhere():
    from ccviz.app.url import FABRIC_URL_CHARS, decode_fabric, encode_fabric

    at = fresh_app()
    at.switch_page("pages/topology.py").run()
    at.selectbox(key="topo_switch_hop_paid").select("free").run()  # an edit: the fabric has no name any more
    assert_clean(at)
    edited = at.session_state["ccviz_topology"]
    assert edited.switch_hop == "free"
    fabric = at.query_params["fabric"]
    assert "topology" not in at.query_params and len(fabric) <= FABRIC_URL_CHARS
    assert decode_fabric(fabric).to_json() == edited.to_json() == decode_fabric(encode_fabric(edited)).to_json()
    assert any("edited fabric included" in c.value for c in at.caption)
    other = AppTest.from_file(APP, default_timeout=TIMEOUT)
    other.query_params.update({"page": "synthesize", "fabric": fabric})
    other.run()
    assert_clean(other)
    assert other.session_state["ccviz_topology"].to_json() == edited.to_json()
    broken = AppTest.from_file(APP, default_timeout=TIMEOUT)
    broken.query_params.update({"fabric": fabric[: len(fabric) // 2]})
    broken.run()
    assert not broken.exception
    assert any("fabric" in e.value and "damaged" in e.value for e in broken.error)


def test_learn_and_compare_links_restore_what_they_show():
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params.update({"page": "learn", "lesson": "torus2d:dims=4x4", "collective": "allgather",
                            "algorithm": "bruck", "chunks": "2"})
    at.run()
    assert_clean(at)
    assert at.selectbox(key="learn_topology").value == "4x4 torus"
    assert (at.selectbox(key="learn_algorithm").value, at.select_slider(key="learn_chunks").value) == ("bruck", 2)
    assert (at.query_params["lesson"], at.query_params["algorithm"]) == ("torus2d:dims=4x4", "bruck")
    cmp = AppTest.from_file(APP, default_timeout=TIMEOUT)
    cmp.query_params.update({"page": "compare", "topology": "ring:n=8", "collective": "allreduce",
                             "algorithms": "ring,rhd", "sizes": "1KB-1MB"})
    cmp.run()
    assert_clean(cmp)
    assert cmp.multiselect(key="cmp_algorithms_allreduce").value == ["ring", "rhd"]
    assert cmp.query_params["sizes"] == "1KB-1MB"


def test_a_papers_link_opens_the_paper_it_showed():
    # the lecturer shared the explainer's worked tables and the link opened TE-CCL's table instead
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params.update({"page": "papers", "paper": "explainer"})
    at.run()
    assert_clean(at)
    assert at.radio(key="papers_paper").value.startswith("Collectives Explainer")
    assert at.query_params["paper"] == "explainer"
    at.radio(key="papers_paper").set_value("TE-CCL (SIGCOMM 2024)").run()
    assert at.query_params["paper"] == "teccl"
    wrong = AppTest.from_file(APP, default_timeout=TIMEOUT)
    wrong.query_params.update({"page": "papers", "paper": "nccl"})
    wrong.run()
    assert not wrong.exception
    assert any("paper" in e.value and "explainer" in e.value for e in wrong.error)


def test_a_sendrecv_link_keeps_its_destination_on_synthesize_and_playback():
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params.update({"topology": "ring:n=8", "collective": "sendrecv", "algorithm": "direct", "root": "2",
                            "dest": "5"})
    at.run()
    assert_clean(at)
    assert (at.selectbox(key="syn_root").value, at.selectbox(key="syn_dest").value) == (2, 5)
    assert at.query_params["dest"] == "5"
    pb = AppTest.from_file(APP, default_timeout=TIMEOUT)
    pb.query_params.update({"page": "playback", "topology": "ring:n=8", "collective": "sendrecv", "algorithm": "direct",
                            "root": "2", "dest": "5"})
    pb.run()
    assert_clean(pb)
    assert pb.session_state["ccviz_last_run"].request.dest == 5 and pb.query_params["dest"] == "5"
    bad = AppTest.from_file(APP, default_timeout=TIMEOUT)
    bad.query_params.update({"topology": "ring:n=8", "collective": "sendrecv", "root": "2", "dest": "2"})
    bad.run()
    assert not bad.exception
    assert any("dest" in e.value and "destination box" in e.value for e in bad.error)


def test_a_playback_link_remakes_its_run_in_a_dozen_steps_with_play():
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params.update({"page": "playback", "topology": "ring:n=8", "collective": "allreduce",
                            "algorithm": "rhd", "size": "1MB"})
    at.run()
    assert_clean(at)
    assert at.title[0].value == "Playback"
    steps = figure_spec(at, 0)
    assert 1 < len(steps["frames"]) <= 12 + 1  # the start, then one frame per round (2 log2 8 = 6)
    assert "▶ Play" in [b["label"] for b in steps["layout"]["updatemenus"][0]["buttons"]]
    assert at.query_params["algorithm"] == "rhd" and at.query_params["page"] == "playback"


def test_a_run_at_the_pages_default_options_is_shared_as_a_link_that_remakes_it():
    # Playback said "a link cannot remake this run (... solver options)" for a plain forestcoll run: the page's
    # own default time limit counted as a user's option
    at = fresh_app()
    at.selectbox(key="syn_algorithm").select("forestcoll").run()
    at.button(key="syn_run").click().run()
    assert_clean(at)
    made = at.session_state["ccviz_last_run"].request
    at.switch_page("pages/playback.py").run()
    assert_clean(at)
    assert not any("cannot remake" in c.value for c in at.caption)
    assert at.query_params["algorithm"] == "forestcoll"
    link = AppTest.from_file(APP, default_timeout=TIMEOUT)
    link.query_params.update(dict(at.query_params))
    link.run()
    assert_clean(link)
    assert link.session_state["ccviz_last_run"].request == made  # the same run, its time limit included
    at.switch_page("pages/synthesize.py").run()
    at.number_input(key="syn_opt_time_limit").set_value(7.0).run()
    at.button(key="syn_run").click().run()
    at.switch_page("pages/playback.py").run()
    assert any("cannot remake" in c.value for c in at.caption)  # a changed option is not in the link: it says so


def test_a_failing_msccl_export_says_why_and_offers_no_file():
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params.update({"topology": "ring:n=8", "collective": "broadcast", "algorithm": "ring"})
    at.run()
    at.selectbox(key="syn_root").select(1).run()  # MSCCL programs are rooted at GPU 0
    at.button(key="syn_run").click().run()
    assert not at.exception and not at.error
    assert any("No MSCCL XML for this schedule" in w.value and "rooted at GPU 0" in w.value for w in at.warning)
    labels = [b.proto.label for b in at.get("download_button")]
    assert "Schedule JSON" in labels and "MSCCL XML" not in labels
    at.query_params.update({"collective": "allreduce", "algorithm": "rhd"})  # relays partial sums: exported
    at.selectbox(key="syn_collective").select("allreduce").run()
    at.selectbox(key="syn_algorithm").select("rhd").run()
    at.button(key="syn_run").click().run()
    assert "MSCCL XML" in [b.proto.label for b in at.get("download_button")]


def test_the_bound_shown_is_the_tighter_one_and_astar_never_claims_optimal():
    from ccviz.app.ui import tightest_bound

    ring = ccviz.load_topology("ring:n=4")
    assert tightest_bound(12e-6, 17.5e-6, ring)[0] == 17.5e-6
    assert tightest_bound(12e-6, None, ring)[0] == 12e-6
    star = ccviz.load_topology("star:n=4").with_changes(switch_hop="free")  # the limit does not bound here
    assert tightest_bound(12e-6, 17.5e-6, star)[0] == 12e-6
    result = run(ring, "allgather", "teccl-astar", 1e6)
    assert result.schedule.status != "optimal"


def test_designer_refuses_nonpositive_and_non_numbers_keeping_the_topology():
    topo = ccviz.load_topology("ring:n=4")
    nodes = node_table(topo)
    for column, bad in (("bandwidth_GBps", -5.0), ("bandwidth_GBps", 0.0), ("bandwidth_GBps", "nan"),
                        ("bandwidth_GBps", float("inf")), ("alpha_us", -1.0), ("alpha_us", "nan"), ("lanes", 0)):
        links = link_table(topo).astype({column: object})
        links.loc[0, column] = bad
        with pytest.raises(ccviz.CcvizError, match=f"{column.split('_')[0]}.*link row 1"):
            topology_from_tables(topo, nodes, links)


def test_app_messages_name_widgets_and_the_fastest_imported_point_is_the_fastest():
    from ccviz.app.imports import fastest_point
    from ccviz.app.state import for_app

    assert "--" not in for_app("choose a topology (--topology) to run it; or --opt trees=1")
    rows = pd.DataFrame({"schedule": ["a", "a", "b"], "size": ["1KB", "1GB", "1GB"], "finish_us": [2.0, 9e4, 8e4],
                         "algbw_GBps": [0.5, 11.1, 12.5]})
    assert fastest_point(rows)["schedule"] == "b"


def test_a_link_carries_the_root_of_a_rooted_collective():
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params.update({"topology": "ring:n=8", "collective": "broadcast", "algorithm": "ring", "root": "3"})
    at.run()
    assert_clean(at)
    assert at.selectbox(key="syn_root").value == 3 and at.query_params["root"] == "3"
    at.selectbox(key="syn_collective").select("allgather").run()  # no root: the parameter goes
    assert "root" not in at.query_params


def test_a_process_group_run_is_shared_by_its_link_and_the_link_remakes_the_same_run():
    # the lecturer's ring over one row of a 4x4 torus: the link left the group out, so the recipient's
    # Playback remade a ring over all 16 GPUs
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params.update({"topology": "torus2d:dims=4x4", "collective": "allreduce", "algorithm": "ring"})
    at.run()
    at.text_input(key="syn_ranks").input("0-3").run()
    assert at.query_params["ranks"] == "0-3"  # the Synthesize page's own link
    at.button(key="syn_run").click().run()
    assert_clean(at)
    made = at.session_state["ccviz_last_run"].request
    assert made.ranks == (0, 1, 2, 3)
    at.switch_page("pages/playback.py").run()
    assert_clean(at)
    assert at.query_params["ranks"] == "0-3" and not any("cannot remake" in c.value for c in at.caption)
    link = AppTest.from_file(APP, default_timeout=TIMEOUT)
    link.query_params.update(dict(at.query_params))
    link.run()
    assert_clean(link)
    assert link.session_state["ccviz_last_run"].request == made  # the same run: the group included
    assert link.session_state["syn_ranks"] == "0-3"  # and Synthesize opens with the group in its box
    bad = AppTest.from_file(APP, default_timeout=TIMEOUT)
    bad.query_params.update({"topology": "torus2d:dims=4x4", "ranks": "0-3,99"})
    bad.run()
    assert not bad.exception
    assert any("ranks" in e.value and "99" in e.value for e in bad.error), [e.value for e in bad.error]


def test_playback_says_how_the_schedule_was_made_beside_how_far_it_is_from_the_limit():
    # a lecturer playing back a forestcoll run read how far it was from the limit, but not what forestcoll built
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params.update({"page": "playback", "topology": "torus2d:dims=3x3", "collective": "reducescatter",
                            "algorithm": "forestcoll", "size": "1MB"})
    at.run()
    assert_clean(at)
    notes = last_schedule(at).notes
    assert notes, "forestcoll's schedule carries no notes to show"
    captions = [c.value for c in at.caption]
    assert all(note in captions for note in notes), (notes, captions)
    assert any("x the fabric's limit" in m.value for m in at.markdown)


def test_a_builder_asked_for_too_many_gpus_names_the_box_and_keeps_what_was_entered():
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params.update({"page": "topology", "topology": "dragonfly:groups=4,routers=2,gpus=6"})
    at.run()
    at.text_input(key="topo_b_dragonfly_gpus").set_value("10000").run()
    at.button(key="topo_build").click().run()
    assert not at.exception
    assert len(at.error) == 1 and "gpus:" in at.error[0].value and "make gpus smaller" in at.error[0].value, \
        [e.value for e in at.error]
    assert at.text_input(key="topo_b_dragonfly_gpus").value == "10000"  # what was typed stays to be fixed
    assert at.subheader[0].value == "dragonfly_4x2x6"  # the fabric on screen is kept


def test_learns_bound_on_an_alltoall_is_the_flow_limit_and_its_help_calls_it_no_cut():
    # a lecturer on AllToAll: the bound's help called the maximum concurrent flow LP's limit a "bottleneck cut"
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params.update({"page": "learn", "lesson": "torus2d:dims=4x4", "collective": "alltoall",
                            "algorithm": "direct", "size": "1GB"})
    at.run()
    assert_clean(at)
    limit = ccviz.bandwidth_limit(ccviz.load_topology("torus2d:dims=4x4"), "alltoall", 1e9)
    bound = next(m for m in at.metric if m.label == "bound")
    assert bound.value == format_time(limit.limit_s)  # what `ccviz limit ... -c alltoall -s 1GB` says
    assert "bandwidth only, alpha ignored" in bound.proto.help and "bottleneck cut" not in bound.proto.help, \
        bound.proto.help
