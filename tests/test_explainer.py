"""The Collectives Explainer's algorithms (dimdecomp, hierarchical, pat, sendrecv), formulas and reproduced tables."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ccviz.bounds.explained import explained_cost, parse_eta
from ccviz.builders.loading import load_topology
from ccviz.cli import main
from ccviz.errors import CcvizError
from ccviz.runs.explainer import reproduce_explainer, summary
from ccviz.runs.pipeline import run
from ccviz.synth.registry import SynthOptions

MB = 1e6
PAGES = Path(__file__).resolve().parents[1] / "pages"


def finish(spec: str, collective: str, algorithm: str, size: float = MB, chunks: int = 1, **extra) -> float:
    result = run(load_topology(spec), collective, algorithm, size, chunks, options=SynthOptions(extra=extra))
    assert result.timeline.verified, result.timeline.violations[:3]
    return result.finish_time_s


@pytest.mark.parametrize("spec,dims,mesh", [
    ("torus2d:dims=4x4", "4x4", False), ("torus2d:dims=8x4", "8x4", False), ("torus3d:dims=2x2x2", "2x2x2", False),
    ("mesh2d:dims=4x4", "4x4", True), ("mesh2d:dims=3x5", "3x5", True), ("torus3d:dims=3x3x2", "3x3x2", False),
])
def test_dimdecomp_allreduce_matches_its_formula_within_2_percent(spec: str, dims: str, mesh: bool) -> None:
    formula = explained_cost("allreduce", "dimdecomp", MB, 0.5, 50, dims=dims, mesh=mesh).time_s
    assert finish(spec, "allreduce", "dimdecomp") == pytest.approx(formula, rel=0.02)


def test_dimdecomp_4x4_torus_is_12_alpha_plus_1_875_m_over_bw() -> None:
    assert finish("torus2d:dims=4x4", "allreduce", "dimdecomp") == pytest.approx(12 * 0.5e-6 + 1.875 * MB / 50e9,
                                                                                  rel=0.02)
    flat = finish("torus2d:dims=4x4", "allreduce", "ring")
    assert flat > 1.15 * finish("torus2d:dims=4x4", "allreduce", "dimdecomp")


@pytest.mark.parametrize("spec", ["torus2d:dims=4x4", "mesh2d:dims=3x5", "hypercube:n=8",
                                  "multidim:dims=4x2,kinds=ring/switch", "torus3d:dims=2x2x2"])
@pytest.mark.parametrize("collective", ["allgather", "reducescatter", "alltoall", "broadcast", "reduce"])
def test_dimdecomp_verifies_every_collective_on_every_grid(spec: str, collective: str) -> None:
    assert finish(spec, collective, "dimdecomp", chunks=2) > 0


def test_dimdecomp_halves_and_pipelines_as_the_formula_counts() -> None:
    ag = explained_cost("allgather", "dimdecomp", MB, 0.5, 50, dims="4x4").time_s
    assert finish("torus2d:dims=4x4", "allgather", "dimdecomp") == pytest.approx(ag, rel=0.02)
    # broadcast both ways round each ring, 4 segments: (2 + 2 + 4 - 1)(a + M/(4 BW))
    assert finish("torus2d:dims=4x4", "broadcast", "dimdecomp", chunks=4) == pytest.approx(7 * (0.5e-6 + MB / 4 / 50e9))


def test_unsynchronized_rounds_let_chunks_run_ahead_and_finish_sooner() -> None:
    lockstep = finish("torus2d:dims=4x4", "allreduce", "dimdecomp")
    ahead = finish("torus2d:dims=4x4", "allreduce", "dimdecomp", sync=False)
    assert ahead < lockstep


def test_dimdecomp_refuses_what_is_no_grid_in_one_line() -> None:
    with pytest.raises(CcvizError, match="dimdecomp needs a grid fabric") as err:
        finish("ndv2:chassis=2", "allreduce", "dimdecomp")
    assert "\n" not in str(err.value)
    with pytest.raises(CcvizError, match="power-of-two"):
        finish("mesh2d:dims=3x5", "allreduce", "dimdecomp", per_dim="rhd")
    with pytest.raises(CcvizError, match="per_dim"):
        finish("torus2d:dims=4x4", "allreduce", "dimdecomp", per_dim="tree")


@pytest.mark.parametrize("spec", ["ndv2:chassis=2", "multidim:dims=4x4,kinds=switch/switch", "leafspine",
                                  "dgx2:chassis=2"])
@pytest.mark.parametrize("collective", ["allreduce", "allgather", "reducescatter", "alltoall", "broadcast", "reduce"])
def test_hierarchical_verifies_on_tiered_fabrics(spec: str, collective: str) -> None:
    assert finish(spec, collective, "hierarchical") > 0


def test_hierarchical_two_tier_matches_its_phases() -> None:
    # 4 groups of 4 on switches: inner RS ring(4) on M, outer AR ring(4) on M/4, inner AG ring(4) on M
    spec = "multidim:dims=4x4,kinds=switch/switch"
    inner = explained_cost("reducescatter", "ring", MB, 1.0, 50, n=4).time_s  # a GPU->switch->GPU hop is 2 alphas
    outer = explained_cost("allreduce", "ring", MB / 4, 1.0, 50, n=4).time_s
    simulated = finish(spec, "allreduce", "hierarchical")
    assert simulated >= 2 * inner + outer - 1e-12  # store-and-forward through the switch costs its bytes twice
    assert simulated == pytest.approx(finish(spec, "allreduce", "hierarchical", inner="ring", outer="ring"))


def test_hierarchical_groups_and_refusals() -> None:
    assert finish("torus2d:dims=4x4", "allreduce", "hierarchical", group_size=4) > 0
    # a grid's rows are its inner groups: on a 4x4 torus hierarchical is the 2-dimension decomposition
    assert finish("torus2d:dims=4x4", "allreduce", "hierarchical") == pytest.approx(43.5e-6)
    with pytest.raises(CcvizError, match="group_size") as err:
        finish("fully_connected:n=8", "allreduce", "hierarchical")
    assert "\n" not in str(err.value)
    with pytest.raises(CcvizError, match="group_size"):
        finish("torus2d:dims=4x4", "allreduce", "hierarchical", group_size=5)
    with pytest.raises(CcvizError, match="give one of 2, 4, 8, or leave it automatic"):  # the fix, not only the fault
        finish("torus2d:dims=4x4", "allreduce", "hierarchical", group_size=3)


@pytest.mark.parametrize("n", [8, 6, 16])
@pytest.mark.parametrize("collective", ["allgather", "reducescatter"])
def test_pat_verifies_and_costs_log_rounds_on_a_clique(n: int, collective: str) -> None:
    formula = explained_cost(collective, "pat", MB, 0.5, 50, n=n).time_s
    simulated = finish(f"fully_connected:n={n}", collective, "pat")
    if n & (n - 1) == 0:  # round r carries 2^(r-1) chunks: exactly the formula
        assert simulated == pytest.approx(formula)
    else:
        assert simulated >= formula - 1e-12
    assert finish(f"ring:n={n}", collective, "pat") > 0


def test_sendrecv_is_one_hop_of_the_whole_buffer() -> None:
    result = run(load_topology("torus2d:dims=4x4"), "sendrecv", "direct", MB, root=0, dest=1)
    assert result.timeline.verified
    assert result.finish_time_s == pytest.approx(0.5e-6 + MB / 50e9)
    with pytest.raises(CcvizError, match="dest"):
        run(load_topology("ring:n=4"), "sendrecv", "direct", MB, root=2, dest=2)
    with pytest.raises(CcvizError, match="dest"):
        run(load_topology("ring:n=4"), "allreduce", "direct", MB, dest=2)


def test_cli_sendrecv_and_dimdecomp_json(capsys) -> None:
    assert main(["synth", "torus2d:dims=4x4", "-c", "sendrecv", "-a", "direct", "--root", "0", "--dest", "5", "-s",
                 "1MB", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["verified"] and out["collective"] == "sendrecv"
    assert main(["synth", "torus2d:dims=4x4", "-c", "allreduce", "-a", "dimdecomp", "-s", "1MB", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["verified"] and out["finish_time_s"] == pytest.approx(43.5e-6, rel=0.02)


# ------------------------------------------------------------------------------------------------ formulas
def test_composed_formulas_give_the_references_anchor_numbers() -> None:
    us = 1e-6
    assert explained_cost("allreduce", "dimdecomp", 16e6, 0.5, 900, dims="8x8x8").n_alpha == 42
    assert explained_cost("allreduce", "dimdecomp", 16e6, 0.5, 900, dims="8x8x8", per_dim="rhd").n_alpha == 18
    hier = explained_cost("allreduce", "hierarchical", 16e6, "0.5/2", "900/50", tiers="72x2")
    assert [round(p["time_s"] / us, 2) for p in hier.phases] == [53.03, 8.44, 53.03]
    assert explained_cost("allreduce", "inc", 16e6, 0.5, 900, n=512).time_s / us == pytest.approx(18.78, abs=0.01)
    pairwise = explained_cost("alltoall", "direct", 16e6, 0.5, 50, n=16)
    assert pairwise.time_s / us == pytest.approx(307.5) and "port budget P = 1" in pairwise.assumptions
    assert explained_cost("alltoall", "direct", 16e6, 0.5, 50, n=16, ports=15).time_s / us == pytest.approx(20.5)


def test_eta_profiles_and_per_tier_oversubscription() -> None:
    assert (parse_eta("torus").alpha, parse_eta("torus").beta) == (1.2, 0.6)
    assert parse_eta("clos:4").beta == 0.25 and parse_eta("clos:1").beta == 0.8
    ideal = explained_cost("allreduce", "hierarchical", 16e6, "0.5/2", "900/50", tiers="72x2")
    contended = explained_cost("allreduce", "hierarchical", 16e6, "0.5/2", "900/50", tiers="72x2",
                               eta="crossbar/clos:2")
    assert contended.phases[1]["eta_beta"] == 0.5 and contended.time_s > ideal.time_s
    oversubscribed = explained_cost("allreduce", "hierarchical", 16e6, "0.5/2", "900/50", tiers="72x2", oversub=2)
    assert oversubscribed.phases[1]["time_s"] > ideal.phases[1]["time_s"]
    for bad in ({"eta": "bogus"}, {"eta_alpha": 0.5}, {"eta_beta": 1.5}):
        with pytest.raises(CcvizError):
            explained_cost("allreduce", "ring", 1e6, 0.5, 50, n=8, **bad)


def test_where_ccviz_differs_the_reference_variant_and_reason_are_given() -> None:
    dbt = explained_cost("allreduce", "dbt", 16e6, 0.5, 900, n=512)
    assert dbt.reference is not None and dbt.reference["time_s"] < dbt.time_s and "pipeline" in dbt.reference["why"]
    ring_a2a = explained_cost("alltoall", "ring", 16e6, 0.5, 900, n=512)
    assert ring_a2a.reference is not None and "relay" in ring_a2a.reference["why"]
    assert explained_cost("allreduce", "ring", 16e6, 0.5, 900, n=512).reference is None


@pytest.mark.parametrize("argv", [
    ["-c", "allreduce", "-a", "dimdecomp", "--dims", "8x8x8", "--mesh"],
    ["-c", "allreduce", "-a", "hierarchical", "--tiers", "72x2", "--alpha", "0.5/2", "--bw", "900/50", "--oversub",
     "2"],
    ["-c", "allgather", "-a", "pat", "--n", "512"],
    ["-c", "allreduce", "-a", "inc", "--n", "512", "--eta", "nvls"],
    ["-c", "alltoall", "-a", "direct", "--n", "16", "--ports", "4"],
    ["-c", "allreduce", "-a", "ring", "--n", "8", "--eta-alpha", "1.2", "--eta-beta", "0.6"],
])
def test_cost_cli_json_has_time_and_counts(argv: list[str], capsys) -> None:
    assert main(["cost", *argv, "-s", "16MB", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["time_s"] > 0 and out["n_alpha"] > 0 and out["n_beta"] > 0


def test_cost_cli_refuses_in_one_line(capsys) -> None:
    assert main(["cost", "-c", "allreduce", "-a", "dimdecomp", "-s", "1MB"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--dims" in err or "dims" in err


# ---------------------------------------------------------------------------------------- reproduce explainer
def test_reproduce_explainer_every_row_agrees_or_says_why() -> None:
    rows = reproduce_explainer()
    s = summary(rows)
    assert s["unexplained"] == [] and s["rows"] >= 40
    for r in rows:
        assert r.within_1pct or r.note, r.name
    simulated = {r.name: r for r in rows if r.simulated_us is not None}
    assert len(simulated) >= 5
    torus = simulated["4x4 torus ring per dimension AR (n_a = 12)"]
    assert torus.simulated_us == pytest.approx(torus.formula_us, rel=0.02)


def test_papers_page_shows_the_explainer_table() -> None:
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(PAGES / "papers.py"), default_timeout=120).run()
    at.radio(key="papers_paper").set_value("Collectives Explainer (worked tables)").run()
    assert not at.exception and not at.error
    table = at.dataframe[0].value
    assert len(table) >= 40 and {"reference (us)", "formula (us)", "simulated (us)", "ratio"} <= set(table.columns)
    assert "0 unexplained" in at.success[0].value


def test_compare_has_the_composed_formulas() -> None:
    from ccviz.runs.compare import formula_time

    torus = load_topology("torus2d:dims=4x4")
    assert formula_time("allreduce", "dimdecomp", torus, MB) == pytest.approx(43.5e-6)
    assert formula_time("allgather", "pat", torus, MB) == pytest.approx(4 * 0.5e-6 + 15 / 16 * MB / 50e9)
    assert formula_time("allreduce", "hierarchical", load_topology("ndv2:chassis=2"), MB) > 0


def test_synthesize_page_offers_the_destination_and_the_job_carries_it() -> None:
    from streamlit.testing.v1 import AppTest

    from ccviz.app.runs import RunRequest, SynthesisJob

    at = AppTest.from_file(str(PAGES.parent / "app.py"), default_timeout=120).run()
    at.switch_page("pages/synthesize.py").run()
    at.selectbox(key="syn_collective").set_value("sendrecv").run()
    at.selectbox(key="syn_dest").set_value(3).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    ring = load_topology("ring:n=4")
    job = SynthesisJob(RunRequest.make(ring, "sendrecv", "direct", MB, root=0, dest=2), ring)
    job.wait(120)
    assert job.error is None and job.entry is not None
    result = job.entry.result
    assert result.collective.dest == 2 and result.timeline.verified
    assert result.finish_time_s == pytest.approx(2 * (0.5e-6 + MB / 50e9))  # two hops round the ring
