"""Topology designer: start from a builder, a sample or a file; edit nodes and links; save as JSON."""

import json

import streamlit as st
from streamlit_flow import streamlit_flow

from ccviz.app import ui, url
from ccviz.app.advise_panel import remember_link, suggest_upgrades
from ccviz.app.canvas import canvas_too_big, flow_state, structure_changed, topology_from_flow
from ccviz.app.state import (
    current_topology,
    sample_files,
    set_topology,
    show_errors,
    topology_source,
    topology_spec,
    user_errors,
)
from ccviz.app.tables import (
    DIRECTIONS,
    editable_link_table,
    fabric_defaults,
    node_table,
    topology_from_tables,
)
from ccviz.app.url import topology_from_name
from ccviz.bounds.limit import AUTO_LIMIT_GPUS, LIMITED, bandwidth_limit, limit_is_quick
from ccviz.builders import BUILDERS, build
from ccviz.errors import CcvizError
from ccviz.model.files import parse_yaml
from ccviz.model.topology import SWITCH_HOPS, Topology
from ccviz.viz import cut_figure, topology_figure

remember_link()  # the advisor's mix and budget a link carries, before the URL is rewritten
ui.configure_page()

st.title("Topology designer")
topology = current_topology()

# Build, Load and Use draw the rest of this run from the new fabric (read again below) and do not call
# st.rerun(): a click on another page in the sidebar while that rerun was starting was lost (the designer ran
# again and the user stayed on it).
source = st.radio("start from", ["builder", "sample file", "upload", "nvidia-smi topo -m"], horizontal=True,
                  key="topo_source",
                  persist_state="session")
if source == "builder":
    names = sorted(BUILDERS)
    # the picker starts on the builder (and its values) of the fabric on screen, so "Build" rebuilds it
    shown, _, shown_values = (topology_spec() or "").partition(":")
    given = dict(item.split("=", 1) for item in shown_values.split(",") if "=" in item) if shown in BUILDERS else {}
    first = shown if shown in BUILDERS else "dgx1" if "dgx1" in names else names[0]
    name = st.selectbox("builder", names, index=names.index(first), key="topo_builder",
                        persist_state="session")
    b = BUILDERS[name]
    st.caption(b.summary)
    defaults = dict(item.split("=", 1) for item in b.signature_text().split(",") if "=" in item)
    cols = st.columns(max(1, min(len(defaults), 4)))
    changed = {}
    for k, (param, default) in enumerate(defaults.items()):
        with cols[k % len(cols)]:
            if default in ("true", "false"):
                start = given.get(param, default) == "true"
                value = "true" if st.checkbox(param, value=start, key=f"topo_b_{name}_{param}") else "false"
            else:
                value = st.text_input(param, value=given.get(param, default), key=f"topo_b_{name}_{param}").strip()
        if value != default:
            changed[param] = value
    spec = name + (":" + ",".join(f"{k}={v}" for k, v in changed.items()) if changed else "")
    if shown not in BUILDERS:  # a fabric from a link, a file or an edit: the picker is not what is on screen
        st.caption(f"On screen: **{topology.name}** (from {topology_source()}), not a builder's; Build replaces it.")
    label = f"Build {spec}" if shown in BUILDERS else f"Build {spec} (replaces {topology.name})"
    if st.button(label, type="primary", key="topo_build"):
        with user_errors("builder", sticky="topology"):
            set_topology(build(spec), f"builder {spec}", spec=spec)
elif source == "sample file":
    samples = sample_files()
    if not samples:
        st.warning("No sample topology files found in sample_topologies/.")
    else:
        stems = list(samples)
        pick = st.selectbox("sample", stems, index=stems.index("dgx1") if "dgx1" in stems else 0, key="topo_sample",
                            persist_state="session")
        if st.button(f"Load {pick}", type="primary", key="topo_load_sample"):
            with user_errors("sample", sticky="topology"):
                set_topology(*topology_from_name(pick), spec=pick)
