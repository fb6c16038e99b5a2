"""forestcoll doubles its automatic pieces where the transfers it made leave room in the budget.

The automatic piece count budgets every hop of every tree edge (``MAX_TRANSFERS``), but where a switch copies
a piece rides to several children on one send, so far fewer transfers are made: the default ``railclos``
AllGather ran 8 pieces per tree and ended at 1.054 x the limit (its deep trees' last pieces draining); with 16
(189,421 transfers, within the budget) it ends at 1.018 x. Here the same on a 16-GPU rail Clos with the budget
lowered so that the count allows 2 pieces.
"""

from __future__ import annotations

import pytest

import ccviz
from ccviz.synth import forestcoll

SIZE = 1e9
ABOVE = forestcoll.tuning.MORE_PIECES_ABOVE


def _run(monkeypatch: pytest.MonkeyPatch, above: float) -> ccviz.RunResult:
    monkeypatch.setattr(forestcoll.tuning, "MAX_TRANSFERS", 12_200)
    monkeypatch.setattr(forestcoll.tuning, "MORE_PIECES_ABOVE", above)
    return ccviz.run(ccviz.load_topology("railclos:boxes=4,gpus=4"), "allgather", "forestcoll", SIZE)


def test_pieces_double_where_the_transfers_made_leave_room(monkeypatch: pytest.MonkeyPatch) -> None:
    before = _run(monkeypatch, above=float("inf"))  # never tried: 2 pieces per tree, 1.051 x the limit
    after = _run(monkeypatch, above=ABOVE)  # 4 pieces, 1.026 x
    assert after.timeline.verified
    assert after.schedule.collective.chunks_per_rank == 2 * before.schedule.collective.chunks_per_rank
    assert len(after.schedule.transfers) <= 12_200
    assert after.finish_time_s < before.finish_time_s
