"""Where the slot grid goes first (33-64 GPUs, routes across two switches), the balanced trees are packed with a
price per link crossed first.

Among equally loaded links the packing took any route, and on a dragonfly a GPU -> GPU route may cross five
links where three do. Every link of a route must be free in the same slots of the grid, so long routes
collided at the receivers' down-links and the global cables: the 36-GPU dragonfly below ended its
ReduceScatter at 1.090 x the limit with unpriced trees (3.27 links per tree edge), 1.04 x priced (2.49).
"""

from __future__ import annotations

import numpy as np

import ccviz
from ccviz.synth import forestcoll
from ccviz.synth.forestcoll import TreePacker
from ccviz.synth.forestcoll.tuning import GRID_FEWER_TREES, GRID_HOP_COST, GRID_TREES
from ccviz.synth.reversal import mirror_fabric

SIZE = 1e9
DRAGONFLY = "dragonfly:groups=6,routers=3,gpus=2"  # 36 GPUs: the grid goes first


def _links_per_edge(hop_cost: float) -> tuple[float, float]:
    mirror = mirror_fabric(ccviz.load_topology(DRAGONFLY))
    limit = ccviz.bandwidth_limit(mirror, "allgather", SIZE).limit_s
    packing = TreePacker(mirror, list(mirror.gpus), SIZE / mirror.n_gpus / 1e9 / limit, hop_cost=hop_cost).pack(4)
    hops = [len(route) for trees in packing.trees.values() for tree in trees
            for kids in tree.children.values() for _, route in kids]
    return float(np.mean(hops)), packing.congestion


def test_a_hop_price_packs_shorter_routes_no_more_congested() -> None:
    unpriced, unpriced_congestion = _links_per_edge(0.0)
    priced, priced_congestion = _links_per_edge(GRID_HOP_COST)
    assert priced < unpriced - 0.5  # 3.27 -> 2.49 links per tree edge
    assert priced_congestion <= unpriced_congestion + 1e-9


def test_dragonfly_reducescatter_comes_within_five_percent_with_priced_trees() -> None:
    topology = ccviz.load_topology(DRAGONFLY)
    result = ccviz.run(topology, "reducescatter", "forestcoll", SIZE)
    assert result.timeline.verified
    assert result.finish_time_s <= 1.05 * ccviz.bandwidth_limit(topology, "reducescatter", SIZE).limit_s
    assert any("price per hop" in note for note in result.schedule.notes)


def test_every_candidate_is_booked_where_none_ends_within_the_mark(monkeypatch) -> None:
    # GRID_ENOUGH below any schedule: priced trees by chunk index, unpriced in piece waves, fewer priced trees;
    # the fastest kept
    booked = []
    original = forestcoll.grid._few_trees_slotted

    def spy(*args, **kwargs):
        result = original(*args, **kwargs)
        booked.append(((kwargs["hop_cost"], args[10], kwargs["orders"]), result[2].finish_s))
        return result

    monkeypatch.setattr(forestcoll.grid, "_few_trees_slotted", spy)
    monkeypatch.setattr(forestcoll.tuning, "GRID_ENOUGH", 0.5)
    topology = ccviz.load_topology(DRAGONFLY)
    result = ccviz.run(topology, "allgather", "forestcoll", SIZE)
    assert [how for how, _ in booked] == [(GRID_HOP_COST, GRID_TREES, (False,)), (0.0, GRID_TREES, (True,)),
                                          (GRID_HOP_COST, GRID_FEWER_TREES, (False,))]
    assert result.schedule.estimated_finish_s == min(finish for _, finish in booked)
