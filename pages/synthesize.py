"""Synthesize: pick a collective, an algorithm and its options; run it; see the verdict and the animation."""

import streamlit as st

from ccviz.app import matrix as matrix_ui
from ccviz.app import ui, url
from ccviz.app.baseline_view import nccl_baseline_line
from ccviz.app.replay import replay_section
from ccviz.app.runs import RunRequest, SynthesisJob, cache_line
from ccviz.app.state import (
    clear_errors,
    current_topology,
    keep_error,
    last_run,
    set_last_run,
    show_errors,
    user_errors,
)
from ccviz.errors import CcvizError
from ccviz.model.collectives import COLLECTIVES, ROOTED, VARIABLE
from ccviz.model.units import format_time
from ccviz.runs.isolated import pool
from ccviz.synth.registry import REGISTRY, algorithms_for
from ccviz.viz.steps import steps_figure

ui.configure_page()

JOB_KEY = "ccviz_job"
POLL_S = 0.1

st.title("Synthesize a schedule")
with st.expander("**What is ccviz?** Start here", expanded=last_run() is None):
    st.markdown("ccviz builds schedules for collective communication (AllGather, AllReduce, AllToAll, …) on a "
                "GPU fabric, checks every schedule in a simulator, compares it with the lower bound, and shows "
                "it moving over the links. Three ways in:")
    for column, (page, label, icon, text) in zip(st.columns(3), (
            ("pages/learn.py", "Teach", ":material/school:", "step through ring, tree and halving-doubling"),
            ("pages/topology.py", "Design", ":material/hub:", "build or upload a fabric, edit its cables"),
            ("pages/compare.py", "Compare", ":material/monitoring:", "algorithms over sizes against the bound"),
    ), strict=True):
        column.page_link(page, label=f"**{label}**", icon=icon)
        column.markdown(text)
    st.markdown("Or stay here: pick a collective and an algorithm below and press **Synthesize**.")
ui.topology_caption()
topology = current_topology()

left, middle, right = st.columns(3)
collective = left.selectbox("collective", COLLECTIVES + VARIABLE, key="syn_collective", persist_state="session")
choices = algorithms_for(collective)
algorithm = ui.algorithm_picker(middle, choices, collective, "syn_algorithm")
with right:
    size = ui.size_picker("size per rank", "syn_size") if collective not in VARIABLE else None
    if size is None:
        st.caption("alltoallv: the bytes of every pair come from the traffic matrix below")
alg = REGISTRY[algorithm]
st.caption(f"**{alg.name}** ({alg.kind}): {alg.description}")
c1, c2, c3 = st.columns(3)
st.session_state.setdefault("syn_chunks", 1)
chunks = 1 if collective in VARIABLE else int(  # alltoallv: the chunks come from the matrix
    c1.number_input("chunks per rank", min_value=1, max_value=64, step=1, key="syn_chunks", persist_state="session"))
root = c2.selectbox("root", topology.gpus, key="syn_root") if collective in ROOTED else None
dest = (c2.selectbox("destination", [g for g in topology.gpus if g != root], key="syn_dest",
                     help="sendrecv: the GPU the root sends its buffer to") if collective == "sendrecv" else None)
ranks = c3.text_input("process group (optional)", key="syn_ranks", placeholder="every GPU, or e.g. 0-3,8",
                      help="the collective covers these GPUs only; the others relay").strip()
url.share("synthesize", collective=collective, algorithm=algorithm, size=size, chunks=chunks, root=root, dest=dest,
          ranks=ranks or None)
st.caption(url.shared_note())
matrix = None
if collective in VARIABLE:
    with user_errors():  # the message names the cell ("matrix[1][2]: ...")
        matrix = matrix_ui.matrix_inputs("syn_mx", topology)
with st.expander("algorithm options", expanded=bool(alg.options_used) and alg.kind == "optimal"):
    options = ui.option_inputs(alg, "syn_opt")

pool().prepare()  # worker processes with the solvers imported, ready before Synthesize is pressed
job = st.session_state.get(JOB_KEY)
running = job is not None and not job.done
button_slot = st.empty()  # while a solve runs: a disabled button; the real one is drawn here once it ends
if running:
    button_slot.button("Synthesize", type="primary", disabled=True, key="syn_run_busy")
elif button_slot.button("Synthesize", type="primary", key="syn_run"):
    with user_errors("synthesis", sticky="synthesis"):
        if collective in VARIABLE and matrix is None:
            raise CcvizError("matrix: give a traffic matrix (the MoE generator or an upload) first", "matrix")
        request = RunRequest.make(topology, collective, algorithm, size or float(matrix.sum(axis=1).max()), chunks,
                                  root, ranks=ranks or None, dest=dest, matrix=matrix, **options)
        job = SynthesisJob(request, topology)
        st.session_state[JOB_KEY] = job

if job is not None and not job.done:
    live = st.empty()  # the stop button and progress vanish together once the solve ends
    with live.container():
        # on_click runs before the next script run starts: the stop reaches the solver at once
        st.button("Stop", key="syn_stop", on_click=job.stop,
                  help="ends the solve within about a second; the best schedule found so far is shown")
        status = st.empty()
    while not job.wait(POLL_S):
        status_line = ui.job_line(job.request.algorithm, job.elapsed_s, job.latest(), job.stop_event.is_set())
        if busy := job.queue_line():  # the machine is shared: say when this solve waits or shares the cores
            status_line += f" · {busy}"
        if job.best_s is not None:
            status_line += f" · Stop now keeps a verified schedule finishing in {format_time(job.best_s)}"
        p = job.latest()
        if p is not None and p.fraction is not None:
            status.progress(min(1.0, max(0.0, p.fraction)), text=status_line)
        else:
            status.info(status_line)
    live.empty()

if job is not None and job.done:
    del st.session_state[JOB_KEY]
    if job.error:
        keep_error("synthesis", f"{job.request.algorithm}: {job.error}")
    elif job.entry is not None:
        clear_errors("synthesis")
        set_last_run(job.entry)
    if running:  # the button above was drawn disabled while the solve ran: enabled again at once, no rerun
        button_slot.button("Synthesize", type="primary", key="syn_run")
show_errors("synthesis")  # stays until the next successful run

entry = last_run()
if entry is not None:
    with user_errors("results"):
        ui.results_summary(entry)
        nccl_baseline_line(entry)
        matrix_ui.matrix_views(entry, ui.plot)
        ui.downloads(entry)
        ui.plot(entry.figure("steps_figure", lambda: steps_figure(entry.result.timeline)),
                key=f"syn_steps_{id(entry)}")  # a new run, a new chart: it opens at its first frame
        st.caption("One frame per dependency step: press ▶ Play or drag the slider (it runs in your browser). "
                   "More views (the animation in time, utilization, who holds what, Gantt) on the Playback page.")
    st.caption(cache_line())
    with user_errors("replay"):
        replay_section(entry)  # a packet-level second opinion on ns-3 (the ns3 extra)
else:
    st.info("Choose a collective and an algorithm, then press **Synthesize**.")
