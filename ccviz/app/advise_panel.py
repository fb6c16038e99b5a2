"""The designer's "Suggest upgrades" panel: the advisor (``ccviz.advise``) on the fabric on screen.

The panel only calls the library: it reads the mix and the budget, runs ``advise`` within a time limit,
draws the plan on the fabric and the cost/time curve, applies a step with one click (undoable), and
confirms the plan with verified schedules on request. The mix and the budget travel in the page's link.
"""

from __future__ import annotations

import plotly.graph_objects as go
import streamlit as st

from ccviz.advise import advise, apply_upgrades, parse_mix
from ccviz.advise.advisor import Advice
from ccviz.app.state import set_topology, show_errors, topology_source, user_errors
from ccviz.model.topology import Topology
from ccviz.model.units import format_time
from ccviz.viz import topology_figure

DEFAULT_MIX = "allreduce:1GB:0.5,alltoall:256MB:0.3,allgather:64MB:0.2"
RESULT_KEY = "advise_result"  # (fabric JSON, mix text, budget, Advice)
UNDO_KEY = "advise_undo"  # [(topology, source)] before each applied suggestion
CONFIRM_KEY = "advise_confirmed"


def remember_link() -> None:
    """Take the mix and budget a link carries into the panel's inputs (called before the page rewrites its URL,
    which drops parameters it does not know)."""
    params = st.query_params
    if "advise_mix" not in st.session_state and "mix" in params:
        st.session_state["advise_mix"] = params["mix"]
    if "advise_budget" not in st.session_state and "budget" in params:
        try:
            st.session_state["advise_budget"] = max(0.0, float(params["budget"]))
        except ValueError:
            pass


def suggest_upgrades(topology: Topology) -> None:
    """Draw the panel for ``topology`` (the designer's current fabric)."""
    with st.expander("Suggest upgrades: what to buy for a workload", expanded=RESULT_KEY in st.session_state,
                     icon=":material/shopping_cart:"):
        st.caption("The advisor prices candidate upgrades (faster cables, new cables across the bottleneck, a "
                   "switch that reduces, a NIC per box) and picks what shortens the mix's weighted time most for the "
                   "budget, on the fabric's exact limits (bandwidth only, alpha ignored). Default prices: a "
                   "third-party estimate of an InfiniBand NDR build; `ccviz advise --costs` takes your own.")
        c1, c2, c3, c4 = st.columns([4, 2, 1, 1])
        mix_text = c1.text_input("mix (collective:size:weight, weights sum to 1)", DEFAULT_MIX, key="advise_mix")
        budget = c2.number_input("budget (USD; 0 = best value per step)", min_value=0.0, value=5_000.0,
                                 step=500.0, key="advise_budget")
        steps = c3.number_input("max steps", min_value=1, max_value=10, value=3, key="advise_steps")
        limit = c4.number_input("time limit (s)", min_value=1.0, max_value=600.0, value=60.0, key="advise_limit")
        st.query_params["mix"] = mix_text
        st.query_params["budget"] = f"{budget:g}"
        if st.button("Suggest upgrades", type="primary", key="advise_run"):
            with user_errors("advisor", sticky="advise"), st.spinner("Pricing candidates on the exact limits…"):
                mix = parse_mix(mix_text)
                advice = advise(topology, mix, budget=budget or None, max_steps=int(steps), time_limit=float(limit))
                st.session_state[RESULT_KEY] = (topology.to_json(), mix_text, budget, advice)
                st.session_state.pop(CONFIRM_KEY, None)
        show_errors("advise")
        _undo_button()
        result = st.session_state.get(RESULT_KEY)
        if result is None:
            return
        fabric_json, shown_mix, shown_budget, advice = result
        if fabric_json != topology.to_json():
            st.info("The fabric changed since these suggestions: press *Suggest upgrades* again for this one.")
            return
        _show(topology, advice)


