"""``ccviz sweep`` on a real Dask ``LocalCluster`` of 2 worker processes (tiny fabrics, fast algorithms)."""

from __future__ import annotations

import json
import os
import signal
import threading

import pandas as pd
import pytest

from ccviz.cli import main
from ccviz.errors import CcvizError
from ccviz.runs.grid import Grid, parse_sizes, row_key
from ccviz.runs.sweep import RowWriter, dask_client, summary_text, sweep
from tests.test_cli import CONTRACT_KEYS

GRID_24 = ["--topology", "ring:n=4", "--topology", "mesh2d:dims=2x3", "--collective", "allgather",
           "--algorithm", "ring,direct,tacos", "--size", "1KB..64KB"]  # 2 x 1 x 3 x 4 = 24 rows


@pytest.fixture(scope="module")
def client():
    with dask_client(workers=2) as c:
        yield c


def read(path) -> pd.DataFrame:
    return pd.read_parquet(path) if str(path).endswith(".parquet") else pd.read_csv(path)


def keys(frame: pd.DataFrame) -> list[tuple]:
    return [row_key(row) for row in frame.to_dict("records")]


def test_cli_sweep_of_24_rows_writes_24_rows_then_resumes_without_work(capsys, tmp_path, client):
    out = tmp_path / "results.csv"
    assert main(["sweep", *GRID_24, "--out", str(out), "--workers", "2", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert {"rows", "ok", "failed", "wall_s"} <= set(summary)
    assert summary["rows"] == 24 and summary["ok"] == 24 and summary["failed"] == 0 and summary["new"] == 24
    frame = read(out)
    assert len(frame) == 24 and len(set(keys(frame))) == 24
    assert CONTRACT_KEYS - {"status"} <= set(frame.columns) and {"status", "error", "worker", "wall_s"} <= set(frame)
    assert set(frame["status"]) == {"ok"} and frame["verified"].all()
    assert frame["worker"].str.startswith("tcp://").all()
    assert (frame["finish_time_s"] >= frame["lower_bound_s"] * (1 - 1e-9)).all()

    same = Grid.make(["ring:n=4", "mesh2d:dims=2x3"], "allgather", "ring,direct,tacos", "1KB..64KB")
    again = sweep(same, client, RowWriter(out)).summary()  # the same grid on another cluster: nothing to do
    assert again["new"] == 0 and again["rows"] == 24 and len(read(out)) == 24


def test_a_killed_worker_process_loses_no_row_and_duplicates_none(client, tmp_path):
    grid = Grid.make(["torus2d:dims=4x4", "mesh2d:dims=4x4"], "allgather", "tacos,ring", "1KB..1MB")
    assert len(grid.points()) == 24
    pids = client.run(os.getpid)
    killed: list[int] = []

    def kill_one(row: dict) -> None:
        if not killed:  # mid-sweep: the first row is back, 23 are queued or running
            victim = next(pid for address, pid in pids.items() if address != row["worker"])
            os.kill(victim, signal.SIGKILL)
            killed.append(victim)

    out = RowWriter(tmp_path / "killed.csv")
    report = sweep(grid, client, out, on_row=kill_one)
    assert killed and report.stopped is None
    frame = read(tmp_path / "killed.csv")
    assert len(frame) == 24 and len(set(keys(frame))) == 24
    assert set(frame["status"]) == {"ok"}
    assert report.new == 24


def test_a_row_on_a_worker_is_the_run_in_this_process(client, tmp_path):
    # Compare with TE-CCL selected (an embedded cluster) showed mcf at 10.31 ms where the same page without
    # it, Synthesize and `ccviz synth` said 10 ms: the worker read the fabric from JSON, its links sorted,
    # and mcf breaks ties in link order
    from ccviz.builders.loading import load_topology
    from ccviz.runs.pipeline import run

    grid = Grid.make(["torus2d:dims=4x4"], "alltoall", "mcf", "1GB")
    sweep(grid, client, RowWriter(tmp_path / "m.csv"))
    row = read(tmp_path / "m.csv").iloc[0]
    here = run(load_topology("torus2d:dims=4x4"), "alltoall", "mcf", 1e9)
    assert row["status"] == "ok"
    assert row["finish_time_s"] == pytest.approx(here.timeline.finish_time_s, rel=1e-12)


def test_a_failing_row_is_reported_with_its_message_while_the_rest_finish(client, tmp_path):
    # rhd needs a power-of-two number of GPUs: the algorithm raises for every size on a 6-ring
    grid = Grid.make(["ring:n=6"], "allreduce", "rhd,ring", "1KB,1MB")
    report = sweep(grid, client, RowWriter(tmp_path / "f.csv"))
    frame = read(tmp_path / "f.csv")
    assert len(frame) == 4 and report.failed == 2 and report.ok == 2
    failed = frame[frame["status"] == "error"]
    assert set(failed["algorithm"]) == {"rhd"}
    assert failed["error"].str.contains("power-of-two").all()
    assert frame.loc[frame["status"] == "ok", "algorithm"].eq("ring").all()
    assert "error: rhd allreduce on ring:n=6" in summary_text(report)


def test_resume_skips_finished_rows_and_cuts_a_half_written_line(client, tmp_path):
    out = tmp_path / "r.csv"
    small = Grid.make(["ring:n=4"], "allgather", "ring", "1KB,4KB")
    sweep(small, client, RowWriter(out))
    with open(out, "a") as f:
        f.write("ring:n=4,allgather,ring,16000.0")  # a crash in the middle of a row
    bigger = Grid.make(["ring:n=4"], "allgather", "ring", "1KB,4KB,16KB,64KB")
    report = sweep(bigger, client, RowWriter(out))
    assert report.new == 2 and len(report.rows) == 4
    frame = read(out)
    assert len(frame) == 4 and len(set(keys(frame))) == 4 and frame["status"].eq("ok").all()
    # other solver options are other rows
    timed = Grid.make(["ring:n=4"], "allgather", "ring", "1KB", time_limit=5)
    assert sweep(timed, client, RowWriter(out)).new == 1


def test_parquet_output_and_kept_schedules(client, tmp_path):
    out = tmp_path / "r.parquet"
    grid = Grid.make(["ring:n=4"], "allgather,broadcast", "ring", "1KB,1MB", chunks="1,2")
    report = sweep(grid, client, RowWriter(out), schedules=tmp_path / "schedules")
    frame = read(out)
    assert len(frame) == 8 == report.new and frame["status"].eq("ok").all()
    files = sorted((tmp_path / "schedules").glob("*.json"))
    assert len(files) == 8
    assert main(["verify", str(files[0])]) == 0
    assert sweep(grid, client, RowWriter(out)).new == 0


def test_a_stop_before_the_start_writes_nothing_and_a_rerun_finishes(client, tmp_path):
    stop = threading.Event()
    stop.set()
    grid = Grid.make(["ring:n=4"], "allgather", "ring", "1KB,4KB")
    report = sweep(grid, client, RowWriter(tmp_path / "s.csv"), stop=stop)
    assert report.stopped == "stopped" and report.new == 0
    assert sweep(grid, client, RowWriter(tmp_path / "s.csv")).new == 2


@pytest.mark.parametrize("args, message", [
    (["--algorithm", "nope"], "unknown algorithm 'nope'"),
    (["--size", "1GB..1KB"], "runs backwards"),
    (["--scheduler", "tcp://127.0.0.1:9"], "cannot reach a Dask scheduler"),
    (["--topology", "nosuch:n=3"], "topology"),
    (["--chunks", "0"], "--chunks"),
])
def test_a_bad_grid_is_a_one_line_error_before_any_work(capsys, tmp_path, args, message):
    out = tmp_path / "bad.csv"
    base = {"--topology": "ring:n=4", "--collective": "allgather", "--algorithm": "ring", "--size": "1KB"}
    flags = [x for k, v in base.items() if k not in args for x in (k, v)]
    assert main(["sweep", *flags, *args, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err
    assert not out.exists()


def test_size_ranges_and_lists():
    assert parse_sizes("1KB..1GB")[0] == 1e3 and parse_sizes("1KB..1GB")[-1] == 1e9
    assert parse_sizes("1KB..1GB") == sorted(parse_sizes("1KB..1GB")) and len(parse_sizes("1KB..1GB")) == 11
    assert parse_sizes("1KiB..1MiB") == [2.0 ** k for k in range(10, 21, 2)]
    assert parse_sizes("64MB,1MB,1MB") == [1e6, 64e6]
    with pytest.raises(CcvizError, match="backwards"):
        parse_sizes("1MB..1KB")


def test_grid_from_yaml_with_flags_winning(tmp_path):
    path = tmp_path / "grid.yaml"
    path.write_text("topology: [ring:n=4, 'mesh2d:dims=2x2']\ncollective: allgather\nalgorithm: [ring, tacos]\n"
                    "size: 1KB..16KB\ntime-limit: 5\n")
    grid = Grid.from_yaml(path, algorithm="ring")
    assert grid.algorithms == ["ring"] and grid.time_limit == 5 and len(grid.points()) == 2 * 3
    path.write_text("topology: ring:n=4\nsizes: 1KB\n")
    with pytest.raises(CcvizError, match="unknown key"):
        Grid.from_yaml(path)


def test_compare_jobs_run_on_the_engine_and_stop(tmp_path):
    from ccviz.app import runs
    from ccviz.app.runs import SweepJob, SweepRequest
    from ccviz.builders.loading import load_topology

    topology = load_topology("ring:n=6")
    request = SweepRequest(topology.to_json(), "allreduce", ("ring", "rhd"), (1e3, 1e6), 1, None, 20.0)
    warm = "local cluster" in runs._CLIENTS  # once started, the embedded cluster serves every sweep
    job = SweepJob(request, topology)
    assert job.engine == ("local cluster" if warm else "worker") and job.wait(120)
    table = job.table()
    assert job.error is None and len(table) == 4 and not job.stopped
    assert table["verified"].sum() == 2 and table.loc[table["algorithm"] == "rhd", "error"].notna().all()
    assert "4/4 runs" in job.status_line()

    big = SweepRequest(load_topology("torus2d:dims=8x8").to_json(), "allgather", ("tacos", "ring"),
                       (1e3, 4e3, 16e3, 64e3, 256e3, 1e6), 1, None, 20.0)
    stopped = SweepJob(big, load_topology("torus2d:dims=8x8"))
    stopped.stop()
    assert stopped.wait(120) and stopped.stopped and len(stopped.table()) == 12

    fresh = SweepRequest(topology.to_json(), "allgather", ("ring",), (2e3,))  # not cached
    unreachable = SweepJob(fresh, topology, scheduler="tcp://127.0.0.1:9")
    assert unreachable.engine == "scheduler" and unreachable.wait(60)
    assert "cannot reach a Dask scheduler" in unreachable.error and unreachable.stopped


def test_a_pair_the_algorithm_does_not_implement_is_a_row_with_that_error(client, tmp_path):
    grid = Grid.make(["ring:n=4"], "allgather,broadcast", "ring,bruck", "1KB")
    report = sweep(grid, client, RowWriter(tmp_path / "u.csv"))
    assert len(report.rows) == 4 and report.ok == 3 and report.summary()["not_implemented"] == ["bruck broadcast"]
    (bad,) = [r for r in report.rows if r["status"] == "error"]
    assert bad["algorithm"] == "bruck" and "does not implement broadcast" in bad["error"]
    with pytest.raises(CcvizError, match="none of bruck implements broadcast"):
        Grid.make(["ring:n=4"], "broadcast", "bruck", "1KB")
