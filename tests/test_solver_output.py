"""Native solver output never reaches stdout: `--json` prints exactly one JSON object (issue 26)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _run(code: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120,
                          check=False)


def test_highs_banner_inside_the_guard_goes_to_stderr():
    # highspy.Highs() prints "Running HiGHS ..." with C stdio on descriptor 1 at construction
    done = _run("import highspy\nfrom ccviz.bounds.solver_output import solver_output_to_stderr\n"
                "with solver_output_to_stderr():\n    highspy.Highs()\nprint('after')")
    assert done.stdout == "after\n" and "HiGHS" in done.stderr


def test_teccl_astar_json_stdout_is_exactly_one_object():
    done = _run("import sys\nfrom ccviz.cli import main\n"
                "sys.exit(main(['synth', 'ring:n=4', '-a', 'teccl-astar', '--size', '1KB', '--json']))")
    assert done.returncode == 0, done.stderr
    assert isinstance(json.loads(done.stdout), dict)  # one object, nothing before or after it



@pytest.mark.parametrize("args", [
    ["limit", "leafspine:leaves=2,hosts=2,spines=2", "-c", "alltoall", "--json"],  # the flow LP, outside synthesis
    ["synth", "leafspine:leaves=2,hosts=2,spines=2", "-c", "alltoall", "-a", "mcf", "--size", "1MB", "--json"],
    ["synth", "star:n=4,reduce=true", "-c", "allreduce", "-a", "teccl", "--size", "1KB", "--time-limit", "30",
     "--json"],  # Pyomo's appsi HiGHS
])
def test_json_stdout_of_solver_backed_commands_parses(args):
    # HiGHS prints its banner once per process, on descriptor 1, past sys.stdout: each command in a process of its
    # own, stdout read as the one JSON object a script would parse
    done = _run(f"import sys\nfrom ccviz.cli import main\nsys.exit(main({args!r}))")
    assert done.returncode == 0, done.stderr[-2000:]
    assert isinstance(json.loads(done.stdout), dict), done.stdout[:300]
