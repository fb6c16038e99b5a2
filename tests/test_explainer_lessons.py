"""Learn's Explainer lessons: each opens from a link, presets a runnable lesson, and its numbers are ccviz's."""

import pytest
from streamlit.testing.v1 import AppTest

from ccviz.errors import CcvizError
from ccviz.runs.pipeline import run
from ccviz.viz.explainer_lessons import LESSONS, apply_preset, grade, lesson_rows, restore_topic
from ccviz.viz.lesson import TEACHING_TOPOLOGIES
from tests.test_app import APP, TIMEOUT, assert_clean, metrics


def test_every_lesson_runs_on_a_teaching_fabric():
    for lesson in LESSONS.values():
        assert lesson.fabric in TEACHING_TOPOLOGIES.values(), lesson.key


def test_ports_lesson_numbers_match_synth():
    from ccviz.builders.loading import load_topology

    rows = lesson_rows(LESSONS["ports"], 8)
    star = rows.iloc[0]
    s = run(load_topology("star:n=8,switch_hop=free"), "allreduce", "dbt", 16e6, 8).summary()
    assert star["simulated_s"] == s["finish_time_s"] and star["formula_s"] == s["formula_s"]
    assert star["formula_s"] >= star["limit_s"]  # priced at the star's one port: not below the limit
    assert rows.iloc[2]["simulated_s"] < star["simulated_s"]  # Case B: seven ports


def test_pipeline_lesson_formula_tracks_the_simulation():
    rows = lesson_rows(LESSONS["pipeline"], 4)
    assert list(rows["chunks"]) == [1, 2, 4, 8, 16]
    for r in rows.itertuples():
        assert r.simulated_s == pytest.approx(r.formula_s, rel=0.03)


def test_presets_and_links():
    state = {}
    restore_topic(state, "switch", exercise=True)
    assert state == {"learn_topic": "switch", "learn_exercise": True}
    apply_preset(state, "switch")
    assert state["learn_algorithm"] == "ring" and state["learn_size"] == 16e6
    with pytest.raises(CcvizError, match="topic"):
        restore_topic(state, "nope")


def test_grading():
    assert grade(600, 567e-6).verdict.startswith("Right")
    assert grade(300, 567e-6).verdict.startswith("Too low")


def test_learn_opens_a_lesson_from_its_link_and_hides_the_answer():
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params.update({"page": "learn", "topic": "switch", "lesson": "star:n=8,switch_hop=free",
                            "collective": "allreduce", "algorithm": "ring", "size": "16MB", "chunks": "1",
                            "exercise": "1"})
    at.run()
    at.switch_page("pages/learn.py").run()
    assert_clean(at)
    assert metrics(at)["simulated finish"] == "?"
    at.number_input(key="learn_guess").set_value(560.0).run()
    assert metrics(at)["simulated finish"] == "567 us"
    assert any("Right" in s.value for s in at.success)
    assert any("switch_hop=free" in c.value for c in at.caption)


def test_crossover_lesson_figure_marks_the_reference_m_star():
    from ccviz.viz.explainer_lessons import crossover_figure

    fig, c = crossover_figure("allreduce", ["ring", "dbt"], 72, 0.5, 900, 2.0)
    assert c.crossover_bytes == pytest.approx(2.07e9, rel=0.01)
    assert len(fig.data) == 2


def test_dbt_role_table_swaps_leaves_and_interiors():
    from ccviz.builders.loading import load_topology
    from ccviz.viz.explainer_lessons import dbt_roles

    roles, fig = dbt_roles(load_topology("fully_connected:n=8"), 16e6, 8)
    assert len(roles) == 8 and len(fig.data) >= 4
    for row in roles.itertuples():  # interior (forwarding) in at most one tree
        assert not (row[2].startswith("interior") and row[3].startswith("interior"))
    assert roles["receives from at once (reduce)"].max() <= 2 and roles["sends to at once (reduce)"].max() <= 2


def test_eta_lesson_measures_contention_beside_the_assumed_profile():
    from ccviz.builders.loading import load_topology
    from ccviz.viz.explainer_lessons import eta_rows

    rows = eta_rows(load_topology("torus2d:dims=4x4"), 16e6)
    assert len(rows) == 4 and set(rows["assumed η_β (torus profile)"]) == {0.6}
    assert all(0 < e <= 1 for e in rows["measured η_β"])
