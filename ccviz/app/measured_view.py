"""The Papers page's "Measured" view: published nccl-tests numbers against ccviz (``ccviz reproduce measured``).

The page only draws: the rows, their predictions and the error table come from ``ccviz.runs.measured``, the
plot from ``ccviz.viz.measured_plot``.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from ccviz.app.state import user_errors
from ccviz.model.units import format_size
from ccviz.runs import measured
from ccviz.viz.measured_plot import measured_figure

RESULT_KEY = "ccviz_measured_rows"
_PREDICTED: dict = {}  # filter -> predictions, shared by every session of this server (the rows never change)


def measured_section() -> None:
    st.title("Papers: published measurements on real machines")
    st.markdown(
        "Each row is a number someone measured and published: nccl-tests (or rccl-tests) bus bandwidth on a "
        "real machine, with the link it was read from. ccviz predicts it by simulating `-a nccl` (NCCL's own "
        "choice of algorithm and protocol) on the matching system preset; **ratio** = predicted busbw / "
        "measured (1.00 = exact, below 1 ccviz is slower than the machine). `ccviz reproduce measured` prints "
        "the same table, `bench/measured.py` the error table.")
    st.caption("Tolerances the issue asks for: busbw within 10 % at ≥ 64 MiB, within 25 % at 1–16 MiB, time "
               "within 2× at ≤ 64 KiB. A row with no prediction says why (no preset for that machine yet, or too "
               "many GPUs to simulate here).")
    rows = measured.measured_rows()
    filter_text = st.text_input("rows whose machine, collective or size has every word", key="measured_filter",
                                placeholder="e.g. dgxh100, or nvl72 1GiB (empty: all rows)")
    chosen = measured.select(rows, filter_text)
    key = (filter_text.strip().lower(), len(chosen))
    result = st.session_state.get(RESULT_KEY)
    if result is not None and result[0] != key:
        result = None
    result = result or _PREDICTED.get(key)
    if st.button("Predict with ccviz (-a nccl)", type="primary", key="measured_run", disabled=result is not None,
                 help=f"simulates each of these {len(chosen)} rows on its preset (all {len(rows)} rows took about 9 "
                      "minutes on a shared 2-core machine); narrow the filter for fewer"):
        bar = st.progress(0.0, text="predicting")
        with user_errors("measured"):
            comps = measured.compare(chosen, progress=lambda i, c: bar.progress(
                (i + 1) / max(len(chosen), 1), text=f"{c.row.label} {c.row.collective} {format_size(c.row.size_bytes)}"))
            result = _PREDICTED[key] = (key, comps)
        bar.empty()
    if result is None:  # the measurements alone until predicted
        result = (key, [measured.Comparison(r, missing="not predicted yet: press Predict") for r in chosen])
    else:
        st.session_state[RESULT_KEY] = result
    comps = result[1]
    if not comps:
        st.info("No row has every word of the filter.")
        return
    table = measured.error_table(comps)
    st.subheader("Error per machine and size class")
    if any(e.predicted for e in table):
        st.dataframe(pd.DataFrame([{
            "machine": e.label, "size class": e.size_class, "rows": e.rows, "predicted": e.predicted,
            "median error": measured.format_error(e.size_class, e.median_error),
            "worst error": measured.format_error(e.size_class, e.worst_error),
            "within tolerance": f"{e.within}/{e.predicted}" if e.tolerance else "", "tolerance": e.tolerance}
            for e in table]), hide_index=True, width="stretch")
    else:
        st.info("Press **Predict** to simulate these rows: the error table and ccviz's dashed lines appear here.")
    collectives = list(dict.fromkeys(c.row.collective for c in comps))
    collective = st.radio("plot", collectives, horizontal=True, key="measured_plot_collective")
    st.plotly_chart(measured_figure(comps, collective), width="stretch", key="measured_plot")
    st.subheader("Every row")
    st.dataframe(pd.DataFrame([{
        "machine": c.row.label, "collective": c.row.collective, "size": format_size(c.row.size_bytes),
        "measured busbw (GB/s)": c.row.busbw_GBps,
        "ccviz busbw (GB/s)": None if c.predicted_busbw_GBps is None else round(c.predicted_busbw_GBps, 2),
        "ratio": None if c.ratio is None else round(c.ratio, 3), "in place": c.row.in_place,
        "NCCL": c.row.nccl_version, "environment": c.row.algo_env, "why not predicted": c.missing,
        "how predicted": c.notes or ("simulated" if c.predicted_s else ""),
        "source": c.row.source_url, "note": c.row.note} for c in comps]),
        hide_index=True, width="stretch", height=520,
        column_config={"source": st.column_config.LinkColumn("source")})
