"""Reversal helper: any verified copy schedule on the reversed topology becomes a verified reduction."""

from __future__ import annotations

import networkx as nx
import pytest

from ccviz import load_topology, make_collective, simulate
from ccviz.errors import CcvizError
from ccviz.model.schedule import Schedule, Transfer
from ccviz.model.topology import Link, Node, Topology
from ccviz.synth.reversal import concatenate, mirror_collective, mirror_fabric, reverse_schedule
from tests.paths import REFERENCE


def unicast_paths_schedule(topology: Topology, collective) -> Schedule:
    """A deliberately wasteful copy schedule: every (chunk, destination) on its own shortest path.

    Paths overlap, so intermediate ranks receive duplicates: the reversal must keep only first arrivals.
    """
    g = topology.graph
    transfers = []
    for c in collective.chunks:
        (src,) = c.pre
        for dst in sorted(c.post - c.pre):
            path = nx.shortest_path(g, src, dst)
            transfers += [Transfer(c.id, u, v, step=h) for h, (u, v) in enumerate(nx.utils.pairwise(path))]
    timed = simulate(Schedule(topology, collective, transfers, "unicast"))
    assert timed.verified, timed.violations[:3]
    return timed.schedule


def reduce_via_reversal(topology: Topology, name: str, size: float = 1e6) -> Schedule:
    target = make_collective(name, topology, size)
    forward = unicast_paths_schedule(topology.reversed(), mirror_collective(target))
    return reverse_schedule(forward, topology, target)


def ring_with_uneven_links() -> Topology:
    """Each direction of a cable has its own alpha and bandwidth, so reversed timing differs."""
    links = []
    for i in range(5):
        j = (i + 1) % 5
        links += [Link(i, j, 10.0 + 7 * i, 0.3 + i), Link(j, i, 40.0 - 3 * i, 2.0 - 0.3 * i)]
    return Topology("uneven-ring", [Node(i) for i in range(5)], links)


def star_with_switch(switch_hop: str, copy: bool) -> Topology:
    nodes = [Node(i) for i in range(4)] + [Node(4, "switch", copy=copy)]
    links = [lk for i in range(4) for lk in (Link(i, 4, 20.0 + i, 0.5), Link(4, i, 30.0, 1.0 + i))]
    links += [Link(0, 1, 50.0, 0.2), Link(1, 0, 50.0, 0.2)]
    return Topology(f"star-{switch_hop}-{copy}", nodes, links, switch_hop=switch_hop)


TOPOLOGIES = {
    "mesh3x3": lambda: load_topology("mesh2d:dims=3x3"),
    "uneven-ring": ring_with_uneven_links,
    "dgx1": lambda: load_topology(REFERENCE / "dgx1.json"),
    "ndv2_1chassis": lambda: load_topology(REFERENCE / "ndv2_1chassis.json"),
    "ndv2_as_run_free_hop": lambda: load_topology(REFERENCE / "ndv2_2chassis_teccl_as_run.json"),
    "star-free-copy": lambda: star_with_switch("free", True),
    "star-paid-nocopy": lambda: star_with_switch("paid", False),
}


@pytest.mark.parametrize("name", ["reducescatter", "reduce"])
@pytest.mark.parametrize("topo_name", sorted(TOPOLOGIES))
def test_reversed_reduction_verifies(topo_name: str, name: str) -> None:
    schedule = reduce_via_reversal(TOPOLOGIES[topo_name](), name)
    timeline = simulate(schedule)
    assert timeline.verified, timeline.violations[:3]
    assert all(t.op == "reduce" for t in schedule.transfers)
    assert timeline.finish_time_s == pytest.approx(max(t.end_s for t in schedule.transfers))


def test_reversal_keeps_symmetric_timing() -> None:
    """On symmetric links the reduction takes exactly as long as the forward broadcast."""
    topology = load_topology("mesh2d:dims=3x3")
    target = make_collective("reducescatter", topology, 1e6)
    forward = unicast_paths_schedule(topology.reversed(), mirror_collective(target))
    reverse = reverse_schedule(forward, topology, target)
    assert simulate(reverse).finish_time_s <= simulate(forward).finish_time_s * (1 + 1e-12)


def test_allreduce_is_reducescatter_then_allgather() -> None:
    topology = load_topology(REFERENCE / "dgx1.json")
    rs = reduce_via_reversal(topology, "reducescatter")
    ag = unicast_paths_schedule(topology, make_collective("allgather", topology, 1e6))
    allreduce = make_collective("allreduce", topology, 1e6)
    combined = simulate(concatenate(rs, ag, allreduce))
    assert combined.verified, combined.violations[:3]
    assert combined.finish_time_s == pytest.approx(simulate(rs).finish_time_s + simulate(ag).finish_time_s,
                                                   rel=1e-12)


