"""Compare: several algorithms over a size sweep on the current topology, against the lower bound.

The table is the library's ``ccviz.runs.compare.compare``, started by a ``SweepJob`` on the same Dask engine
as ``ccviz sweep``: light sweeps in the app process, heavy ones on an embedded cluster, or on any Dask
cluster whose scheduler address is given.
"""

import streamlit as st

from ccviz.app import imports, ui, url
from ccviz.app import matrix as matrix_ui
from ccviz.app.runs import SweepJob, SweepRequest, cache_line
from ccviz.app.state import current_topology, for_app, user_errors
from ccviz.model.collectives import COLLECTIVES, ROOTED
from ccviz.model.units import format_size, format_time
from ccviz.runs import baseline
from ccviz.synth.fabric_fit import fitting, unfit_reason
from ccviz.synth.registry import REGISTRY, algorithms_for
from ccviz.viz import comparison_figure, finish_bars
from ccviz.viz.comparison import (
    formulas_above_limit,
    formulas_beaten,
    handover_sentence,
    largest_finished_size,
)

ui.configure_page()

PARAMS_KEY = "cmp_params"
JOB_KEY = "cmp_job"
POLL_S = 0.1
NUMERIC = ("finish_us", "algbw_GBps", "busbw_GBps", "bound_us", "bound_ratio", "limit_us", "limit_pct",
           "no_switch_sums_us", "formula_us", "synth_time_s", "x_nccl")
# what each number is, in its header's tooltip (a researcher read "limit_pct" as a share of the limit's time)
COLUMN_HELP = {
    "finish_us": "finish time in the simulator (us)",
    "algbw_GBps": "algorithm bandwidth: size per rank / finish time (GB/s)",
    "busbw_GBps": "bus bandwidth: algbw times nccl-tests' factor for the collective (GB/s)",
    "bound_us": "the bound: the tighter of the lower bound and, where it bounds, the fabric's limit (us); one per "
                "size where the limit bounds (no schedule beats it whatever its chunking), so every algorithm is "
                "measured against the same",
    "bound_ratio": "finish time / bound (1 = at the bound)",
    "limit_us": "the fabric's limit: bandwidth only, alpha ignored (us)",
    "limit_pct": "limit / finish time, in %: the share of the limit's speed the schedule reaches (100 = at the limit)",
    "no_switch_sums_us": "AllReduce on switches that add (NVLS, SHARP): the limit for schedules that sum at GPUs, "
                         "ReduceScatter then AllGather (us); empty elsewhere",
    "formula_us": "the textbook alpha-beta formula (us); empty where the algorithm has none",
    "synth_time_s": "synthesis time (s)",
    "x_nccl": "NCCL's finish time / this row's at the same size (above 1: faster than what NCCL would run; "
              "ccviz.runs.baseline)",
}


def run_sweep(job: SweepJob) -> None:
    """Show the sweep's progress with a Stop button until its thread ends (as the Synthesize page)."""
    live = st.empty()  # the stop button and progress vanish together once the sweep ends
    with live.container():
        st.button("Stop", key="cmp_stop", on_click=job.stop,
                  help="ends the sweep within about a second: the running algorithm returns its best schedule "
                  "so far (or fails), the points not run are marked skipped")
        status = st.empty()
    while not job.wait(POLL_S):
        status.progress(min(1.0, job.fraction), text=f"{job.status_line()}, {format_time(job.elapsed_s)}")
    live.empty()


st.title("Compare algorithms")
ui.topology_caption()
topology = current_topology()

c1, c2 = st.columns([1, 2])
collective = c1.selectbox("collective", COLLECTIVES, key="cmp_collective", persist_state="session")
available = algorithms_for(collective)
if not available:
    st.warning(f"No registered algorithm implements {collective} yet.")
    st.stop()
# Optimal solvers (MILPs) take tens of seconds per run even on small fabrics: opt-in, so the
# defaults finish in about half a minute. The choices follow the collective (one selection per collective).
default = [a for a in available if REGISTRY[a].kind != "optimal"] or available
if baseline.applies(topology) and baseline.ALGORITHM in available:  # a system preset: NCCL's row comes first
    default = [baseline.ALGORITHM, *(a for a in default if a != baseline.ALGORITHM)]
if not topology.reducing_switches:  # inc needs switches that add in the network: not offered where none do
    available = [a for a in available if a != "inc"]
