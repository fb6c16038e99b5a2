"""Server time of every Playback view for 16-, 256- and 1024-GPU schedules.

What the app does on the server for a view: build the plotly figure(s) and
serialize them to JSON (what Streamlit sends to the browser), plus the
tables the view shows. The budget from the issue is 2 s per view at 256
GPUs and 5 s at 1024 GPUs; the script prints each view's time and its
ratio to the budget, measured in this run. Schedules are ring AllGathers
on a 2D torus (n*(n-1) transfers: 65 280 at 256 GPUs, ~1M at 1024).

    python bench/app_views.py [--sizes 16,256,1024]
"""

from __future__ import annotations

import argparse
import time

from ccviz.builders.loading import load_topology
from ccviz.runs.pipeline import run
from ccviz.viz import (
    frame_snapshot,
    frame_windows,
    gantt_figure,
    holdings_figure,
    link_busy_bars,
    schedule_animation,
    topology_figure,
    utilization_heatmap,
)

BUDGET_S = {16: 2.0, 256: 2.0, 1024: 5.0}
TOPOLOGY = {16: "torus2d:dims=4x4", 256: "torus2d:dims=16x16", 1024: "torus2d:dims=32x32"}


def views(timeline) -> dict:
    """Each Playback view as the work the page does for it (figures are serialized as Streamlit does)."""
    windows = frame_windows(timeline)
    frame = timeline.transfers_frame()
    return {
        "animation": lambda: schedule_animation(timeline).to_json(),
        "step by step": lambda: (frame_snapshot(timeline, len(windows) // 2, windows).to_json(),
                                 frame.iloc[list(windows[len(windows) // 2].transfers)]),
        "inspect": lambda: (topology_figure(timeline.topology).to_json(),
                            frame[(frame["src"] == timeline.topology.gpus[0])]),
        "utilization": lambda: (link_busy_bars(timeline).to_json(), utilization_heatmap(timeline).to_json()),
        "who holds what": lambda: holdings_figure(timeline).to_json(),
        "gantt": lambda: gantt_figure(timeline).to_json(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="16,256,1024", help="GPU counts (16, 256, 1024)")
    args = parser.parse_args()
    print(f"{'GPUs':>5} {'view':<16} {'server s':>9} {'budget s':>9} {'ratio':>6}")
    worst = 0.0
    for n in (int(x) for x in args.sizes.split(",")):
        t0 = time.perf_counter()
        result = run(load_topology(TOPOLOGY[n]), "allgather", "ring", 1e6)
        timeline = result.timeline
        print(f"{n:>5} {'(synthesis)':<16} {time.perf_counter() - t0:9.2f} {'':>9} {'':>6}  "
              f"{len(timeline.schedule.transfers)} transfers")
        timeline.transfers_frame()  # cached by the page before any view (the caption's counts use it)
        for name, work in views(timeline).items():
            start = time.perf_counter()
            work()
            spent = time.perf_counter() - start
            ratio = spent / BUDGET_S[n]
            worst = max(worst, ratio)
            print(f"{n:>5} {name:<16} {spent:9.2f} {BUDGET_S[n]:9.1f} {ratio:6.2f}", flush=True)
    print(f"worst ratio to budget: {worst:.2f} ({'within' if worst <= 1 else 'OVER'} budget)")


if __name__ == "__main__":
    main()
