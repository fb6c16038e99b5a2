"""Playback: the last schedule as an animation, step by step, and through its link and buffer views."""

import pandas as pd
import streamlit as st

from ccviz.app import imports, ui, url
from ccviz.app.state import last_run
from ccviz.model.units import format_size, format_time
from ccviz.viz import (
    gantt_figure,
    holdings_figure,
    link_busy_bars,
    topology_figure,
    utilization_heatmap,
)
from ccviz.viz.steps import schedule_steps, steps_figure

ui.configure_page()

st.title("Playback")
imports.upload_panel()  # a schedule made elsewhere becomes the run shown here
url.run_from_link()  # a shared link to Playback names a run: make it, so the link shows what it showed
entry = last_run()
if entry is None:
    url.share("playback")
    st.info("No schedule yet: run one on the **Synthesize** page, then come back here.")
    st.stop()

timeline = entry.result.timeline
topology = timeline.topology
frame = timeline.transfers_frame()
coll = timeline.collective
note = url.share_run(entry)
steps = entry.figure("steps", lambda: schedule_steps(timeline))
st.caption(f"{entry.request.algorithm} · {coll.name} of {format_size(coll.size_bytes)} over {coll.n_ranks} GPUs "
           f"on {topology.name} · finish {format_time(timeline.finish_time_s)} · {ui.plural(len(steps), 'step')} · "
           + note)
ui.limit_lines(entry)  # how far from the fabric's limit, and which links bind
ui.schedule_notes(entry)  # how the algorithm made it
with st.expander("download this schedule (JSON, MSCCL XML, Chakra ET for ASTRA-sim, animation)"):
    ui.downloads(entry)


def transfers_table(rows: pd.DataFrame, first: list[str] | None = None) -> None:
    """Transfers with readable times (us)."""
    view = rows.assign(start_us=rows["start_s"] * 1e6, arrival_us=rows["arrival_s"] * 1e6)
    st.dataframe(view[[*(first or []), "chunk", "source", "src", "dst", "op", "start_us", "arrival_us"]],
                 width="stretch", hide_index=True)


VIEWS = ["Step by step", "Animation in time", "Inspect a link or node", "Utilization", "Who holds what", "Gantt"]
view = st.radio("view", VIEWS, horizontal=True, key="pb_view", label_visibility="collapsed",
                persist_state="session")
# Only the chosen view is drawn: big schedules make every figure cost something.
if view == "Step by step":
    st.caption("One frame per dependency step (a textbook algorithm's rounds): ▶ Play, the slider and the frames "
               "run in your browser. Links are coloured by what they do in the step, GPUs by how much of what they "
               "need they hold once it has landed.")
    ui.plot(entry.figure("steps_figure", lambda: steps_figure(timeline)), key=f"pb_steps_{id(entry)}")
    step_of = {i: s.number for s in steps for i in s.transfers}
    with st.expander("every transfer with its step"):
        transfers_table(frame.assign(step=[step_of.get(i, 0) for i in range(len(frame))]), first=["step"])

elif view == "Animation in time":
    ui.plot(ui.animation(entry), key="pb_animation")

elif view == "Inspect a link or node":
    st.caption("Click a node or the dot in the middle of a link, or pick one below.")
    event = ui.plot(entry.figure("topology", lambda: topology_figure(topology)), key="pb_pick",
                        on_select="rerun", selection_mode="points")
    picked = None
    points = (event.selection.points if event is not None and hasattr(event, "selection") else []) or []
    if points and points[0].get("customdata"):
        picked = tuple(points[0]["customdata"])
    names = [f"node {n}" for n in topology.nodes] + [f"link {u}->{v}" for u, v in sorted(topology.links)]
    if picked is not None and picked != st.session_state.get("pb_last_pick"):  # a new click wins over the menu
        st.session_state["pb_last_pick"] = picked
        clicked = f"node {picked[0]}" if len(picked) == 1 else f"link {picked[0]}->{picked[1]}"
        if clicked in names:
            st.session_state["pb_elem"] = clicked
    if st.session_state.get("pb_elem") not in names:
        st.session_state["pb_elem"] = names[0]
    choice = st.selectbox("element", names, key="pb_elem")
    kind, _, ident = choice.partition(" ")
    if kind == "node":
        node = int(ident)
        rows = frame[(frame["src"] == node) | (frame["dst"] == node)]
        held = timeline.holdings_at(timeline.finish_time_s).get(node)
        st.markdown(f"**{topology.nodes[node].label}** sends {int((rows['src'] == node).sum())} and "
                    f"receives {ui.plural(int((rows['dst'] == node).sum()), 'transfer')}"
                    + (f"; holds {ui.plural(sum(v >= 1 for v in held.values()), 'complete chunk')} at the end"
                       if held else ""))
    else:
        u, v = (int(x) for x in ident.split("->"))
        rows = frame[(frame["src"] == u) & (frame["dst"] == v)]
        busy = timeline.link_utilization().get((u, v), 0.0)
        st.markdown(f"**link {u}→{v}** carries {ui.plural(len(rows), 'transfer')}, busy {busy:.0%} of the run")
    transfers_table(rows)

elif view == "Utilization":
    ui.plot(entry.figure("busy", lambda: link_busy_bars(timeline)), key="pb_busy")
    ui.plot(entry.figure("heatmap", lambda: utilization_heatmap(timeline)), key="pb_heat")

elif view == "Who holds what":
    ui.plot(entry.figure("holdings", lambda: holdings_figure(timeline)), key="pb_hold")

else:
    ui.plot(entry.figure("gantt", lambda: gantt_figure(timeline)), key="pb_gantt")
