"""Papers: re-run a paper's published table row by row and compare (``ccviz reproduce`` in the app)."""


import pandas as pd
import streamlit as st

from ccviz.app import ui, url
from ccviz.app.runs import CachedRun, ReproduceJob, RunRequest
from ccviz.app.state import for_app, set_last_run, set_topology, user_errors
from ccviz.model.units import format_time
from ccviz.runs import reproduce
from ccviz.runs.isolated import pool

ui.configure_page()

EXPLAINER_KEY = "ccviz_explainer_rows"
paper = st.radio("paper", list(url.PAPERS.values()), horizontal=True, key=url.PAPER_KEY)
url.share("papers", paper=next(k for k, v in url.PAPERS.items() if v == paper))  # a link opens this paper
if paper.startswith("Collectives Explainer"):
    from ccviz.runs import explainer

    st.title("Papers: the Collectives Explainer's worked tables")
    st.markdown("Each row is a number printed in the Collectives Explainer series (N = 512 ladders, in-network "
                "rows, the NVL72 + IB hierarchical case study, small tori, pipelining) beside ccviz's formula "
                "(`ccviz cost`) and, where the fabric is small enough to build, the simulated schedule. "
                "`ccviz reproduce explainer` prints the same table.")
    if EXPLAINER_KEY not in st.session_state:
        with st.spinner("evaluating the formulas and simulating the small fabrics"), user_errors("explainer"):
            st.session_state[EXPLAINER_KEY] = explainer.reproduce_explainer()
    rows = st.session_state.get(EXPLAINER_KEY) or []
    # the numbers in the grid; each row's note and command below it, wrapped (in the grid they were cut off)
    st.dataframe(pd.DataFrame([{
        "row": r.name, "reference (us)": r.reference_us, "formula (us)": round(r.formula_us, 3),
        "simulated (us)": None if r.simulated_us is None else round(r.simulated_us, 3),
        "limit (us)": None if r.limit_us is None else round(r.limit_us, 3), "ratio": round(r.ratio, 3),
        "note": "yes" if r.note else "", "table": r.table} for r in rows]), width="stretch", hide_index=True,
        height=640, column_config={"row": st.column_config.TextColumn("row", width="large"),
                                   "note": st.column_config.TextColumn("note", help="read it below", width="small")})
    if rows:
        noted = [r.name for r in rows if r.note]
        name = st.selectbox("read a row's note and its `ccviz cost` command", [r.name for r in rows],
                            index=[r.name for r in rows].index(noted[0]) if noted else 0, key="papers_explainer_row")
        chosen = next(r for r in rows if r.name == name)
        st.markdown(f"**{chosen.name}** ({chosen.table}): {chosen.note or 'no note: within 1 % of the reference.'}")
        st.code(chosen.command, language="bash", wrap_lines=True)
    s = explainer.summary(rows)
    (st.success if not s["unexplained"] else st.error)(
        f"{s['rows']} rows: {s['within_1pct']} within 1 % of the reference, {s['explained']} differ with the "
        f"reason in their note, {len(s['unexplained'])} unexplained; {s['simulated']} simulated")
    with st.expander("Where the reference contradicts itself, and which side ccviz follows"):
        from ccviz.runs.explainer_conflicts import conflicts

        if "ccviz_explainer_conflicts" not in st.session_state:  # each computes a number (a few simulations)
            st.session_state["ccviz_explainer_conflicts"] = conflicts()
        for c in st.session_state["ccviz_explainer_conflicts"]:
            text = (f"**{c['topic']}.** One place: {c['statement_a']}. Another: {c['statement_b']}. ccviz "
                    f"follows {c['ccviz_follows']}, because {c['why']}. `{c['command']}`: {c['demonstration']}.")
            st.markdown(text.replace("~", r"\~"))  # "~2 a_switch" is not strikethrough
    st.stop()

if paper.startswith("Measured"):
    from ccviz.app.measured_view import measured_section

    measured_section()
    st.stop()

