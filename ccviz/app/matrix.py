"""AllToAllv in the app: a traffic matrix from an upload or the MoE generator (skew slider), its heatmap beside the
per-link load, and direct / twophase / mcf against the exact limit across skews (Synthesize and Compare)."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import streamlit as st

from ccviz.app.runs import CachedRun
from ccviz.errors import CcvizError
from ccviz.model.topology import Topology
from ccviz.model.traffic import moe_matrix, moe_summary, read_matrix

GENERATOR, UPLOAD = "MoE generator", "upload a matrix"
SKEW_CHOICES = (0.0, 0.8, 1.0, 1.2, 1.5, 2.0)
MOE_ALGORITHMS = ("direct", "twophase", "mcf")
SKEW_RUN_LIMIT_S = 60.0  # each run of the skew comparison


def skew_text(exponent: float) -> str:
    return "uniform" if exponent == 0 else f"zipf:{exponent:g}"


def moe_inputs(key: str, n_ranks: int) -> dict:
    """The generator's knobs (experts a multiple of the ranks); the skew is a slider of the Zipf exponent."""
    c = st.columns(5)
    per_rank = c[0].number_input("experts per GPU", 1, 16, 2, key=f"{key}_epr",
                                 help="experts = this x the GPUs (each GPU hosts the same number)")
    topk = c[1].number_input("top-k", 1, 16, 8, key=f"{key}_topk", help="experts each token is sent to")
    tokens = c[2].number_input("tokens per GPU", 1, 65536, 4096, step=512, key=f"{key}_tokens")
    hidden = c[3].number_input("hidden size", 1, 65536, 7168, step=512, key=f"{key}_hidden",
                               help="bytes per token = hidden x 2 (bf16)")
    seed = c[4].number_input("seed", 0, 10_000, 0, key=f"{key}_seed")
    return {"experts": int(per_rank) * n_ranks, "topk": int(topk), "tokens": int(tokens), "hidden": int(hidden),
            "seed": int(seed)}


def matrix_inputs(key: str, topology: Topology) -> np.ndarray | None:
    """Synthesize's matrix: generated (with a skew slider) or uploaded; None until one is valid."""
    n = topology.n_gpus
    source = st.radio("traffic matrix", (GENERATOR, UPLOAD), horizontal=True, key=f"{key}_source")
    if source == UPLOAD:
        return upload_input(key, topology)
    params = moe_inputs(key, n)
    exponent = st.select_slider("expert popularity skew (Zipf exponent; 0 = uniform)", SKEW_CHOICES, value=1.2,
                                key=f"{key}_skew")
    matrix = moe_matrix(n, skew=skew_text(exponent), **params)
    st.caption(f"Dispatch of {params['tokens']} tokens per GPU to the top {params['topk']} of {params['experts']} "
               f"experts; the busiest GPU receives {moe_summary(matrix)['max_over_mean_in']:.2f} x the mean.")
    return matrix


def upload_input(key: str, topology: Topology) -> np.ndarray | None:
    """An uploaded matrix, checked (one line naming the bad cell), or None until a file is given."""
    n = topology.n_gpus
    file = st.file_uploader(f"bytes from rank i to rank j: {n} x {n}, as .csv, .npy or .json",
                            type=["csv", "npy", "json"], key=f"{key}_upload")
    if file is None:
        st.info(f"Upload a {n} x {n} matrix (CSV: one row per line, commas), or use the MoE generator.")
        return None
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"matrix{Path(file.name).suffix.lower()}"
        path.write_bytes(file.getvalue())
        matrix = read_matrix(path)
    if len(matrix) != n:
        raise CcvizError(f"matrix: {file.name} is {len(matrix)} x {len(matrix)}; this fabric has {n} GPUs", "matrix")
    return matrix


def matrix_views(entry: CachedRun, plot) -> None:
    """The matrix as a heatmap beside the per-link load of the run (where the run has a matrix)."""
    from ccviz.viz.traffic import traffic_heatmap
    from ccviz.viz.utilization import link_busy_bars

    result = entry.result
    matrix = result.collective.meta.get("matrix")
    if matrix is None:
        return
    left, right = st.columns(2)
    with left:
        plot(entry.figure("traffic_heatmap", lambda: traffic_heatmap(matrix, result.collective.ranks)),
             key=f"mx_heat_{id(entry)}")
    with right:
        plot(entry.figure("link_busy", lambda: link_busy_bars(result.timeline)), key=f"mx_links_{id(entry)}")
    st.caption("Left: the demand (rows send, columns receive). Right: how busy each link was over the run, the "
               "bottleneck in red.")


