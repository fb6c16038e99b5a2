"""forestcoll's offers (``SynthOptions.best``) are schedules of the collective asked for.

The app keeps the latest verified offer of the asked collective as the answer when it has to end a solve
(Stop, its time limit). A ReduceScatter is booked as a copy on the mirrored fabric and an AllReduce as two
halves, so their parts offered AllGathers on another fabric, or ReduceScatters for an AllReduce, which the
app drops: a 64-GPU dragonfly AllReduce ended at the app's default 30 s with nothing to show.
"""

from __future__ import annotations

import pytest

import ccviz
from ccviz.synth.registry import SynthOptions

FABRIC = "dragonfly:groups=3,routers=2,gpus=2"  # 12 GPUs, switches: packed trees first come, then the grid


@pytest.mark.parametrize("collective", ["reducescatter", "allreduce"])
def test_every_offer_is_the_collective_asked_for_and_verifies(collective: str) -> None:
    topology = ccviz.load_topology(FABRIC)
    offers: list[ccviz.Schedule] = []
    result = ccviz.run(topology, collective, "forestcoll", 1e8, options=SynthOptions(best=offers.append))
    assert result.timeline.verified
    assert offers, "a complete schedule is offered on the way"
    for offer in offers:
        assert offer.collective.name == collective and offer.topology is topology
        assert ccviz.simulate(offer).verified
    assert min(ccviz.simulate(o).finish_time_s for o in offers) >= result.timeline.finish_time_s * (1 - 1e-9)


def test_stop_at_the_first_allreduce_offer_returns_a_verified_allreduce(stop_at_first_offer) -> None:
    topology = ccviz.load_topology(FABRIC)
    options, offers = stop_at_first_offer
    result = ccviz.run(topology, "allreduce", "forestcoll", 1e8, options=options)
    assert offers and offers[0].collective.name == "allreduce"
    assert result.timeline.verified
