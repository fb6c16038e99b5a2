"""Learn: a textbook algorithm on a teaching fabric, stepped by its own rounds, beside its formula."""

import streamlit as st

from ccviz.app import ui, url
from ccviz.app.learn_panels import exercise_panel, lesson_panel
from ccviz.app.runs import RunRequest, SynthesisJob
from ccviz.app.state import for_app, user_errors
from ccviz.builders.loading import load_topology
from ccviz.model.units import format_size, format_time
from ccviz.runs.composed_formula import composed_unavailable, lesson_formula
from ccviz.synth.registry import REGISTRY
from ccviz.viz.explainer_lessons import EXERCISE_KEY, FREE, LESSONS, TOPIC_KEY, apply_preset
from ccviz.viz.inc_lesson import inc_comparison, inc_cost
from ccviz.viz.lesson import (
    LESSON_SIZES,
    TEACHING_TOPOLOGIES,
    lesson_figure,
    lesson_summary,
    lesson_table,
    textbook_unavailable,
)
from ccviz.viz.narration import formula_gap
from ccviz.viz.rounds import rounds_frame_height, rounds_html
from ccviz.viz.switch_model import other_switch_model, switch_model_time, switch_model_words

ui.configure_page()

TEACHING_COLLECTIVES = ("allreduce", "allgather", "reducescatter", "broadcast", "reduce", "alltoall", "gather",
                        "scatter")
TEXTBOOK = ("ring", "ring-bidir", "tree", "dbt", "rhd", "rd", "direct", "bruck", "dimdecomp", "hierarchical", "pat")
RUN_WAIT_S = 60.0

GLOSSARY = {
    "α (alpha)": "latency: the fixed cost of one message on a link, whatever its size",
    "β (beta)": "the cost per byte on a link, 1/bandwidth; M·β is the time to push the whole buffer",
    "chunk": "the piece of a GPU's data that moves as one transfer; more chunks per GPU = more pipelining",
    "round": "one logical step of the algorithm: every GPU sends (at most) one message to its partner",
    "epoch": "a fixed time slot in which synthesizers like TE-CCL schedule transfers",
    "algbw": "algorithm bandwidth: buffer size / time",
    "busbw": "bus bandwidth: algbw scaled by the collective's factor, comparable with link speed",
    "lower bound": "no schedule on this fabric can finish sooner (cut and latency arguments)",
    "partial sum": "a reduction of some ranks' contributions, still missing the others'",
}
INTROS = {
    "ring": "Ring: every GPU talks only to its neighbour. It optimises bandwidth — each GPU sends just "
            "(N-1)/N of the buffer per phase — but pays N-1 latencies per phase: AllReduce costs "
            "2(N-1)α + 2(N-1)/N·M·β.",
    "ring-bidir": "Bidirectional ring: two rings in opposite directions, each carrying half of the chunks, so "
                  "both directions of every cable work. Same rounds as the ring, half the bytes per direction "
                  "(needs 2+ chunks per GPU to split).",
    "rhd": "Recursive halving-doubling (Rabenseifner): partners at distance N/2, N/4, …, 1 exchange half of "
           "what they hold, then the reverse. It optimises latency — only 2·log2 N rounds — while keeping the "
           "ring's bytes: 2·log2(N)α + 2(N-1)/N·M·β. Partners are not neighbours on a ring, so sends relay.",
    "rd": "Simple recursive doubling: in round k every GPU swaps its whole partial sum with the GPU 2^k away and "
          "adds it. log2 N rounds, but the whole buffer each round: log2(N)(α + M·β). Its partner changes every "
          "round, so it pipelines only where a GPU has a link to each partner (a hypercube), not on a one-port star.",
    "tree": "Binomial tree: reduce up to a root, then broadcast down, log2 N rounds each. Few rounds "
            "(latency), but the whole buffer crosses every level: 2⌈log2 N⌉(α + M·β).",
    "dbt": "Double binary tree (NCCL): two complementary trees, each carrying half the data, pipelined over "
           "the chunks: 2(d+S-1)(α + M/(2S)·β) with depth d = ⌊log2 N⌋ and S chunks.",
    "direct": "Direct: every GPU sends straight to every other (through the fabric's routes). One or two "
              "rounds, but each GPU pushes N-1 messages: (N-1)(α + M/N·β) per phase.",
    "inc": "In-network (NVLS / SHARP): every GPU sends each chunk up once; the switch adds the contributions "
           "and multicasts the sum back, chunk after chunk, up and down links busy at once. AllReduce costs "
           "2α + (S+1)/S·M·β for S chunks in all: M/BW, where software needs 2(N-1)/N·M/BW.",
    "bruck": "Bruck: ⌈log2 N⌉ rounds at distances 1, 2, 4, … for any N. Latency-optimal AllGather: "
             "⌈log2 N⌉α + (N-1)/N·M·β.",
    "dimdecomp": "Dimension-decomposed: on a torus or mesh, reduce-scatter along one dimension at a time (every "
                 "row at once, then every column on a quarter of the data, …), then all-gather back. Rounds drop "
                 "from 2(N-1) to 2Σ(dᵢ-1) while the bytes stay the ring's: 2Σ(dᵢ-1)α + 2(N-1)/N·M·β.",
    "hierarchical": "Hierarchical: reduce-scatter inside each group over its fast links, all-reduce the 1/n "
                    "that each GPU owns across groups (the slow tier carries only M/n), all-gather inside the "
                    "group again: t_RS,inner(M) + t_AR,outer(M/n) + t_AG,inner(M).",
    "pat": "PAT (parallel aggregated trees, NCCL 2.23): every GPU roots a binomial tree; all trees grow one "
           "level per round, farthest partner first. ⌈log2 N⌉ rounds with the ring's bytes: "
           "⌈log2 N⌉α + (N-1)/N·M·β.",
}

