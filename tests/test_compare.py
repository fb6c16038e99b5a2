"""Size sweeps: a stop event or a sweep time limit ends the sweep between rows, marking the rest."""

from __future__ import annotations

import threading

import pandas as pd
import pytest

import ccviz
from ccviz import CcvizError
from ccviz.builders import build
from ccviz.runs.compare import compare
from ccviz.synth.registry import SynthOptions

SIZES = [1e3, 1e4, 1e5]


def test_a_sweep_stopped_midway_keeps_the_completed_rows_and_marks_the_rest() -> None:
    topo = ccviz.load_topology("ring:n=4")
    stop = threading.Event()
    seen = []

    def stop_after_three(row: dict) -> None:
        seen.append(row)
        if len(seen) == 3:
            stop.set()

    table = compare(topo, "allgather", ["ring", "tacos"], SIZES, on_row=stop_after_three, stop=stop)
    assert len(table) == 6 and len(seen) == 6  # every (algorithm, size) has a row, all reported
    done, rest = table.iloc[:3], table.iloc[3:]
    assert done["error"].isna().all() and done["verified"].all()
    assert (rest["status"] == "skipped").all() and not rest["verified"].any()
    assert rest["error"].str.contains("skipped: the sweep was stopped after 3 of 6 runs").all()
    assert list(rest["algorithm"]) == ["tacos", "ring", "tacos"]


def test_options_stop_is_honoured_between_rows() -> None:
    topo = ccviz.load_topology("ring:n=4")
    stop = threading.Event()
    stop.set()
    table = compare(topo, "allgather", ["tacos"], SIZES, options=SynthOptions(stop=stop))
    assert (table["status"] == "skipped").all()
    assert table["error"].str.contains("after 0 of 3 runs").all()


def test_the_stop_reaches_the_running_algorithm_which_returns_its_best() -> None:
    topo = ccviz.load_topology("mesh2d:dims=3x3")
    stop = threading.Event()

    def stop_after_first_restart(p) -> None:
        if p.message.endswith("done"):
            stop.set()

    options = SynthOptions(restarts=4, seed=0, progress=stop_after_first_restart)
    table = compare(topo, "allgather", ["tacos", "ring"], SIZES, options=options, stop=stop)
    first = table.iloc[0]
    assert first["verified"] and first["status"] == "heuristic" and pd.isna(first["error"])
    assert (table.iloc[1:]["status"] == "skipped").all()
    assert table.iloc[1:]["error"].str.contains("after 1 of 6 runs").all()


def test_an_expired_sweep_time_limit_skips_the_rest_and_bad_limits_are_refused() -> None:
    topo = ccviz.load_topology("ring:n=4")
    table = compare(topo, "allgather", ["ring"], SIZES, time_limit=1e-9)
    assert (table["status"] == "skipped").all()
    assert table["error"].str.contains("time limit").all()
    with pytest.raises(CcvizError, match="time_limit"):
        compare(topo, "allgather", ["ring"], SIZES, time_limit=0)


def test_an_unstopped_sweep_runs_every_row() -> None:
    topo = ccviz.load_topology("ring:n=4")
    table = compare(topo, "allgather", ["ring", "mteg"], SIZES, stop=threading.Event(), time_limit=600)
    assert table["error"].isna().all() and table["verified"].all()
    assert (table["status"] != "skipped").all()


def test_the_same_loop_runs_the_rows_on_a_dask_cluster_with_the_same_table() -> None:
    """``client``: the rows run as tasks of the sweep engine; the table equals the in-process one."""
    from ccviz.runs.sweep import dask_client

    topo = ccviz.load_topology("ring:n=4")
    here = compare(topo, "allgather", ["ring", "direct"], SIZES)
    reports = []
    with dask_client(workers=1, processes=False) as client:
        there = compare(topo, "allgather", ["ring", "direct"], SIZES, client=client, on_progress=reports.append)
    same = ["algorithm", "size_bytes", "finish_time_s", "lower_bound_s", "limit_s", "verified", "status"]
    pd.testing.assert_frame_equal(here[same], there[same])
    assert reports and reports[-1].done == 6 and reports[-1].running == 0
    with dask_client(workers=1, processes=False) as client, pytest.raises(CcvizError, match="seed"):
        compare(topo, "allgather", ["tacos"], SIZES, options=SynthOptions(seed=3), client=client)


def test_known_rows_are_not_run_and_each_size_bound_is_computed_once(monkeypatch) -> None:
    from ccviz.runs import compare as module

    topo = ccviz.load_topology("ring:n=4")
    first = compare(topo, "allgather", ["ring"], SIZES[:1])
    known = {(SIZES[0], "ring"): {**first.iloc[0].to_dict(), "synth_time_s": -1.0}}  # a mark no run leaves
    bounds = []
    real = module.size_bound
    monkeypatch.setattr(module, "size_bound", lambda *args: bounds.append(args[2]) or real(*args))
    solver = []
    table = compare(topo, "allgather", ["ring", "tacos"], SIZES, known=known,
                    on_solver_progress=lambda algorithm, size, p: solver.append((algorithm, size)))
    assert table.iloc[0]["synth_time_s"] == -1.0 and len(table) == 6  # served, not run
    assert sorted(bounds) == SIZES  # once per size, shared by its algorithms
    assert table["verified"].all() and {a for a, _ in solver} == {"tacos"}


