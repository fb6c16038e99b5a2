"""Shareable app state: what is on screen goes into the URL's query parameters and comes back from them.

A lecturer or a reviewer copies the address bar and the recipient sees the
same fabric, collective, algorithm, size and chunks on the same page. A
topology that can be named travels by its name (a builder spec such as
``torus2d:dims=4x4`` or a sample file's name); an uploaded or hand-edited
fabric travels as ``fabric=``, its JSON compressed (zlib) and base64url
encoded, up to ``FABRIC_URL_CHARS`` characters (a few hundred GPUs' worth of
links); a bigger one cannot be carried and the page says so. Each page
writes its own settings (Learn its teaching fabric and algorithm, Compare
its algorithms and sizes) and a link restores them on that page. Reading
the URL never opens a file path: a sample is looked up by name among the
shipped ones.
"""

from __future__ import annotations

import base64
import binascii
import json
import zlib
from collections.abc import Sequence
from itertools import permutations

import streamlit as st

from ccviz.app.state import current_topology, keep_error, sample_files, set_topology, topology_spec
from ccviz.builders import build
from ccviz.errors import CcvizError
from ccviz.model.collectives import COLLECTIVES, ROOTED, VARIABLE
from ccviz.model.groups import group_ranks, rank_text
from ccviz.model.topology import Topology
from ccviz.model.units import format_size, parse_size
from ccviz.synth.registry import algorithms_for

RESTORED_KEY = "ccviz_url_restored"
PAGE_KEY = "ccviz_url_page"  # the page a link asked for, until the navigation has opened it
RUN_ASKED_KEY = "ccviz_url_run"  # a link to Playback names a run: (collective, algorithm, size, chunks)
# query parameter -> the Synthesize page's widget key
WIDGETS = {"collective": "syn_collective", "algorithm": "syn_algorithm", "size": "syn_size", "chunks": "syn_chunks"}
# the same parameters on the pages that have their own widgets
PAGE_WIDGETS = {
    "learn": {"collective": "learn_collective", "algorithm": "learn_algorithm", "size": "learn_size",
              "chunks": "learn_chunks"},
    "compare": {"collective": "cmp_collective", "chunks": "cmp_chunks"},
}
PAPERS = {"teccl": "TE-CCL (SIGCOMM 2024)", "explainer": "Collectives Explainer (worked tables)",
          "measured": "Measured (nccl-tests on real machines)"}  # ``paper=``
PAPER_KEY = "papers_paper"  # the Papers page's choice of paper
LEARN_FABRIC_KEY = "learn_topology"  # Learn's teaching fabric (a label of its own list), carried as ``lesson=``
FABRIC_URL_CHARS = 8000  # an edited fabric longer than this, encoded, is not put into the URL
FABRIC_JSON_BYTES = 4_000_000  # a decoded fabric larger than this is refused (a link cannot inflate memory)


def encode_fabric(topology: Topology) -> str:
    """The topology as URL-safe text: compact JSON, zlib-compressed, base64url without padding."""
    text = json.dumps(topology.to_dict(), separators=(",", ":"))
    return base64.urlsafe_b64encode(zlib.compress(text.encode("utf-8"), 9)).decode("ascii").rstrip("=")


def decode_fabric(text: str) -> Topology:
    """The topology a ``fabric=`` parameter carries. Raises CcvizError naming what is wrong."""
    try:
        packed = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        inflater = zlib.decompressobj()
        raw = inflater.decompress(packed, FABRIC_JSON_BYTES)
        if inflater.unconsumed_tail:
            raise CcvizError(f"fabric: the link's fabric unpacks to more than {FABRIC_JSON_BYTES // 1_000_000} MB; "
                             "share the topology JSON as a file instead", "fabric")
        data = json.loads(raw.decode("utf-8"))
    except (binascii.Error, zlib.error, UnicodeDecodeError, json.JSONDecodeError, ValueError) as exc:
        if isinstance(exc, CcvizError):
            raise
        raise CcvizError("fabric: the link's fabric is damaged (it was cut or altered); ask for the link again "
                         "or for the topology JSON", "fabric") from None
    return Topology.from_dict(data)


