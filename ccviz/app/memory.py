"""The server gives memory back after a class: closed tabs' sessions dropped, free heap returned.

Why: Streamlit keeps a closed tab's session (its session state: jobs, runs, figures, widget values)
for ``server.disconnectedSessionTTL`` seconds in case the tab reconnects, but it drops an expired one
only when some later tab disconnects, so after the last student left every session stayed for the
server's life. And glibc keeps freed heap pages in its per-thread arenas (Streamlit runs each
session's script in a thread of its own). A janitor thread, every ``JANITOR_EVERY_S`` seconds,
drops the sessions whose reconnect time has passed and hands free pages back (``malloc_trim``).

The sessions are reached through Streamlit's runtime internals (its session manager's storage); on
a Streamlit laid out differently the janitor only trims the heap.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from typing import Any

from ccviz.runs.isolated import release_memory

JANITOR_EVERY_S = 10.0

_STARTED = False
_LOCK = threading.Lock()


def start_janitor() -> None:
    """Start the janitor thread once per server process (every page calls this)."""
    global _STARTED
    with _LOCK:
        if _STARTED:
            return
        _STARTED = True
    threading.Thread(target=_janitor, daemon=True, name="ccviz-janitor").start()


def _janitor() -> None:
    stop = threading.Event()
    while not stop.wait(JANITOR_EVERY_S):
        tidy()


def tidy() -> int:
    """Drop the expired sessions of closed tabs, collect, and return free heap to the system; how many dropped."""
    dropped = drop_expired_sessions()
    if dropped:
        gc.collect()  # a session's objects refer to each other: reference counting alone leaves them
    release_memory()
    return dropped


def drop_expired_sessions(storage: Any = None, lock: Any = None) -> int:
    """Remove from Streamlit's store of disconnected sessions those past their reconnect time; how many.

    ``storage`` (a ``MemorySessionStorage``) and its ``lock`` default to the running server's.
    """
    if storage is None:
        storage, lock = _server_storage()
    expire = getattr(getattr(storage, "_cache", None), "expire", None)
    if expire is None:
        return 0
    with lock or contextlib.nullcontext():
        try:
            return len(expire())
        except RuntimeError:  # the store changed under us (a tab reconnecting): the next round tries again
            return 0


def _server_storage() -> tuple[Any, Any]:
    """The running server's store of disconnected sessions and the lock its manager takes around it."""
    try:
        from streamlit.runtime import Runtime

        if not Runtime.exists():
            return None, None
        manager = getattr(Runtime.instance(), "_session_mgr", None)
    except Exception:  # another Streamlit layout: nothing to drop
        return None, None
    return getattr(manager, "_session_storage", None), getattr(manager, "_storage_lock", None)
