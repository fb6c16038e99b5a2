"""Wall time of one 40-row sweep on an embedded Dask cluster of 1 and of 2 worker processes.

Prints each run's sweep wall time (cluster start-up shown apart), rows per second, and the ratio
1-worker / 2-workers measured in this run. Each run writes a fresh CSV, so nothing is resumed.
With ``--rows-cost`` it also times single rows on 64- to 1024-GPU fabrics, each in a fresh
process, with that process's peak memory, and with ``--overhead`` the engines' start-up and the
scheduler's cost per task (the numbers docs/scale.md is built from).

    python bench/sweep.py [--workers 1,2] [--repeat 2] [--overhead] [--rows-cost]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ccviz.runs.grid import Grid
from ccviz.runs.sweep import RowWriter, dask_client, run_point, sweep

# 2 fabrics x 2 algorithms x 10 sizes (1KB..256MB) = 40 rows of about 0.1-1 s each
GRID = {"topology": ["torus2d:dims=8x8", "mesh2d:dims=6x6"], "collective": "allgather",
        "algorithm": "tacos,ring", "size": "1KB..256MB"}
ROW_COST = [  # (fabric, GPUs, algorithm, collective, size)
    ("torus2d:dims=8x8", 64, "ring", "allgather", "1MB"),
    ("torus2d:dims=8x8", 64, "tacos", "allgather", "1MB"),
    ("torus2d:dims=16x16", 256, "ring", "allgather", "1MB"),
    ("torus2d:dims=16x16", 256, "tacos", "allgather", "1MB"),
    ("torus3d:dims=8x8x8", 512, "ring", "allgather", "1MB"),
    ("torus3d:dims=8x8x16", 1024, "ring", "allgather", "1MB"),
]


def _warm() -> None:
    import ccviz.runs.pipeline  # noqa: F401  (a worker's first row would otherwise pay ccviz's imports)


def one_run(workers: int, repeat: int) -> tuple[float, float, float, int]:
    """Best sweep wall of ``repeat`` sweeps on one cluster (fresh output each), start-up and warm-up apart."""
    grid = Grid.make(**GRID)
    assert len(grid.points()) == 40, len(grid.points())
    started = time.perf_counter()
    with dask_client(workers=workers) as client:
        start_s = time.perf_counter() - started
        t = time.perf_counter()
        client.run(_warm)
        warm_s = time.perf_counter() - t
        walls, ok = [], 0
        for _ in range(repeat):
            with tempfile.TemporaryDirectory() as tmp:
                report = sweep(grid, client, RowWriter(Path(tmp) / "rows.csv"))
            walls.append(report.wall_s)
            ok = report.ok
    return min(walls), start_s, warm_s, ok


def row_cost(spec: str, algorithm: str, collective: str, size: str) -> dict:
    """One row in this (fresh) process: wall seconds of run() and the process's peak RSS."""
    from ccviz.builders.loading import load_topology
    from ccviz.model.units import parse_size
    from ccviz.runs.pipeline import run

    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    topology = load_topology(spec)
    started = time.perf_counter()
    result = run(topology, collective, algorithm, parse_size(size))
    wall = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"wall_s": wall, "peak_rss_MB": peak / 1024, "import_rss_MB": base / 1024,
            "transfers": result.summary()["transfers"], "verified": result.timeline.verified,
            "row_bytes": len(json.dumps(result.summary()))}


def overhead() -> None:
    """Start-up of each embedded engine, one tiny row's round trip, and the scheduler's cost per no-op task."""
    import os

    grid = Grid.make("ring:n=4", "allgather", "ring", "1KB")
    point, text = grid.points()[0], grid.loaded["ring:n=4"].to_json()
    for processes, n in ((False, 1), (True, 2)):
        started = time.perf_counter()
        with dask_client(workers=n, processes=processes) as client:
            start_s = time.perf_counter() - started
            t = time.perf_counter()
            for _ in range(20):
                client.submit(run_point, point, text, "bench", pure=False).result()
            row_ms = (time.perf_counter() - t) / 20 * 1e3
            t = time.perf_counter()
            client.gather([client.submit(os.getpid, pure=False) for _ in range(1000)])
            task_ms = (time.perf_counter() - t) / 1000 * 1e3
        kind = f"{n} worker process(es)" if processes else "1 worker thread in-process"
        print(f"  {kind:<26} start-up {start_s:5.2f} s, tiny row round trip {row_ms:5.1f} ms, "
              f"1000 no-op tasks {task_ms:5.2f} ms each")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default="1,2", help="worker counts to compare")
    parser.add_argument("--rows-cost", action="store_true", help="also time single rows on 64-1024 GPU fabrics")
    parser.add_argument("--repeat", type=int, default=2, help="sweeps per worker count (best is kept)")
    parser.add_argument("--overhead", action="store_true", help="also time engine start-up and per-task cost")
    parser.add_argument("--row", nargs=4, help=argparse.SUPPRESS)  # internal: one row in a fresh process
    args = parser.parse_args()
    if args.row:
        print(json.dumps(row_cost(*args.row)))
        return
    counts = [int(n) for n in args.workers.split(",")]
    walls = {}
    print("40-row sweep (2 fabrics x tacos,ring x 10 sizes, AllGather) on an embedded LocalCluster")
    for n in counts:
        wall, start_s, warm_s, ok = one_run(n, args.repeat)
        walls[n] = wall
        print(f"  {n} worker(s): {wall:7.2f} s sweep, best of {args.repeat} ({40 / wall:5.1f} rows/s, {ok} ok); "
              f"cluster start-up {start_s:5.2f} s, worker imports {warm_s:5.2f} s")
    if len(counts) >= 2:
        a, b = counts[0], counts[1]
        print(f"  ratio {a} worker(s) / {b} worker(s): {walls[a] / walls[b]:.2f}x")
    if args.overhead:
        print("engine overheads:")
        overhead()
    if args.rows_cost:
        print("single rows, each in a fresh process (wall of synthesize+simulate+bound, peak RSS):")
        for spec, gpus, algorithm, collective, size in ROW_COST:
            out = subprocess.run([sys.executable, __file__, "--row", spec, algorithm, collective, size],
                                 capture_output=True, text=True, timeout=900)
            if out.returncode:
                print(f"  {spec:<20} {gpus:5d} GPUs {algorithm:<6} failed: {out.stderr.strip()[-200:]}")
                continue
            r = json.loads(out.stdout)
            print(f"  {spec:<20} {gpus:5d} GPUs {algorithm:<6} {collective} {size}: {r['wall_s']:8.2f} s, "
                  f"peak {r['peak_rss_MB']:6.0f} MB (after imports {r['import_rss_MB']:.0f} MB), "
                  f"{r['transfers']} transfers, row {r['row_bytes']} B")


if __name__ == "__main__":
    main()
