"""Real-browser smoke test: the app starts, synthesizes DGX-1 AllGather, and its animation plays.

Drives Debian's chromium through Playwright (never a downloaded browser).
Screenshots land in the test's temporary folder.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_healthy(url: str, proc: subprocess.Popen, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"streamlit exited early with code {proc.returncode}")
        try:
            with urllib.request.urlopen(url + "/_stcore/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    raise TimeoutError("streamlit did not become healthy in time")


@contextlib.contextmanager
def streamlit_server(log_dir: Path):
    """`streamlit run app.py` headless on a free port of 127.0.0.1; its URL once healthy, stopped on the way out."""
    port = _free_port()
    log = (log_dir / "server.log").open("w")  # a pipe nobody reads could block
    cmd = [sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"), "--server.headless", "true",
           "--browser.gatherUsageStats", "false", "--server.address", "127.0.0.1", "--server.port", str(port)]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(url, proc)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


@pytest.fixture(scope="module")
def app_url(tmp_path_factory):
    with streamlit_server(tmp_path_factory.mktemp("streamlit")) as url:
        yield url


needs_chromium = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"Debian chromium not installed at "
                                    f"{CHROMIUM} (apt-get install chromium); CI installs it")


@contextlib.contextmanager
def browser_page(height: int = 1000, timeout_ms: int = 45_000):
    """A page in Debian's chromium (Playwright, never a downloaded browser); closed on the way out."""
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": height})
        page.set_default_timeout(timeout_ms)
        try:
            yield page
        finally:
            browser.close()


@needs_chromium
def test_synthesize_and_play_animation(app_url, tmp_path):
    with browser_page() as page:
        page.goto(app_url)
        page.get_by_role("heading", name="Synthesize a schedule").wait_for()
        assert "dgx1" in page.get_by_text("Topology dgx1", exact=False).first.inner_text()
        page.screenshot(path=str(tmp_path / "1_start.png"), full_page=True)

        page.get_by_role("button", name="Synthesize", exact=True).click()
        page.get_by_text("finish time").first.wait_for()
        current = page.locator(".js-plotly-plot .slider-label").filter(has_text="step").first
        current.wait_for()
        page.wait_for_timeout(500)
        before = current.text_content()
        page.screenshot(path=str(tmp_path / "2_synthesized.png"), full_page=True)

        page.locator(".js-plotly-plot g.updatemenu-button").filter(has_text="Play").first.click()
        deadline = time.monotonic() + 20
        while current.text_content() == before and time.monotonic() < deadline:
            page.wait_for_timeout(200)
        after = current.text_content()
        page.screenshot(path=str(tmp_path / "3_playing.png"), full_page=True)

        with page.expect_download() as download:
            page.get_by_role("button", name="Animation HTML").click()
        saved = tmp_path / "animation.html"
        download.value.save_as(saved)
    html = saved.read_text()
    assert "plotly.js" in html and '"traces"' in html  # self-contained: plotly.js and the animation frames
    assert before.startswith("step")
    assert after != before, f"the steps did not advance (slider still at {before!r})"


@needs_chromium
def test_learn_steps_rhd_rounds_with_the_arrow_keys(app_url, tmp_path):
    with browser_page(height=1200, timeout_ms=60_000) as page:
        page.goto(app_url + "/learn")
        page.get_by_role("heading", name="Learn: how collective algorithms move data").wait_for()
        assert page.get_by_role("combobox", name="fabric").input_value() == "ring of 8 GPUs"  # the default
        assert page.get_by_role("combobox", name="collective").input_value() == "allreduce"
        page.get_by_role("combobox", name="algorithm").click()
        page.get_by_role("option", name="rhd", exact=True).click()
        page.get_by_text("Recursive halving-doubling (Rabenseifner)").wait_for()
        frame = page.frame_locator("iframe").first
        title = frame.locator("#title")
        title.filter(has_text="Before round 1 (of 6)").wait_for()
        page.screenshot(path=str(tmp_path / "learn_0.png"), full_page=True)
        page.locator("h1").first.click()  # focus the page, not the figure: the page's arrows drive it
        seen = []
        for step in range(1, 7):
            t0 = time.perf_counter()
            page.keyboard.press("ArrowRight")
            title.filter(has_text=f"Round {step} of 6").wait_for()
            seen.append(title.inner_text())
            print(f"arrow {step}: {(time.perf_counter() - t0) * 1e3:.1f} ms round trip -> {seen[-1]!r}")
        sentence = frame.locator("#sentence").inner_text()
        page.screenshot(path=str(tmp_path / "learn_6.png"), full_page=True)
    assert seen[-1] == "Round 6 of 6 — finished"
    assert "Finished" in sentence and "every GPU holds its result" in sentence


