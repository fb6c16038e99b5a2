"""Figures read the simulator's Timeline faithfully: frames, transfers, utilization, holdings."""

from __future__ import annotations

import math

import numpy as np
import pytest

import ccviz
from ccviz.model.schedule import Schedule, Transfer
from ccviz.runs.compare import compare
from ccviz.viz import (
    busy_fraction,
    comparison_figure,
    finish_bars,
    frame_snapshot,
    frame_windows,
    gantt_figure,
    holdings_figure,
    holdings_matrix,
    link_busy_bars,
    narrate,
    node_positions,
    schedule_animation,
    topology_figure,
    utilization_heatmap,
)
from ccviz.viz.animation import CHUNKS_UP_TO
from ccviz.viz.layout import link_segments
from tests.paths import REFERENCE

REFERENCE_DGX1 = str(REFERENCE / "dgx1.json")


def ring_allgather(n: int, size: float = 1e6) -> ccviz.Timeline:
    """A hand-built ring AllGather on a ring of n GPUs (independent of any synthesizer)."""
    topo = ccviz.load_topology(f"ring:n={n}")
    coll = ccviz.make_collective("allgather", topo, size)
    transfers = [Transfer(chunk=(i - k) % n, src=i, dst=(i + 1) % n, step=k) for k in range(n - 1) for i in range(n)]
    return ccviz.simulate(Schedule(topo, coll, transfers, "hand-ring"))


def as_epoch_schedule(timeline: ccviz.Timeline) -> ccviz.Timeline:
    """The same ring, declared as an epoch schedule with one epoch per ring step."""
    sched = timeline.schedule
    link = next(iter(sched.topology.links.values()))
    epoch = link.alpha_s + link.serialization_s(sched.chunk_bytes)
    timed = sched.with_transfers(list(sched.transfers))
    timed.epoch_s, timed.epochs = epoch, int(max(t.step for t in sched.transfers)) + 1
    return ccviz.simulate(timed)


def chunk_markers(frame_data) -> int:
    trace = next(t for t in frame_data if t.name == "chunks in flight")
    return sum(1 for x in trace.x if x is not None)


@pytest.fixture(scope="module")
def ring8():
    return ring_allgather(8)


def test_epoch_schedule_has_one_frame_per_epoch_and_transfers_in_their_epoch(ring8):
    timeline = as_epoch_schedule(ring8)
    assert timeline.verified
    windows = frame_windows(timeline)
    assert len(windows) == timeline.schedule.epochs == 7
    for w in windows:
        assert {timeline.schedule.transfers[i].step for i in w.transfers} == {w.index}
    fig = schedule_animation(timeline)
    assert len(fig.frames) == timeline.schedule.epochs + 1  # and a last "done" frame at the finish
    assert fig.layout.sliders[0].steps[0].label.startswith("1/8 · epoch 1")
    assert fig.layout.sliders[0].steps[-1].label.startswith("8/8 · done")
    assert sum(chunk_markers(f.data) for f in fig.frames) == len(timeline.schedule.transfers)


@pytest.mark.parametrize("max_frames", [2, 3, 5, 120])
def test_every_transfer_appears_in_exactly_one_frame(ring8, max_frames):
    windows = frame_windows(ring8, max_frames=max_frames)
    assert len(windows) <= max_frames
    members = sorted(i for w in windows for i in w.transfers)
    assert members == list(range(len(ring8.schedule.transfers)))
    for w in windows:  # each transfer's start lies in its frame's window
        for i in w.transfers:
            assert w.start_s - 1e-15 <= ring8.start_s[i] <= w.end_s + 1e-15
    assert windows[-1].end_s >= ring8.finish_time_s


def test_every_registered_algorithm_frames_each_transfer_once():
    # a ring for every algorithm, a reducing star for those that need switches that add (inc), two tiers
    # for those that need them (hierarchical)
    fabrics = [ccviz.load_topology(spec) for spec in ("ring:n=4", "star:n=4,reduce=true", "ndv2:chassis=2")]
    for name in ccviz.algorithms_for("allgather"):
        if ccviz.REGISTRY[name].kind == "optimal":
            continue  # solver-backed algorithms are covered by their own tests
        schedules = []
        for topo in fabrics:
            try:
                schedules.append(ccviz.synthesize(topo, ccviz.make_collective("allgather", topo, 1e6), name))
                break
            except ccviz.CcvizError:
                continue
        assert schedules, f"{name} synthesizes AllGather on none of {[f.name for f in fabrics]}"
        timeline = ccviz.simulate(schedules[0])
        windows = frame_windows(timeline)
        if timeline.schedule.epochs:
            assert len(windows) == timeline.schedule.epochs, name
        assert sorted(i for w in windows for i in w.transfers) == list(range(len(timeline.schedule.transfers)))