def _show(topology: Topology, advice: Advice) -> None:
    lines = advice.summary_lines()
    st.markdown(f"{lines[0]}. *{lines[-1]}.*")
    if advice.notes:
        st.caption(" ".join(advice.notes))
    if not advice.steps:
        return
    fabric = apply_upgrades(topology, [advice.candidates[i] for i in advice.plan])
    added = [(c.src, c.dst) for c in (advice.candidates[i] for i in advice.plan) if c.kind in ("add_link", "add_nic")]
    raised = [link for c in (advice.candidates[i] for i in advice.plan) if c.kind == "set_bw"
              for link in (c.links or ((c.src, c.dst),))]
    reducing = [c.src for c in (advice.candidates[i] for i in advice.plan) if c.kind == "reduce_switch"]
    left, right = st.columns([3, 2])
    with left:
        highlight = [k for u, v in added + raised for k in ((u, v), (v, u)) if k in fabric.links]
        st.plotly_chart(topology_figure(fabric, highlight_links=highlight, highlight_nodes=reducing,
                                        title=f"after the plan: {format_time(advice.weighted_time_s[-1])} weighted "
                                              f"(was {format_time(advice.start_s)})",
                                        highlight_name="cables the plan adds or speeds up"),
                        key="advise_figure", width="stretch")
    with right:
        st.plotly_chart(_curve_figure(advice), key="advise_curve", width="stretch")
    for n, step in enumerate(advice.steps, 1):
        up = advice.candidates[step.index]
        a, b = st.columns([5, 1])
        a.markdown(f"**{n}. {up.label}** · {step.cost:,.0f} {advice.costs.currency} · saves "
                   f"{format_time(step.saved_s)} · {step.bottleneck}: cut before *{step.cut_before}*; after "
                   f"*{step.cut_after}*")
        if b.button(f"Apply 1-{n}", key=f"advise_apply_{n}", help="make the plan's first steps on this fabric "
                                                                  "(undoable)"):
            st.session_state.setdefault(UNDO_KEY, []).append((topology, topology_source()))
            applied = apply_upgrades(topology, [advice.candidates[i] for i in advice.plan[:n]])
            set_topology(applied.with_changes(name=f"{topology.name}+{n} upgrade{'s' if n > 1 else ''}"),
                         f"advisor: {n} step(s) on {topology.name}")
            st.rerun()
    if st.button("Confirm by schedule (forestcoll, mcf, inc; verified)", key="advise_confirm"):
        from ccviz.advise.confirm import confirm

        with user_errors("confirm", sticky="advise"), st.spinner("Synthesizing the mix on each step's fabric…"):
            st.session_state[CONFIRM_KEY] = confirm(topology, advice, time_limit=60.0)
    confirmed = st.session_state.get(CONFIRM_KEY)
    if confirmed:
        st.dataframe([{"step": r.step, "promised (limits)": format_time(r.promised_s),
                       "realized (verified schedules)": format_time(r.realized_s) if r.verified else "not verified",
                       "realized / promised": round(r.ratio, 4) if r.verified else None,
                       "algorithms": ", ".join(f"{x['collective']}: {x['algorithm']}" for x in r.runs)}
                      for r in confirmed], hide_index=True, width="stretch")


def _curve_figure(advice: Advice) -> go.Figure:
    fig = go.Figure()
    curve = advice.to_dict()["curve"]
    fig.add_trace(go.Scatter(x=[p["cost"] for p in curve], y=[p["weighted_time_s"] * 1e3 for p in curve],
                             mode="lines+markers", name="best value each step", line={"shape": "hv"}))
    costs = [0.0] + [s.total_cost for s in advice.steps]
    fig.add_trace(go.Scatter(x=costs, y=[t * 1e3 for t in advice.weighted_time_s], mode="markers+text",
                             name="the plan" + (" (budget)" if advice.budget else ""), marker={"size": 11},
                             text=[""] + [str(i + 1) for i in range(len(advice.steps))], textposition="top center"))
    if advice.budget:
        fig.add_vline(x=advice.budget, line_dash="dot", annotation_text="budget")
    fig.update_layout(title="cost against weighted time", xaxis_title=f"cost ({advice.costs.currency})",
                      yaxis_title="weighted time (ms)", height=380, margin={"t": 50, "b": 40, "l": 50, "r": 10},
                      legend={"orientation": "h", "y": -0.25})
    return fig


def _undo_button() -> None:
    undo = st.session_state.get(UNDO_KEY) or []
    if undo and st.button(f"Undo the last applied suggestion ({len(undo)})", key="advise_undo_button"):
        previous, source = undo.pop()
        set_topology(previous, source)
        st.rerun()
