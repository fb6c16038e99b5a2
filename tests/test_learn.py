"""The Learn page walked over every teaching fabric x collective x listed textbook algorithm (AppTest)."""

from __future__ import annotations

import math
import re

import pytest
from streamlit.testing.v1 import AppTest

from ccviz.viz.lesson import TEACHING_TOPOLOGIES
from tests.test_app import APP, TIMEOUT, assert_clean, metrics

UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1.0}


def seconds(label: str) -> float:
    value, unit = label.split()
    return float(value) * UNITS[unit]


def textbook_rounds(algorithm: str, collective: str, n: int) -> int | None:
    """The rounds every course quotes, for ring/rhd/tree/direct on a power-of-two ring of n GPUs."""
    log = int(math.log2(n))
    two_phase = collective == "allreduce"
    table = {
        "ring": {"allreduce": 2 * (n - 1), "allgather": n - 1, "reducescatter": n - 1, "broadcast": n - 1,
                 "reduce": n - 1},
        "rhd": {"allreduce": 2 * log, "allgather": log, "reducescatter": log},
        "tree": {"allreduce": 2 * log, "broadcast": log, "reduce": log, "allgather": 2 * log},
        "direct": dict.fromkeys(("allgather", "reducescatter", "broadcast", "reduce", "alltoall"), 1),
    }
    if algorithm == "direct" and two_phase:
        return 2
    return table.get(algorithm, {}).get(collective)


@pytest.fixture(scope="module")
def learn() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT).run()
    at.switch_page("pages/learn.py").run()
    assert_clean(at)
    return at


@pytest.mark.parametrize("fabric", list(TEACHING_TOPOLOGIES))  # one part per fabric: workers share the walk
def test_learn_walks_every_fabric_collective_and_textbook_algorithm(learn: AppTest, fabric: str) -> None:
    at = learn
    assert fabric in at.selectbox(key="learn_topology").options
    checked = disabled = 0
    at.selectbox(key="learn_topology").set_value(fabric).run()
    for collective in at.selectbox(key="learn_collective").options:
        at.selectbox(key="learn_collective").set_value(collective).run()
        for shown in at.selectbox(key="learn_algorithm").options:
            algorithm = shown.split(" — ")[0]
            at.selectbox(key="learn_algorithm").set_value(algorithm).run()
            where = f"{fabric} / {collective} / {algorithm}"
            assert_clean(at)
            if "unavailable" in shown:  # shown disabled with its reason, never an error
                disabled += 1
                assert any("unavailable here" in w.value for w in at.warning), where
                continue
            checked += 1
            shown_metrics = metrics(at)
            assert shown_metrics["verified"] == "yes", where
            caption = next(c.value for c in at.caption if " rounds · " in c.value)
            rounds = int(caption.split()[0])
            ring = re.fullmatch(r"ring of (\d+) GPUs", fabric)
            expected = textbook_rounds(algorithm, collective, int(ring.group(1))) if ring else None
            if expected is not None:
                assert rounds == expected, where
            if shown_metrics["alpha-beta formula"] != "n/a":
                sim, est = seconds(shown_metrics["simulated finish"]), seconds(shown_metrics["alpha-beta formula"])
                if abs(sim / est - 1) > 0.06:  # labels carry 4 digits: a margin over the page's 5%
                    assert any(m.value.startswith("**Why they differ:**") for m in at.markdown), where
    collectives = len(at.selectbox(key="learn_collective").options)
    assert checked >= collectives, fabric  # at least one algorithm runs each collective on every fabric
    assert disabled >= (3 if fabric == "3x3 torus" else 0), fabric  # rhd on the 3x3 torus, per collective listed


def test_learn_side_by_side_marks_a_handover(learn: AppTest) -> None:
    at = learn
    at.selectbox(key="learn_topology").set_value("ring of 8 GPUs").run()
    at.selectbox(key="learn_collective").set_value("allreduce").run()
    at.selectbox(key="learn_algorithm").set_value("rhd").run()
    at.toggle(key="learn_compare").set_value(True).run()
    assert_clean(at)
    table = at.dataframe[0].value
    assert {"ring", "rhd", "tree", "direct"} <= set(table["algorithm"])
    assert set(table.columns) >= {"rounds", "α terms", "bytes per GPU", "simulated", "formula"}
    at.toggle(key="learn_compare").set_value(False).run()


def _timeline(fabric: str, collective: str, algorithm: str, size: float = 1e6):
    import ccviz

    topo = ccviz.load_topology(fabric)
    schedule = ccviz.synthesize(topo, ccviz.make_collective(collective, topo, size), algorithm)
    return ccviz.simulate(schedule)


def test_rhd_rounds_double_the_ranks_each_partial_sum_covers() -> None:
    from ccviz.viz.rounds import round_frames, rounds

    story = rounds(_timeline("ring:n=8", "allreduce", "rhd"))
    assert [r.number for r in story] == [1, 2, 3, 4, 5, 6]
    assert ["cover 2 of 8", "cover 4 of 8", "cover 8 of 8"] == [
        next(p for p in ("cover 2 of 8", "cover 4 of 8", "cover 8 of 8") if p in r.sentence) for r in story[:3]]
    assert "distance 2" in story[1].label and "relayed through up to 1 other GPU" in story[1].sentence
    assert all(len(s.path) == 2 for s in story[2].sends)  # distance 1: neighbours, no relay
    assert story[-1].delivered == 64 and "every GPU holds its result" in story[-1].sentence
    frames = round_frames(_timeline("ring:n=8", "allreduce", "rhd"))
    assert frames[0]["title"] == "Before round 1 (of 6)" and frames[-1]["title"] == "Round 6 of 6 — finished"


def test_formula_gap_names_relays_and_stays_quiet_when_they_agree() -> None:
    from ccviz.bounds.schedule_formula import schedule_formula
    from ccviz.viz.narration import formula_gap

    for algorithm, expect in (("rhd", "relayed"), ("ring", None)):
        timeline = _timeline("ring:n=8", "allreduce", algorithm)
        used = {(t.src, t.dst) for t in timeline.schedule.transfers}
        f = schedule_formula(timeline.topology, timeline.collective, algorithm, used)
        gap = formula_gap(timeline, f)
        assert (gap is None) if expect is None else (expect in gap and "slower than the formula" in gap)


def test_why_one_wins_labels_each_decade_once() -> None:
    # projected in a lecture, the log axes' automatic "2" and "5" between decades read as values
    import ccviz
    from ccviz.viz.lesson import lesson_figure, lesson_table

    topo = ccviz.load_topology("ring:n=4")
    fig = lesson_figure(lesson_table(topo, "allreduce", ["ring", "rhd"], (1e3, 1e6), 1))
    assert (fig.layout.xaxis.dtick, fig.layout.yaxis.dtick) == (1, 1)