st.title("Learn: how collective algorithms move data")
st.markdown("Pick a textbook algorithm and a small fabric; step through its **rounds** (buttons, Play, or the "
            "← → keys) and read what each round does. The simulated time sits beside the algorithm's "
            "alpha-beta formula, and *Why one wins* compares them all.")
st.markdown("Words: " + " · ".join(f'<abbr title="{text}">{term}</abbr>' for term, text in GLOSSARY.items())
            + " <small>(hover a word)</small>", unsafe_allow_html=True)

st.session_state.setdefault(TOPIC_KEY, FREE)
topic = st.selectbox(
    "lesson", [FREE, *LESSONS], key=TOPIC_KEY,
    format_func=lambda k: "free exploration (pick anything below)" if k == FREE else LESSONS[k].title,
    on_change=lambda: apply_preset(st.session_state, st.session_state[TOPIC_KEY]),
    help="A lesson of the Collectives Explainer sets the fabric, collective, algorithm, size and chunks below, "
         "and adds its own table; the link carries it (topic=...).")
c1, c2, c3, c4, c5 = st.columns([4, 2, 3, 3, 2])  # the fabric's names are the longest
topo_label = c1.selectbox("fabric", list(TEACHING_TOPOLOGIES), index=1, key="learn_topology",
                          persist_state="session")
collective = c2.selectbox("collective", TEACHING_COLLECTIVES, key="learn_collective", persist_state="session",
                          help="allreduce = reduce-scatter + all-gather")
with user_errors("learn"):
    topology = load_topology(TEACHING_TOPOLOGIES[topo_label])
n_gpus = topology.n_gpus
listed = [a for a in TEXTBOOK + (("inc",) if topology.reducing_switches else ())
          if a in REGISTRY and REGISTRY[a].supports(collective)]