unfit = [a for a in default if a in available and a not in fitting(topology, [a])]
default = [a for a in default if a in available and a not in unfit] or available  # what runs on this fabric
algorithms = c2.multiselect("algorithms", available, default=default, key=f"cmp_algorithms_{collective}",
                            persist_state="session",
                            help="optimal solvers (TE-CCL) are off by default: each run can take tens of seconds; "
                            "they obey the time limit")
heavy = [a for a in algorithms if REGISTRY[a].kind == "optimal"]
optional = [a for a in available if REGISTRY[a].kind == "optimal" and a not in algorithms]
if optional:
    st.caption(f"Not selected by default (slow per run): {', '.join(optional)}. Add them for a few sizes.")
if unfit:
    st.caption(f"Not selected by default (they do not run on {topology.name}): "
               + "; ".join(f"{a}: {unfit_reason(topology, a)}" for a in unfit))
sizes = ui.size_range_picker("sizes", "cmp_sizes")
c3, c4, c5, c6 = st.columns(4)
chunks = int(c3.number_input("chunks per rank", 1, 16, 1, key="cmp_chunks", persist_state="session"))
root = c4.selectbox("root", topology.gpus, key="cmp_root") if collective in ROOTED else None
time_limit = float(c5.number_input("time limit per run (s)", 1.0, 600.0, 20.0, key="cmp_time_limit",
                                          persist_state="session"))
epoch = c6.selectbox("TE-CCL epoch", ["fastest", "slowest"], key="cmp_epoch", persist_state="session", disabled=not heavy,
                     help="one chunk's time on the fastest/slowest link; used by the TE-CCL solvers only")
if heavy:
    st.caption(f"{len(heavy) * len(sizes)} TE-CCL run(s) of up to {time_limit:g} s each.")
scheduler = st.text_input("Dask scheduler (optional)", key="cmp_scheduler", persist_state="session", placeholder="tcp://HOST:8786",
                          help="run the sweep on a Dask cluster (`dask scheduler` + `dask worker` on its machines, "
                          "with ccviz installed); empty: this machine — one worker process for light sweeps, "
                          "else an embedded cluster of one worker process per core (closed when the sweep ends)")

url.share("compare", collective=collective, algorithms=",".join(algorithms) or None, chunks=chunks,
          sizes=f"{format_size(sizes[0])}-{format_size(sizes[-1])}" if sizes else None)
st.caption(url.shared_note())

params = SweepRequest(topology.to_json(), collective, tuple(algorithms), tuple(float(s) for s in sizes), chunks, root,
                      time_limit, epoch)
job = st.session_state.get(JOB_KEY)
running = job is not None and not job.done
clicked = st.button("Compare", type="primary", disabled=not algorithms or running, key="cmp_run")
if clicked:
    st.session_state[PARAMS_KEY] = params
# Finished points are cached: coming back to a sweep shown before, or pressing Compare after a Stop,
# runs only the points still missing.
if st.session_state.get(PARAMS_KEY) == params and not running and (
        job is None or job.request != params or (clicked and job.stopped)):
    job = st.session_state[JOB_KEY] = SweepJob(params, topology, scheduler)
if job is not None and not job.done:
    run_sweep(job)
    if running:  # the Compare button above was drawn disabled while the sweep ran: draw it again enabled
        st.rerun()