def fabric_parameter(topology: Topology) -> str | None:
    """What ``fabric=`` carries for this topology, or None when it is too big for a link."""
    encoded = encode_fabric(topology)
    return encoded if len(encoded) <= FABRIC_URL_CHARS else None


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
    page = params.get("page") or _page_in_path()
    widgets = {**WIDGETS, **PAGE_WIDGETS.get(page or "", {})}
    try:
        if params.get("topology"):
            topology, source = topology_from_name(params["topology"])
            set_topology(topology, source, spec=params["topology"])
        elif params.get("fabric"):
            topology = decode_fabric(params["fabric"])
            set_topology(topology, f"a shared link (edited fabric {topology.name})")
        if page == "papers" and params.get("paper"):
            if params["paper"] not in PAPERS:
                raise CcvizError(f"paper: the link asks for {params['paper']!r}; choose one of {', '.join(PAPERS)}",
                                 "paper")
            st.session_state[PAPER_KEY] = PAPERS[params["paper"]]
        if page == "learn" and params.get("lesson"):
            _restore_lesson(params["lesson"])
        if page == "learn" and params.get("topic"):
            from ccviz.viz.explainer_lessons import restore_topic

            restore_topic(st.session_state, params["topic"], params.get("exercise") == "1")
        collective = params.get("collective")
        if collective is not None:
            if collective not in COLLECTIVES + VARIABLE:
                raise CcvizError(f"collective: the link asks for {collective!r}; choose one of "
                                 f"{', '.join(COLLECTIVES)}", "collective")
            st.session_state[widgets["collective"]] = collective
        algorithm = params.get("algorithm")
        if algorithm is not None and "algorithm" in widgets and page != "workload":  # Workload's: _restore_workload
            valid = algorithms_for(collective or st.session_state.get(widgets["collective"], COLLECTIVES[0]))
            if algorithm not in valid:
                raise CcvizError(f"algorithm: the link asks for {algorithm!r}, which does not implement this "
                                 f"collective; choose one of {', '.join(valid)}", "algorithm")
            st.session_state[widgets["algorithm"]] = algorithm
        if params.get("size") and "size" in widgets:
            st.session_state[widgets["size"]] = _nearest(sizes, parse_size(params["size"]))
        if params.get("chunks"):
            chunks = int(params["chunks"]) if params["chunks"].isdigit() else 0
            if not 1 <= chunks <= 64:
                raise CcvizError(f"chunks: the link asks for {params['chunks']!r} chunks; give 1 to 64", "chunks")
            if page == "learn":  # Learn's slider offers 1, 2, 4, 8
                chunks = min((1, 2, 4, 8), key=lambda c: abs(c - chunks))
            st.session_state[widgets["chunks"]] = chunks
        if params.get("root") and page in (None, "synthesize", "playback"):
            root = int(params["root"]) if params["root"].isdigit() else -1
            if root not in current_topology().gpus:
                raise CcvizError(f"root: the link asks for root {params['root']!r}, which is not a GPU of this "
                                 "fabric; choose one in the root box", "root")
            st.session_state["syn_root"] = root
        if params.get("dest") and page in (None, "synthesize", "playback"):  # sendrecv's destination
            dest = int(params["dest"]) if params["dest"].isdigit() else -1
            if dest not in current_topology().gpus or dest == st.session_state.get("syn_root", current_topology().gpus[0]):
                raise CcvizError(f"dest: the link asks for destination {params['dest']!r}, which is not another GPU "
                                 "of this fabric; choose one in the destination box", "dest")
            st.session_state["syn_dest"] = dest
        if params.get("ranks") and page in (None, "synthesize", "playback"):  # a process group
            group_ranks(current_topology(), params["ranks"])
            st.session_state["syn_ranks"] = params["ranks"]
        if page == "compare":
            _restore_compare(params, collective or st.session_state.get("cmp_collective", COLLECTIVES[0]), sizes)
        if page == "workload":
            _restore_workload(params)
        if page == "playback" and collective and algorithm:
            st.session_state[RUN_ASKED_KEY] = True
    except CcvizError as exc:
        keep_error("url", f"link: {exc} (the rest of the link was applied)")


def _page_in_path() -> str | None:
    """The page a link names by its path (``/playback?...``) rather than by ``page=``."""
    try:
        address = st.context.url or ""
    except AttributeError:  # an older Streamlit without st.context.url
        return None
    last = address.rstrip("/").rsplit("/", 1)[-1]
    return last if last in ("synthesize", "topology", "playback", "compare", "papers", "learn", "workload") else None


def _nearest(sizes: list[float], wanted: float) -> float:
    """The slider's option nearest to ``wanted`` (relative distance)."""
    return min(sizes, key=lambda s: abs(s - wanted) / s)