def skew_comparison(topology: Topology, params: dict, exponents: list[float], algorithms: list[str]) -> pd.DataFrame:
    """Each skew's limit and each algorithm's judged finish over it (a progress bar; each run capped in time)."""
    from ccviz.bounds.demand_flow import alltoallv_limit
    from ccviz.runs.moe import matrix_collective, run_matrix
    from ccviz.synth.registry import SynthOptions

    rows = []
    total = len(exponents) * (1 + len(algorithms))
    bar = st.progress(0.0, text="solving")
    done = 0
    for exponent in exponents:
        matrix = moe_matrix(topology.n_gpus, skew=skew_text(exponent), **params)
        bar.progress(done / total, text=f"{skew_text(exponent)}: the limit (max concurrent flow LP)")
        limit = alltoallv_limit(topology, matrix_collective(topology, matrix)).limit_s
        done += 1
        row = {"skew": skew_text(exponent), "busiest GPU / mean": moe_summary(matrix)["max_over_mean_in"],
               "limit (ms)": limit * 1e3}
        for algorithm in algorithms:
            bar.progress(done / total, text=f"{skew_text(exponent)}: {algorithm}")
            t0 = time.perf_counter()
            try:
                result = run_matrix(topology, "alltoallv", algorithm, matrix, SynthOptions(time_limit=SKEW_RUN_LIMIT_S))
                row[f"{algorithm} x limit"] = result.finish_time_s / limit if result.timeline.verified else None
                row[f"{algorithm} synth (s)"] = result.schedule.synth_time_s
            except CcvizError as exc:
                row[f"{algorithm} x limit"] = None
                row[f"{algorithm} synth (s)"] = None
                st.caption(f"{algorithm} at {skew_text(exponent)}: {exc}")
            row[f"{algorithm} wall (s)"] = time.perf_counter() - t0
            done += 1
        rows.append(row)
    bar.empty()
    return pd.DataFrame(rows)


def skew_section(topology: Topology, plot) -> None:
    """Compare's AllToAllv section: direct, twophase and mcf against the exact limit, across skews of the MoE
    generator or on an uploaded matrix."""
    from ccviz.viz.traffic import skew_figure

    with st.expander("**Mixture-of-experts AllToAllv**: direct, twophase and mcf against the exact limit, across "
                     "skews", expanded=False):
        st.caption("The dispatch matrix of a router sending each token to its top-k experts, expert popularity "
                   "Zipf-skewed (0 = uniform). The limit is the matrix's maximum concurrent flow (an LP); every "
                   f"schedule is judged by the simulator (each run capped at {SKEW_RUN_LIMIT_S:g} s).")
        source = st.radio("matrices", ("generated, across skews", "one uploaded matrix"), horizontal=True,
                          key="cmp_mx_source")
        algorithms = st.multiselect("algorithms", MOE_ALGORITHMS, default=["twophase", "mcf"], key="cmp_mx_algs",
                                    help="direct (NCCL's pairwise exchange) plans every send: minutes above 16 GPUs")
        if source == "one uploaded matrix":
            with user_errors_here():
                matrix = upload_input("cmp_mx", topology)
                if matrix is not None and st.button("Compare on this matrix", key="cmp_mx_go_upload"):
                    st.dataframe(matrix_table(topology, matrix, algorithms), hide_index=True)
            return
        params = moe_inputs("cmp_mx", topology.n_gpus)
        exponents = st.multiselect("skews (Zipf exponent)", SKEW_CHOICES, default=[0.0, 1.2, 1.5], key="cmp_mx_skews")
        if st.button("Compare across skews", type="primary", key="cmp_mx_go"):
            with user_errors_here():
                st.session_state["cmp_mx_rows"] = (skew_comparison(topology, params, sorted(exponents), algorithms),
                                                   tuple(algorithms))
        shown = st.session_state.get("cmp_mx_rows")
        if shown is not None:
            table, algs = shown
            plot(skew_figure(table.to_dict("records"), algs), key="cmp_mx_fig")
            st.dataframe(table, hide_index=True)


def user_errors_here():
    from ccviz.app.state import user_errors

    return user_errors()  # the message names the cell or the field


def matrix_table(topology: Topology, matrix: np.ndarray, algorithms: list[str]) -> pd.DataFrame:
    """One uploaded matrix: each algorithm's finish over the limit."""
    from ccviz.bounds.demand_flow import alltoallv_limit
    from ccviz.runs.moe import matrix_collective, run_matrix
    from ccviz.synth.registry import SynthOptions

    limit = alltoallv_limit(topology, matrix_collective(topology, matrix)).limit_s
    rows = []
    for algorithm in algorithms:
        result = run_matrix(topology, "alltoallv", algorithm, matrix, SynthOptions(time_limit=SKEW_RUN_LIMIT_S))
        rows.append({"algorithm": algorithm, "finish (ms)": result.finish_time_s * 1e3, "limit (ms)": limit * 1e3,
                     "x limit": result.finish_time_s / limit, "verified": result.timeline.verified,
                     "synth (s)": result.schedule.synth_time_s})
    return pd.DataFrame(rows)
