"""Balanced few trees on the slot grid booked again in piece waves where chunk order ends well over the limit
(``forestcoll.grid._few_trees_slotted``, ``slotted.slotted_pipeline(piece_waves=True)``), the faster kept."""

from __future__ import annotations

import ccviz
from ccviz.synth import slotted
from ccviz.synth.registry import SynthOptions
from ccviz.synth.slotted import _scrambled

# 4 balanced trees x 8 pieces on the grid, no other booking tried first: ReduceScatter on this 18-GPU dragonfly
# ended at 1.251 x the limit by chunk index
# (the code before, and the booking tried first here) and ends at 1.173 x in piece waves
GRID_ONLY = SynthOptions(extra={"slots": True, "trees": 4, "pieces": 8})


def test_piece_waves_end_a_dragonfly_reduce_scatter_sooner_and_verify() -> None:
    result = ccviz.run(ccviz.load_topology("dragonfly:groups=6,routers=3,gpus=1"), "reducescatter", "forestcoll",
                       1e9, options=GRID_ONLY)
    assert result.timeline.verified, [v.message for v in result.timeline.violations[:3]]
    assert "piece waves" in result.schedule.notes[1]
    assert result.limit_s <= result.finish_time_s <= 1.2 * result.limit_s


def test_scrambled_order_keeps_urgency_first_and_is_fixed() -> None:
    """Ties only are reordered: a more urgent edge still comes first, and the same edges sort the same way."""
    edges = [(0, -2, seq) for seq in (7, 8)] + [(1, -3, seq) for seq in range(5)]  # (urgency..., release number)
    order = sorted(edges, key=_scrambled)
    assert order[:2] == sorted(edges[:2], key=_scrambled)
    assert {e[0] for e in order[:2]} == {0}
    assert [e[2] for e in order[2:]] != [0, 1, 2, 3, 4]  # release order is not kept among the ties
    assert order == sorted(reversed(edges), key=_scrambled)



def test_piece_waves_consider_wave_candidates_and_chunk_order_candidates(monkeypatch) -> None:
    """Each booking cuts an up-link's waiting edges at its own cap (``WAVE_CANDIDATES`` in piece waves,
    ``CANDIDATES`` in chunk order): the two caps were measured apart on the 64-GPU dragonflies."""
    monkeypatch.setattr(slotted, "CANDIDATES", 3)
    monkeypatch.setattr(slotted, "WAVE_CANDIDATES", 2)
    widest = {False: 0, True: 0}  # piece waves -> most edges one up-link offered in a slot
    real = slotted.SlotBooking._fitting

    def fitting(self, items, k, free):
        widest[self.piece_waves] = max(widest[self.piece_waves], len(items))
        return real(self, items, k, free)

    monkeypatch.setattr(slotted.SlotBooking, "_fitting", fitting)
    result = ccviz.run(ccviz.load_topology("dragonfly:groups=6,routers=3,gpus=1"), "reducescatter", "forestcoll",
                       1e9, options=GRID_ONLY)
    assert result.timeline.verified
    assert widest == {False: 3, True: 2}
