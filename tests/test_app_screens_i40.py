"""Screens a person reads (issue 40, items 10-12): what the pages default to and say, under AppTest."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

import ccviz
from ccviz.synth.fabric_fit import fitting, unfit_reason

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "app.py")
TIMEOUT = 300  # a script run's limit, not its expected time (a loaded machine)


def _page(**params: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params.update(params)
    at.run()
    assert not at.exception, at.exception
    return at


def test_compare_defaults_to_algorithms_that_run_on_the_fabric():
    at = _page(page="compare", topology="dgx1", collective="allreduce")
    chosen = at.multiselect(key="cmp_algorithms_allreduce").value
    assert chosen and "dimdecomp" not in chosen and "hierarchical" not in chosen and "ring" in chosen
    assert any("do not run on dgx1" in c.value and "dimdecomp" in c.value for c in at.caption)


def test_fabric_fit_names_why_an_algorithm_cannot_run():
    dgx1, torus = ccviz.load_topology("dgx1"), ccviz.load_topology("torus2d:dims=4x4")
    assert "grid" in unfit_reason(dgx1, "dimdecomp") and unfit_reason(torus, "dimdecomp") is None
    assert "tiers" in unfit_reason(dgx1, "hierarchical") and unfit_reason(dgx1, "ring") is None
    assert fitting(dgx1, ["ring", "dimdecomp", "hierarchical", "inc", "rhd"]) == ["ring", "rhd"]


def test_a_star_has_one_switch_not_one_switches():
    assert "1 switch," in ccviz.load_topology("star:n=8").summary()
    assert "0 switches" in ccviz.load_topology("ring:n=4").summary()


def test_the_finish_time_axis_labels_each_decade_with_its_own_unit():
    # a log axis in ms over 1 KB-64 MB read '100μ' (plotly's SI prefix on a number already in ms)
    from ccviz.builders import build
    from ccviz.runs.compare import compare
    from ccviz.viz.comparison import comparison_figure

    table = compare(build("ring:n=8"), "allgather", ["ring"], [1e3, 64e6])
    axis = comparison_figure(table).layout.yaxis2
    assert axis.type == "log" and "us" in " ".join(axis.ticktext) and "ms" in " ".join(axis.ticktext)
    assert all(text[0].isdigit() for text in axis.ticktext)


def test_the_explainer_table_shows_a_rows_note_and_command_in_full():
    at = _page(page="papers", paper="explainer")
    assert at.selectbox(key="papers_explainer_row").value == "Star (crossbar) DBT / RHD AR"  # the first with a note
    assert any("the reference rounds 44.49 us up to 45" in m.value for m in at.markdown)
    assert any(c.value.startswith("ccviz cost -c allreduce -a rhd") for c in at.code)


def test_playback_step_titles_are_whole_and_busy_bars_name_their_axes():
    from ccviz.viz.steps import steps_figure
    from ccviz.viz.utilization import link_busy_bars

    timeline = ccviz.run(ccviz.load_topology("ring:n=8"), "allreduce", "rhd", size_bytes=1e6).timeline
    fig = steps_figure(timeline)
    titles = [frame.layout.title.text for frame in fig.frames]
    assert not any("…" in t for t in titles)
    assert any("the half of its partial sums that the partner's side owns" in t.replace("<br>", " ") for t in titles)
    bars = link_busy_bars(timeline)
    assert bars.layout.xaxis.title.text.startswith("link") and bars.layout.yaxis.title.text.startswith("busy")


def test_why_one_wins_gives_each_algorithm_its_colour_and_names_a_covered_curve():
    from ccviz.viz.lesson import lesson_figure, lesson_table

    table = lesson_table(ccviz.load_topology("torus2d:dims=4x4"), "allreduce",
                         ["ring", "rhd", "dbt", "tree", "dimdecomp", "hierarchical", "direct", "ring-bidir"],
                         (1e3, 1e6), 1)
    shown = [d for d in lesson_figure(table).data if d.showlegend is not False]
    colors = [d.line.color for d in shown]
    assert len(set(colors)) == len(colors)  # dbt and tree shared a colour in a 7-colour cycle
    names = [d.name for d in shown]
    assert "hierarchical (= dimdecomp here)" in names, names  # it covered dimdecomp exactly


def test_a_round_says_how_many_deliveries_relays_dropped_off():
    from ccviz.viz.rounds import rounds

    timeline = ccviz.run(ccviz.load_topology("torus2d:dims=4x4"), "allgather", "bruck", size_bytes=1e6).timeline
    first = rounds(timeline)[0]
    assert "20/240 deliveries done, 4 of them at GPUs a relayed message passed through" in first.sentence


def test_pats_formula_states_its_counts_once():
    from ccviz.runs.composed_formula import lesson_formula

    topology = ccviz.load_topology("torus2d:dims=4x4")
    result = ccviz.run(topology, "allgather", "pat", size_bytes=1e6)
    used = {(t.src, t.dst) for t in result.schedule.transfers}
    text = lesson_formula(topology, result.collective, "pat", used, result.schedule.options).text
    assert text.count("M/BW (N=") == 1 and text.count("= 4 a + 0.9375 M/BW") == 1, text


def test_teaching_fabric_names_fit_the_fabric_box_and_the_rounds_frame_fits_its_content():
    from ccviz.viz.lesson import TEACHING_TOPOLOGIES
    from ccviz.viz.rounds import rounds_frame_height

    assert max(len(label) for label in TEACHING_TOPOLOGIES) <= 32  # 'NVSwitch box of 8 GPUs, th...' was cut
    small = ccviz.run(ccviz.load_topology("torus2d:dims=4x4"), "allreduce", "ring", size_bytes=1e6).timeline
    assert rounds_frame_height(small) < 560 + 18 * 16  # the old height left 150-250 px blank below the figure


def test_designer_defaults_break_a_tie_the_same_way_before_and_after_an_edit():
    from ccviz.app.tables import fabric_defaults

    dgx1 = ccviz.load_topology("dgx1")  # 16 links at 50 GB/s, 16 at 25: a blank cell gave 50, then 25
    reordered = dgx1.with_changes(links=list(reversed(list(dgx1.links.values()))))
    assert fabric_defaults(dgx1) == fabric_defaults(reordered) == (50.0, 0.7)


def test_designer_names_a_bandwidth_that_is_not_a_number():
    import pytest

    from ccviz.app.tables import editable_link_table, node_table, topology_from_tables

    topo = ccviz.load_topology("ring:n=4")
    links = editable_link_table(topo)
    assert links.loc[0, "bandwidth_GBps"] == "50"  # text cells, so the grid hands 'abc' on instead of dropping it
    assert topology_from_tables(topo, node_table(topo), links).to_json() == topo.to_json()
    links.loc[1, "bandwidth_GBps"] = "abc"
    with pytest.raises(ccviz.CcvizError, match=r"bandwidth_GBps: link row 2 has bandwidth_GBps 'abc'"):
        topology_from_tables(topo, node_table(topo), links)
    dgx1 = ccviz.load_topology("dgx1")
    links = editable_link_table(dgx1)
    row = links.index[links["bandwidth_GBps"] == "25"][0]
    links.loc[row, "bandwidth_GBps"] = " "  # blank: the fabric's default, 50 (the tie's faster side)
    src, dst = int(links.loc[row, "src"]), int(links.loc[row, "dst"])
    assert topology_from_tables(dgx1, node_table(dgx1), links).links[(src, dst)].bandwidth_GBps == 50.0


def test_designer_says_when_the_fabric_on_screen_is_not_the_builders():
    at = _page(page="topology", topology="ndv2_2chassis")  # a sample file, not a builder
    assert "replaces" in at.button(key="topo_build").label
    assert any("not a builder's" in c.value for c in at.caption)
    built = _page(page="topology", topology="torus2d:dims=3x3")
    assert built.button(key="topo_build").label == "Build torus2d:dims=3x3"


def test_the_canvas_spreads_a_32_gpu_fabric_so_its_nodes_do_not_overlap():
    import numpy as np

    from ccviz.app.canvas import NODE_GAP_PX, flow_state

    for spec in ("dragonfly", "railclos:boxes=4,gpus=8", "torus2d:dims=4x8"):
        state = flow_state(ccviz.load_topology(spec))
        points = np.array([(n.position["x"], n.position["y"]) for n in state.nodes])
        gaps = np.sqrt(((points[:, None] - points[None]) ** 2).sum(-1)) + np.eye(len(points)) * 1e9
        assert gaps.min() >= NODE_GAP_PX * 0.999, spec  # a node box is 64 px wide
        # and the whole fits the 700 x 480 frame at a readable zoom: spreading the layout uniformly until the
        # closest pair cleared drew the dragonfly 5,334 x 3,493 px, its nodes at 13 % (measured 2026-11-29)
        width, height = np.ptp(points[:, 0]) + 64, np.ptp(points[:, 1]) + 30
        assert min(700 / width, 480 / height) >= 0.5, (spec, width, height)


def test_the_canvas_of_a_fabric_with_many_cables_is_drawn_on_request():
    from ccviz.app.canvas import CANVAS_MAX_CABLES, canvas_too_big

    assert canvas_too_big(ccviz.load_topology("dragonfly")) is None
    said = canvas_too_big(ccviz.load_topology("nvl72"))  # 1,296 cables: 8.9 s to draw in Chromium
    assert said and "1296 cables" in said and str(CANVAS_MAX_CABLES) in said


def test_compare_says_faster_than_the_formula_in_one_box():
    at = _page(page="compare", topology="torus2d:dims=4x4", collective="alltoall", algorithms="direct,bruck",
               sizes="1MB-1MB")
    at.button(key="cmp_run").click()
    at.run(timeout=180)
    assert not at.exception, at.exception
    boxes = [i.value for i in at.info if "textbook formula" in i.value]
    assert len(boxes) == 1 and boxes[0].startswith("Faster than their textbook formula: **direct** at"), boxes
