"""Widgets and result views shared by the app's pages (pages only call these and the library)."""

from __future__ import annotations

import traceback
from collections.abc import Callable
from typing import Any

import streamlit as st

from ccviz.app import memory, url
from ccviz.app.runs import SHARED_OPTION_DEFAULTS, CachedRun
from ccviz.app.state import current_topology, for_app, topology_source, user_errors
from ccviz.bounds.limit import limit_sentence, switch_sums_sentence
from ccviz.errors import CcvizError
from ccviz.interop import export
from ccviz.model.units import format_size, format_time, size_sweep
from ccviz.runs.pipeline import CUT_SHORT_WORDS
from ccviz.synth.options import OptionSpec
from ccviz.synth.registry import Algorithm, Progress
from ccviz.viz import schedule_animation

SIZES = size_sweep(1e3, 1e9)
PLOT_CONFIG = {"displaylogo": False, "scrollZoom": False}
APP_CONTROLLED = frozenset({"progress", "stop", "extra"})  # the app wires these itself (progress display, Stop)


_NAVIGATION_RAN = False  # app.py's st.navigation has run in this server process (it then serves every page)


def configure_page(from_navigation: bool = False) -> None:
    """Title and wide layout; every page calls it so a page run on its own looks the same.

    ``from_navigation``: app.py calls it before its ``st.navigation``; a page run without app.py having
    run in this process hands itself over to it (``hand_over_to_navigation``).

    The icon is an emoji: Streamlit draws it locally, where a ``:material/...:`` favicon is fetched
    from a font host (the app must work offline).
    """
    global _NAVIGATION_RAN
    if from_navigation:
        _NAVIGATION_RAN = True
    else:
        hand_over_to_navigation()
    st.set_page_config(page_title="ccviz workbench", page_icon="🕸️", layout="wide")
    memory.start_janitor()  # closed tabs' sessions and free heap go back to the system
    url.restore(SIZES)  # a shared link, applied once per session whichever page it opens


def hand_over_to_navigation() -> None:
    """Run this page again through app.py's ``st.navigation`` when Streamlit ran it as a file of pages/.

    A fresh server that first gets a deep link (``/learn``) has not seen ``st.navigation`` yet, so it
    runs the page file directly and lists pages/ by file name ('app', 'compare', ...) in the sidebar.
    Clearing the flag ``st.navigation`` itself clears and rerunning sends the same URL through app.py:
    the sidebar shows the app's titles and the page opened is the one linked.
    """
    try:
        from streamlit.runtime.pages_manager import PagesManager
    except ImportError:  # another Streamlit layout: keep its own behaviour
        return
    if not _NAVIGATION_RAN and getattr(PagesManager, "uses_pages_directory", None):
        PagesManager.uses_pages_directory = False
        st.rerun()


def algorithm_picker(container: Any, choices: list[str], collective: str, key: str) -> str:
    """Choose among the algorithms that implement ``collective`` (ring first when it can), or stop the page."""
    if not choices:
        st.warning(f"No registered algorithm implements {collective} yet; choose another collective.")
        st.stop()
    if st.session_state.get(key) not in choices:  # first visit, or the collective changed: ring when it can
        st.session_state[key] = "ring" if "ring" in choices else choices[0]
    return container.selectbox("algorithm", choices, key=key, persist_state="session")


def job_line(what: str, elapsed_s: float, progress: Progress | None, stopping: bool) -> str:
    """The status line of a running job, in words (the same wording as the CLI's ``--progress``)."""
    line = f"running {what} … {format_time(elapsed_s)}"
    if progress is not None and progress.text():
        line += " — " + progress.text()
    return line + (" (stopping…)" if stopping else "")


def plural(n: int, word: str) -> str:
    """'1 transfer', '3 transfers'."""
    return f"{n} {word}{'' if n == 1 else 's'}"


def topology_caption() -> None:
    topo = current_topology()
    st.caption(f"Topology **{topo.name}** — {topo.summary()} · from {topology_source()} "
               "(change it on the Topology page)")


