"""Session state shared by the app's pages: the current topology and the last run.

Every page starts from here so that a topology designed on one page is the
one synthesized, played back and compared on the others, and a fresh
session starts on DGX-1 with nothing to set up.
"""

from __future__ import annotations

import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import streamlit as st

from ccviz.errors import CcvizError
from ccviz.loading import load_topology
from ccviz.topology import Topology

DEFAULT_TOPOLOGY = "dgx1"
SAMPLES_DIR = Path(__file__).resolve().parent.parent / "sample_topologies"
TOPOLOGY_KEY = "ccviz_topology"
SOURCE_KEY = "ccviz_topology_source"
RUN_KEY = "ccviz_last_run"


def current_topology() -> Topology:
    """The topology every page works on (DGX-1 until the user picks another)."""
    if TOPOLOGY_KEY not in st.session_state:
        st.session_state[TOPOLOGY_KEY] = load_topology(DEFAULT_TOPOLOGY)
        st.session_state[SOURCE_KEY] = f"builder {DEFAULT_TOPOLOGY}"
    return st.session_state[TOPOLOGY_KEY]


def topology_source() -> str:
    current_topology()
    return st.session_state.get(SOURCE_KEY, "")


def set_topology(topology: Topology, source: str) -> None:
    """Make ``topology`` current for every page; a run on another topology is dropped."""
    st.session_state[TOPOLOGY_KEY] = topology
    st.session_state[SOURCE_KEY] = source
    run = st.session_state.get(RUN_KEY)
    if run is not None and run.result.topology.to_json() != topology.to_json():
        del st.session_state[RUN_KEY]


def sample_files() -> dict[str, Path]:
    """Sample topology files shipped with the project, by file stem."""
    if not SAMPLES_DIR.is_dir():
        return {}
    return {p.stem: p for p in sorted(SAMPLES_DIR.glob("*.json"))}


def last_run():
    """The last finished run (``ccviz.app_runs.CachedRun``) or None."""
    return st.session_state.get(RUN_KEY)


def set_last_run(run) -> None:
    st.session_state[RUN_KEY] = run


@contextmanager
def user_errors(what: str = "") -> Iterator[None]:
    """Turn any failure into an ``st.error`` with the fix; never a traceback on the page."""
    try:
        yield
    except CcvizError as exc:
        st.error(f"{what + ': ' if what else ''}{exc}")
    except Exception as exc:  # last resort: a bug, shown briefly, details in the server log
        traceback.print_exc()
        st.error(
            f"{what + ': ' if what else ''}unexpected {type(exc).__name__}: {exc}. "
            "Try a smaller size or another algorithm; please report this with the topology and settings."
        )