JOB_KEY = "ccviz_reproduce_job"
ROWS_KEY = "ccviz_reproduce_rows"
POLL_S = 0.2

st.title("Papers: published results, re-run")
st.markdown(
    "**TE-CCL** (Liu et al., SIGCOMM 2024): its 66 published AllGather runs on NDv2 2 chassis (as run: node 0 "
    "marked a switch, chunk = size / 16) and DGX2 2 chassis (chunk = size / 32), epoch modes Slow, Fast and "
    "Fast_Early_Stop (MIP gap 0.3). Each row is solved with the run's own epoch length and TE-CCL's published "
    "switch rule (`switch_hop=teccl`: a hop out of a switch pays its alpha, not a second serialization), then "
    "replayed by the simulator. Published solve times are Gurobi's on an 80-core server.")
st.caption("'optimal' means optimal in TE-CCL's epoch model: no schedule needs fewer epochs (the bound proves it). "
           "Epochs round alpha and serialization up, so the continuous-time replay ('simulated') is usually a "
           "little faster than epochs × epoch length, and other algorithms can beat it in continuous time.")

c1, c2 = st.columns([3, 1])
filter_text = c1.text_input("rows whose name has every word", key="papers_filter",
                            placeholder="e.g. DGX2 Slow, or 1MB (empty: all 66)")
time_limit = float(c2.number_input("time limit per row (s)", min_value=1.0, max_value=600.0, value=30.0,
                                   step=5.0, key="papers_time_limit"))

job = st.session_state.get(JOB_KEY)
running = job is not None and not job.done
if st.button("Run the table", type="primary", disabled=running, key="papers_run"):
    with user_errors("reproduce"):
        job = ReproduceJob(reproduce.published_runs(filter_text), time_limit)
        st.session_state[JOB_KEY] = job

if job is not None and not job.done:
    live = st.empty()
    with live.container():
        if st.button("Stop", key="papers_stop"):
            job.stop()
        bar = st.empty()
    while not job.wait(POLL_S):
        line = f"{len(job.rows)} of {len(job.runs)} rows · {format_time(job.elapsed_s)}"
        if job.current:
            line += f" · solving {job.current}"
        if busy := pool().line(job.ticket):
            line += f" · {busy}"
        line += " (stopping…)" if job.stop_event.is_set() else ""
        bar.progress(min(1.0, job.fraction), text=line)
    live.empty()

if job is not None and job.done:
    del st.session_state[JOB_KEY]
    if job.error:
        st.error(for_app(job.error))
    st.session_state[ROWS_KEY] = job.rows
    if running:  # the Run button above was drawn disabled while the table ran: draw it again enabled
        st.rerun()

rows = st.session_state.get(ROWS_KEY)
if not rows:
    st.info("Press **Run the table** (all 66 rows take a few minutes; a filter runs fewer).")
    st.stop()

summary = reproduce.summary(rows)
table = pd.DataFrame(reproduce.table_rows(rows), columns=list(reproduce.COLUMNS))
st.dataframe(table, width="stretch", hide_index=True)
line = reproduce.summary_line(summary)
(st.success if summary["ok"] else st.error)(line)

opened = [r for r in rows if r.result is not None]
if opened:
    c1, c2 = st.columns([3, 1])
    name = c1.selectbox("open a row in Playback", [r.run.name for r in opened], key="papers_open_row")
    if c2.button("Open in Playback", key="papers_open"):
        row = next(r for r in opened if r.run.name == name)
        result = reproduce.completed_result(row)  # with the bound and the limit the table skips
        request = RunRequest.make(result.topology, "allgather", "teccl", row.run.size_bytes,
                                  epoch=row.run.epoch_s, gap=row.run.gap)
        set_topology(result.topology, f"published run {row.run.name}")
        set_last_run(CachedRun(request, result, row.solve_s))
        st.switch_page("pages/playback.py")