def size_picker(label: str, key: str, default: float = 1e6) -> float:
    st.session_state.setdefault(key, default)  # a shared link may have set it already
    return st.select_slider(label, options=SIZES, format_func=format_size, key=key, persist_state="session")


def size_range_picker(label: str, key: str, default: tuple[float, float] = (1e3, 1e9)) -> list[float]:
    lo, hi = st.select_slider(label, options=SIZES, value=default, format_func=format_size, key=key,
                                persist_state="session")
    return [s for s in SIZES if lo <= s <= hi]


def option_inputs(algorithm: Algorithm, key: str) -> dict[str, Any]:
    """Inputs for exactly the options this algorithm uses: the shared ones it reads
    (``Algorithm.options_used``), then its own, drawn from its options dataclass (``Algorithm.options``).

    Its own options are returned only where they differ from the default, so a run records what the
    user changed (as ``--opt`` does) and equal runs share a cache entry.
    """
    values: dict[str, Any] = {}
    used = [name for name in algorithm.options_used if name not in APP_CONTROLLED]
    specs = algorithm.options.specs()
    if not used and not specs:
        st.caption(f"{algorithm.name} has no options.")
        return values
    if used:
        cols = st.columns(min(len(used), 4))
        for k, name in enumerate(used):
            with cols[k % len(cols)]:
                values[name] = _option_input(name, f"{key}_{name}")
    if specs:
        st.caption(f"{algorithm.name}'s own options (`--opt key=value` in the CLI, listed by `ccviz list`)")
        cols = st.columns(min(len(specs), 4))
        for k, spec in enumerate(specs):
            with cols[k % len(cols)]:
                value = algorithm_option_input(spec, f"{key}_{algorithm.name}_{spec.name}")
            if value != spec.default:
                values[spec.name] = value
    return values


def algorithm_option_input(spec: OptionSpec, key: str) -> Any:
    """The widget an option's declaration asks for: a selectbox for choices (and for a yes/no that may be
    automatic), a checkbox for yes/no, a number input for numbers (0 = automatic where it may be)."""
    label, help_text = spec.name.replace("_", " "), f"{spec.meaning} (CLI: `--opt {spec.name}=...`)"
    if spec.choices:
        return st.selectbox(label, spec.choices, index=spec.choices.index(spec.default), key=key, help=help_text)
    if spec.kind is bool and spec.automatic:
        words = {"auto": None, "true": True, "false": False}
        default = next(word for word, value in words.items() if value is spec.default)
        return words[st.selectbox(label, list(words), index=list(words).index(default), key=key, help=help_text)]
    if spec.kind is bool:
        return st.checkbox(label, value=spec.default, key=key, help=help_text)
    if spec.kind is str:
        return st.text_input(label, value=spec.default or "", key=key, help=help_text) or spec.default
    whole = spec.kind is int
    cast = int if whole else float
    if spec.automatic:  # 0 stands for automatic (such options start at 1 or above)
        number = st.number_input(f"{label} (0 = auto)", min_value=cast(0), max_value=_bound(spec.maximum, cast),
                                 value=cast(spec.default or 0), step=cast(1), key=key, help=help_text)
        return cast(number) or None
    number = st.number_input(label, min_value=_bound(spec.minimum, cast), max_value=_bound(spec.maximum, cast),
                             value=cast(spec.default), step=cast(1) if whole else None, key=key, help=help_text)
    return cast(number)


def _bound(limit: float | None, cast: type) -> Any:
    return None if limit is None else cast(limit)