def test_busy_fraction_is_in_unit_interval_and_conserves_busy_time(ring8):
    edges = np.linspace(0, ring8.finish_time_s, 17)
    keys, busy = busy_fraction(ring8, edges)
    assert busy.min() >= 0 and busy.max() <= 1 + 1e-12
    total = (busy * np.diff(edges)).sum(axis=1)
    for row, key in enumerate(keys):
        expected = sum(e - s for s, e, _ in ring8.link_busy.get(key, []))
        assert math.isclose(total[row], expected, rel_tol=1e-9, abs_tol=1e-15)
    util = ring8.link_utilization()
    assert all(0 <= u <= 1 for u in util.values())


def test_animation_colours_busy_links_and_fills_gpus(ring8):
    fig = schedule_animation(ring8)
    last = fig.frames[-2].data  # the last step (the frame after it is the finished state)
    busiest = next(t for t in last if t.name == "busy ≤ 100%")
    assert any(x is not None for x in busiest.x)  # a ring step keeps its links fully busy
    gpus = next(t for t in last if t.name == "GPUs")
    assert list(gpus.marker.color) == [1.0] * 8  # every GPU holds all it needs at the end
    done = fig.frames[-1].data
    assert list(next(t for t in done if t.name == "GPUs").marker.color) == [1.0] * 8
    now = done[-1]  # the time strip's marker sits at the finish time
    assert now.xaxis == "x2" and now.x[0] == pytest.approx(ring8.finish_time_s * 1e6)
    first = fig.frames[0].data
    assert max(next(t for t in first if t.name == "GPUs").marker.color) < 1.0
    assert fig.layout.sliders[0].steps and fig.layout.updatemenus[0].buttons[0].label.endswith("Play")


def test_large_fabric_animation_is_utilization_only():
    timeline = ring_allgather(CHUNKS_UP_TO + 8, size=1e5)
    fig = schedule_animation(timeline, max_frames=10)
    assert len(fig.frames) <= 10 + 1
    assert all(chunk_markers(f.data) == 0 for f in fig.frames)
    assert "utilization only" in fig.layout.title.text


def test_holdings_fill_up_for_allgather(ring8):
    _, _, start = holdings_matrix(ring8, 0.0)
    assert np.array_equal(start, np.eye(8))
    _, _, end = holdings_matrix(ring8, ring8.finish_time_s)
    assert np.all(end == 1.0)
    fig = holdings_figure(ring8, frames=5)
    assert len(fig.frames) == 5


def test_topology_layout_and_styles():
    ref = ccviz.load_topology(REFERENCE_DGX1)  # no positions in the file: computed
    pos = node_positions(ref)
    assert len({(round(x, 6), round(y, 6)) for x, y in pos.values()}) == len(ref.nodes)
    fig = topology_figure(ref)
    assert {t.name for t in fig.data} >= {"50 GB/s links", "25 GB/s links", "GPUs"}
    one_way = ccviz.load_topology("ring:n=4,bidirectional=false")
    assert any(t.name == "direction" for t in topology_figure(one_way).data)
    with_switch = ccviz.load_topology("star:n=4")
    fig = topology_figure(with_switch)
    switches = next(t for t in fig.data if t.name == "switches")
    assert switches.marker.symbol == "square"


def test_utilization_gantt_and_snapshot_figures(ring8):
    heat = utilization_heatmap(ring8)
    z = np.array(heat.data[0].z)
    assert z.min() >= 0 and z.max() <= 1
    bars = link_busy_bars(ring8)
    assert "bottleneck" in bars.layout.annotations[0].text
    gantt = gantt_figure(ring8)
    assert sum(len(t.x) for t in gantt.data) == len(ring8.schedule.transfers)
    snap = frame_snapshot(ring8, 2)
    assert chunk_markers(snap.data) == 8


def test_narration_ends_with_everything_delivered(ring8):
    stories = narrate(ring8)
    assert len(stories) == len(frame_windows(ring8))
    assert stories[-1].delivered == stories[-1].demands == 56
    assert all(s.sentence for s in stories)


