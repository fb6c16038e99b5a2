"""The "Replay on ns-3" section beside a result: a background replay with progress and Stop, then the
judge's and the packet-level timelines side by side, the links where they differ most and the ratio.

Kept apart from ``ccviz.app.runs`` (its own small thread): the page calls ``replay_section(entry)``. The
ns-3 engine is loaded once per process (``ccviz.judge.replay_ns3``) and shared by every session.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import streamlit as st

from ccviz.errors import CcvizError
from ccviz.judge import replay_ns3
from ccviz.judge.replay import Replay, replay
from ccviz.model.units import format_time
from ccviz.synth.registry import Progress

JOB_KEY = "ccviz_replay_job"
RESULTS_KEY = "ccviz_replay_results"
POLL_S = 0.2
MAX_KEPT = 8  # replays kept per session (one per result shown)


class ReplayJob:
    """One replay in a daemon thread that survives Streamlit reruns; ``stop()`` ends it within a slice."""

    def __init__(self, key: int, schedule: Any) -> None:
        self.key = key
        self.stop_event = threading.Event()
        self.progress: list[Progress] = []
        self.result: Replay | None = None
        self.error: str | None = None
        self.started = time.perf_counter()
        self._thread = threading.Thread(target=self._work, args=(schedule,), daemon=True, name="ccviz-replay")
        self._thread.start()

    def _work(self, schedule: Any) -> None:
        try:
            self.result = replay(schedule, "ns3", progress=self.progress.append, stop=self.stop_event)
        except CcvizError as exc:
            self.error = str(exc)
        except Exception as exc:  # a fault in the engine must not kill the app
            self.error = f"unexpected {type(exc).__name__} in the ns-3 replay: {exc}"

    @property
    def done(self) -> bool:
        return not self._thread.is_alive()

    def stop(self) -> None:
        self.stop_event.set()

    def wait(self, timeout_s: float) -> bool:
        self._thread.join(timeout_s)
        return self.done

    def line(self) -> str:
        latest = self.progress[-1].text() if self.progress else "starting"
        stopping = " (stopping…)" if self.stop_event.is_set() else ""
        return f"replaying on ns-3 … {format_time(time.perf_counter() - self.started)} — {latest}{stopping}"


def replay_section(entry: Any) -> None:
    """The whole section for one finished run (``ccviz.app.runs.CachedRun``)."""
    st.subheader("Replay on ns-3")
    if not replay_ns3.available():
        st.info("A packet-level second opinion needs the ns-3 Python bindings: "
                "`pip install -e \".[ns3]\"`, then restart the app.")
        return
    key = id(entry.result)
    results: dict[int, Replay] = st.session_state.setdefault(RESULTS_KEY, {})
    job: ReplayJob | None = st.session_state.get(JOB_KEY)
    running = job is not None and not job.done
    st.caption("Every transfer becomes a stream of frames on ns-3 point-to-point links (the links' rate, "
               "alpha as propagation delay), switches forward frame by frame; each transfer starts when its "
               "chunk has landed at its source. The first replay loads ns-3 (about 20 s).")
    if st.button("Replay on ns-3", key="replay_run", disabled=running):
        job = ReplayJob(key, entry.result.timeline.schedule)
        st.session_state[JOB_KEY] = job
    if job is not None and not job.done:
        live = st.empty()
        with live.container():
            st.button("Stop", key="replay_stop", on_click=job.stop,
                      help="ends the replay within a second; what was delivered so far is reported")
            status = st.empty()
        while not job.wait(POLL_S):
            fraction = job.progress[-1].fraction if job.progress else None
            if fraction is not None:
                status.progress(min(1.0, max(0.0, fraction)), text=job.line())
            else:
                status.info(job.line())
        live.empty()
    if job is not None and job.done:
        del st.session_state[JOB_KEY]
        if job.error:
            st.error(f"replay: {job.error}")
        elif job.result is not None:
            results[job.key] = job.result
            while len(results) > MAX_KEPT:
                results.pop(next(iter(results)))
    result = results.get(key)
    if result is not None:
        show_replay(result)


def show_replay(result: Replay) -> None:
    """Ratio and bytes, the two timelines side by side, the links that differ most, the notes."""
    from ccviz.app import ui
    from ccviz.viz.replay import replay_heatmaps

    s = result.summary()
    cols = st.columns(4)
    cols[0].metric("α-β judge", format_time(s["judge_finish_time_s"]))
    cols[1].metric("ns-3", format_time(s["finish_time_s"]) if s["finish_time_s"] is not None else "did not finish")
    cols[2].metric("ns-3 / α-β", f"{s['ratio']:.4f}" if s["ratio"] is not None else "—")
    cols[3].metric("bytes delivered", f"{s['bytes_delivered'] / max(1, s['bytes_expected']):.1%}",
                   delta=f"{s['bytes_lost']} B lost" if s["bytes_lost"] else None, delta_color="inverse")
    if not s["complete"]:
        st.warning("The replay did not deliver every byte: " + "; ".join(s["notes"][-2:]))
    judge_fig, replay_fig = replay_heatmaps(result)
    left, right = st.columns(2)
    with left:
        ui.plot(judge_fig, key="replay_judge_fig")
    with right:
        ui.plot(replay_fig, key="replay_ns3_fig")
    st.markdown("**Links where the two differ most** (when each link's last byte went out)")
    st.dataframe([{"link": f"{r['src']}→{r['dst']}", "α-β busy until": format_time(r["judge_busy_until_s"]),
                   "ns-3 busy until": format_time(r["replay_busy_until_s"]),
                   "difference": format_time(abs(r["difference_s"])) + (" later" if r["difference_s"] > 0 else
                                                                        " earlier"),
                   "α-β busy": format_time(r["judge_busy_s"]), "ns-3 busy": format_time(r["replay_busy_s"])}
                  for r in result.differing_links(5)], hide_index=True)
    for note in s["notes"]:
        st.caption(f"note: {note}")
    queue = s["settings"]["switch_queue_frames"]
    st.caption(f"mtu {s['settings']['mtu']} B, switch port queues "
               f"{'lossless' if queue is None else f'{queue} frames'}, "
               f"replayed in {s['wall_s']:.2f} s. Why the two differ: docs/replay.md.")