def _option_input(name: str, key: str) -> Any:
    if name == "epoch":
        rules = ["fastest", "slowest", "seconds"]
        choice = st.selectbox("epoch", rules, index=rules.index(SHARED_OPTION_DEFAULTS[name]), key=key,
                              help="fastest/slowest: one chunk's time on the fastest/slowest link")
        if choice == "seconds":
            return st.number_input("epoch (us)", min_value=1e-4, value=1.0, format="%.4f", key=key + "_us") * 1e-6
        return choice
    if name == "epochs":
        n = st.number_input("epochs (0 = automatic)", min_value=0, value=0, step=1, key=key)
        return int(n) or None
    if name == "time_limit":
        return float(st.number_input("time limit (s)", min_value=0.5, value=SHARED_OPTION_DEFAULTS[name], step=5.0,
                                     key=key))
    if name == "gap":
        return float(st.number_input("MIP gap to stop at", min_value=0.0, max_value=1.0,
                                     value=SHARED_OPTION_DEFAULTS[name], step=0.05,
                                     key=key, help="0 = solve to optimality; 0.3 = the paper's early stop"))
    if name == "seed":
        return int(st.number_input("seed", min_value=0, value=SHARED_OPTION_DEFAULTS[name], step=1, key=key))
    if name == "restarts":
        return int(st.number_input("restarts", min_value=1, value=SHARED_OPTION_DEFAULTS[name], step=1, key=key))
    text = st.text_input(name, key=key)
    return text or None


def results_summary(entry: CachedRun) -> None:
    """Finish time, bandwidths, the bound and the ratio to it, synthesis time, the verdict."""
    result = entry.result
    s = result.summary()
    top, bottom = st.columns(3), st.columns(3)
    top[0].metric("finish time", format_time(s["finish_time_s"]))
    top[1].metric("algbw", _gbps(s["algbw_GBps"]))
    top[2].metric("busbw", _gbps(s["busbw_GBps"]))
    bound_s, bound_help = tightest_bound(s["lower_bound_s"], s["limit_s"], result.topology)
    ratio = s["finish_time_s"] / bound_s if bound_s else None
    bottom[0].metric("bound", format_time(bound_s) if bound_s else "n/a", help=bound_help,
                     delta=f"finish = {ratio:.3g} × bound" if ratio else None, delta_color="off", delta_arrow="off")
    bottom[1].metric("synthesis time", format_time(s["synth_time_s"]), delta=status_words(s["status"]),
                     delta_color="off", delta_arrow="off")
    bottom[2].metric("verified by simulator", "yes" if s["verified"] else "NO")
    details = (f"{s['collective']} of {format_size(s['size_bytes'])} ({format_size(s['chunk_bytes'])} chunks) on "
               f"{s['topology']} with **{s['algorithm']}**: {s['transfers']} transfers")
    if s["epochs"]:
        details += f", {s['epochs']} epochs of {format_time(s['epoch_s'])}"
    if s["mip_gap"] is not None:
        details += f", MIP gap {s['mip_gap']:.3g}"
    # the wall time beside "synthesis time" (the solver's own): a first run's worker start can take seconds
    st.markdown(details + f" · {format_time(entry.server_time_s)} from Synthesize to this result (waiting for a "
                "worker process, the simulator and the bound included)")
    limit_lines(entry)
    st.caption(f"Status: {s['status_meaning']}.")
    if entry.stopped_at_limit:  # nobody pressed Stop: the page must not say so
        st.warning("Stopped at the time limit: this is the best schedule the solver had when its time limit ran "
                   "out; raise 'time limit (s)' under algorithm options to let it go on.")
    elif entry.stopped:
        st.warning("Stopped early: this is the best schedule found before you pressed Stop.")
    elif s.get("cut_short"):  # the solver honoured its limit (or Stop) itself and handed back its best so far
        st.info(cut_short_words(s["cut_short"], "'time limit (s)' under algorithm options"))
    schedule_notes(entry)
    if not s["verified"]:
        st.error(f"The simulator found {len(s['violations'])} violation(s); the schedule is not valid.")
        st.dataframe(s["violations"], width="stretch")


def schedule_notes(entry: CachedRun) -> None:
    """How the algorithm made this schedule, in its own notes (Synthesize and Playback: a lecturer on Playback
    saw how far a forestcoll run was from the limit but not what forestcoll had built)."""
    for note in entry.result.schedule.notes or []:
        st.caption(for_app(note))