def test_compare_table_respects_the_lower_bound_and_records_errors():
    topo = ccviz.load_topology("ring:n=4")
    algorithms = [a for a in ccviz.algorithms_for("allgather") if ccviz.REGISTRY[a].kind != "optimal"][:2]
    sizes = [1e3, 1e6, 1e9]
    table = compare(topo, "allgather", [*algorithms, "no-such-algorithm"], sizes)
    assert len(table) == (len(algorithms) + 1) * len(sizes)
    ok = table[table["error"].isna()]
    assert len(ok) == len(algorithms) * len(sizes)
    assert (ok["algbw_GBps"] <= ok["bound_algbw_GBps"] * (1 + 1e-9)).all()
    assert (ok["bound_ratio"] >= 1 - 1e-9).all()
    assert table[table["algorithm"] == "no-such-algorithm"]["error"].str.contains("unknown algorithm").all()
    fig = comparison_figure(table)
    assert any("lower bound" in t.name for t in fig.data)
    assert len(finish_bars(table, 1e6).data[0].x) == len(algorithms)


def test_wrap_around_links_are_bent_so_they_do_not_cross_nodes():
    torus = ccviz.load_topology("torus2d:dims=4x4")
    segments = link_segments(torus, node_positions(torus))
    wrap = segments[(0, 3)]
    assert len(wrap) > 2 and segments[(3, 0)] == wrap[::-1]
    assert len(segments[(0, 1)]) == 2  # neighbours stay straight
    ring = ccviz.load_topology("ring:n=8")
    assert all(len(path) == 2 for path in link_segments(ring, node_positions(ring)).values())


def test_many_sources_get_a_colourbar_not_a_legend():
    timeline = ring_allgather(16, size=1e5)
    fig = schedule_animation(timeline)
    assert not [t for t in fig.data if (t.name or "").startswith("from ")]
    assert any(t.marker is not None and t.marker.showscale for t in fig.data)
    few = schedule_animation(ring_allgather(4, size=1e5))
    assert len([t for t in few.data if (t.name or "").startswith("from ")]) == 4


@pytest.mark.parametrize("spec, collective, algorithm", [("dgx1", "allreduce", "ring"),
                                                          ("torus2d:dims=3x3", "alltoall", "direct")])
def test_holdings_series_replays_the_simulators_holdings(spec, collective, algorithm):
    from ccviz.runs.pipeline import run
    from ccviz.viz.holdings import holdings_series

    timeline = run(ccviz_load(spec), collective, algorithm, 1e6).timeline
    times = np.linspace(0, timeline.finish_time_s, 7)
    _, _, series, note = holdings_series(timeline, times)
    chunks, gpus = timeline.collective.chunks, timeline.topology.gpus
    for k, t in enumerate(times):
        held = timeline.holdings_at(float(t))
        expected = np.array([[held.get(g, {}).get(c.id, 0.0) for c in chunks] for g in gpus])
        assert np.allclose(series[k], expected)
    assert note == ""


def ccviz_load(spec):
    from ccviz import load_topology

    return load_topology(spec)


def test_steps_follow_dependency_rounds_and_play_in_the_browser():
    from ccviz.runs.pipeline import run
    from ccviz.viz.steps import OP_COLORS, dependency_rounds, schedule_steps, steps_figure

    rhd = run(ccviz.load_topology("ring:n=8"), "allreduce", "rhd", 1e6).timeline
    steps = schedule_steps(rhd)
    assert len(steps) == 6  # 2 log2 8 rounds, not a hundred time windows
    fig = steps_figure(rhd)
    assert len(fig.frames) == len(steps) + 1 and fig.layout.sliders[0].active == 0
    assert [b.label for b in fig.layout.updatemenus[0].buttons][0] == "▶ Play"

    def coloured(frame, op):  # how many link segments the frame draws in op's colour
        trace = next(t for t in frame.data if t.line and t.line.color == OP_COLORS[op])
        return sum(1 for x in trace.x if x is None or x != x)

    assert coloured(fig.frames[0], "reduce") == coloured(fig.frames[0], "copy") <= 1  # nothing moves before step 1
    assert coloured(fig.frames[1], "reduce") > 1  # reduce-scatter reduces ...
    assert coloured(fig.frames[-1], "copy") > 1 and coloured(fig.frames[-1], "reduce") <= 1  # ... all-gather copies
    # a schedule without round labels: a transfer's step follows the step that brought its chunk to its sender
    tacos = run(ccviz.load_topology("torus2d:dims=3x3"), "allgather", "tacos", 1e6).timeline
    rounds = dependency_rounds(tacos)
    transfers = tacos.schedule.transfers
    for i, t in enumerate(transfers):
        feeders = [rounds[j] for j, u in enumerate(transfers)
                   if u.dst == t.src and u.chunk == t.chunk and tacos.arrival_s[j] <= tacos.start_s[i] * (1 + 1e-9)]
        assert rounds[i] == 1 + max(feeders, default=0)
    assert len(schedule_steps(tacos)) == max(rounds)