def _main(page):
    """The page's own content (Streamlit's header has a Stop button of its own while a script runs)."""
    return page.locator("[data-testid=stMain]")


@needs_chromium
def test_a_link_restores_the_view_and_the_app_stays_offline(app_url, tmp_path):
    outside: list[str] = []
    with browser_page() as page:
        page.on("request", lambda r: outside.append(r.url) if not r.url.startswith((app_url, "data:", "blob:"))
                else None)
        page.goto(f"{app_url}/?topology=torus2d:dims%3D3x3&collective=alltoall&algorithm=direct&size=4MB")
        page.get_by_role("heading", name="Synthesize a schedule").wait_for()
        _main(page).get_by_text("Topology torus2d", exact=False).first.wait_for()
        page.wait_for_timeout(1500)
        selects = _main(page).locator("[data-testid=stSelectbox] input")
        assert [selects.nth(0).input_value(), selects.nth(1).input_value()] == ["alltoall", "direct"]
        assert "4MB" in _main(page).locator("[data-testid=stSlider]").first.inner_text()
        assert page.get_by_role("button", name="Deploy").count() == 0
        page.screenshot(path=str(tmp_path / "link.png"), full_page=True)
    assert not outside, f"the app fetched from outside: {outside[:5]}"


@needs_chromium
def test_stop_during_a_long_teccl_solve_shows_the_stopped_early_result(app_url, tmp_path):
    with browser_page() as page:
        # TE-CCL's MILP for a 5x5 torus AllGather in 2 chunks per rank runs to its time limit (tens of seconds)
        page.goto(f"{app_url}/?topology=torus2d:dims%3D5x5&collective=allgather&algorithm=teccl&size=4MB&chunks=2")
        _main(page).get_by_text("Topology torus2d_5x5", exact=False).first.wait_for()
        _main(page).get_by_role("button", name="Synthesize", exact=True).click()
        stop = _main(page).get_by_role("button", name="Stop", exact=True)
        stop.wait_for()
        # press Stop once the solver has offered a verified schedule (the status line says so): Stop then
        # ends the worker and that schedule is the answer (how fast is measured by bench/class.py)
        _main(page).get_by_text("Stop now keeps a verified schedule").first.wait_for(timeout=120_000)
        assert stop.is_visible(), "the solve ended before Stop could be pressed"
        stop.click()
        _main(page).get_by_text("Stopped early").first.wait_for(timeout=30_000)
        # the stopped-early result's metrics draw just after its status line (a moment later under load)
        _main(page).get_by_text("finish time").first.wait_for(timeout=10_000)
        page.screenshot(path=str(tmp_path / "stopped.png"), full_page=True)
        assert _main(page).get_by_role("button", name="Synthesize", exact=True).is_enabled()


@needs_chromium
def test_a_malformed_upload_keeps_its_error_on_screen(app_url, tmp_path):
    bad = tmp_path / "broken.json"
    bad.write_text('{"nodes": [1, 2,')
    with browser_page() as page:
        page.goto(f"{app_url}/topology")
        page.get_by_role("heading", name="Topology designer").wait_for()
        _main(page).get_by_text("upload", exact=True).click()
        _main(page).locator("input[type=file]").set_input_files(str(bad))
        _main(page).get_by_role("button", name="Use broken.json").click()
        _main(page).get_by_text("is not valid JSON").first.wait_for()
        page.wait_for_timeout(3000)
        page.screenshot(path=str(tmp_path / "upload_error.png"), full_page=True)
        assert _main(page).get_by_text("is not valid JSON").first.is_visible()


@needs_chromium
def test_the_sidebar_opens_synthesize_right_after_load_sample_on_the_designer(app_url, tmp_path):
    """Clicking the sidebar's Synthesize just after "Load dgx1" left the user on the designer in 2 of 8 tries
    (the canvas reported its state after the switch; Load's st.rerun raced it). Repeated at four gaps."""
    with browser_page() as page:
        sidebar = page.locator("[data-testid=stSidebar]")
        for k, gap_ms in enumerate((0, 50, 100, 150)):
            page.goto(f"{app_url}/topology")
            page.get_by_role("heading", name="Topology designer").wait_for()
            _main(page).get_by_text("sample file", exact=True).click()
            load = _main(page).get_by_role("button", name="Load dgx1", exact=True)
            load.wait_for()
            _idle(page)
            load.click()
            page.wait_for_timeout(gap_ms)
            sidebar.get_by_text("Synthesize", exact=True).click()
            try:
                page.get_by_role("heading", name="Synthesize a schedule").wait_for(timeout=20_000)
            except Exception:
                page.screenshot(path=str(tmp_path / f"stayed_{k}.png"), full_page=True)
                raise AssertionError(f"try {k} ({gap_ms} ms after Load): still on {page.url}") from None


