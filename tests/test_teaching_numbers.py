"""docs/teaching.md's numbers are generated from the code (ccviz/viz/teaching_numbers.py), not typed."""

from ccviz.viz.teaching_numbers import DOC, MARK, NUMBERS, rewrite


def test_docs_numbers_are_current():
    text = DOC.read_text()
    _, stale = rewrite(text)
    assert stale == [], f"run python -m ccviz.viz.teaching_numbers: stale {stale}"


def test_every_number_is_marked_and_known():
    keys = {m["key"] for m in MARK.finditer(DOC.read_text())}
    assert keys == set(NUMBERS)


def test_rewrite_replaces_a_typed_number():
    """rhd on an 8-ring was typed as 81.5 us; the simulator runs it at 63.0 us."""
    new, stale = rewrite("takes <!--n:rhd_ring_sim-->81.5 µs<!--/n--> on a ring")
    assert stale == ["rhd_ring_sim"] and "<!--n:rhd_ring_sim-->63.0 µs<!--/n-->" in new
