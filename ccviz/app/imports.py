"""The app's side of "bring your own schedule": upload on Playback, compare beside synthesized runs.

An uploaded MSCCL XML, TE-CCL output or ccviz schedule JSON goes through
``ccviz.interop.importers`` and the simulator exactly like the CLI's ``ccviz import``;
the result becomes the run Playback shows, and the upload is kept in the
session so Compare can replay it at every size of a sweep.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import pandas as pd
import streamlit as st

from ccviz.app.runs import CachedRun, RunRequest
from ccviz.app.state import current_topology, set_last_run, user_errors
from ccviz.bounds.cost import lower_bound
from ccviz.errors import CcvizError
from ccviz.interop.importers import import_text
from ccviz.interop.msccl import check
from ccviz.judge.simulate import simulate
from ccviz.model.topology import Topology
from ccviz.model.units import format_size, format_time, parse_size
from ccviz.runs.pipeline import RunResult, group_limit

IMPORTS_KEY = "ccviz_imports"
ON_FULLY_CONNECTED = "fully connected (MSCCL default)"
ON_CURRENT = "current topology"


@dataclass(frozen=True)
class Upload:
    """One uploaded file, kept so that Compare can import it again at other sizes."""

    name: str
    text: str
    on_current_topology: bool
    size_bytes: float
    collective: str
    resizable: bool  # an MSCCL program runs at any size; TE-CCL and ccviz files are fixed
    data: bytes | None = None  # a zip of Chakra ETs (ccviz's own: the fabric and size travel inside)

    def import_at(self, size_bytes: float, topology: Topology | None):
        if self.data is not None:
            from ccviz.interop.chakra import import_chakra_zip

            return import_chakra_zip(self.data, self.name)
        return import_text(self.text, self.name, topology if self.on_current_topology else None, size_bytes)


def imported_run(upload: Upload, topology: Topology | None) -> CachedRun:
    """Import, simulate and bound an upload: a run Playback and every figure can show."""
    schedule = upload.import_at(upload.size_bytes, topology)
    timeline = simulate(schedule)
    try:  # the fabric's limit, as a synthesized run has it (Playback said 'no fabric limit' for an AllGather)
        limit = group_limit(schedule.topology, schedule.collective)
    except CcvizError as exc:
        schedule.notes.append(f"fabric limit unknown: {str(exc).split(': ', 1)[-1]}")
        limit = None
    result = RunResult(schedule.topology, schedule.collective, schedule, timeline,
                       lower_bound(schedule.topology, schedule.collective), limit)
    request = RunRequest.make(schedule.topology, schedule.collective.name, schedule.algorithm,
                              schedule.collective.size_bytes, schedule.collective.chunks_per_rank)
    return CachedRun(request, result, server_time_s=0.0)


def fastest_point(rows: pd.DataFrame) -> pd.Series:
    """The row moving data fastest (highest algbw); the shortest finish would just be the smallest size."""
    return rows.loc[rows["algbw_GBps"].idxmax()]


def upload_panel() -> None:
    """Playback: load a schedule made elsewhere; on success it becomes the run shown below."""
    with st.expander("Bring your own schedule: MSCCL XML, TE-CCL output JSON, ccviz schedule JSON or Chakra ET zip"):
        file = st.file_uploader("schedule file", type=["xml", "json", "zip"], key="imp_file",
                                help="a zip of the PREFIX.RANK.et files ccviz wrote (Synthesize's Chakra download) "
                                     "replays exactly; ETs from other tools: `ccviz import DIR --collective ...`")
        c1, c2 = st.columns(2)
        where = c1.radio("run it on", [ON_FULLY_CONNECTED, ON_CURRENT], key="imp_where",
                         help="an MSCCL program without a topology runs on a fully connected fabric of its GPUs; "
                              "a TE-CCL output needs the fabric it was solved on (set it on the Topology page)")
        size_text = c2.text_input("buffer size per GPU", "1MB", key="imp_size",
                                  help="nccl-tests convention; TE-CCL outputs need the size they were solved for")
        if file is None or not st.button("Import and play", type="primary", key="imp_go"):
            return
        with user_errors("import"):
            is_zip = file.name.lower().endswith(".zip")
            text = "" if is_zip else file.getvalue().decode("utf-8", errors="replace")
            size = parse_size(size_text)
            topology = current_topology()
            is_xml = text.lstrip().startswith("<")
            # Only an MSCCL program can run without a fabric; a TE-CCL output names nodes of the one it was
            # solved on (a ccviz schedule and ccviz's Chakra ETs carry their own).
            upload = Upload(file.name, text, (where == ON_CURRENT or not is_xml) and not is_zip, size, "", is_xml,
                            file.getvalue() if is_zip else None)
            run = imported_run(upload, topology)
            upload = replace(upload, collective=run.result.collective.name,  # a fixed-size file keeps its own size
                             size_bytes=upload.size_bytes if upload.resizable else run.result.collective.size_bytes)
            st.session_state.setdefault(IMPORTS_KEY, {})[file.name] = upload
            set_last_run(run)
            if upload.resizable:
                for execution in check(text):
                    (st.success if execution.ok else st.warning)(f"MSCCL executor: {execution.summary()}")
            for note in run.result.schedule.notes:
                st.caption(note)


def uploads_for(collective: str) -> dict[str, Upload]:
    return {k: u for k, u in st.session_state.get(IMPORTS_KEY, {}).items() if u.collective == collective}


def compare_section(collective: str, sizes: list[float]) -> None:
    """Compare: imported schedules of this collective on the current topology, at the sweep's sizes."""
    uploads = uploads_for(collective)
    if not uploads:
        st.caption("Imported schedules (uploaded on the Playback page) appear here beside the synthesized ones.")
        return
    st.subheader("Imported schedules")
    chosen = st.multiselect("imported", list(uploads), default=list(uploads), key="cmp_imported")
    topology = current_topology()
    rows = []
    for name in chosen:
        upload = uploads[name]
        for size in sizes if upload.resizable else [upload.size_bytes]:
            row = {"schedule": name, "size": format_size(size), "size_bytes": size}
            try:
                timeline = simulate(upload.import_at(size, topology))
                row.update(finish_us=timeline.finish_time_s * 1e6, algbw_GBps=timeline.algbw_GBps,
                           busbw_GBps=timeline.busbw_GBps, verified=timeline.verified,
                           fabric=timeline.topology.name, error=None)
            except CcvizError as exc:
                row.update(error=str(exc))
            rows.append(row)
    if not rows:
        return
    table = pd.DataFrame(rows)
    ok = table[table["error"].isna()] if "error" in table else table
    if len(ok):
        import plotly.express as px

        fig = px.line(ok, x="size_bytes", y="algbw_GBps", color="schedule", markers=True, log_x=True,
                      labels={"size_bytes": "buffer size per GPU (B)", "algbw_GBps": "algbw (GB/s)"},
                      title="imported schedules, replayed by the simulator")
        st.plotly_chart(fig, key="cmp_imported_plot")
        best = fastest_point(ok)
        st.caption(f"fastest imported point: {best['schedule']} at {best['size']}, {best['algbw_GBps']:.3g} GB/s "
                   f"(finish {format_time(best['finish_us'] * 1e-6)})")
    st.dataframe(table.drop(columns=["size_bytes"]), hide_index=True, width="stretch")
