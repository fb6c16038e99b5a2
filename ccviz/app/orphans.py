"""A solve ends with the browser session that started it.

A background job (a synthesis, a Compare sweep, a paper's re-run) outlives Streamlit's reruns on
purpose, so closing the tab used to leave its worker solving: a TE-CCL solve with a 150 s limit kept
going at ~1 GB for more than 75 s after its tab closed, and later students were told they shared the
cores with it. Each job is watched here: once its session has been gone from Streamlit's runtime for
``ORPHAN_GRACE_S`` (a reload or a brief network drop reconnects well within it), the job is stopped as
Stop would stop it, and its worker process ends ``GRACE_S`` later (``ccviz.runs.isolated``).
"""

from __future__ import annotations

import threading
import time
import weakref
from typing import Protocol

ORPHAN_GRACE_S = 10.0  # a session gone this long (not reconnected) has closed: its jobs stop
POLL_S = 1.0


class Stoppable(Protocol):
    @property
    def done(self) -> bool: ...

    def stop(self) -> None: ...


_lock = threading.Lock()
_watched: dict[int, tuple[weakref.ref, str, list[float | None]]] = {}
_watcher: threading.Thread | None = None


def current_session_id() -> str | None:
    """The Streamlit session running this script, None outside a running app (tests, the library)."""
    try:
        from streamlit.runtime.scriptrunner import get_script_run_ctx
    except ImportError:
        return None
    ctx = get_script_run_ctx(suppress_warning=True)
    return None if ctx is None else ctx.session_id


def session_alive(session_id: str) -> bool:
    """Whether the session is connected now (a closed tab's session leaves the runtime's active ones)."""
    from streamlit import runtime

    if not runtime.exists():
        return True  # no runtime (bare mode): nothing says the session ended
    return runtime.get_instance().is_active_session(session_id)


def watch(job: Stoppable, session_id: str | None = None) -> None:
    """Stop ``job`` once the session that started it (default: the current one) has been gone
    ``ORPHAN_GRACE_S``; nothing happens outside a running app."""
    global _watcher
    session_id = session_id or current_session_id()
    if session_id is None:
        return
    with _lock:
        _watched[id(job)] = (weakref.ref(job), session_id, [None])
        if _watcher is None:
            _watcher = threading.Thread(target=_watch_loop, daemon=True, name="ccviz-orphan-watch")
            _watcher.start()


def check_once(now: float | None = None) -> list[Stoppable]:
    """One look at every watched job: stop those whose session is gone past the grace; the stopped ones."""
    now = time.monotonic() if now is None else now
    stopped = []
    with _lock:
        entries = list(_watched.items())
    for key, (ref, session_id, gone_since) in entries:
        job = ref()
        if job is None or job.done:
            with _lock:
                _watched.pop(key, None)
            continue
        if session_alive(session_id):
            gone_since[0] = None
        elif gone_since[0] is None:
            gone_since[0] = now
        elif now - gone_since[0] >= ORPHAN_GRACE_S:
            job.stop()
            stopped.append(job)
            with _lock:
                _watched.pop(key, None)
    return stopped


def _watch_loop() -> None:
    global _watcher
    while True:
        time.sleep(POLL_S)
        try:
            check_once()
        except Exception:  # noqa: BLE001 - the watcher must outlive a runtime being shut down
            continue
        with _lock:
            if not _watched:  # the next watch() starts a new watcher (decided under the same lock)
                _watcher = None
                return