def limit_lines(entry: CachedRun) -> None:
    """How far the run is from the fabric's limit, then what the limit is, how it was found and which links
    bind (a lecturer's question on any page that shows a run: Synthesize and Playback)."""
    s = entry.result.summary()
    st.markdown(f"**{for_app(limit_sentence(s['finish_time_s'], s['limit_s'], s['n_gpus'], s['collective']))}**")
    sums = switch_sums_sentence(s["finish_time_s"], s.get("limit_without_switch_sums_s"),
                                entry.result.schedule.sums_in_switches)
    if sums:  # AllReduce on switches that add: the limit a schedule summing at GPUs can reach
        st.caption(for_app(sums[0].upper() + sums[1:] + "."))
    if entry.result.limit is not None:
        st.caption(for_app(entry.result.limit.explanation()))


# "optimal" only with its scope: TE-CCL proves it within its epoch model, where epochs round times up
STATUS_WORDS = {"optimal": "optimal in TE-CCL's epoch model", "time_limit": "stopped (not proven optimal)"}


def cut_short_words(cut_short: str, where: str) -> str:
    """What a schedule handed back before its search was over means, and the knob (``where``) that lets it go on."""
    phrase = CUT_SHORT_WORDS[cut_short][0].upper() + CUT_SHORT_WORDS[cut_short][1:]
    if cut_short == "stopped":
        return f"{phrase}: the best schedule complete when you pressed Stop; the search was not over."
    return (f"{phrase}: the best schedule complete when the limit ran out; the search was not over, and a larger "
            f"{where} may find a faster one.")


def status_words(status: str | None) -> str | None:
    """A run's status as the app shows it: 'optimal' always with the model it holds in."""
    return STATUS_WORDS.get(status, status) if status else status


def row_status(status, cut_short) -> str | None:
    """A Compare row's status in words, with whether its search was cut short (a closer schedule may exist)."""
    words = status_words(status) if isinstance(status, str) else None
    return f"{words}, {CUT_SHORT_WORDS[cut_short]}" if words and isinstance(cut_short, str) else words


def limit_bounds(topology) -> bool:
    """Whether the fabric's limit (bandwidth only) is a lower bound here: a switch hop charged in full
    ("paid") or no switches. Under "teccl" or "free" a hop out of a switch costs no serialization, so
    a schedule can finish before the cut's bytes would have crossed it."""
    return not topology.switches or topology.switch_hop == "paid"


def tighter_bounds(table, topology):
    """Per Compare row, the bound shown: the larger of its lower bound and (where it bounds) the fabric's limit."""
    import pandas as pd

    columns = [table["lower_bound_s"]]
    if "limit_s" in table and limit_bounds(topology):
        columns.append(table["limit_s"])
    return pd.concat(columns, axis=1).max(axis=1)


def comparison_export(table, topology):
    """The Compare table as the CSV download gives it: the library's columns, with ``bound_s`` the bound the
    page shows (the tighter of the lower bound and the fabric's limit) and ``bound_algbw_GBps`` and
    ``bound_ratio`` measured against it, so the file's ratios are the page's (they were against the lower
    bound alone: 5.41 in the file where the page showed 2.79, dragonfly AllReduce)."""
    bound_s = tighter_bounds(table, topology)
    export = table.assign(bound_algbw_GBps=table["size_bytes"] / bound_s / 1e9,
                          bound_ratio=table["finish_time_s"] / bound_s)
    export.insert(export.columns.get_loc("lower_bound_s") + 1, "bound_s", bound_s)
    return export


def tightest_bound(lower_bound_s: float | None, limit_s: float | None, topology) -> tuple[float | None, str]:
    """The bound to show: the larger of the lower bound and the fabric's limit (where the limit bounds),
    and a help text naming both, so the page never shows a weaker bound beside a stronger one."""
    candidates = {"lower bound (cut and latency arguments)": lower_bound_s}
    if limit_s and limit_bounds(topology):
        candidates["fabric's limit (bandwidth only, alpha ignored)"] = limit_s  # AllToAll's is a flow LP, not a cut
    known = {name: value for name, value in candidates.items() if value}
    if not known:
        return None, "no bound is known for this collective"
    name = max(known, key=known.get)
    parts = [f"{k}: {format_time(v)}" for k, v in known.items()]
    return known[name], (f"no schedule on this fabric finishes sooner. The tighter of {' and '.join(parts)}"
                         if len(known) > 1 else f"no schedule on this fabric finishes sooner: {parts[0]}")


