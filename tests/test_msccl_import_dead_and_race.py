"""Importing MSCCL programs that run but are not tidy: a dead send imports with a warning, a race is named,
and repeated unknown elements are one counted note."""

from __future__ import annotations

from pathlib import Path

import pytest

from ccviz import CcvizError
from ccviz.interop.importers import import_schedule
from ccviz.interop.msccl import parse_program
from ccviz.judge.simulate import simulate

EDGE = Path(__file__).parent / "fixtures" / "msccl_edge"
RING = Path(__file__).parent / "fixtures" / "msccl" / "allgather_ring_8.xml"


@pytest.mark.parametrize("collective", [None, "gather"])
def test_msccl_solve_gather_on_dgx1_imports_and_verifies_with_a_dead_send_warning(collective):
    schedule = import_schedule(EDGE / "gather_dgx1_root0_dead_send.xml", "dgx1", 1e6, collective)
    dead = [n for n in schedule.notes if "dead send" in n]
    assert len(dead) == 1 and "1 dead send:" in dead[0] and "GPU 0 tb 4 step 0" in dead[0]
    result = simulate(schedule)
    assert result.verified, result.violations[:1]
    assert len(schedule.transfers) == 10  # 11 messages, the dead one carries nothing


def test_a_racing_program_is_refused_naming_the_race_not_its_symptom():
    with pytest.raises(CcvizError) as err:
        import_schedule(EDGE / "racy_allreduce_2.xml")
    text = str(err.value)
    assert "races" in text and "data race on GPU 1 i/o[0]" in text and "line 10" in text and "line 13" in text


def test_many_unknown_elements_of_one_kind_are_one_counted_warning():
    text = RING.read_text().replace('<tb id="0"', '<copy/><tb id="0"')  # one <copy> in each of the 8 GPUs
    program = parse_program(text, "copies.xml")
    assert len(program.warnings) == 1
    assert "skipped 8 unknown <copy> elements inside <gpu>" in program.warnings[0]
    assert "5 more" not in program.warnings[0] and "3 more" in program.warnings[0]


def test_collective_names_take_the_right_article():
    from ccviz.model.collectives import with_article

    assert with_article("alltoall") == "an alltoall" and with_article("gather") == "a gather"
    assert with_article("'allgather'") == "an 'allgather'"