if st.session_state.get(PARAMS_KEY) == params and job is not None and job.done and job.request == params:
    with user_errors("comparison"):
        if job.error:
            st.error(for_app(job.error))
        table = job.table()
        if job.stopped and not job.error:  # a sweep that failed was not stopped: its error says why
            st.info(f"Sweep stopped after {len(table[table['status'] != 'skipped'])} of {job.total} runs; "
                    "press **Compare** to run the rest.")
        failed = table[table["error"].notna()]
        for _, row in failed[failed["status"] != "skipped"].drop_duplicates("algorithm").iterrows():
            st.warning(for_app(f"{row['algorithm']}: {row['error']}"))
        bound_s = ui.tighter_bounds(table, topology)  # the tighter of the lower bound and the fabric's limit
        ok = table[table["error"].isna()]
        over = ok[ok["algbw_GBps"] > ok["bound_algbw_GBps"] * (1 + 1e-6)]
        if len(over):
            st.error(f"{len(over)} result(s) beat the lower bound, which is impossible (please report it): "
                     f"{', '.join(over['algorithm'].unique())}")
        elif len(ok) and ok["lower_bound_s"].notna().all():
            st.success(f"All {len(ok)} verified results stay within the bound (the tighter of the lower bound and "
                       f"the fabric's limit); best ratio to it: {(ok['finish_time_s'] / bound_s[ok.index]).min():.3f}.")
        ui.plot(comparison_figure(table), key="cmp_plot")
        st.caption("Dotted lines are the textbook α-β formulas: one message per GPU at a time, every link at the "
                   "speed of the links the schedule uses, no contention. Solid lines are simulated on this fabric.")
        if beaten := formulas_beaten(table):  # one box: six near-identical ones read as noise
            st.info("Faster than their textbook formula: "
                    + "; ".join(f"**{alg}** at {', '.join(format_size(s) for s in at_sizes)}"
                                for alg, at_sizes in beaten.items())
                    + ". The formula sends one message per GPU at a time; these schedules use several of a GPU's "
                    "links at once, so there the formula is not an ideal.")
        if handover := handover_sentence(table):
            st.markdown(handover)
        # "no schedule reaches it" only where the limit bounds (switch hops paid in full, or no switches)
        if above := (formulas_above_limit(table) if ui.limit_bounds(topology) else {}):
            st.warning("Textbook formulas faster than this fabric's limit: "
                       + "; ".join(f"**{alg}** at {', '.join(format_size(s) for s in at_sizes)}"
                                   for alg, at_sizes in above.items())
                       + ". A formula assumes every link at full speed and no link shared, which this fabric's "
                       "bottleneck links cannot give; no schedule reaches it here.")
        at = st.select_slider("finish times at", options=list(sizes), format_func=format_size, key="cmp_bar_size",
                              value=largest_finished_size(table) or sizes[-1])  # a Stopped sweep skips the largest
        ui.plot(finish_bars(table, at), key="cmp_bars")
        cut = table[table["cut_short"] == "time_limit"]
        if len(cut):  # a row cut by its own time limit is its algorithm's best so far, not its best
            st.warning(f"{len(cut)} run(s) reached the time limit per run ({time_limit:g} s) before their search was "
                       f"over: {', '.join(f'{a} at {s}' for a, s in zip(cut['algorithm'], cut['size'], strict=True))}. "
                       "Each shows the best schedule complete by then; raise 'time limit per run (s)' to let them go on.")
        shown = table.assign(status=[ui.row_status(s, c) for s, c in zip(table["status"], table["cut_short"], strict=True)],
                             finish_us=table["finish_time_s"] * 1e6,
                             bound_us=bound_s * 1e6, bound_ratio=table["finish_time_s"] / bound_s,
                             formula_us=table["formula_time_s"] * 1e6, limit_us=table["limit_s"] * 1e6,
                             limit_pct=table["limit_fraction"] * 100,
                             no_switch_sums_us=table["limit_without_switch_sums_s"] * 1e6,
                             x_nccl=baseline.times_nccl_column(table))
        sums = ["no_switch_sums_us"] if shown["no_switch_sums_us"].notna().any() else []
        vs = ["x_nccl"] if shown["x_nccl"].notna().any() else []
        st.dataframe(shown[["algorithm", "size", "finish_us", "algbw_GBps", "busbw_GBps", "bound_us",
                            "bound_ratio", *vs, "limit_us", "limit_pct", *sums, "formula_us", "verified", "status",
                            "synth_time_s", "error"]],
                     width="stretch", hide_index=True,
                     column_config={c: st.column_config.NumberColumn(c, format="%.4g", help=COLUMN_HELP[c])
                                    for c in NUMERIC if (c != "no_switch_sums_us" or sums) and (c != "x_nccl" or vs)})
        st.download_button("table as CSV", data=ui.comparison_export(table, topology).to_csv(index=False),
                           file_name="comparison.csv",
                           mime="text/csv", on_click="ignore")
else:
    st.info("Pick algorithms and sizes, then press **Compare**.")
st.caption(cache_line())

imports.compare_section(collective, sizes)  # uploads from Playback, replayed at the same sizes
matrix_ui.skew_section(topology, ui.plot)  # AllToAllv: direct, twophase, mcf and the limit across skews