def _restore_lesson(spec: str) -> None:
    """Learn's teaching fabric from its builder spec (one of the page's own list)."""
    from ccviz.viz.lesson import TEACHING_TOPOLOGIES

    labels = {s: label for label, s in TEACHING_TOPOLOGIES.items()}
    if spec not in labels:
        raise CcvizError(f"lesson: the link asks for the teaching fabric {spec!r}; choose one of "
                         f"{', '.join(labels)}", "lesson")
    st.session_state[LEARN_FABRIC_KEY] = labels[spec]


def _restore_compare(params, collective: str, sizes: list[float]) -> None:
    """Compare's algorithms (``algorithms=ring,rhd``) and size range (``sizes=1KB-1GB``)."""
    if params.get("algorithms"):
        asked = [a for a in params["algorithms"].split(",") if a]
        valid = algorithms_for(collective)
        wrong = [a for a in asked if a not in valid]
        if wrong:
            raise CcvizError(f"algorithms: the link asks for {', '.join(wrong)}, which do not implement {collective}; "
                             f"choose among {', '.join(valid)}", "algorithms")
        st.session_state[f"cmp_algorithms_{collective}"] = asked
    if params.get("sizes"):
        lo, sep, hi = params["sizes"].partition("-")
        if not sep:
            raise CcvizError(f"sizes: the link gives {params['sizes']!r}; write a range such as 1KB-1GB", "sizes")
        ends = [_nearest(sizes, parse_size(v)) for v in (lo, hi)]
        st.session_state["cmp_sizes"] = (min(ends), max(ends))


def workload_orders(kinds: Sequence[str]) -> list[str]:
    """The rank orders the Workload page offers for these kinds (innermost first), then ``random``."""
    return ["-".join(p) for p in permutations(kinds)][:6] + ["random"] if kinds else ["random"]


def _restore_workload(params) -> None:
    """The Workload page's inputs: ``parallel``, ``run``, ``algorithm``, ``synthesis``, ``orders=A,B``, ``seed``."""
    from ccviz.runs.workload import SYNTHESES, parse_parallel, parse_run
    from ccviz.synth.registry import REGISTRY

    state = st.session_state
    kinds: list[str] = list(parse_parallel(state.get("wl_parallel", "")) if state.get("wl_parallel") else [])
    if params.get("parallel"):
        kinds = list(parse_parallel(params["parallel"]))
        state["wl_parallel"] = params["parallel"]
    if params.get("run"):
        parse_run(params["run"])
        state["wl_run"] = params["run"]
    if params.get("algorithm"):
        if params["algorithm"] not in REGISTRY:
            raise CcvizError(f"algorithm: the link asks for {params['algorithm']!r}; choose one of "
                             f"{', '.join(sorted(REGISTRY))}", "algorithm")
        state["wl_algorithm"] = params["algorithm"]
    if params.get("synthesis"):
        if params["synthesis"] not in SYNTHESES:
            raise CcvizError(f"synthesis: the link asks for {params['synthesis']!r}; choose one of "
                             f"{', '.join(SYNTHESES)}", "synthesis")
        state["wl_synthesis"] = params["synthesis"]
    if params.get("orders"):
        asked = params["orders"].split(",")
        offered = workload_orders(kinds)
        if len(asked) != 2 or any(o not in offered for o in asked):
            raise CcvizError(f"orders: the link gives {params['orders']!r}; write two rank orders as ORDER_A,ORDER_B "
                             f"from {', '.join(offered)}", "orders")
        state["wl_order_a"], state["wl_order_b"] = asked
    if params.get("seed"):
        seed = int(params["seed"]) if params["seed"].isdigit() else -1
        if not 0 <= seed <= 10_000:
            raise CcvizError(f"seed: the link asks for seed {params['seed']!r}; give 0 to 10000", "seed")
        state["wl_seed"] = seed


def wanted_page() -> str | None:
    """The page a link asked for, once (None afterwards)."""
    return st.session_state.pop(PAGE_KEY, None)


def share(page: str, **values: object) -> None:
    """Write the current page, topology and ``values`` (None = leave out) into the URL.

    A named topology goes in as ``topology=``; an uploaded or edited one as ``fabric=`` (encoded) when it
    fits in ``FABRIC_URL_CHARS``. Parameters of other pages are dropped, so the URL holds what is shown.
    """
    spec = topology_spec()
    wanted: dict[str, object] = {"page": page, "topology": spec,
                                 "fabric": None if spec is not None else _fabric_of_current()}
    wanted.update({k: (format_size(v) if k == "size" and isinstance(v, float) else v) for k, v in values.items()})
    current = st.query_params.to_dict()
    for key in set(current) - set(wanted):
        del st.query_params[key]
    for key, value in wanted.items():
        if value is None:
            if key in current:
                del st.query_params[key]
        elif current.get(key) != str(value):
            st.query_params[key] = str(value)