def test_a_run_that_refines_the_chunks_is_measured_against_the_sizes_one_bound() -> None:
    # ForestColl pipelines pieces of the chunks: the bound at 1 chunk per rank does not hold for it (the table
    # once showed it beating that bound on DGX-1 at 4 MB), and a bound per algorithm's own chunking ranked
    # nothing (issue 40: 374 us for forestcoll beside 481 us for teccl-astar at 64 MB). One bound per size, valid
    # at any chunking, holds for both.
    topo = ccviz.load_topology("dgx1")
    table = compare(topo, "allgather", ["ring", "forestcoll"], [4e6])
    ring, forest = (table[table["algorithm"] == a].iloc[0] for a in ("ring", "forestcoll"))
    assert forest["verified"] and forest["lower_bound_s"] == ring["lower_bound_s"]
    assert (table["finish_time_s"] >= table["lower_bound_s"] * (1 - 1e-9)).all()
    assert (table["algbw_GBps"] <= table["bound_algbw_GBps"] * (1 + 1e-9)).all()


def test_compare_says_which_algorithm_is_fastest_over_which_sizes_and_where_it_hands_over() -> None:
    """Issue 30: Compare shows where a bandwidth-optimal schedule takes over from a latency-optimal one.
    Unverified or failed rows never win."""
    from ccviz.viz.comparison import fastest_by_size, handover_sentence

    rows = [("bruck", 1e3, 2e-6, True, None), ("mcf", 1e3, 3e-6, True, None),
            ("bruck", 1e6, 50e-6, True, None), ("mcf", 1e6, 11e-6, True, None),
            ("bruck", 1e9, 1e-3, False, None), ("mcf", 1e9, 10e-3, True, None),  # bruck unverified at 1GB
            ("direct", 1e9, 1e-6, True, "timed out")]  # a failed row: no winner
    table = pd.DataFrame(rows, columns=["algorithm", "size_bytes", "finish_time_s", "verified", "error"])
    assert fastest_by_size(table) == [(1e3, 1e3, "bruck"), (1e6, 1e9, "mcf")]
    assert handover_sentence(table) == ("Fastest verified: **bruck** at 1KB; **mcf** from 1MB to 1GB. "
                                        "Handover: bruck → mcf between 1KB and 1MB.")
    real = compare(build("torus2d:dims=3x3"), "alltoall", ["mcf", "bruck"], [1e3, 1e9])
    spans = fastest_by_size(real)
    assert spans[0][0] == 1e3 and spans[-1][1] == 1e9 and spans[-1][2] == "mcf"  # mcf at 1GB on a torus
    assert "mcf" in handover_sentence(real)


def test_a_schedule_faster_than_its_textbook_formula_is_named_so_the_formula_is_not_called_ideal() -> None:
    """Compare called the α-β formulas "ideal" while direct AllToAll on a 4x4 torus ran at 69 GB/s against
    its formula's 38 GB/s (the formula sends one message per GPU at a time; the schedule uses four links)."""
    from ccviz.viz.comparison import comparison_figure, formulas_beaten

    table = compare(build("torus2d:dims=4x4"), "alltoall", ["direct", "bruck"], [1e6])
    beaten = formulas_beaten(table)
    direct = table[table["algorithm"] == "direct"].iloc[0]
    assert direct["finish_time_s"] < direct["formula_time_s"] and beaten.get("direct") == [1e6]
    names = {trace.name for trace in comparison_figure(table).data}
    assert not any("ideal" in name for name in names), names


def test_allreduce_on_switches_that_add_shows_the_limit_without_switch_sums() -> None:
    """On dgxh100 (NVLS) the fabric's AllReduce limit counts sums made in the switch; ring and forestcoll sum
    at GPUs and can only reach the limit without them, which Compare draws as a second line and lists."""
    from ccviz.viz.comparison import SUMS_NAME, comparison_figure, finish_bars

    table = compare(build("dgxh100"), "allreduce", ["ring"], [1e6])
    row = table.iloc[0]
    assert row["limit_without_switch_sums_s"] > row["limit_s"]
    assert row["finish_time_s"] >= row["limit_without_switch_sums_s"] * (1 - 1e-9)
    assert SUMS_NAME in {trace.name for trace in comparison_figure(table).data}
    assert any("without switch sums" in (shape.text or "") for shape in finish_bars(table, 1e6).layout.annotations)
    plain = compare(build("dgx1"), "allreduce", ["ring"], [1e6])
    assert plain["limit_without_switch_sums_s"].isna().all()
    assert SUMS_NAME not in {trace.name for trace in comparison_figure(plain).data}