def _expect():
    return pytest.importorskip("playwright.sync_api")


def _idle(page) -> None:
    """Wait until the app's script has finished its run (Streamlit marks it on the app's root)."""
    page.locator("[data-testid=stApp][data-test-script-state=notRunning]").wait_for()


def _edit_cell(page, grid, column: int, row: int, text: str) -> None:
    """Type ``text`` into a cell of a data editor, waiting on the grid's own state (never on the clock).

    The grid draws on a canvas but keeps an accessible table of its cells (``glide-cell-COL-ROW`` with
    ``aria-selected``): each step waits until that table shows the step's effect. A rerun that redraws
    the grid mid-edit loses the edit, so the edit is made again until the table shows the value.
    """
    sync_api = _expect()
    cell = grid.locator(f"[data-testid=glide-cell-{column}-{row}]")
    for _ in range(5):
        _idle(page)
        grid.locator("[data-testid=glide-cell-1-0]").wait_for(state="attached")
        box = grid.locator("canvas").first.bounding_box()
        page.mouse.click(box["x"] + 40, box["y"] + 52 + 35 * row)  # first column of the row
        grid.locator(f"[data-testid=glide-cell-1-{row}][aria-selected=true]").wait_for(state="attached")
        for col in range(2, column + 1):
            page.keyboard.press("ArrowRight")
            grid.locator(f"[data-testid=glide-cell-{col}-{row}][aria-selected=true]").wait_for(state="attached")
        page.keyboard.type(text, delay=40)  # typing on a selected cell opens its editor with the text
        page.keyboard.press("Enter")
        try:
            sync_api.expect(cell).to_have_text(text)  # committed: the grid shows the new value
            return
        except AssertionError:
            page.keyboard.press("Escape")  # an editor left open by a lost keystroke would take the next try's keys
            continue
    sync_api.expect(cell).to_have_text(text)


@needs_chromium
def test_one_edit_of_a_cable_changes_both_directions(app_url, tmp_path):
    with browser_page() as page:
        page.goto(f"{app_url}/topology?topology=ring:n%3D4")
        _main(page).get_by_role("heading", name="ring4").wait_for()
        links = _main(page).locator("[data-testid=stDataFrame]").nth(1)  # nodes first, then cables
        links.scroll_into_view_if_needed()
        _edit_cell(page, links, column=4, row=0, text="7")  # the first cable's GB/s
        _main(page).get_by_role("button", name="Apply edits").click()
        _main(page).get_by_text("7 GB/s links").first.wait_for()  # the figure redrawn from the edited fabric
        with page.expect_download() as download:
            _main(page).get_by_role("button", name="Save topology JSON").click()
        saved = tmp_path / "edited.json"
        download.value.save_as(saved)
        page.screenshot(path=str(tmp_path / "cable_edit.png"), full_page=True)
    data = json.loads(saved.read_text())
    bandwidth = {(lk["src"], lk["dst"]): lk["bandwidth_GBps"] for lk in data["links"]}
    changed = sorted(k for k, bw in bandwidth.items() if bw == 7)
    assert changed == [(0, 1), (1, 0)], bandwidth  # the first cable, both directions, in one edit


@needs_chromium
def test_a_negative_bandwidth_is_refused_on_screen_and_the_edit_is_kept(app_url, tmp_path):
    with browser_page() as page:
        page.goto(f"{app_url}/topology?topology=ring:n%3D4")
        _main(page).get_by_role("heading", name="ring4").wait_for()
        links = _main(page).locator("[data-testid=stDataFrame]").nth(1)
        links.scroll_into_view_if_needed()
        _edit_cell(page, links, column=4, row=1, text="-5")  # the grid once dropped the sign and applied 5
        _main(page).get_by_role("button", name="Apply edits").click()
        error = _main(page).get_by_text("link row 2 has bandwidth -5")
        error.first.wait_for()
        page.screenshot(path=str(tmp_path / "negative.png"), full_page=True)
        kept = links.locator("[data-testid=glide-cell-4-1]").text_content().strip()
    assert kept == "-5"  # the user's edit stays in the table to fix


