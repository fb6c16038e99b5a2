"""ccviz crossover: the reference's M* values from formulas, and a simulated crossover on a small fabric."""

import json
import subprocess
import sys

import pytest

from ccviz.errors import CcvizError
from ccviz.runs.crossover import formula_crossover, simulated_crossover


@pytest.mark.parametrize(("n", "expected"), [(72, 2.07e9), (512, 115.7e9)])
def test_ring_vs_dbt_with_c_real_reproduces_the_reference(n, expected):
    c = formula_crossover("allreduce", "ring,dbt", n, 0.5, 900, c_real=2)
    assert c.crossover_bytes == pytest.approx(expected, rel=0.01)
    assert (c.below, c.above) == ("dbt", "ring")


def test_without_c_real_dbt_wins_everywhere():
    c = formula_crossover("allreduce", "ring,dbt", 72, 0.5, 900)
    assert c.crossover_bytes is None and "dbt is faster at every M" in c.words


def test_rd_vs_dbt_is_about_506_kb():
    c = formula_crossover("allreduce", ["rd", "dbt"], 512, 0.5, 900)
    assert c.crossover_bytes == pytest.approx(506.25e3, rel=1e-6)


def test_dbt_balance_is_the_reference_4_mb_and_inc_always_wins():
    c = formula_crossover("allreduce", "inc,dbt", 512, 0.5, 900, c_real=2)
    assert c.crossover_bytes is None and c.below == "inc"
    assert c.lines[1]["balance_bytes"] == pytest.approx(4.05e6)


def test_eta_moves_the_crossover_linearly():
    base = formula_crossover("allreduce", "rd,dbt", 512, 0.5, 900).crossover_bytes
    worse = formula_crossover("allreduce", "rd,dbt", 512, 0.5, 900, eta_alpha=1.2, eta_beta=0.6).crossover_bytes
    assert worse == pytest.approx(base * 1.2 * 0.6)


@pytest.mark.parametrize("algs", ["ring", "ring,ring", "ring,dbt,rd"])
def test_two_different_algorithms_needed(algs):
    with pytest.raises(CcvizError, match="algorithms"):
        formula_crossover("allreduce", algs, 8, 0.5, 50)


def test_c_real_below_one_refused():
    with pytest.raises(CcvizError, match="c-real"):
        formula_crossover("allreduce", "ring,dbt", 8, 0.5, 50, c_real=0.5)


def test_simulated_crossover_brackets_the_flip():
    r = simulated_crossover("star:n=8", "allreduce", "ring,dbt", chunks=4, refine=3)
    m = r["crossover_bytes"]
    assert m is not None
    before = [row for row in r["ladder"] if row["size_bytes"] < m]
    after = [row for row in r["ladder"] if row["size_bytes"] > m]
    assert (before[-1]["ring"] < before[-1]["dbt"]) != (after[0]["ring"] < after[0]["dbt"])


def test_cli_json_has_crossover_bytes():
    out = subprocess.run([sys.executable, "-m", "ccviz.cli", "crossover", "-c", "allreduce", "--algorithms",
                          "ring,dbt", "--n", "72", "--alpha", "0.5", "--bw", "900", "--c-real", "2", "--json"],
                         capture_output=True, text=True, check=True)
    assert json.loads(out.stdout)["crossover_bytes"] == pytest.approx(2.07e9, rel=0.01)