why_not = {a: textbook_unavailable(a, n_gpus) or composed_unavailable(a, topology) for a in listed}
algorithm = c3.selectbox(
    "algorithm", listed, key="learn_algorithm", persist_state="session",
    format_func=lambda a: f"{a} — unavailable: {why_not[a]}" if why_not[a] else a,
    help="Algorithms marked unavailable cannot run on this fabric; the reason is beside the name.")
chunks = c4.select_slider("chunks per GPU (segments)", options=[1, 2, 4, 8], value=1, key="learn_chunks", persist_state="session",
                          help="More chunks let pipelined algorithms (dbt, ring broadcast) overlap their rounds "
                               "and let ring-bidir split data between directions.")
with c5:
    size = ui.size_picker("buffer size", "learn_size", default=1e6)

exercise = st.toggle("Exercise: predict the time before you see it", key=EXERCISE_KEY,
                     help="The simulated time stays hidden until you type your guess; the page grades it.")
url.share("learn", lesson=TEACHING_TOPOLOGIES[topo_label], topology=None, collective=collective,
          algorithm=algorithm, size=size, chunks=chunks, topic=None if topic == FREE else topic,
          exercise="1" if exercise else None)
st.caption("The address bar holds this lesson (fabric, collective, algorithm, size, chunks): copy it to share.")
st.info(INTROS.get(algorithm, REGISTRY[algorithm].description))
if any(topology.is_switch(v) for v in topology.nodes):
    st.caption(f"**Switch model:** {switch_model_words(topology)}")
if why_not[algorithm]:
    st.warning(f"{algorithm} is unavailable here: it {why_not[algorithm]}. Pick another algorithm or another "
               "fabric.")
    st.stop()

with user_errors("learn"):
    request = RunRequest.make(topology, collective, algorithm, size, chunks,
                              **({"pieces": chunks} if algorithm == "inc" else {}))
    job = SynthesisJob(request, topology, isolated=False)  # textbook rounds: milliseconds, no solver, no line
    job.wait(RUN_WAIT_S)
    if job.error or job.entry is None:
        st.error(for_app(f"{algorithm}: {job.error or 'did not finish in time; try a smaller fabric'}"))
        st.stop()
    entry = job.entry
    result = entry.result
    timeline = result.timeline
    schedule = timeline.schedule
    used = {(t.src, t.dst) for t in schedule.transfers}
    formula = lesson_formula(topology, timeline.collective, algorithm, used, schedule.options)
    if algorithm == "inc" and collective == "allreduce":
        formula = inc_cost(topology, timeline.collective)

    graded = True
    if exercise:
        graded = exercise_panel(timeline.finish_time_s, formula, size, n_gpus)
    m1, m2, m3, m4 = st.columns(4)
    m1.metric("simulated finish", format_time(timeline.finish_time_s) if graded else "?",
              help="the simulator's verdict")
    m2.metric("alpha-beta formula", format_time(formula.time_s) if formula else "n/a",
              help="evaluated for this schedule: its chunks and the links it uses")
    bound_s, bound_help = ui.tightest_bound(result.lower_bound_s, result.limit_s, topology)
    m3.metric("bound", format_time(bound_s) if bound_s else "n/a", help=bound_help)
    m4.metric("verified", "yes" if timeline.verified else "NO", help="every GPU ends with what it must hold")
    st.caption(f"{schedule.n_rounds} rounds · {len(schedule.transfers)} link transfers · "
               f"{format_size(timeline.collective.chunk_bytes)} per chunk")
    if formula is None:
        st.markdown(f"No closed form for {algorithm} {collective} on {n_gpus} GPUs.")
    else:
        st.markdown(f"Formula: `{formula.text}`")
        gap = formula_gap(timeline, formula, bound_s or result.lower_bound_s) if graded else None
        if gap:
            st.markdown(f"**Why they differ:** {gap}")
    if schedule.notes:
        st.caption(" · ".join(schedule.notes))
    if any(topology.is_switch(v) for v in topology.nodes) and st.toggle(
            "What would the other switch model cost?", key="learn_switch_toggle",
            help="the same algorithm on the same fabric, its switch hops charged the other way"):
        other = other_switch_model(topology)
        with st.spinner("simulating the other switch model"):
            other_s = switch_model_time(other, collective, algorithm, size, chunks)
        st.metric(f"simulated finish, switch_hop={other.switch_hop}", format_time(other_s),
                  delta=format_time(other_s - timeline.finish_time_s), delta_color="off")
        st.caption(switch_model_words(other))

    if topic != FREE:
        lesson_panel(LESSONS[topic], topology, chunks, show_simulated=graded)
    if graded:
        html = entry.figure("rounds_html", lambda: rounds_html(timeline))
        st.iframe(html, height=rounds_frame_height(timeline))
    else:
        st.caption("The rounds (with their times) appear once you have made your guess.")

    st.subheader("Why one wins")
    if st.toggle("Compare every textbook algorithm for this collective and fabric (1 KB to 1 GB)",
                 key="learn_compare"):
        runnable = [a for a in listed if not why_not[a]]
        sizes = tuple(sorted(set(LESSON_SIZES) | {float(size)}))
        key = ("lesson", TEACHING_TOPOLOGIES[topo_label], collective, chunks, sizes)
        if key not in st.session_state:
            with st.spinner(f"simulating {len(runnable)} algorithms at {len(sizes)} sizes"):
                st.session_state[key] = lesson_table(topology, collective, runnable, sizes, chunks)
        table = st.session_state[key]
        ui.plot(lesson_figure(table), key="learn_lesson")
        st.dataframe(lesson_summary(table, float(size)), hide_index=True)
        failed = table[table["error"] != ""]
        for row in failed.itertuples():
            st.caption(f"{row.algorithm} at {format_size(row.size_bytes)}: {row.error}")

