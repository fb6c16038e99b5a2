"""Session state shared by the app's pages: the current topology and the last run.

Every page starts from here so that a topology designed on one page is the
one synthesized, played back and compared on the others, and a fresh
session starts on DGX-1 with nothing to set up.
"""

from __future__ import annotations

import re
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import streamlit as st

from ccviz.builders.loading import load_topology
from ccviz.errors import CcvizError
from ccviz.model.topology import Topology

DEFAULT_TOPOLOGY = "dgx1"
SAMPLES_DIR = Path(__file__).resolve().parents[2] / "sample_topologies"
TOPOLOGY_KEY = "ccviz_topology"
SOURCE_KEY = "ccviz_topology_source"
RUN_KEY = "ccviz_last_run"
SPEC_KEY = "ccviz_topology_spec"  # a name that rebuilds the topology (builder spec or sample), or None


def current_topology() -> Topology:
    """The topology every page works on (DGX-1 until the user picks another)."""
    if TOPOLOGY_KEY not in st.session_state:
        st.session_state[TOPOLOGY_KEY] = load_topology(DEFAULT_TOPOLOGY)
        st.session_state[SOURCE_KEY] = f"builder {DEFAULT_TOPOLOGY}"
        st.session_state[SPEC_KEY] = DEFAULT_TOPOLOGY
    return st.session_state[TOPOLOGY_KEY]


def topology_spec() -> str | None:
    """The builder spec or sample name of the current topology (None once uploaded or hand-edited)."""
    current_topology()
    return st.session_state.get(SPEC_KEY)


def topology_source() -> str:
    current_topology()
    return st.session_state.get(SOURCE_KEY, "")


def set_topology(topology: Topology, source: str, spec: str | None = None) -> None:
    """Make ``topology`` current for every page; a run on another topology is dropped.

    ``spec``: the builder spec or sample name that rebuilds it (what a shared link carries).
    """
    st.session_state[TOPOLOGY_KEY] = topology
    st.session_state[SOURCE_KEY] = source
    st.session_state[SPEC_KEY] = spec
    run = st.session_state.get(RUN_KEY)
    if run is not None and run.result.topology.to_json() != topology.to_json():
        del st.session_state[RUN_KEY]


def sample_files() -> dict[str, Path]:
    """Sample topology files shipped with the project, by file stem."""
    if not SAMPLES_DIR.is_dir():
        return {}
    return {p.stem: p for p in sorted(SAMPLES_DIR.glob("*.json"))}


def last_run():
    """The last finished run (``ccviz.app.runs.CachedRun``) or None."""
    return st.session_state.get(RUN_KEY)


def set_last_run(run) -> None:
    st.session_state[RUN_KEY] = run


ERRORS_KEY = "ccviz_errors"


@contextmanager
def user_errors(what: str = "", sticky: str | None = None) -> Iterator[None]:
    """Turn any failure into an ``st.error`` with the fix; never a traceback on the page.

    With ``sticky`` (a scope such as "topology") the message is kept in the session instead of drawn
    once: ``show_errors(scope)`` draws it on every rerun until an action in that scope succeeds, so
    the automatic reruns that follow a click (uploaders, canvas components) cannot wipe it.
    """
    try:
        yield
    except CcvizError as exc:
        _fail(f"{what + ': ' if what else ''}{exc}", sticky)
    except Exception as exc:  # last resort: a bug, shown with advice, details in the server log
        traceback.print_exc()
        _fail(f"{what + ': ' if what else ''}unexpected {type(exc).__name__}: {exc}. "
              "Try a smaller size or another algorithm; please report this with the topology and settings.", sticky)
    except BaseException:  # Streamlit's rerun/stop after a successful action
        clear_errors(sticky)
        raise
    else:
        clear_errors(sticky)


# The library's messages name CLI flags (its first users type commands); the app has widgets instead.
APP_WORDS = (
    (re.compile(r"`ccviz limit` shows the bottleneck cut"), "the Topology designer draws the bottleneck cut"),
    (re.compile(r" \(--topology\)"), " (in the Topology designer)"),
    # the isolated runner's words when a solve ended with nothing: the app's limit is under algorithm options
    (re.compile(r"give it a longer time limit"), "raise 'time limit (s)' under algorithm options"),
    (re.compile(r"(pass|give|use|choose) --topology"), r"\1 the topology (Topology designer)"),
    (re.compile(r"--topology"), "the topology (Topology designer)"),
    # an option by its widget's label (underscores read as spaces, as the options expander draws them)
    (re.compile(r"--opt ([a-z_]+)=([^\s;,)]+)"),
     lambda m: f"the option '{m[1].replace('_', ' ')}' set to {m[2]} (algorithm options)"),
    (re.compile(r"--opt"), "the algorithm options"),
    # an algorithm named the CLI's way (`-a inc`): the app has an algorithm box
    (re.compile(r"`-a ([\w-]+)`|(?<![\w-])-a ([\w-]+)"), lambda m: f"the algorithm {m[1] or m[2]}"),
    (re.compile(r"\bset ([a-z]+(?:_[a-z]+)+) to\b"), lambda m: f"set '{m[1].replace('_', ' ')}' (algorithm options) to"),
    (re.compile(r" \(Node\.reduce\)"), " (tick 'reduce' on a switch in the Topology designer, or pick a fabric "
     "whose switches add: NVLS, SHARP)"),
    (re.compile(r"--collective"), "the collective box"),
    (re.compile(r"--chunks"), "chunks per rank"),
    (re.compile(r"drop --ranks"), "empty the process group box"),
    (re.compile(r"--ranks"), "the process group box"),
    (re.compile(r"--size"), "the size slider"),
    (re.compile(r"--epochs?"), "the epoch option"),
    (re.compile(r"leave --scheduler out"), "empty the Dask scheduler box"),
    (re.compile(r"--scheduler"), "Dask scheduler (Compare)"),
    # the Workload page's two boxes: the library's fields are --parallel and --run
    (re.compile(r"--parallel"), "the parallelism box"),
    (re.compile(r"^(workload(?: input)?: )parallel: "), r"\1parallelism (product = GPUs): "),
    (re.compile(r"^(workload(?: input)?: )run: "), r"\1collectives: "),
)


def for_app(message: str) -> str:
    """A library message in the app's words: widgets and pages where the text names CLI flags."""
    for pattern, words in APP_WORDS:
        message = pattern.sub(words, message)
    return message


def _fail(message: str, sticky: str | None) -> None:
    message = for_app(message)
    if sticky is None:
        st.error(message)
    else:
        st.session_state.setdefault(ERRORS_KEY, {})[sticky] = message


def clear_errors(scope: str | None) -> None:
    if scope is not None:
        st.session_state.get(ERRORS_KEY, {}).pop(scope, None)


def keep_error(scope: str, message: str) -> None:
    """Remember an error outside a ``user_errors`` block (e.g. a background job's failure)."""
    _fail(message, scope)


def show_errors(scope: str) -> None:
    """Draw the error kept for ``scope`` (if any); it stays until an action in the scope succeeds."""
    message = st.session_state.get(ERRORS_KEY, {}).get(scope)
    if message:
        st.error(message, icon=":material/error:")

