"""Plotly figures of topologies and simulated schedules (they read a ``Timeline``, never recompute physics)."""

from ccviz.viz.animation import FrameWindow, frame_snapshot, frame_windows, schedule_animation
from ccviz.viz.comparison import comparison_figure, finish_bars
from ccviz.viz.gantt import gantt_figure
from ccviz.viz.holdings import holdings_figure, holdings_matrix
from ccviz.viz.layout import node_positions
from ccviz.viz.lesson import lesson_figure, lesson_table
from ccviz.viz.narration import StepStory, formula_gap, narrate
from ccviz.viz.rounds import rounds, rounds_html
from ccviz.viz.topology_fig import cut_figure, topology_figure
from ccviz.viz.utilization import bottleneck_links, busy_fraction, link_busy_bars, utilization_heatmap

__all__ = [
    "FrameWindow", "StepStory", "bottleneck_links", "busy_fraction", "comparison_figure", "cut_figure", "finish_bars",
    "formula_gap", "frame_snapshot", "frame_windows", "gantt_figure", "holdings_figure", "holdings_matrix",
    "lesson_figure", "lesson_table", "link_busy_bars", "narrate", "node_positions", "rounds", "rounds_html",
    "schedule_animation", "topology_figure", "utilization_heatmap",
]