@needs_chromium
def test_playback_of_rhd_on_a_ring_plays_its_rounds_in_the_browser(app_url, tmp_path):
    with browser_page() as page:
        page.goto(f"{app_url}/playback?topology=ring:n%3D8&collective=allreduce&algorithm=rhd&size=1MB")
        plot = _main(page).locator(".js-plotly-plot").first
        label = plot.locator(".slider-label").first
        label.wait_for()
        before = label.text_content()
        plot.locator("g.updatemenu-button").filter(has_text="Play").first.click()
        _expect().expect(label).not_to_have_text(before)  # the steps advance in the browser
        page.screenshot(path=str(tmp_path / "playback_steps.png"), full_page=True)
        shown = page.evaluate("() => document.querySelector('.js-plotly-plot')._transitionData._frames.length")
    assert before == "step start" and 2 <= shown <= 12 + 1, (before, shown)  # the start + at most 12 steps


@needs_chromium
def test_a_fresh_servers_first_visit_by_a_shared_link_gets_the_apps_sidebar(tmp_path):
    """A server whose first visitor follows a link to a page (not the start page) shows the app's page titles,
    not the files of pages/ ('app', 'compare', ...), opens the linked page and applies the link."""
    with streamlit_server(tmp_path) as url, browser_page() as page:
        page.goto(f"{url}/compare?topology=ring:n%3D8&collective=allreduce")
        page.get_by_role("heading", name="Compare algorithms").wait_for()
        _main(page).get_by_text("Topology ring", exact=False).first.wait_for()
        sidebar = page.locator("[data-testid=stSidebarNav]")
        sidebar.get_by_text("Topology designer").wait_for()
        labels = sidebar.inner_text()
        page.screenshot(path=str(tmp_path / "first_visit.png"), full_page=True)
    assert "Synthesize" in labels and "Learn" in labels, labels
    assert "app" not in labels.split(), labels


@needs_chromium
def test_learn_steps_in_network_allreduce_on_the_nvls_box(app_url, tmp_path):
    with browser_page(height=1200, timeout_ms=60_000) as page:
        page.goto(app_url + "/learn")
        page.get_by_role("heading", name="Learn: how collective algorithms move data").wait_for()
        page.get_by_role("combobox", name="fabric").click()
        page.get_by_role("option", name="NVSwitch box of 8 (adds: NVLS)").click()
        page.wait_for_timeout(1500)
        page.get_by_role("combobox", name="algorithm").click()
        page.get_by_role("option", name="inc", exact=True).click()
        page.get_by_text("In-network (NVLS / SHARP)").wait_for()
        title = page.frame_locator("iframe").first.locator("#title")
        title.filter(has_text="of 8").wait_for()
        page.locator("h1").first.click()
        page.keyboard.press("ArrowRight")
        title.filter(has_text="Round 1 of 8").wait_for()
        sentence = page.frame_locator("iframe").first.locator("#sentence").inner_text()
        page.get_by_text("Switches that add").first.wait_for()
        page.screenshot(path=str(tmp_path / "learn_inc.png"), full_page=True)
    assert "combine it in switch" in sentence and "multicasts the sum" in sentence


def test_learn_steps_dimdecomp_on_a_torus_and_papers_shows_the_explainer_table(app_url, tmp_path):
    with browser_page(height=1400, timeout_ms=90_000) as page:
        page.goto(app_url + "/learn")
        page.get_by_role("heading", name="Learn: how collective algorithms move data").wait_for()
        for label, option in (("fabric", "4x4 torus"), ("algorithm", "dimdecomp")):
            page.get_by_role("combobox", name=label).click()
            page.get_by_role("option", name=option, exact=True).click()
            _idle(page)
        page.get_by_text("Dimension-decomposed: on a torus or mesh").wait_for()
        frame = page.frame_locator("iframe").first
        title = frame.locator("#title")
        title.filter(has_text="Before round 1 (of 12)").wait_for()
        frame.get_by_role("button", name="Next ▶").click()
        title.filter(has_text="Round 1 of 12").wait_for()
        sentence = frame.locator("#sentence").inner_text()
        metrics = _main(page).locator("[data-testid=stMetricValue]").all_inner_texts()
        page.screenshot(path=str(tmp_path / "learn_dimdecomp.png"), full_page=True)

        page.goto(app_url + "/papers")
        page.get_by_text("Collectives Explainer (worked tables)").click()
        summary = page.get_by_text("unexplained").first
        summary.wait_for()
        page.screenshot(path=str(tmp_path / "papers_explainer.png"), full_page=True)
        summary_text = summary.inner_text()
    assert "Reduce-scatter along dimension 1" in sentence
    assert metrics[:2] == ["43.5 us", "43.5 us"]  # simulated and its formula 12 a + 1.875 M/BW
    assert "0 unexplained" in summary_text


