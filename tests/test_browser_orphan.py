"""Closing the tab ends its solve (issue 40, item 2): a real browser starts a long TE-CCL solve, closes the tab
mid-solve, and the worker process solving it is gone within 45 s (a 150 s solve used to go on for minutes)."""

from __future__ import annotations

import time

import pytest

from tests.test_browser import _main, browser_page, needs_chromium, streamlit_server

pytestmark = pytest.mark.browser


def _spawned(server) -> list:  # noqa: ANN001 - a psutil.Process
    """The server's worker processes (multiprocessing's children: the fork server, solves and their spares)."""
    out = []
    for child in server.children(recursive=True):
        try:
            if any("multiprocessing" in part for part in child.cmdline()):
                out.append(child)
        except Exception:  # noqa: BLE001 - a process that ended meanwhile
            continue
    return out


def _busy(server, wait_s: float = 2.0) -> list:  # noqa: ANN001
    """The worker process using the CPU most (the solving one): a spare the pool starts ahead is busy too while it
    imports, then idles for the next solve, and is not the solve's worker."""
    before = {p.pid: sum(p.cpu_times()[:2]) for p in _spawned(server)}
    time.sleep(wait_s)
    used = []
    for p in _spawned(server):
        try:
            used.append((sum(p.cpu_times()[:2]) - before.get(p.pid, 0.0), p))
        except Exception:  # noqa: BLE001
            continue
    used = [(cpu, p) for cpu, p in used if cpu > 0.3]
    return [max(used, key=lambda x: x[0])[1]] if used else []


@needs_chromium
def test_closing_the_tab_mid_solve_ends_its_worker(tmp_path):
    psutil = pytest.importorskip("psutil")
    with streamlit_server(tmp_path) as url:
        port = url.rsplit(":", 1)[1]
        server = next(p for p in psutil.process_iter(["cmdline"])
                      if "streamlit" in " ".join(p.info["cmdline"] or []) and port in (p.info["cmdline"] or []))
        with browser_page() as page:
            page.goto(f"{url}/?topology=torus2d:dims%3D5x5&collective=allgather&algorithm=teccl&size=4MB&chunks=2")
            _main(page).get_by_text("Topology torus2d_5x5", exact=False).first.wait_for()
            limit = _main(page).get_by_label("time limit (s)")
            limit.fill("150")
            limit.press("Enter")
            page.wait_for_timeout(1000)
            _main(page).get_by_role("button", name="Synthesize", exact=True).click()
            _main(page).get_by_role("button", name="Stop", exact=True).wait_for()
            deadline = time.monotonic() + 60
            solving = []
            while not solving and time.monotonic() < deadline:
                solving = _busy(server)
            assert solving, "no worker process was solving"
            page.screenshot(path=str(tmp_path / "solving.png"), full_page=True)
            page.close()  # the tab closes mid-solve (the browser's websocket with it)
            closed = time.monotonic()
        gone = psutil.wait_procs(solving, timeout=45)[1] == []
        waited = time.monotonic() - closed
        assert gone, f"the solve's worker still ran {waited:.0f} s after its tab closed"
