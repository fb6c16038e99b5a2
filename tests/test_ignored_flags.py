"""Issue 40, item 19: a flag the command would ignore, or a value it cannot take, is one line naming that flag
(the number printed must be the one asked for)."""

from __future__ import annotations

import pytest

from ccviz.cli import main

COST = ["cost", "-s", "1MB"]


@pytest.mark.parametrize("argv, field", [
    (["-c", "allreduce", "-a", "ring", "--n", "8", "--mesh"], "mesh"),
    (["-c", "allreduce", "-a", "pat", "--n", "8", "--tiers", "8x2"], "tiers"),
    (["-c", "allreduce", "-a", "ring", "--n", "8", "--dims", "4x2"], "dims"),
    (["-c", "allreduce", "-a", "ring", "--n", "8", "--oversub", "2"], "oversub"),
    (["-c", "allreduce", "-a", "rhd", "--n", "8", "--outer", "tree"], "outer"),
    (["-c", "alltoall", "-a", "hierarchical", "--tiers", "8x4", "--outer", "tree"], "outer"),
    (["-c", "broadcast", "-a", "hierarchical", "--tiers", "8x4", "--inner", "rhd"], "inner"),
    (["-c", "allreduce", "-a", "dimdecomp", "--dims", "4x4", "--n", "16"], "n"),
    (["-c", "allreduce", "-a", "ring", "--n", "8", "--ports", "0"], "ports"),
    (["-c", "allreduce", "-a", "ring", "--n", "8", "--ports", "-2"], "ports"),
    (["-c", "allreduce", "-a", "ring", "--n", "8", "--eta", ""], "eta"),
    (["-c", "allreduce", "-a", "hierarchical", "--tiers", "72x0"], "tiers"),
    (["-c", "allreduce", "-a", "hierarchical", "--tiers", "8x4", "--oversub", "inf"], "oversub"),
])
def test_cost_refuses_what_its_formula_would_ignore(capsys, argv, field):
    assert main(COST + argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"error: {field}:" in err, err


def test_cost_still_takes_the_options_its_formula_reads(capsys):
    assert main(COST + ["-c", "allreduce", "-a", "hierarchical", "--tiers", "8x4", "--outer", "tree"]) == 0
    assert main(COST + ["-c", "allreduce", "-a", "dimdecomp", "--dims", "4x4", "--mesh"]) == 0
    assert main(COST + ["-c", "alltoall", "-a", "direct", "--n", "8", "--ports", "2"]) == 0
    capsys.readouterr()


@pytest.mark.parametrize("extra, field", [(["--order", ""], "--order"), (["--chunks", "0"], "--chunks"),
                                          (["--chunks", "-1"], "--chunks")])
def test_workload_refuses_an_empty_order_and_no_chunks(capsys, extra, field):
    assert main(["workload", "ring:n=4", "--parallel", "tp=2,dp=2", "--run", "tp:allreduce:1MB", *extra]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"error: {field}:" in err, err


@pytest.mark.parametrize("extra", [["--time-limit", "-1"], ["--time-limit", "5"], ["--filter", "ring"]])
def test_reproduce_explainer_refuses_the_flags_it_does_not_read(capsys, extra):
    assert main(["reproduce", "explainer", *extra]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"error: --{extra[0][2:]}:" in err, err