def _fabric_of_current() -> str | None:
    """The current (unnamed) topology's ``fabric=`` text."""
    return _fabric_of(current_topology())


def _fabric_of(topology: Topology) -> str | None:
    """``fabric_parameter`` once per topology (encoding costs a few ms on big fabrics)."""
    key = topology.to_json()
    cache = st.session_state.setdefault("ccviz_fabric_param", {})
    if key not in cache:
        cache.clear()
        cache[key] = fabric_parameter(topology)
    return cache[key]


def shared_note(topology: Topology | None = None) -> str:
    """A line for the page: whether the address bar carries this view (``topology``: the one shown,
    when it is not the current one, e.g. Playback of an imported run)."""
    current = current_topology()
    named = topology_spec() is not None and (topology is None or topology.to_json() == current.to_json())
    if not named and _fabric_of(topology or current) is None:
        return (f"This fabric is too big for a link (over {FABRIC_URL_CHARS} characters encoded): the address bar "
                "carries the page and its settings but not the fabric; share the topology JSON "
                "(Topology designer → Save topology JSON) with it.")
    if not named:
        return ("The address bar holds this view, the edited fabric included (compressed into it; fabrics up to "
                f"{FABRIC_URL_CHARS} encoded characters travel this way): copy it to share.")
    return "The address bar holds this view: copy it to share."


def share_run(entry) -> str:
    """Playback's URL: the run shown (collective, algorithm, size, chunks on its fabric), which a link remakes;
    the line for the page saying what the address bar carries.

    An uploaded schedule, or a run with solver options or a root (a published TE-CCL row), cannot be
    remade from those parameters: its URL carries the page and fabric only, and the line says so.
    """
    request, topology = entry.request, entry.result.topology
    values: dict[str, object] = {}
    if topology.to_json() != current_topology().to_json():
        values.update(topology=None, fabric=_fabric_of(topology))
    from ccviz.app.runs import default_options

    # the page's default options (a time limit, an epoch rule) are remade by the link; changed ones are not
    remade = (request.algorithm in algorithms_for(request.collective)
              and dict(request.options) == default_options(request.algorithm))
    if remade:
        values.update(collective=request.collective, algorithm=request.algorithm, size=request.size_bytes,
                      chunks=request.chunks, root=request.root, dest=request.dest,
                      ranks=rank_text(request.ranks) if request.ranks else None)
    share("playback", **values)
    note = shared_note(topology)
    if not remade:
        note += (" A link cannot remake this run (it was uploaded, or made with solver options): the address bar "
                 "carries the page and the fabric; share the schedule JSON for the run itself.")
    return note


def run_from_link(wait_s: float = 60.0) -> None:
    """Once, after a link to Playback that names a run: make that run (as Synthesize would) so the page
    shows what the sender saw. A run that does not finish in ``wait_s`` is left to the Synthesize page."""
    from ccviz.app.runs import RunRequest, SynthesisJob, default_options
    from ccviz.app.state import last_run, set_last_run

    if not st.session_state.pop(RUN_ASKED_KEY, False) or last_run() is not None:
        return
    topology = current_topology()
    state = st.session_state
    try:
        collective = state[WIDGETS["collective"]]
        root = state.get("syn_root", topology.gpus[0]) if collective in ROOTED else None
        dest = state.get("syn_dest", next(g for g in topology.gpus if g != root)) if collective == "sendrecv" else None
        request = RunRequest.make(topology, collective, state[WIDGETS["algorithm"]], state.get(WIDGETS["size"], 1e6),
                                  state.get(WIDGETS["chunks"], 1), root, dest=dest,
                                  ranks=state.get("syn_ranks", "").strip() or None,
                                  **default_options(state[WIDGETS["algorithm"]]))
        with st.spinner(f"making the linked run: {request.algorithm} {request.collective}"):
            job = SynthesisJob(request, topology)
            job.wait(wait_s)
    except CcvizError as exc:
        st.error(f"link: {exc}")
        return
    if job.error or job.entry is None:
        st.error(f"link: {request.algorithm}: {job.error or 'did not finish in time'}; run it on the Synthesize page")
        return
    set_last_run(job.entry)
