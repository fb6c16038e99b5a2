"""Topology designer: start from a builder, a sample or a file; edit nodes and links; save as JSON."""

import json

import streamlit as st

from ccviz import app_ui
from ccviz.app_state import current_topology, sample_files, set_topology, topology_source, user_errors
from ccviz.builders import BUILDERS, build
from ccviz.errors import CcvizError
from ccviz.topology import Topology
from ccviz.topology_tables import link_table, node_table, topology_from_tables
from ccviz.viz import topology_figure

st.title("Topology designer")
topology = current_topology()

source = st.radio("start from", ["builder", "sample file", "upload"], horizontal=True, key="topo_source")
if source == "builder":
    names = sorted(BUILDERS)
    name = st.selectbox("builder", names, index=names.index("dgx1") if "dgx1" in names else 0, key="topo_builder")
    b = BUILDERS[name]
    st.caption(b.summary)
    defaults = dict(item.split("=", 1) for item in b.signature_text().split(",") if "=" in item)
    cols = st.columns(max(1, min(len(defaults), 4)))
    changed = {}
    for k, (param, default) in enumerate(defaults.items()):
        with cols[k % len(cols)]:
            if default in ("true", "false"):
                value = "true" if st.checkbox(param, value=default == "true", key=f"topo_b_{name}_{param}") else "false"
            else:
                value = st.text_input(param, value=default, key=f"topo_b_{name}_{param}").strip()
        if value != default:
            changed[param] = value
    spec = name + (":" + ",".join(f"{k}={v}" for k, v in changed.items()) if changed else "")
    if st.button(f"Build {spec}", type="primary", key="topo_build"):
        with user_errors("builder"):
            set_topology(build(spec), f"builder {spec}")
            st.rerun()
elif source == "sample file":
    samples = sample_files()
    if not samples:
        st.warning("No sample topology files found in sample_topologies/.")
    else:
        stems = list(samples)
        pick = st.selectbox("sample", stems, index=stems.index("dgx1") if "dgx1" in stems else 0, key="topo_sample")
        if st.button(f"Load {pick}", type="primary", key="topo_load_sample"):
            with user_errors("sample"):
                set_topology(Topology.from_dict(json.loads(samples[pick].read_text()), name=pick), f"sample {pick}")
                st.rerun()
else:
    upload = st.file_uploader("topology JSON (ccviz format or the papers' reference format)", type=["json"],
                              key="topo_upload")
    if upload is not None and st.button(f"Use {upload.name}", type="primary", key="topo_use_upload"):
        with user_errors(upload.name):
            try:
                data = json.loads(upload.getvalue().decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                raise CcvizError(f"topology: {upload.name} is not valid JSON ({exc})", "topology") from None
            set_topology(Topology.from_dict(data, name=upload.name.rsplit(".", 1)[0]), f"upload {upload.name}")
            st.rerun()

st.divider()
topology = current_topology()
st.subheader(topology.name)
st.caption(f"{topology.summary()} · from {topology_source()}" + (f" · {topology.description}"
                                                                  if topology.description else ""))
figure_col, edit_col = st.columns([3, 2])
with figure_col:
    app_ui.plot(topology_figure(topology), key="topo_figure")
with edit_col:
    st.markdown("**Edit** (add or delete rows; then apply)")
    version = abs(hash(topology.to_json()))
    nodes = st.data_editor(node_table(topology), num_rows="dynamic", width="stretch", hide_index=True,
                           key=f"topo_nodes_{version}", height=220,
                           column_config={"kind": st.column_config.SelectboxColumn("kind", options=["gpu", "switch"]),
                                          "copy": st.column_config.CheckboxColumn("copy", help="switch multicast")})
    links = st.data_editor(link_table(topology), num_rows="dynamic", width="stretch", hide_index=True,
                           key=f"topo_links_{version}", height=300,
                           column_config={"bandwidth_GBps": st.column_config.NumberColumn("GB/s", min_value=0.0),
                                          "alpha_us": st.column_config.NumberColumn("alpha (us)", min_value=0.0)})
    if st.button("Apply edits", type="primary", key="topo_apply"):
        with user_errors("edit"):
            set_topology(topology_from_tables(topology, nodes, links), f"edited {topology.name}")
            st.rerun()
    st.download_button("Save topology JSON", data=topology.to_json(), file_name=f"{topology.name}.json",
                       mime="application/json", on_click="ignore", key="topo_save")