elif source == "nvidia-smi topo -m":
    from ccviz.interop.nvidia_smi import GENERATIONS, MODELS, topo_to_fabric

    matrix = st.text_area("paste the output of `nvidia-smi topo -m`", height=220, key="topo_smi_text",
                          placeholder="        GPU0    GPU1    ...    CPU Affinity\nGPU0     X      NV2     ...")
    gpu = st.selectbox("GPU generation (sets the NVLink rate)", ["infer from the NVLink counts", *GENERATIONS],
                       key="topo_smi_gpu")
    smi_model = st.radio("judged with", MODELS, horizontal=True, key="topo_smi_model",
                         format_func={"hardware": "the hardware link model of its generation's preset",
                                      "alphabeta": "the textbook alpha-beta rule at spec rates"}.get)
    if st.button("Build from the matrix", type="primary", key="topo_smi_build"):
        with user_errors("nvidia-smi", sticky="topology"):
            fabric = topo_to_fabric(matrix, None if gpu.startswith("infer") else gpu, model=smi_model)
            set_topology(fabric, "nvidia-smi topo -m")
    for line in current_topology().meta.get("assumptions", []) if topology_source() == "nvidia-smi topo -m" else []:
        st.caption(f"assumed: {line}")
else:
    upload = st.file_uploader("topology JSON or YAML (ccviz format, the papers' reference format, or InfraGraph, "
                              "which `ccviz fabric --format infragraph` writes as YAML)", type=["json", "yaml", "yml"],
                              key="topo_upload")
    if upload is not None and st.button(f"Use {upload.name}", type="primary", key="topo_use_upload"):
        with user_errors("upload", sticky="topology"):
            try:
                text = upload.getvalue().decode("utf-8")
                data = parse_yaml(text, upload.name, "topology") if upload.name.lower().endswith((".yaml", ".yml")) \
                    else json.loads(text)
            except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                raise CcvizError(f"topology: {upload.name} is not valid JSON ({exc})", "topology") from None
            from ccviz.builders.infragraph import is_infragraph, topology_from_infragraph

            stem = upload.name.rsplit(".", 1)[0]
            fabric = topology_from_infragraph(data, upload.name) if is_infragraph(data) else \
                Topology.from_dict(data, name=stem)
            set_topology(fabric, f"upload {upload.name}")

show_errors("topology")  # kept until the next successful build/load, whatever reruns follow

st.divider()
topology = current_topology()
st.subheader(topology.name)
url.share("topology")
st.caption(url.shared_note())
st.caption(f"{topology.summary()} · from {topology_source()}" + (f" · {topology.description}"
                                                                  if topology.description else ""))
hops = list(SWITCH_HOPS)
hop = st.selectbox("switch hops (how a hop out of a switch is charged)", hops, index=hops.index(topology.switch_hop),
                   format_func=lambda h: f"{h}: {SWITCH_HOPS[h]}", key=f"topo_switch_hop_{topology.switch_hop}")
if hop != topology.switch_hop:
    with user_errors("switch hops"):
        set_topology(topology.with_changes(switch_hop=hop), f"{topology_source()}, switch_hop={hop}")
        st.rerun()
version = abs(hash(topology.to_json()))
figure_col, edit_col = st.container(), st.container()  # the grids below, full width: beside the figure they hid columns
with figure_col:
    # The canvas is drawn only while its tab is open: the streamlit-flow component reports its state back
    # whenever it is drawn, and a report that landed just after the user clicked another page in the sidebar
    # reran the designer instead (the user stayed here, sometimes with "start from" back at "builder").
    figure_tab, canvas_tab = st.tabs(["Figure", "Draw on a canvas"], key="topo_view", on_change="rerun")
    with figure_tab:
        # first shown: the cut of the collective chosen on Synthesize, whose verdict sends the user here for it
        cut_choices = ["none", *LIMITED]
        chosen = st.session_state.get("syn_collective")
        show_cut = st.selectbox("bottleneck cut of", cut_choices, index=cut_choices.index(chosen) if chosen in LIMITED
                                else 1, key="topo_cut_of", persist_state="session",
                                help="the fabric's limit: which links bound the collective (bandwidth only)")
        if show_cut != "none" and not limit_is_quick(topology, show_cut):
            st.caption(f"The bottleneck cut is drawn automatically up to {AUTO_LIMIT_GPUS} GPUs (above, it can take "
                       f"seconds); `ccviz limit` computes it for this fabric.")
            show_cut = "none"
        if show_cut == "none":
            ui.plot(topology_figure(topology), key="topo_figure")
        else:
            with user_errors("limit"):
                limit = bandwidth_limit(topology, show_cut, 1e9)
                ui.plot(cut_figure(topology, limit), key="topo_figure")
                st.caption(limit.explanation() + " Edit a link on this page and the cut is recomputed.")
    with canvas_tab:
        too_big = canvas_too_big(topology) if canvas_tab.open else None
        if too_big and st.session_state.get("topo_canvas_anyway") != version:
            st.info(too_big)
            if st.button("Draw the canvas anyway", key="topo_canvas_draw"):
                st.session_state["topo_canvas_anyway"] = version
                st.rerun()
        elif not canvas_tab.open:
            st.caption("Drawing the canvas…")
        else:
            st.caption("Drag from a node's handle to another node to add a cable (both directions, the most common "
                       "bandwidth); right-click the canvas to add a GPU, a node or an edge to delete it. "
                       "Bandwidth and alpha are edited in the link table. The canvas draws every cable straight; "
                       "the Figure tab draws wrap-around cables (tori) as arcs.")
            if st.session_state.get("topo_flow_for") != version:
                st.session_state["topo_flow_state"] = flow_state(topology)
                st.session_state["topo_flow_for"] = version
            drawn = streamlit_flow(f"topo_flow_{version}", st.session_state["topo_flow_state"], height=480,
                                   fit_view=True, min_zoom=0.05, allow_new_edges=True, enable_pane_menu=True, enable_node_menu=True,
                                   enable_edge_menu=True, hide_watermark=True)
            st.session_state["topo_flow_state"] = drawn  # keep the drawing even when it does not validate
            if structure_changed(topology, drawn):
                with user_errors("canvas", sticky="topology_edit"):
                    set_topology(topology_from_flow(topology, drawn), f"canvas edit of {topology.name}")
                    st.rerun()