@needs_chromium
def test_a_shared_papers_link_opens_the_explainer_in_a_fresh_browser(app_url, tmp_path):
    # the lecturer copied the address bar on the explainer's table; a student's fresh browser got TE-CCL's
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            lecturer = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
            lecturer.set_default_timeout(90_000)
            lecturer.goto(app_url + "/papers")
            lecturer.get_by_text("Collectives Explainer (worked tables)").click()
            lecturer.get_by_text("unexplained").first.wait_for()
            _idle(lecturer)
            shared = lecturer.url
            student = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
            student.set_default_timeout(90_000)
            student.goto(shared)
            student.get_by_role("heading", name="Papers: the Collectives Explainer's worked tables").wait_for()
            student.get_by_text("unexplained").first.wait_for()
            student.screenshot(path=str(tmp_path / "papers_shared.png"), full_page=True)
        finally:
            browser.close()
    assert "paper=explainer" in shared


def test_a_lesson_link_opens_the_lesson_and_its_rounds_step_with_the_keys(app_url, tmp_path):
    with browser_page(height=1400, timeout_ms=60_000) as page:
        page.goto(app_url + "/learn?page=learn&topic=bruck&lesson=ring%3An%3D8&collective=alltoall&algorithm=bruck"
                            "&size=1MB&chunks=1")
        page.get_by_role("heading", name="Learn: how collective algorithms move data").wait_for()
        assert page.get_by_role("combobox", name="lesson").input_value().startswith("Bruck's AllToAll")
        title = page.frame_locator("iframe").first.locator("#title")
        title.filter(has_text="Before round 1 (of 3)").wait_for()
        page.locator("h1").first.click()
        page.keyboard.press("ArrowRight")
        title.filter(has_text="Round 1 of 3").wait_for()
        page.screenshot(path=str(tmp_path / "learn_lesson.png"), full_page=True)


@needs_chromium
def test_a_bandwidth_that_is_not_a_number_is_one_line_naming_its_cell(app_url):
    # the grid's number cell dropped 'abc' without a word (issue 40, item 11)
    with browser_page() as page:
        page.goto(f"{app_url}/topology?topology=ring:n%3D4")
        _main(page).get_by_role("heading", name="ring4").wait_for()
        links = _main(page).locator("[data-testid=stDataFrame]").nth(1)
        links.scroll_into_view_if_needed()
        _edit_cell(page, links, column=4, row=0, text="abc")
        _main(page).get_by_role("button", name="Apply edits").click()
        _main(page).get_by_text("link row 1 has bandwidth_GBps 'abc', which is not a number").first.wait_for()


@needs_chromium
def test_the_designer_canvas_of_a_32_gpu_fabric_is_readable_and_nvl72s_waits_for_a_click(app_url, tmp_path):
    # issue 40 item 11: the 32-GPU dragonfly's canvas drew its nodes a few pixels wide (the layout spread 7.6 x
    # until no two nodes touched, then fitted into the frame), and NVL72's 1,296 cables took 8.9 s to draw
    with browser_page(timeout_ms=90_000) as page:
        page.goto(f"{app_url}/topology?topology=dragonfly")
        _main(page).get_by_role("heading", name="dragonfly_4x4x2").wait_for()
        page.get_by_role("tab", name="Draw on a canvas").click()
        canvas = page.frame_locator("iframe[title='streamlit_flow.streamlit_flow']")
        nodes = canvas.locator(".react-flow__node")
        nodes.first.wait_for()
        page.wait_for_timeout(1000)  # the fit-view zoom settles
        page.screenshot(path=str(tmp_path / "dragonfly_canvas.png"), full_page=True)
        boxes = [nodes.nth(i).bounding_box() for i in range(nodes.count())]
        assert len(boxes) == 48
        assert min(b["width"] for b in boxes) >= 32, boxes[:3]  # a 64 px box shown at half size or more
        overlaps = [(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1:]
                    if a["x"] < b["x"] + b["width"] and b["x"] < a["x"] + a["width"]
                    and a["y"] < b["y"] + b["height"] and b["y"] < a["y"] + a["height"]]
        assert not overlaps, overlaps[:2]

        page.goto(f"{app_url}/topology?topology=nvl72")
        _main(page).get_by_role("heading", name="nvl72_x1").wait_for()
        page.get_by_role("tab", name="Draw on a canvas").click()
        _main(page).get_by_text("1296 cables").wait_for()
        assert page.locator("iframe[title='streamlit_flow.streamlit_flow']").count() == 0
        _main(page).get_by_role("button", name="Draw the canvas anyway").click()
        page.frame_locator("iframe[title='streamlit_flow.streamlit_flow']").locator(".react-flow__node").first.wait_for()
