"""Learn's "why they differ" sentence, checked against the numbers on every (fabric, algorithm) pair Learn offers:
the direction word matches simulated vs formula, and only causes that push that way are given as the reason
(relays, switch hops, shared links make a schedule slower; faster links, extra ports and chunks running ahead
make it faster)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from ccviz.builders.loading import load_topology
from ccviz.runs.composed_formula import composed_unavailable, lesson_formula
from ccviz.runs.pipeline import run
from ccviz.synth.registry import REGISTRY
from ccviz.viz.lesson import TEACHING_TOPOLOGIES, textbook_unavailable
from ccviz.viz.narration import formula_gap

PAGE = Path(__file__).resolve().parents[1] / "pages" / "learn.py"
SLOWER_CAUSES = ("relayed", "cross a switch", "links are shared", "below this fabric's lower bound")
FASTER_CAUSES = ("but some links carry", "ports the formula", "moves on as soon as it lands",
                 "next round starts on each link")


def page_constant(name: str):
    for node in ast.parse(PAGE.read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == name for t in node.targets):
            return ast.literal_eval(node.value)
    raise AssertionError(f"{name} not found in pages/learn.py")


def offered_pairs() -> list[tuple[str, str, str]]:
    pairs = []
    for spec in TEACHING_TOPOLOGIES.values():
        topology = load_topology(spec)
        for algorithm in page_constant("TEXTBOOK"):
            alg = REGISTRY[algorithm]
            collective = "allreduce" if alg.supports("allreduce") else "allgather"
            if textbook_unavailable(algorithm, topology.n_gpus) or composed_unavailable(algorithm, topology):
                continue
            pairs.append((spec, algorithm, collective))
    return pairs


@pytest.mark.parametrize("spec,algorithm,collective", offered_pairs())
def test_the_gap_sentence_is_right_in_direction_and_cause(spec: str, algorithm: str, collective: str) -> None:
    topology = load_topology(spec)
    result = run(topology, collective, algorithm, 1e6)
    timeline = result.timeline
    assert timeline.verified
    used = {(t.src, t.dst) for t in timeline.schedule.transfers}
    formula = lesson_formula(topology, timeline.collective, algorithm, used, timeline.schedule.options)
    if formula is None:
        return
    sim, est = timeline.finish_time_s, formula.time_s
    gap = formula_gap(timeline, formula, result.lower_bound_s)
    if gap is None:
        assert abs(sim / est - 1) <= 0.05
        return
    assert "pipelined over" not in gap
    slower = sim > est
    assert (" slower than the formula" in gap) == slower and (" faster than the formula" in gap) == (not slower)
    because = gap.split(" because ", 1)[1].split(" Pulling the other way", 1)[0]
    wrong = FASTER_CAUSES if slower else SLOWER_CAUSES
    assert not any(w in because for w in wrong), gap