with edit_col:
    st.markdown("**Edit** (add or delete rows; then apply)")
    nodes = st.data_editor(node_table(topology), num_rows="dynamic", width="stretch", hide_index=True,
                           key=f"topo_nodes_{version}", height=220,
                           column_config={  # narrow columns: 'reduce' was behind a horizontal scroll
                               "id": st.column_config.NumberColumn("id", width="small"),
                               "kind": st.column_config.SelectboxColumn("kind", options=["gpu", "switch"],
                                                                        width="small"),
                               "label": st.column_config.TextColumn("label", width="small"),
                               "group": st.column_config.TextColumn("group", width="small"),
                               "copy": st.column_config.CheckboxColumn("copy", help="switch multicast", width="small"),
                               "reduce": st.column_config.CheckboxColumn(
                                   "reduce", help="the switch adds in the network (NVLS, SHARP)", width="small")})
    per_direction = st.toggle("asymmetric: one row per direction", key="topo_per_direction", persist_state="session",
                              help="off: one row per cable, an edit changes both directions")
    bw, alpha = fabric_defaults(topology)
    st.caption(f"One row per cable (direction *both*); blank GB/s or alpha take the fabric's defaults "
               f"({bw:g} GB/s, {alpha:g} us).")
    links = st.data_editor(
        editable_link_table(topology, per_direction), num_rows="dynamic", width="stretch", hide_index=True,
        key=f"topo_links_{version}_{per_direction}", height=300,
        column_config={
            "direction": st.column_config.SelectboxColumn("direction", options=list(DIRECTIONS),
                                                          help="both: the cable's two directions; one way: src->dst"),
            # text cells: a number cell silently dropped "abc" or a "-" and kept the old value; every entry must
            # reach the check in topology_from_tables, which names the row in an error that stays
            "src": st.column_config.NumberColumn("src", width="small"),
            "dst": st.column_config.NumberColumn("dst", width="small"),
            "bandwidth_GBps": st.column_config.TextColumn("GB/s", width="small",
                                                          help=f"positive; blank = {bw:g} (fabric default)"),
            "alpha_us": st.column_config.TextColumn("alpha (us)", width="small",
                                                    help=f"zero or positive; blank = {alpha:g}"),
            "lanes": st.column_config.TextColumn("lanes", width="small", help="a whole number, 1 or more")})
    if st.button("Apply edits", type="primary", key="topo_apply"):
        with user_errors("edit", sticky="topology_edit"):
            edited = topology_from_tables(topology, nodes, links)
            if edited.to_json() != topology.to_json():  # unchanged tables keep the fabric's name (and short link)
                set_topology(edited, f"table edit of {topology.name}")
            st.rerun()
    show_errors("topology_edit")
    st.download_button("Save topology JSON", data=topology.to_json(), file_name=f"{topology.name}.json",
                       mime="application/json", on_click="ignore", key="topo_save")

suggest_upgrades(current_topology())
