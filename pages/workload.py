"""Workload: every process group of a parallel job runs its collective at once; two rank orders side by side."""

import streamlit as st

from ccviz.app import ui, url
from ccviz.app.state import clear_errors, current_topology, keep_error, show_errors, user_errors
from ccviz.runs.workload import SYNTHESES, parse_parallel, parse_run, run_workload
from ccviz.synth.registry import REGISTRY, SynthOptions
from ccviz.viz.workload import alone_vs_together, group_timelines, groups_on_fabric, groups_table, links_table

ui.configure_page()
RESULTS_KEY = "wl_results"

st.title("Workload: concurrent process groups")
st.markdown("A training job runs many collectives at once: tensor-parallel groups inside a box, data-parallel "
            "groups across boxes. Each group's schedule is synthesized alone (the other GPUs relay; a group that a "
            "symmetry of the fabric maps from one already synthesized gets that schedule relabeled), then all "
            "groups are judged **together** by the simulator on one timeline, sharing links. "
            "With synthesis **joint** the job's schedule is instead one synthesis of every group's chunks at once "
            "(each group alone still gives its finish alone). "
            "*eta_beta* = finish alone / finish together (1: the others cost it nothing).")
ui.topology_caption()
topology = current_topology()
n = topology.n_gpus


def default_parallel() -> str:
    tp = next((t for t in (8, 4, 2) if n % t == 0 and n // t >= 2), 1)
    return f"tp={tp},dp={n // tp}"


left, middle, right = st.columns(3)
st.session_state.setdefault("wl_parallel", default_parallel())  # a shared link may have set these (ccviz.app.url)
st.session_state.setdefault("wl_run", "tp:allreduce:16MB,dp:allreduce:64MB")
st.session_state.setdefault("wl_algorithm", "ring")
parallel_text = left.text_input("parallelism (product = GPUs)", key="wl_parallel",
                                help="kinds tp, cp, ep, pp, dp, e.g. tp=8,dp=4")
run_text = middle.text_input("collectives", key="wl_run",
                             help="KIND:COLLECTIVE:SIZE for each kind, comma separated")
names = sorted(REGISTRY)
algorithm = right.selectbox("algorithm", names, key="wl_algorithm")
st.session_state.setdefault("wl_synthesis", SYNTHESES[0])
synthesis = right.selectbox("synthesis", SYNTHESES, key="wl_synthesis",
                            help="composed: each group synthesized alone, then all timed together on shared links; "
                                 "joint: every group's chunks in one synthesis (tacos, mteg, teccl, teccl-astar)")

kinds: list[str] = []
with user_errors("workload input"):
    kinds = list(parse_parallel(parallel_text))
    parse_run(run_text)
orders = url.workload_orders(kinds)
c1, c2, c3, c4 = st.columns(4)
for key, default in (("wl_order_a", orders[0]), ("wl_order_b", orders[min(1, len(orders) - 1)])):
    if st.session_state.get(key) not in orders:  # first visit, or the kinds changed
        st.session_state[key] = default
st.session_state.setdefault("wl_seed", 0)
order_a = c1.selectbox("rank order A (innermost first)", orders, key="wl_order_a")
order_b = c2.selectbox("rank order B", orders, key="wl_order_b")
seed = int(c3.number_input("seed (random order)", min_value=0, max_value=10_000, key="wl_seed"))
limit = float(c4.number_input("time limit per group (s)", min_value=1.0, max_value=600.0, value=30.0,
                              key="wl_limit"))
url.share("workload", parallel=parallel_text, run=run_text, algorithm=algorithm,
          synthesis=None if synthesis == SYNTHESES[0] else synthesis, orders=f"{order_a},{order_b}",
          seed=seed or None)

if st.button("Run both orders", type="primary", key="wl_run_button"):
    results = {}
    with st.status("synthesizing every group alone, then judging them together ...", expanded=False) as status:
        try:
            for order in dict.fromkeys((order_a, order_b)):
                results[order] = run_workload(topology, parallel_text, run_text, algorithm, order=order, seed=seed,
                                              options=SynthOptions(time_limit=limit), synthesis=synthesis,
                                              progress=lambda text, o=order: status.update(label=f"[{o}] {text}"))
            status.update(label="done", state="complete")
            clear_errors("workload")
            st.session_state[RESULTS_KEY] = {"orders": (order_a, order_b), "results": results}
        except Exception as exc:  # one clear line on the page, never a traceback
            status.update(label="failed", state="error")
            keep_error("workload", f"workload: {exc}")
show_errors("workload")

saved = st.session_state.get(RESULTS_KEY)
if not saved:
    st.info("Choose the parallelism, the collectives, an algorithm and two rank orders, then press **Run both "
            "orders**.")
    st.stop()
columns = st.columns(2)
for side, (column, order) in enumerate(zip(columns, saved["orders"], strict=True)):  # A and B may be one order
    result = saved["results"][order]
    with column, user_errors("workload results"):
        data = result.to_dict()
        ok = "verified" if data["verified"] else f"INVALID ({len(result.timeline.violations)} violations)"
        st.subheader(f"order {order}")
        st.metric("job finish (all groups together)", f"{data['finish_s'] * 1e3:.4g} ms", help=ok)
        st.caption(f"{ok} by the simulator · slowest group alone {data['finish_alone_max_s'] * 1e3:.4g} ms · "
                   f"{data['contended_links']} links shared by two or more groups · synthesis "
                   f"{data['synth_time_s']:.1f} s"
                   + ("" if data["joint_synth_time_s"] is None else
                      f" alone, {data['joint_synth_time_s']:.1f} s together")
                   + f". {result.synthesis}.")
        shown = st.radio("colour GPUs by", list(dict.fromkeys(g.kind for g in result.groups)), horizontal=True,
                         key=f"wl_kind_{side}_{order}")
        ui.plot(groups_on_fabric(result, shown), key=f"wl_fabric_{side}_{order}")
        ui.plot(alone_vs_together(result), key=f"wl_bars_{side}_{order}")
        ui.plot(group_timelines(result), key=f"wl_timeline_{side}_{order}")
        st.markdown("**Groups**")
        st.dataframe(groups_table(result), hide_index=True, width="stretch")
        st.markdown("**Busiest links** (all groups together)")
        st.dataframe(links_table(result), hide_index=True, width="stretch")
        if st.checkbox("show the concurrent animation", key=f"wl_anim_{side}_{order}"):
            from ccviz.viz import schedule_animation

            ui.plot(schedule_animation(result.timeline, max_frames=60), key=f"wl_animation_{side}_{order}")
