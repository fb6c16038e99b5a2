"""The booking floor (``forestcoll.floor``): no booking of a schedule's routes and pieces ends before it."""

from __future__ import annotations

import dataclasses

import pytest

import ccviz
from ccviz.builders.fabric import Fabric
from ccviz.judge.simulate import simulate
from ccviz.model.collectives import make_collective
from ccviz.model.physics import arrival_delay, occupancy
from ccviz.model.schedule import Schedule, Transfer
from ccviz.synth.forestcoll.floor import booking_floor


def test_one_link_back_to_back_is_exactly_at_the_floor() -> None:
    """Two GPUs, one cable each way, 4 chunks each: the last piece starts after the other three's bytes and lands
    its delay later; booked back to back, the schedule ends exactly there; idle between pieces, later."""
    fabric = Fabric()
    a, b = fabric.add_gpu(), fabric.add_gpu()
    fabric.cable(a, b, 50.0, 1.0)
    topology = fabric.topology("pair", "two GPUs", "line")
    collective = make_collective("allgather", topology, 8e6, 4)
    busy, delay = occupancy(topology, a, b, collective.chunk_bytes), arrival_delay(topology, a, b, collective.chunk_bytes)

    def booked(gap: float) -> Schedule:
        transfers = [Transfer(c.id, c.source, b if c.source == a else a, c.index * (busy + gap),
                              c.index * (busy + gap) + delay) for c in collective.chunks]
        return Schedule(topology, collective, transfers, "hand", {}, "heuristic")

    tight, loose = booked(0.0), booked(0.5 * busy)
    assert simulate(tight).verified and simulate(loose).verified
    assert booking_floor(tight) == pytest.approx(3 * busy + delay, rel=1e-12)
    assert booking_floor(loose) == pytest.approx(booking_floor(tight), rel=1e-12)  # the booking, not the routes
    assert simulate(loose).finish_time_s > booking_floor(loose)


@pytest.mark.parametrize("collective", ["allgather", "reducescatter", "allreduce"])
def test_forestcoll_never_ends_before_its_floor_and_a_later_booking_keeps_it(collective: str) -> None:
    topology = ccviz.load_topology("dgx1")
    result = ccviz.run(topology, collective, "forestcoll", 1e8)
    floor = booking_floor(result.schedule)
    assert floor is not None and floor <= result.finish_time_s * (1 + 1e-9)
    assert floor >= 0.99 * result.limit.limit_s  # its trees pack at the limit: the floor is no idle figure
    later = dataclasses.replace(result.schedule, transfers=[t._replace(start_s=t.start_s * 1.5, end_s=t.start_s * 1.5
                                                                       + (t.end_s - t.start_s))
                                                            for t in result.schedule.transfers])
    assert simulate(later).verified
    assert booking_floor(later) == pytest.approx(floor, rel=1e-9)


@pytest.mark.parametrize("spec", ["dgxh100", "dgxh100:boxes=2"])
def test_the_closed_forms_book_their_routes_as_early_as_they_can_be(spec: str) -> None:
    # one shift per plane and rail per slot, every link busy in every slot: the closed form ends at its floor
    topology = ccviz.load_topology(spec)
    result = ccviz.run(topology, "allgather", "forestcoll", 1e9)
    assert result.schedule.options["crossbar"]
    assert booking_floor(result.schedule) == pytest.approx(result.finish_time_s, rel=1e-6)


def test_no_floor_where_switches_sum() -> None:
    topology = ccviz.load_topology("dgxh100")
    result = ccviz.run(topology, "allreduce", "forestcoll", 1e9)  # the in-switch schedule (NVLS) wins here
    assert any(t.op == "combine" for t in result.schedule.transfers)
    assert booking_floor(result.schedule) is None
