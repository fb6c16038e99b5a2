"""Synthesize's NCCL baseline line: on a system preset, the run beside what NCCL would run ("x NCCL").

The numbers come from ``ccviz.runs.baseline`` (``-a nccl`` on the same collective, the same simulator);
this module only draws them.
"""

from __future__ import annotations

import streamlit as st

from ccviz.app.runs import CachedRun
from ccviz.errors import CcvizError
from ccviz.model.units import format_time
from ccviz.runs import baseline


def nccl_baseline_line(entry: CachedRun) -> None:
    """One metric and one sentence: this schedule against NCCL's (nothing on fabrics without the model)."""
    result = entry.result
    if not baseline.applies(result.topology):
        return
    if result.schedule.algorithm == baseline.ALGORITHM:
        st.caption("This is the NCCL baseline: what NCCL would run on this system (its tuner's algorithm and "
                   "protocol for the size, named in the notes), judged by the same simulator as every schedule.")
        return
    try:
        nccl = entry.figure("nccl_baseline", lambda: baseline.nccl_result(result.topology, result.collective))
    except CcvizError as exc:
        st.caption(f"No NCCL baseline here: {exc}")
        return
    x = baseline.times_nccl(result.finish_time_s, nccl.finish_time_s)
    left, right = st.columns([1, 2])
    left.metric("against NCCL", baseline.words(x),
                help="NCCL's finish time / this schedule's, both judged by the simulator on this fabric's hardware "
                     "model (above 1: faster than what NCCL would run)")
    right.markdown(f"NCCL here ({nccl.schedule.options.get('nccl_algo', 'nccl')}, "
                   f"{nccl.schedule.options.get('protocol', 'simple')}) finishes in "
                   f"**{format_time(nccl.finish_time_s)}**, busbw {nccl.timeline.busbw_GBps:.1f} GB/s.")
