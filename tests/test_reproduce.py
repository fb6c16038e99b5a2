"""`ccviz reproduce teccl`: the published table ships with the package and a fast subset reproduces.

The full 66-row run takes minutes; it is `python bench/teccl.py` (or `ccviz reproduce teccl`), not a test.
"""

from __future__ import annotations

import json

import pytest

from ccviz import load_topology, make_collective
from ccviz.cli import main
from ccviz.runs.reproduce import published_runs, reproduce_run, summary

FAST_ROWS = "NDv2 Slow 1GB"  # certified by the bound in well under a second


def test_the_published_table_ships_whole_with_its_conventions() -> None:
    runs = published_runs()
    assert len(runs) == 66 and len({r.name for r in runs}) == 66
    assert {r.topology for r in runs} == {"NDv2", "DGX2"}
    assert {r.mode for r in runs} == {"Slow", "Fast", "Fast_Early_Stop"}
    for r in runs:
        assert r.finish_s == pytest.approx(r.epochs * r.epoch_s, rel=1e-9)
        assert r.gap == (0.3 if r.mode == "Fast_Early_Stop" else None)
    ndv2, dgx2 = (load_topology(published_runs(f"{t} Slow 1GB")[0].topology_spec) for t in ("NDv2", "DGX2"))
    assert make_collective("allgather", ndv2, 16e6).chunk_bytes == 1e6  # size / 16 on the as-run NDv2
    assert make_collective("allgather", dgx2, 32e6).chunk_bytes == 1e6  # size / 32 on DGX2
    assert ndv2.switch_hop == dgx2.switch_hop == "teccl"


def test_dgx2_1kb_slow_reproduces_the_published_epoch_count() -> None:
    # 5 ns epochs: GPU->NVSwitch 1 + 70, NVSwitch->GPU 70 (alpha only), NIC 1 + 520:
    # 71 + 70 + 521 + 71 + 70 = 803 epochs for a chunk that must cross the chassis and then spread.
    row = reproduce_run(published_runs("DGX2 Slow 1KB")[0], time_limit=60)
    assert row.result.timeline.verified
    assert (row.epochs, row.status, row.bound_epochs, row.verdict) == (803, "optimal", 803, "equal")
    assert row.model_s == pytest.approx(4.015e-6)
    assert row.simulated_s <= row.model_s  # the replay pays alpha, not whole epochs


def test_early_stop_rows_solve_with_the_published_gap_and_never_exceed_it() -> None:
    row = reproduce_run(published_runs("NDv2 Fast_Early_Stop 1GB")[0], time_limit=60)
    assert row.result.schedule.status == "optimal" and row.epochs <= row.run.epochs
    assert row.verdict == ("equal" if row.epochs == row.run.epochs else "lower")


def test_cli_table_json_and_exit_status(capsys) -> None:
    assert main(["reproduce", "teccl", "--filter", FAST_ROWS, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    (row,) = out["rows"]
    assert (row["instance"], row["epochs"], row["published_epochs"], row["verdict"]) == (FAST_ROWS, 10, 10, "equal")
    assert row["model_finish_s"] == pytest.approx(0.05) and row["simulated_finish_s"] <= 0.05
    assert row["status"] == "optimal" and row["bound_epochs"] == 10 and row["verified"]
    assert out["summary"]["ok"] and out["summary"]["geomean_solve_ratio"] == pytest.approx(row["solve_ratio"])
    assert main(["reproduce", "teccl", "--filter", FAST_ROWS]) == 0
    text = capsys.readouterr().out
    assert "ccviz ep" in text and "geometric mean" in text and "1 equal" in text


def test_a_row_worse_than_published_fails_the_run() -> None:
    row = reproduce_run(published_runs(FAST_ROWS)[0], time_limit=60)
    row.result.schedule.epochs = row.run.epochs + 1
    assert row.verdict == "higher" and not summary([row])["ok"]


def test_bad_filter_and_time_limit_are_one_line_errors(capsys) -> None:
    assert main(["reproduce", "teccl", "--filter", "AMD"]) == 2
    assert "--filter" in capsys.readouterr().err
    assert main(["reproduce", "teccl", "--time-limit", "0"]) == 2
    assert "--time-limit" in capsys.readouterr().err
