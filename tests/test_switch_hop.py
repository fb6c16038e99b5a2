"""The three switch-hop rules on GPU0 -> switch -> GPU2, against arrival times derived by hand.

Link 0->1: 10 GB/s, alpha 1 us; link 1->2: 5 GB/s, alpha 1 us; two chunks of 10 kB broadcast from GPU 0.
Serialization: 1 us into the switch, 2 us out of it. Into the switch (every rule): chunk 0 leaves at 0
and arrives at 2 us, chunk 1 leaves at 1 and arrives at 3 us. Out of the switch, the link is busy 2 us
per chunk under every rule, so chunk 1 starts when chunk 0's serialization ends (2 + 2 = 4 us):

- paid:  arrival = start + alpha + 2 us -> chunk 0 at 2 + 3 = 5 us, chunk 1 at 4 + 3 = 7 us
- teccl: arrival = start + alpha        -> chunk 0 at 2 + 1 = 3 us, chunk 1 at 4 + 1 = 5 us
- free:  arrival = start                -> chunk 0 at 2 us,          chunk 1 at 4 us

Epoch model, tau = 0.5 us: 0->1 is kappa 2 + alpha 2 = 4 epochs; 1->2 is kappa 4, alpha 2 epochs:
paid 4 + 2 = 6, teccl 2, free 0 epochs. Chunk 1 leaves GPU 0 at epoch 2 and the switch link's window of
4 epochs holds one chunk, so it leaves the switch at epoch 4 + 4 = 8: the last arrival is at epoch
paid 8 + 6 = 14, teccl 8 + 2 = 10, free 8 + 0 = 8.
"""

from __future__ import annotations

import pytest

from ccviz import make_collective
from ccviz.errors import CcvizError
from ccviz.judge.simulate import simulate
from ccviz.model.schedule import Schedule, Transfer
from ccviz.model.topology import Link, Node, Topology
from ccviz.synth import SynthOptions, synthesize
from ccviz.synth.teccl.epochs import EpochGrid

US = 1e-6
CHUNK = 1e4
TAU = 0.5 * US
ARRIVALS_US = {"paid": (5.0, 7.0), "teccl": (3.0, 5.0), "free": (2.0, 4.0)}
SWITCH_OFFSET = {"paid": 6, "teccl": 2, "free": 0}
LAST_EPOCH = {"paid": 14, "teccl": 10, "free": 8}


def fabric(hop: str) -> Topology:
    nodes = [Node(0), Node(1, "switch"), Node(2)]
    links = [Link(0, 1, 10.0, 1.0), Link(1, 0, 10.0, 1.0), Link(1, 2, 5.0, 1.0), Link(2, 1, 5.0, 1.0)]
    return Topology("gpu-switch-gpu", nodes, links, switch_hop=hop)


def broadcast(topo: Topology):
    return make_collective("broadcast", topo, 2 * CHUNK, chunks_per_rank=2, root=0)


@pytest.mark.parametrize("hop", ["paid", "teccl", "free"])
def test_simulator_arrivals_follow_the_rule(hop: str) -> None:
    topo = fabric(hop)
    transfers = [Transfer(0, 0, 1, step=0), Transfer(1, 0, 1, step=0),
                 Transfer(0, 1, 2, step=1), Transfer(1, 1, 2, step=1)]
    timeline = simulate(Schedule(topo, broadcast(topo), transfers, "hand"))
    assert timeline.verified, timeline.violations[:3]
    # Chunk 1 could reach the switch at 3 us, but the switch's out-link is busy until 4 us and a bufferless
    # switch forwards on arrival, so its first hop is timed to arrive when the out-link frees up.
    assert timeline.arrival_s[0] == pytest.approx(2 * US) and timeline.arrival_s[1] == pytest.approx(4 * US)
    assert (timeline.arrival_s[2] / US, timeline.arrival_s[3] / US) == pytest.approx(ARRIVALS_US[hop])
    assert [(b - a) / US for a, b, *_ in timeline.link_busy[(1, 2)]] == pytest.approx([2.0, 2.0])


@pytest.mark.parametrize("hop", ["paid", "teccl", "free"])
def test_epoch_model_follows_the_rule(hop: str) -> None:
    topo = fabric(hop)
    grid = EpochGrid.build(topo, CHUNK, TAU)
    assert (grid.links[(0, 1)].kappa, grid.links[(0, 1)].offset) == (2, 4)
    assert (grid.links[(1, 2)].kappa, grid.links[(1, 2)].offset) == (4, SWITCH_OFFSET[hop])
    assert grid.links[(2, 1)].offset == 4 + 2  # into the switch: paid under every rule
    schedule = synthesize(topo, broadcast(topo), "teccl", SynthOptions(epoch=TAU, time_limit=30))
    assert (schedule.status, schedule.epochs) == ("optimal", LAST_EPOCH[hop])
    timeline = simulate(schedule)
    assert timeline.verified and timeline.finish_time_s == pytest.approx(ARRIVALS_US[hop][1] * US)


def test_a_hop_between_two_switches_takes_an_epoch_under_every_rule() -> None:
    nodes = [Node(0), Node(1, "switch"), Node(2, "switch"), Node(3)]
    links = [Link(u, v, 50.0, 0.0) for u, v in ((0, 1), (1, 2), (2, 3), (3, 2), (2, 1), (1, 0))]
    for hop in ("teccl", "free"):
        topo = Topology("two-switches", nodes, links, switch_hop=hop)
        assert topo.delay_epochs(1, 2, 1e6, 1e-3) == 1 and topo.delay_epochs(2, 3, 1e6, 1e-3) == 0


def test_an_unknown_rule_names_the_choices() -> None:
    with pytest.raises(CcvizError, match="paid, teccl, free"):
        fabric("cheap")
