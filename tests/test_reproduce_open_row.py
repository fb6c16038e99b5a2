"""Issue 40, item 6: a TE-CCL row's solve time does not count Python's imports (the page, whose worker is a fresh
process, read 22.9x where the CLI read 125x), and a row opened in Playback carries the fabric's limit."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from ccviz.runs import reproduce

ROOT = Path(__file__).resolve().parents[1]

PROBE = """
import sys, time
from ccviz.runs import reproduce
loaded = []
real = time.perf_counter
def clock():
    if not loaded and sys._getframe(1).f_code.co_name == "reproduce_run":  # the row's own clock starts
        loaded.append(all(m in sys.modules for m in ("pandas", "pyomo.environ", "highspy",
                                                     "ccviz.synth.teccl.synthesizer")))
    return real()
reproduce.time.perf_counter = clock
row = reproduce.reproduce_run(reproduce.published_runs("NDv2 Slow 1KB")[0], 30)
print(loaded[0], row.result is not None)
"""


def test_a_row_in_a_fresh_process_starts_its_clock_after_the_imports():
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, cwd=ROOT, timeout=120,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["True", "True"], out.stdout


def test_a_row_opened_whole_has_its_bound_and_the_fabrics_limit():
    row = reproduce.reproduce_run(reproduce.published_runs("NDv2 Slow 1KB")[0], 30)
    assert row.result.limit is None  # the table skips it
    result = reproduce.completed_result(row)
    assert result.collective.name == "allgather"
    assert result.limit_s is not None and result.limit_s > 0
    assert 0 < result.lower_bound_s <= result.finish_time_s * (1 + 1e-9)
