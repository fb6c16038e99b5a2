"""Shareable app state: what is on screen goes into the URL's query parameters and comes back from them.

A lecturer or a reviewer copies the address bar and the recipient sees the
same fabric, collective, algorithm, size and chunks on the same page. Only
topologies that can be named travel (a builder spec such as
``torus2d:dims=4x4`` or a sample file's name); an uploaded or hand-edited
fabric cannot be carried by a URL, so its parameter is left out (the page
says so). Reading the URL never opens a file path: a sample is looked up
by name among the shipped ones.
"""

from __future__ import annotations

import json

import streamlit as st

from ccviz.app.state import current_topology, keep_error, sample_files, set_topology, topology_spec
from ccviz.builders import build
from ccviz.errors import CcvizError
from ccviz.model.collectives import COLLECTIVES
from ccviz.model.topology import Topology
from ccviz.model.units import format_size, parse_size
from ccviz.synth.registry import algorithms_for

RESTORED_KEY = "ccviz_url_restored"
PAGE_KEY = "ccviz_url_page"  # the page a link asked for, until the navigation has opened it
# query parameter -> the Synthesize page's widget key
WIDGETS = {"collective": "syn_collective", "algorithm": "syn_algorithm", "size": "syn_size", "chunks": "syn_chunks"}


def topology_from_name(name: str) -> tuple[Topology, str]:
    """A sample by file name, else a builder spec; (topology, source text). Raises CcvizError."""
    samples = sample_files()
    if name in samples:
        return Topology.from_dict(json.loads(samples[name].read_text()), name=name), f"sample {name}"
    return build(name), f"builder {name}"


def restore(sizes: list[float]) -> None:
    """Once per session, apply the URL's parameters (every page calls this through ``configure_page``).

    ``sizes`` are the size slider's options: a size in the URL snaps to the nearest one. The page
    asked for is kept for ``wanted_page`` (Streamlit may run a deep link's page without ``app.py``).
    """
    if st.session_state.get(RESTORED_KEY):
        return
    st.session_state[RESTORED_KEY] = True
    params = st.query_params
    st.session_state[PAGE_KEY] = params.get("page")
    try:
        if params.get("topology"):
            topology, source = topology_from_name(params["topology"])
            set_topology(topology, source, spec=params["topology"])
        collective = params.get("collective")
        if collective is not None:
            if collective not in COLLECTIVES:
                raise CcvizError(f"collective: the link asks for {collective!r}; choose one of "
                                 f"{', '.join(COLLECTIVES)}", "collective")
            st.session_state[WIDGETS["collective"]] = collective
        algorithm = params.get("algorithm")
        if algorithm is not None:
            valid = algorithms_for(collective or st.session_state.get(WIDGETS["collective"], COLLECTIVES[0]))
            if algorithm not in valid:
                raise CcvizError(f"algorithm: the link asks for {algorithm!r}, which does not implement this "
                                 f"collective; choose one of {', '.join(valid)}", "algorithm")
            st.session_state[WIDGETS["algorithm"]] = algorithm
        if params.get("size"):
            wanted = parse_size(params["size"])
            st.session_state[WIDGETS["size"]] = min(sizes, key=lambda s: abs(s - wanted) / s)
        if params.get("chunks"):
            chunks = int(params["chunks"]) if params["chunks"].isdigit() else 0
            if not 1 <= chunks <= 64:
                raise CcvizError(f"chunks: the link asks for {params['chunks']!r} chunks; give 1 to 64", "chunks")
            st.session_state[WIDGETS["chunks"]] = chunks
    except CcvizError as exc:
        keep_error("url", f"link: {exc} (the rest of the link was applied)")


def wanted_page() -> str | None:
    """The page a link asked for, once (None afterwards)."""
    return st.session_state.pop(PAGE_KEY, None)


def share(page: str, **values: object) -> None:
    """Write the current page, topology and ``values`` (None = leave out) into the URL."""
    wanted = {"page": page, "topology": topology_spec()}
    wanted.update({k: (format_size(v) if k == "size" and isinstance(v, float) else v) for k, v in values.items()})
    current = st.query_params.to_dict()
    for key, value in wanted.items():
        if value is None:
            if key in current:
                del st.query_params[key]
        elif current.get(key) != str(value):
            st.query_params[key] = str(value)


def shared_note() -> str:
    """A line for the page: whether the address bar carries this topology."""
    current_topology()
    if topology_spec() is None:
        return "This topology was uploaded or edited by hand: a link to this page cannot carry it."
    return "The address bar holds this view: copy it to share."
