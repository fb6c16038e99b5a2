"""reproduce explainer names where the reference contradicts itself, which side ccviz follows, and shows it."""

from ccviz.builders.loading import load_topology
from ccviz.runs.explainer import reproduce_explainer
from ccviz.runs.explainer_conflicts import conflicts, format_conflicts
from ccviz.viz.lesson import TEACHING_TOPOLOGIES
from ccviz.viz.switch_model import other_switch_model, switch_model_time, switch_model_words


def test_every_conflict_has_both_sides_a_choice_and_a_demonstration():
    items = conflicts()
    assert len(items) >= 5
    for c in items:
        assert c["statement_a"] and c["statement_b"] and c["ccviz_follows"] and c["why"]
        assert c["command"].startswith("ccviz ") and any(ch.isdigit() for ch in c["demonstration"])
    assert "contradicts" in format_conflicts(items)


def test_star_row_equals_the_reference_567_us():
    rows = {r.name: r for r in reproduce_explainer() if r.table == "star_small"}
    ring = rows["8-GPU star ring AR, one alpha per traversal (switch_hop=free)"]
    assert round(ring.simulated_us, 1) == 567.0 and round(ring.formula_us, 1) == 567.0


def test_learn_offers_the_reference_star_and_names_its_model():
    label, spec = next((label, s) for label, s in TEACHING_TOPOLOGIES.items() if s == "star:n=8,switch_hop=free")
    assert "one α per traversal" in label  # the page names the switch model in the fabric's label
    star = load_topology(spec)
    assert star.switch_hop == "free" and "one α per GPU-to-GPU traversal" in switch_model_words(star)
    assert round(switch_model_time(star, "allreduce", "ring", 16e6, 1) * 1e6, 1) == 567.0
    paid = other_switch_model(star)
    assert paid.switch_hop == "paid" and "store-and-forward" in switch_model_words(paid)
    assert round(switch_model_time(paid, "allreduce", "ring", 16e6, 1) * 1e6, 1) == 1134.0


def test_simulated_rows_carry_the_fabrics_limit_and_flag_a_formula_below_it():
    rows = [r for r in reproduce_explainer() if r.simulated_us is not None]
    assert all(r.limit_us is not None for r in rows)
    star = next(r for r in rows if r.name.startswith("8-GPU star ring AR"))
    assert round(star.limit_us) == 560 and not star.below_limit
    for r in rows:
        assert r.below_limit == (r.formula_us < r.limit_us * (1 - 1e-9))


def test_reproduce_explainer_json_carries_limits_and_inconsistencies():
    import json
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "ccviz.cli", "reproduce", "explainer", "--json"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["summary"]["unexplained"] == [] and len(data["inconsistencies"]) >= 5
    assert any(r["limit_us"] for r in data["rows"])
