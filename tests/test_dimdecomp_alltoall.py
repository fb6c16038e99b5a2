"""dimdecomp AllToAll as the Collectives Explainer decomposes it: dimension by dimension, sum d_i/8 M/BW."""

import json
import subprocess
import sys

import pytest

from ccviz.bounds.explained import explained_cost
from ccviz.builders.loading import load_topology
from ccviz.runs.pipeline import run


@pytest.mark.parametrize(("spec", "chunks"), [("torus2d:dims=4x4", 1), ("torus2d:dims=5x3", 1),
                                              ("torus3d:dims=4x4x4", 1), ("ring:n=8", 2), ("ring:n=6", 2)])
def test_simulated_equals_the_decomposed_formula(spec, chunks):
    r = run(load_topology(spec), "alltoall", "dimdecomp", 16e6, chunks)
    s = r.summary()
    assert s["verified"]
    assert s["finish_time_s"] == pytest.approx(s["formula_s"], rel=0.02)


def test_formula_is_sum_of_d_over_8():
    c = explained_cost("alltoall", "dimdecomp", 16e6, 0.5, 50, dims="4x4")
    assert (c.n_alpha, c.n_beta) == (4, 1.0)
    assert c.time_s == pytest.approx(322e-6)


def test_odd_halfway_blocks_are_named():
    r = run(load_topology("ring:n=8"), "alltoall", "dimdecomp", 16e6, 1)
    assert any("half-way" in note for note in r.schedule.notes)


def test_cli_synth_json_carries_formula_s():
    out = subprocess.run([sys.executable, "-m", "ccviz.cli", "synth", "torus2d:dims=4x4", "-c", "alltoall", "-a",
                          "dimdecomp", "-s", "16MB", "--json"], capture_output=True, text=True, check=True)
    d = json.loads(out.stdout)
    assert d["verified"] and abs(d["finish_time_s"] / d["formula_s"] - 1) < 0.02


@pytest.mark.parametrize(("spec", "collective", "algorithm"), [
    ("ring:n=8", "allreduce", "ring"), ("ring:n=8", "allgather", "pat"), ("star:n=8,reduce=true", "allreduce", "inc"),
    ("dgx2", "allreduce", "hierarchical")])
def test_formula_s_for_the_textbook_set_and_composed(spec, collective, algorithm):
    s = run(load_topology(spec), collective, algorithm, 1e6).summary()
    assert s["formula_s"] is not None and s["formula_s"] > 0 and s["formula"]