st.subheader("Switches that add: in-network AllReduce (NVLS) vs ring and DBT")
st.markdown(
    "On an 8-GPU NVSwitch box the switch can *add* (NVLink SHARP): every GPU sends each chunk up once, the "
    "switch sums the eight contributions and multicasts the result back. Up and down use the two directions "
    "of each link at once, so AllReduce costs **M/BW** of bandwidth and **2 α** of latency, against ring's "
    "2(N-1)/N·M/BW and 2(N-1) α. Each row: the closed form beside what the simulator measures.")
with user_errors("learn"):
    inc_size = st.select_slider("buffer (INC lesson)", options=[64e3, 1e6, 16e6, 256e6], value=16e6,
                                format_func=format_size, key="learn_inc_size")
    inc_key = ("learn_inc", inc_size)
    if inc_key not in st.session_state:
        with st.spinner("simulating ring, DBT and INC on the 8-GPU box"):
            st.session_state[inc_key] = inc_comparison(float(inc_size))
    st.dataframe([{"algorithm": r.algorithm, "formula time": format_time(r.formula_s) if r.formula_s else "n/a",
                   "simulated": format_time(r.simulated_s), "verified": r.verified, "rounds": r.rounds,
                   "fabric": r.fabric}
                  for r in st.session_state[inc_key]], hide_index=True)
    for r in st.session_state[inc_key]:  # the formulas whole, below the table (a cell cut them off)
        st.markdown(f"**{r.algorithm}:** `{r.formula}`")
    st.caption("ring and DBT run on star:n=8 (the switch forwards and multicasts), INC on star:n=8,reduce=true; "
               "50 GB/s and 0.5 us per link, 4 chunks per GPU. INC's formula counts S = 32 chunks through one "
               "switch: the last chunk's way down is the pipeline's only overhead.")
    for r in st.session_state[inc_key]:  # below the table: a cell would cut the sentence off
        if r.why:
            st.markdown(f"**Why {r.algorithm} differs from its formula:** {r.why}")