def test_multicast_at_a_switch_is_refused() -> None:
    topology = star_with_switch("paid", True)
    target = make_collective("reduce", topology, 1e6, root=0)
    forward_topo = topology.reversed()
    forward_coll = mirror_collective(target)
    # root 0 -> switch once, the switch copies to 2 and 3
    untimed = [Transfer(0, 0, 4, step=0), Transfer(0, 4, 2, step=1), Transfer(0, 4, 3, step=1),
               Transfer(0, 0, 1, step=0)]
    forward = simulate(Schedule(forward_topo, forward_coll, untimed, "hand")).schedule
    with pytest.raises(CcvizError, match="multicast"):
        reverse_schedule(forward, topology, target)


def test_allreduce_cannot_be_mirrored() -> None:
    topology = load_topology("ring:n=4")
    with pytest.raises(CcvizError, match="collective"):
        mirror_collective(make_collective("allreduce", topology, 1e6))


def test_a_reversal_on_a_symmetric_fabric_is_the_forward_mirrored_in_time() -> None:
    """Where every hop costs what its reverse costs, each kept send [s, e] a -> b comes back as b -> a over
    [F - e, F - s] (F the forward's last arrival): the reduction takes exactly as long as its forward
    (kept on the 4x4 torus, where the ASAP replay is no faster)."""
    from ccviz.synth import SynthOptions
    from ccviz.synth.tacos import copy_schedule

    topology = load_topology("torus2d:dims=4x4")
    target = make_collective("reducescatter", topology, 1e6)
    forward = copy_schedule(topology.reversed(), mirror_collective(target), SynthOptions(seed=0))
    reduction = reverse_schedule(forward, topology, target)
    last = max(t.end_s for t in forward.transfers)
    mirrored = sorted((t.chunk, t.dst, t.src, last - t.end_s, last - t.start_s) for t in forward.transfers)
    assert sorted((t.chunk, t.src, t.dst, t.start_s, t.end_s) for t in reduction.transfers) == mirrored
    timeline = simulate(reduction)
    assert timeline.verified
    assert timeline.last_arrival_s == pytest.approx(last - min(t.start_s for t in forward.transfers))


def test_a_replayed_switchless_reversal_shares_steps_and_times_like_one_transfer_per_step() -> None:
    """Where the ASAP replay beats the exact mirror (it closes the forward's idle gaps: AMD's 16 GPUs,
    9.6 against 11.7 us) it is kept. Its transfers with one nominal reversed start share a step (so the
    simulator times the reduction in array work); the times are those of ranking every transfer on its
    own, i.e. the tree's waits."""
    from ccviz.judge.simulate import reference_assign_times
    from ccviz.synth import SynthOptions
    from ccviz.synth.tacos import copy_schedule

    topology = load_topology("amd")
    target = make_collective("reducescatter", topology, 1e6)
    forward = copy_schedule(topology.reversed(), mirror_collective(target), SynthOptions(seed=0))
    reduction = reverse_schedule(forward, topology, target)
    assert "time-reversed" in reduction.notes[-1]
    assert reduction.estimated_finish_s < max(t.end_s for t in forward.transfers)
    steps = [t.step for t in reduction.transfers]
    assert steps == sorted(steps) and len(set(steps)) * 4 < len(steps)
    one_each = reduction.with_transfers([t._replace(start_s=None, end_s=None, step=float(k))
                                         for k, t in enumerate(reduction.transfers)])
    alone = reference_assign_times(one_each).transfers
    assert [(t.start_s, t.end_s) for t in alone] == [(t.start_s, t.end_s) for t in reduction.transfers]
    assert simulate(reduction).verified


def test_a_reversal_through_slot_grid_routes_keeps_the_forward_speed() -> None:
    """Routes through bufferless switches interleaved on a slot grid: the mirror keeps them as they are
    (replaying the reversed order ASAP made leaf-spine ReduceScatter 2 x slower than its forward)."""
    from ccviz.synth import SynthOptions
    from ccviz.synth.budget import Budget
    from ccviz.synth.forestcoll import copy_schedule as forest_copy

    topology = load_topology("leafspine")
    target = make_collective("reducescatter", topology, 1e8)
    options = SynthOptions(extra={"slots": "true"})
    forward, _ = forest_copy(mirror_fabric(topology), mirror_collective(target), options, Budget(options))
    target = make_collective("reducescatter", topology, 1e8, forward.collective.chunks_per_rank)
    timeline = simulate(reverse_schedule(forward, topology, target))
    assert timeline.verified
    assert timeline.last_arrival_s == pytest.approx(simulate(forward).last_arrival_s, rel=1e-9)
