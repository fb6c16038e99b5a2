"""Learn's lesson panel and "predict the time" exercise (Streamlit); the numbers come from
``ccviz.viz.explainer_lessons`` and the run on the page."""

from __future__ import annotations

import streamlit as st

from ccviz.bounds.cost import CostResult
from ccviz.model.topology import Topology
from ccviz.model.units import format_size, format_time
from ccviz.viz.explainer_lessons import (
    Lesson,
    crossover_figure,
    cut_figure,
    dbt_roles,
    eta_rows,
    grade,
    lesson_rows,
)


def lesson_panel(lesson: Lesson, topology: Topology, chunks: int, show_simulated: bool = True) -> None:
    """The lesson's words, then formula, simulation and the fabric's limit side by side for each case
    (the simulated column waits for the student's guess in an exercise)."""
    st.subheader(lesson.title)
    st.markdown(lesson.text)
    if lesson.panel == "bisection":
        key = ("learn_cut", topology.name, lesson.collective, lesson.size)
        if key not in st.session_state:
            with st.spinner("finding the fabric's bottleneck cut"):
                st.session_state[key] = cut_figure(topology, lesson.collective, lesson.size)
        fig, words = st.session_state[key]
        st.plotly_chart(fig, key="learn_cut_fig", config={"displaylogo": False})
        st.caption(f"Red: the cut, where {words}")
    if lesson.panel == "dbt":
        roles, fig = dbt_roles(topology, lesson.size, chunks)
        st.plotly_chart(fig, key="learn_dbt_fig", config={"displaylogo": False})
        st.dataframe(roles, hide_index=True)
        st.caption("In the reduce phase a rank receives from its children in both trees and sends to its parent in "
                   "each; the broadcast phase runs the same links the other way. DBT's M/BW floor needs that many "
                   "ports each way; the formula above is priced at the ports this fabric gives.")
    if lesson.panel == "eta":
        key = ("learn_eta", topology.name, lesson.size)
        if key not in st.session_state:
            with st.spinner("running both groups alone and together"):
                st.session_state[key] = eta_rows(topology, lesson.size)
        st.dataframe(st.session_state[key], hide_index=True)
        st.caption("measured η_β = finish alone / finish together (1: the other group cost it nothing). The "
                   "assumed profile prices every run at its worst case; a layout whose groups share few links "
                   "measures far less contention. Command: `ccviz workload torus2d:dims=4x4 --parallel tp=8,dp=2 "
                   "--run tp:allreduce:16MB --order random`.")
    if lesson.panel == "crossover":
        crossover_panel(topology, lesson.collective)
    key = ("learn_lesson_rows", lesson.key, chunks)
    if key not in st.session_state:
        with st.spinner("simulating the lesson's cases"):
            st.session_state[key] = lesson_rows(lesson, chunks)
    rows = st.session_state[key]
    columns = ["case", "fabric", "algorithm", "chunks", "formula", "simulated", "limit", "verified"]
    if not show_simulated:
        columns.remove("simulated")
        st.caption("The simulated column appears once you have made your guess.")
    st.dataframe(rows[columns], hide_index=True)
    below = rows[(rows["formula_s"].notna()) & (rows["limit_s"].notna()) & (rows["formula_s"] < rows["limit_s"])]
    for row in below.itertuples():
        st.caption(f"{row.case}: the formula sits below the fabric's limit — its ideal model is not a bound here.")
    st.caption("Each row is `ccviz synth FABRIC -c " + lesson.collective + " -a ALGORITHM -s "
               + format_size(lesson.size) + " --chunks CHUNKS --json` (formula_s, finish_time_s, limit_s).")


def exercise_panel(simulated_s: float, formula: CostResult | None, size: float, n_gpus: int) -> bool:
    """Ask for a guess; once given, grade it against the simulation and explain the formula's terms.
    Returns whether the simulated time may be shown."""
    st.markdown(f"**Predict the time.** {n_gpus} GPUs, {format_size(size)}: how long does this run take? "
                "Use the formula's α and M/BW counts.")
    guess = st.number_input("your guess (µs)", min_value=0.0, value=None, step=1.0, key="learn_guess",
                            placeholder="type a number of microseconds")
    if guess is None or guess <= 0:
        return False
    g = grade(float(guess), simulated_s)
    (st.success if "Right" in g.verdict else st.warning)(
        f"{g.verdict} You said {format_time(g.guess_s)}; the simulator says {format_time(simulated_s)}.")
    if formula is not None:
        st.caption(f"The formula's terms: {formula.n_alpha:g} α + {formula.n_beta:.4g} M/BW = "
                   f"{format_time(formula.time_s)} — {formula.text}")
    return True


def crossover_panel(topology: Topology, collective: str) -> None:
    """M* from the formulas for chosen N, α, BW and c_real (as ``ccviz crossover``), and on this fabric simulated."""
    c1, c2, c3, c4 = st.columns(4)
    n = c1.select_slider("N (ranks)", options=[8, 16, 72, 128, 512, 1024], value=72, key="learn_x_n")
    alpha = c2.select_slider("α (µs)", options=[0.1, 0.25, 0.5, 1.0, 2.0], value=0.5, key="learn_x_alpha")
    bw = c3.select_slider("BW (GB/s)", options=[50, 100, 400, 900], value=900, key="learn_x_bw")
    c_real = c4.select_slider("c_real", options=[1.0, 1.5, 2.0, 2.5, 3.0], value=2.0, key="learn_x_c",
                              help="DBT's real M/BW coefficient over its floor (NCCL's tuner behaves as if ~2)")
    fig, c = crossover_figure(collective, ["ring", "dbt"], int(n), float(alpha), float(bw), float(c_real))
    st.plotly_chart(fig, key="learn_x_fig", config={"displaylogo": False})
    m = c.crossover_bytes
    st.markdown(f"**{c.words.replace('*', chr(92) + '*')}.** "
                + f"Command: `ccviz crossover -c {collective} --algorithms ring,dbt --n {n} --alpha {alpha} "
                  f"--bw {bw} --c-real {c_real}`")
    sens = [f"c_real {x['c_real']:g}: {'none' if x['crossover_bytes'] is None else format_size(x['crossover_bytes'])}"
            for x in c.sensitivity if "eta_alpha" not in x]
    st.caption("Sensitivity: " + " · ".join(sens))
    if st.toggle(f"Simulate ring and DBT on this fabric ({topology.name}) from 1 KB to 1 GB", key="learn_x_sim"):
        from ccviz.runs.crossover import simulated_crossover

        key = ("learn_x_sim", topology.name, topology.switch_hop, collective)
        if key not in st.session_state:
            with st.spinner("simulating both schedules at 11 sizes"):
                st.session_state[key] = simulated_crossover(topology, collective, ["ring", "dbt"], chunks=4)
        r = st.session_state[key]
        m = r["crossover_bytes"]
        st.markdown(f"Simulated on {topology.name} (4 chunks per GPU): "
                    + ("no crossover between 1 KB and 1 GB" if m is None else f"the winner flips near {format_size(m)}")
                    + f". Command: `ccviz crossover -c {collective} --algorithms ring,dbt --topology SPEC --chunks 4`")
