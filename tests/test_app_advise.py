"""The designer's "Suggest upgrades" panel: the advisor's plan on screen, applied and undone, bad input named."""

from __future__ import annotations

import json

from ccviz.advise import advise, parse_mix
from ccviz.builders.loading import load_topology
from tests.test_app import assert_clean, fresh_app

MIX = "allreduce:1GB:0.6,alltoall:256MB:0.4"


def _designer():
    at = fresh_app()
    at.switch_page("pages/topology.py").run()
    assert_clean(at)
    return at


def test_suggestions_match_the_library_and_apply_and_undo():
    at = _designer()
    at.text_input(key="advise_mix").set_value(MIX).run()
    at.number_input(key="advise_budget").set_value(3000.0).run()
    at.button(key="advise_run").click().run()
    assert_clean(at)
    expected = advise(load_topology("dgx1"), parse_mix(MIX), budget=3000.0, max_steps=3)
    first = expected.candidates[expected.plan[0]]
    text = " ".join(m.value for m in at.markdown)
    assert first.label in text
    assert at.query_params["mix"] == [MIX] or at.query_params["mix"] == MIX
    before = json.loads(at.session_state["ccviz_topology"].to_json())
    at.button(key="advise_apply_1").click().run()
    assert_clean(at)
    after = at.session_state["ccviz_topology"]
    assert after.name.startswith("dgx1+1 upgrade")
    assert json.loads(after.to_json()) != before
    at.button(key="advise_undo_button").click().run()
    assert_clean(at)
    assert json.loads(at.session_state["ccviz_topology"].to_json()) == before


def test_a_bad_mix_is_one_error_and_the_entry_stays():
    at = _designer()
    at.text_input(key="advise_mix").set_value("allreduce:1GB:0.5,alltoall:1GB:0.4").run()
    at.button(key="advise_run").click().run()
    assert not at.exception
    assert any("sum to 0.9" in e.value for e in at.error)
    assert at.text_input(key="advise_mix").value == "allreduce:1GB:0.5,alltoall:1GB:0.4"


def test_a_link_carries_the_mix_and_budget():
    from streamlit.testing.v1 import AppTest

    from tests.test_app import APP, TIMEOUT

    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params.update({"page": "topology", "topology": "dgx1", "mix": MIX, "budget": "2500"})
    at.run()
    at.switch_page("pages/topology.py").run()
    assert_clean(at)
    assert at.text_input(key="advise_mix").value == MIX
    assert at.number_input(key="advise_budget").value == 2500.0
