"""Learn: a textbook algorithm on a small ring or torus, one sentence per step, beside its alpha-beta formula."""

import streamlit as st

from ccviz import app_ui
from ccviz.app_runs import RunRequest, SynthesisJob
from ccviz.app_state import user_errors
from ccviz.compare import textbook_formula, textbook_link
from ccviz.loading import load_topology
from ccviz.synth.registry import REGISTRY
from ccviz.units import format_size, format_time
from ccviz.viz import frame_snapshot, frame_windows, narrate

app_ui.configure_page()

TEACHING_TOPOLOGIES = {
    "ring of 4 GPUs": "ring:n=4",
    "ring of 8 GPUs": "ring:n=8",
    "2x2 torus": "torus2d:dims=2x2",
    "3x3 torus": "torus2d:dims=3x3",
    "4x4 torus": "torus2d:dims=4x4",
}
TEACHING_COLLECTIVES = ("allgather", "reducescatter", "allreduce", "broadcast", "reduce", "alltoall")
RUN_WAIT_S = 60.0

st.title("Learn: how collective algorithms move data")
st.markdown("Pick a textbook algorithm and a small fabric; step through the schedule and read what happens "
            "at each step and why. The simulated time sits beside the algorithm's alpha-beta formula.")
c1, c2, c3, c4 = st.columns(4)
topo_label = c1.selectbox("fabric", list(TEACHING_TOPOLOGIES), key="learn_topology")
collective = c2.selectbox("collective", TEACHING_COLLECTIVES, key="learn_collective")
textbook = sorted(name for name, alg in REGISTRY.items() if alg.kind == "classic" and alg.supports(collective))
algorithm = app_ui.algorithm_picker(c3, textbook, collective, "learn_algorithm")
with c4:
    size = app_ui.size_picker("size per rank", "learn_size", default=1e6)

with user_errors("learn"):
    topology = load_topology(TEACHING_TOPOLOGIES[topo_label])
    request = RunRequest.make(topology, collective, algorithm, size)
    job = SynthesisJob(request, topology)
    job.wait(RUN_WAIT_S)
    if job.error or job.entry is None:
        st.error(f"{algorithm}: {job.error or 'did not finish in time; try a smaller fabric'}")
        st.stop()
    entry = job.entry
    timeline = entry.result.timeline
    windows = entry.figure("windows", lambda: frame_windows(timeline))
    stories = entry.figure("stories", lambda: narrate(timeline, windows))

    st.info(f"**{algorithm}** — {REGISTRY[algorithm].description}")
    formula = textbook_formula(collective, algorithm, topology, size)
    alpha_us, bw = textbook_link(topology)
    m1, m2, m3 = st.columns(3)
    m1.metric("simulated finish", format_time(timeline.finish_time_s))
    m2.metric("alpha-beta formula", format_time(formula.time_s) if formula else "n/a")
    m3.metric("lower bound", format_time(entry.result.lower_bound_s))
    if formula is not None:
        st.markdown(f"Formula ({topology.n_gpus} GPUs, α = {alpha_us:g} us, β = 1/{bw:g} GB/s, "
                    f"{format_size(size)}): `{formula.text}`")

    k = app_ui.frame_stepper("learn_step", len(windows), "learn", ("◀ back", "step ▶"), reset_for=request)
    story = stories[k]
    st.markdown(f"#### Step {k + 1} of {len(windows)}")
    st.markdown(story.sentence)
    st.progress(story.delivered / story.demands if story.demands else 1.0,
                text=f"{story.delivered}/{story.demands} deliveries done")
    app_ui.plot(frame_snapshot(timeline, k, windows), key="learn_snapshot")
    with st.expander("all steps"):
        for s in stories:
            st.markdown(f"{s.window.index + 1}. {s.sentence}")
