"""A job stops once the browser session that started it has been gone ``ORPHAN_GRACE_S`` (issue 40, item 2);
the browser test closing a tab mid-solve is in tests/test_browser.py."""

from __future__ import annotations

import threading

from ccviz.app import orphans


class FakeJob:
    def __init__(self) -> None:
        self.stopped = threading.Event()
        self.done = False

    def stop(self) -> None:
        self.stopped.set()


def test_a_job_stops_only_after_its_session_stayed_gone(monkeypatch) -> None:
    alive = {"s1": True, "s2": True}
    monkeypatch.setattr(orphans, "session_alive", lambda sid: alive[sid])
    monkeypatch.setattr(orphans, "_watcher", object())  # no background thread: the test steps time itself
    monkeypatch.setattr(orphans, "_watched", {})
    mine, other = FakeJob(), FakeJob()
    orphans.watch(mine, "s1")
    orphans.watch(other, "s2")
    assert orphans.check_once(now=0.0) == []
    alive["s1"] = False  # the tab closed
    assert orphans.check_once(now=1.0) == []
    alive["s1"] = True  # a reload reconnected within the grace: nothing stops
    assert orphans.check_once(now=5.0) == []
    alive["s1"] = False
    assert orphans.check_once(now=6.0) == []
    assert orphans.check_once(now=6.0 + orphans.ORPHAN_GRACE_S) == [mine]
    assert mine.stopped.is_set() and not other.stopped.is_set()
    other.done = True
    orphans.check_once(now=100.0)
    assert orphans._watched == {}  # finished and stopped jobs are no longer watched


def test_outside_a_running_app_nothing_is_watched(monkeypatch) -> None:
    monkeypatch.setattr(orphans, "_watched", {})
    orphans.watch(FakeJob())
    assert orphans._watched == {}