def _gbps(value: float | None) -> str:
    """Three significant digits, never in e-notation (an NVL72 busbw read '1.73e+03 GB/s')."""
    if value is None:
        return "n/a"
    return f"{value:.3g} GB/s" if abs(value) < 1000 else f"{value:,.0f} GB/s"


def animation(entry: CachedRun):
    return entry.figure("animation", lambda: schedule_animation(entry.result.timeline))


def downloads(entry: CachedRun) -> None:
    """Schedule JSON, MSCCL XML, Chakra ET (ASTRA-sim) and the animation as a standalone HTML page."""
    timeline = entry.result.timeline
    stem = f"{entry.result.topology.name}_{entry.result.collective.name}_{entry.request.algorithm}"
    cols = st.columns(4)
    cols[0].download_button("Schedule JSON", data=lambda: export.schedule_json(timeline),
                            file_name=f"{stem}.json", mime="application/json", on_click="ignore")
    xml, why_not = entry.figure("msccl", lambda: msccl_or_reason(timeline))
    if xml is None:  # say why on the page; never offer a file that holds only the failure
        cols[1].warning(f"No MSCCL XML for this schedule: {why_not}", icon=":material/block:")
    else:
        cols[1].download_button("MSCCL XML", data=xml, file_name=f"{stem}.xml", mime="application/xml",
                                on_click="ignore")
    chakra, why_not = entry.figure("chakra", lambda: chakra_or_reason(timeline, stem))
    if chakra is None:
        cols[2].warning(f"No Chakra ET for this schedule: {why_not}", icon=":material/block:")
    else:
        cols[2].download_button("Chakra ET (zip)", data=chakra[0], file_name=f"{stem}_chakra.zip",
                                mime="application/zip", on_click="ignore",
                                help="one PREFIX.RANK.et per rank for ASTRA-sim (--workload-configuration=DIR/PREFIX)"
                                     + "".join(f"; {n}" for n in chakra[1]))
    cols[3].download_button("Animation HTML", data=lambda: animation(entry).to_html(include_plotlyjs=True,
                                                                                     auto_play=False),
                            file_name=f"{stem}.html", mime="text/html", on_click="ignore")


def chakra_or_reason(timeline, stem: str) -> tuple[tuple[bytes, list[str]] | None, str | None]:
    """((zip of the Chakra ETs, notes), None), or (None, why they cannot be written) for the page."""
    from ccviz.interop.chakra import chakra_zip, trace_prefix

    return _file_or_reason(lambda: chakra_zip(timeline, trace_prefix(stem)), "chakra")


def msccl_or_reason(timeline) -> tuple[str | None, str | None]:
    """(the MSCCL XML, None), or (None, why it cannot be written) in words for the page."""
    return _file_or_reason(lambda: export.msccl_xml(timeline), "msccl")


def _file_or_reason(make: Callable[[], Any], field: str) -> tuple[Any, str | None]:
    """(what ``make`` builds, None), or (None, why it cannot be built) in words for the page."""
    try:
        return make(), None
    except CcvizError as exc:
        return None, str(exc).removeprefix(f"{field}: ")
    except Exception as exc:  # noqa: BLE001 - a download must not break the page
        traceback.print_exc()
        return None, f"the export failed unexpectedly ({type(exc).__name__}: {exc}); the JSON schedule still works"


def plot(fig, key: str, **kwargs: Any):
    """Every chart goes through here: full width, no logo, a stable key."""
    with user_errors("drawing"):
        return st.plotly_chart(fig, width="stretch", key=key, config=PLOT_CONFIG, **kwargs)
