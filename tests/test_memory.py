"""The app server gives memory back after a class (ccviz.app.memory)."""

import threading
import time
from types import SimpleNamespace

from streamlit.runtime.memory_session_storage import MemorySessionStorage

from ccviz.app import memory


def _closed_tab(session_id: str) -> SimpleNamespace:
    return SimpleNamespace(session=SimpleNamespace(id=session_id), client=None, script_run_count=1)


def test_closed_tabs_past_their_reconnect_time_are_dropped_and_recent_ones_kept():
    """Streamlit drops an expired session only when another tab disconnects; the janitor does it on its own."""
    expired = MemorySessionStorage(ttl_seconds=0.2)
    expired.save(_closed_tab("a"))
    expired.save(_closed_tab("b"))
    time.sleep(0.3)  # both past their reconnect time, and no tab disconnected since
    assert memory.drop_expired_sessions(expired, threading.Lock()) == 2
    assert expired.list() == [] and expired.get("a") is None

    recent = MemorySessionStorage(ttl_seconds=600)
    recent.save(_closed_tab("c"))
    assert memory.drop_expired_sessions(recent) == 0
    assert recent.get("c") is not None  # a tab may still reconnect to it


def test_without_a_running_server_there_is_nothing_to_drop_and_tidying_is_harmless():
    assert memory.drop_expired_sessions() == 0
    assert memory.tidy() == 0
