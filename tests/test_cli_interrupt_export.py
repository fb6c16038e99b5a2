"""Ctrl-C keeps the best schedule so far; `ccviz export` writes what `ccviz verify` accepts."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

from ccviz.cli import main
from tests.paths import ROOT


def test_sigint_to_a_running_synth_keeps_the_best_schedule(tmp_path):
    out = tmp_path / "best.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "ccviz.cli", "synth", "torus2d:dims=4x4", "--algorithm", "teccl", "--chunks", "2",
         "--time-limit", "120", "--progress", "--json", "--out", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    first = proc.stderr.readline()  # the first progress line: the solver is running
    assert first.startswith("["), first
    started = time.monotonic()
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr
    summary = json.loads(stdout)
    assert summary["verified"] is True and summary["transfers"] > 0
    assert summary["status"] in ("time_limit", "feasible", "optimal")
    assert time.monotonic() - started < summary["synth_time_s"] + 60
    assert main(["verify", str(out)]) == 0


def test_export_writes_msccl_and_json_that_verify(tmp_path, capsys):
    schedule = tmp_path / "s.json"
    assert main(["synth", "ring:n=4", "--size", "4KB", "--out", str(schedule)]) == 0
    xml, again = tmp_path / "s.xml", tmp_path / "again.json"
    assert main(["export", str(schedule), "--format", "msccl", "--out", str(xml)]) == 0
    assert main(["export", str(schedule), "--format", "json", "--out", str(again)]) == 0
    root = ET.parse(xml).getroot()
    assert root.tag == "algo" and int(root.get("ngpus")) == 4
    assert len(root.findall("gpu")) == 4
    assert main(["verify", str(again), "--json"]) == 0
    capsys.readouterr()
    tampered = json.loads(schedule.read_text())
    tampered["transfers"].pop()
    schedule.write_text(json.dumps(tampered))
    assert main(["export", str(schedule), "--out", str(tmp_path / "x.xml")]) == 2  # does not verify: refused
    assert "does not verify" in capsys.readouterr().err
    assert not (tmp_path / "x.xml").exists()