def test_learn_draws_a_torus_wrap_around_as_an_arc_not_through_the_row():
    import re

    from ccviz.runs.pipeline import run
    from ccviz.viz.rounds import round_frames

    timeline = run(ccviz.load_topology("torus2d:dims=4x4"), "allgather", "ring", 1e6).timeline
    svg = round_frames(timeline)[0]["svg"]
    lines = re.findall(r'<polyline points="([^"]+)" fill="none" stroke="#d0d0d0"', svg)
    assert len(lines) == len({frozenset(k) for k in timeline.topology.links})
    bent = [pts for pts in lines if len(pts.split()) > 2]
    # a 4x4 torus has 8 wrap-around cables, each drawn along its arc
    assert len(bent) == 8


def test_textbook_curves_faster_than_the_fabric_limit_are_named():
    import pandas as pd

    from ccviz.viz.comparison import formulas_above_limit

    table = pd.DataFrame({"algorithm": ["ring-bidir", "ring-bidir", "ring"], "size_bytes": [1e6, 1e9, 1e9],
                          "formula_time_s": [30e-6, 9e-3, 40e-3], "limit_s": [20e-6, 18.75e-3, 18.75e-3]})
    assert formulas_above_limit(table) == {"ring-bidir": [1e9]}
    fig = comparison_figure(table.assign(error=None, finish_time_s=[40e-6, 20e-3, 41e-3], lower_bound_s=1e-6,
                                         algbw_GBps=1.0, formula_algbw_GBps=1.0, bound_algbw_GBps=2.0,
                                         size=["1MB", "1GB", "1GB"]))
    names = [t.name for t in fig.data]
    assert "ring-bidir (textbook α-β formula — above the fabric's limit)" in names
    assert "ring (textbook α-β formula)" in names


def test_relays_outside_a_process_group_are_not_drawn_as_gpus_that_hold_everything():
    """Playback of a ring over row 0-3 of a 4x4 torus drew the 12 relays full (as done) from the first frame
    while the group's four GPUs were empty; relays are pale throughout and say they relay."""
    from ccviz.builders import build
    from ccviz.runs.pipeline import run
    from ccviz.viz.steps import steps_figure

    result = run(build("torus2d:dims=4x4"), "allreduce", "ring", 1e6, ranks=[0, 1, 2, 3])
    fig = steps_figure(result.timeline)
    for frame in (fig.frames[0], fig.frames[-1]):
        gpus = next(t for t in frame.data if t.hovertext and any("relay" in h for h in t.hovertext))
        fills = dict(zip(range(16), gpus.marker.color, strict=True))
        assert all(fills[r] == 0.0 for r in range(4, 16)), fills
        assert all("relay" in gpus.hovertext[r] for r in range(4, 16))
        assert not any("relay" in gpus.hovertext[r] for r in range(4))
    assert all(fills[r] == 1.0 for r in range(4))  # the last frame: the group holds what it needs


def _network_px(fig) -> float:
    """Pixels of height the network (y axis) gets: the figure less its margins, times the axis's domain."""
    layout = fig.layout
    domain = layout.yaxis.domain or (0.0, 1.0)
    return (layout.height - layout.margin.t - layout.margin.b) * (domain[1] - domain[0])


def test_the_animation_draws_a_48_gpu_network_as_large_as_the_step_view():
    # Playback of a 48-GPU dragonfly: the animation drew its network at two thirds of the step view's size,
    # and the GPUs' labels around each router ran into each other ("3938", "4445")
    from ccviz.runs.pipeline import run
    from ccviz.viz.steps import steps_figure

    timeline = run(ccviz.load_topology("dragonfly:groups=4,routers=2,gpus=6"), "allgather", "ring", 1e6).timeline
    assert _network_px(schedule_animation(timeline)) >= 0.95 * _network_px(steps_figure(timeline))


def test_utilization_names_a_switch_by_its_label_and_the_number_the_graph_shows() -> None:
    # a walkthrough read 'R0.0→GPU3' in the utilization bars where the graph and the limit's words said 48
    from ccviz.viz.utilization import link_name

    result = ccviz.run(ccviz.load_topology("dragonfly:groups=4,routers=2,gpus=6"), "allgather", "ring", 1e6)
    topology = result.topology
    router = topology.switches[0]
    gpu = next(u for u, v in topology.links if v == router and not topology.is_switch(u))
    assert topology.nodes[router].label == "R0.0" and router == 48
    assert link_name(result.timeline, (gpu, router)) == f"GPU{gpu}→R0.0 (48)"
