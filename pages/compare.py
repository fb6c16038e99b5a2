"""Compare: several algorithms over a size sweep on the current topology, against the lower bound."""

import json

import pandas as pd
import streamlit as st

from ccviz import app_ui
from ccviz.app_state import current_topology, user_errors
from ccviz.collectives import COLLECTIVES, ROOTED
from ccviz.compare import compare
from ccviz.synth.registry import REGISTRY, SynthOptions, algorithms_for
from ccviz.topology import Topology
from ccviz.units import format_size
from ccviz.viz import comparison_figure, finish_bars

app_ui.configure_page()

PARAMS_KEY = "cmp_params"
SMALL_FABRIC = 16  # GPUs
NUMERIC = ("finish_us", "algbw_GBps", "busbw_GBps", "bound_us", "bound_ratio", "formula_us", "synth_time_s")


@st.cache_data(show_spinner=False, max_entries=4096)
def sweep_point(topology_json: str, collective: str, algorithm: str, size: float, chunks: int, root: int | None,
                time_limit: float) -> pd.DataFrame:
    """One (algorithm, size) row, cached by topology JSON + collective + options: revisiting is instant."""
    topology = Topology.from_dict(json.loads(topology_json))
    return compare(topology, collective, [algorithm], [size], chunks, root, SynthOptions(time_limit=time_limit))


def sweep(topology_json: str, collective: str, algorithms: tuple[str, ...], sizes: tuple[float, ...],
          chunks: int, root: int | None, time_limit: float) -> pd.DataFrame:
    """The whole table, point by point so that a long first run shows its progress."""
    points = [(size, algorithm) for size in sizes for algorithm in algorithms]
    bar = st.progress(0.0)
    rows = []
    for k, (size, algorithm) in enumerate(points):
        bar.progress(k / len(points), text=f"{algorithm} at {format_size(size)} ({k + 1}/{len(points)})")
        rows.append(sweep_point(topology_json, collective, algorithm, size, chunks, root, time_limit))
    bar.empty()
    return pd.concat(rows, ignore_index=True)


st.title("Compare algorithms")
app_ui.topology_caption()
topology = current_topology()

c1, c2 = st.columns([1, 2])
collective = c1.selectbox("collective", COLLECTIVES, key="cmp_collective")
available = algorithms_for(collective)
if not available:
    st.warning(f"No registered algorithm implements {collective} yet.")
    st.stop()
# Optimal solvers (MILPs) are quick on small fabrics; on big ones they are opt-in (they obey the time limit).
default = available if topology.n_gpus <= SMALL_FABRIC else [a for a in available if REGISTRY[a].kind != "optimal"]
algorithms = c2.multiselect("algorithms", available, default=default or available, key="cmp_algorithms",
                            help="optimal solvers (MILP) can take long on big fabrics; they obey the time limit")
sizes = app_ui.size_range_picker("sizes", "cmp_sizes")
c3, c4, c5 = st.columns(3)
chunks = int(c3.number_input("chunks per rank", 1, 16, 1, key="cmp_chunks"))
root = c4.selectbox("root", topology.gpus, key="cmp_root") if collective in ROOTED else None
time_limit = float(c5.number_input("time limit per run (s)", 1.0, 600.0, 20.0, key="cmp_time_limit"))

params = (topology.to_json(), collective, tuple(algorithms), tuple(sizes), chunks, root, time_limit)
if st.button("Compare", type="primary", disabled=not algorithms, key="cmp_run"):
    st.session_state[PARAMS_KEY] = params

if st.session_state.get(PARAMS_KEY) == params:
    with user_errors("comparison"):
        table = sweep(*params)
        failed = table[table["error"].notna()]
        for _, row in failed.drop_duplicates("algorithm").iterrows():
            st.warning(f"{row['algorithm']}: {row['error']}")
        ok = table[table["error"].isna()]
        over = ok[ok["algbw_GBps"] > ok["bound_algbw_GBps"] * (1 + 1e-6)]
        if len(over):
            st.error(f"{len(over)} result(s) beat the lower bound, which is impossible: {over['algorithm'].unique()}")
        elif len(ok) and ok["lower_bound_s"].notna().all():
            st.success(f"All {len(ok)} verified results stay within the lower bound "
                       f"(best ratio to bound: {ok['bound_ratio'].min():.3g}).")
        app_ui.plot(comparison_figure(table), key="cmp_plot")
        at = st.select_slider("finish times at", options=list(sizes), value=sizes[-1], format_func=format_size,
                              key="cmp_bar_size")
        app_ui.plot(finish_bars(table, at), key="cmp_bars")
        shown = table.assign(finish_us=table["finish_time_s"] * 1e6, bound_us=table["lower_bound_s"] * 1e6,
                             formula_us=table["formula_time_s"] * 1e6)
        st.dataframe(shown[["algorithm", "size", "finish_us", "algbw_GBps", "busbw_GBps", "bound_us",
                            "bound_ratio", "formula_us", "verified", "status", "synth_time_s", "error"]],
                     width="stretch", hide_index=True,
                     column_config={c: st.column_config.NumberColumn(c, format="%.4g") for c in NUMERIC})
        st.download_button("table as CSV", data=table.to_csv(index=False), file_name="comparison.csv",
                           mime="text/csv", on_click="ignore")
else:
    st.info("Pick algorithms and sizes, then press **Compare**.")
