"""The app's import hook: an uploaded schedule plays back and is compared at the sweep's sizes."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

from ccviz.app.imports import IMPORTS_KEY, Upload, imported_run
from ccviz.app.state import RUN_KEY
from ccviz.builders.loading import load_topology

ROOT = Path(__file__).resolve().parent.parent
RING = (ROOT / "tests" / "fixtures" / "msccl" / "allreduce_ring_8.xml").read_text()


def upload(on_current: bool = False) -> Upload:
    return Upload("allreduce_ring_8.xml", RING, on_current, 1e6, "allreduce", True)


def test_imported_run_is_a_verified_run_on_the_chosen_fabric():
    run = imported_run(upload(), None)
    assert run.result.timeline.verified and run.result.topology.name == "fully_connected8"
    assert run.request.algorithm == "msccl:allreduce_ring_1channelsperring"
    on_ring = imported_run(upload(True), load_topology("ring:n=8"))
    assert on_ring.result.topology.name == "ring8" and on_ring.result.timeline.verified


def test_playback_shows_an_imported_schedule_and_compare_replays_it():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300).run()
    at.session_state[RUN_KEY] = imported_run(upload(), None)
    at.session_state[IMPORTS_KEY] = {"allreduce_ring_8.xml": upload()}
    at.switch_page("pages/playback.py").run()
    assert not at.exception and not at.error
    assert any("msccl:allreduce_ring" in c.value for c in at.caption)
    at.switch_page("pages/compare.py").run()
    at.selectbox(key="cmp_collective").select("allreduce").run()
    at.select_slider(key="cmp_sizes").set_range(1e3, 1e6).run()
    assert not at.exception and not at.error
    table = [d.value for d in at.dataframe if "schedule" in d.value.columns][0]
    assert len(table) == 6 and set(table["schedule"]) == {"allreduce_ring_8.xml"}
    assert table["verified"].all() and set(table["fabric"]) == {"fully_connected8"}
    assert (table["finish_us"].diff().dropna() > 0).all()  # bigger buffers take longer
