"""forestcoll's faster paths book what the slower ones booked, and the grid-first order keeps its fallbacks.

Beyond 32 GPUs on fabrics whose routes cross two switches (dragonflies) the balanced few trees go on the slot
grid first; the packed trees' first-come booking runs only where the grid is refused or ends over
``GRID_FIRST_ENOUGH`` x the limit. Tests move ``SLOTS_AUTO_MAX_GPUS`` down to 8 so that a 16-GPU dragonfly
takes that path in a second or two (a 36-GPU one takes it as it is, in about ten).
"""

from __future__ import annotations

import heapq

import numpy as np
import pytest

import ccviz
from ccviz.synth import forestcoll, slotted
from ccviz.synth.budget import Budget
from ccviz.synth.registry import SynthOptions
from ccviz.synth.reversal import mirror_collective, mirror_fabric

GRID_FIRST = "dragonfly:groups=4,routers=2,gpus=2"  # 16 GPUs: past SLOTS_AUTO_MAX_GPUS below, routes cross two switches
SIZE = 1e8
FEW = SynthOptions(extra={"trees": forestcoll.tuning.GRID_TREES, "spare_crossings": False})  # a quicker fallback


@pytest.fixture(autouse=True)
def _grid_first_from_8_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(forestcoll.tuning, "SLOTS_AUTO_MAX_GPUS", 8)


def _counting(monkeypatch: pytest.MonkeyPatch, module, name: str) -> list[int]:
    """Count the calls of ``<module>.<name>``, a forestcoll stage's (still calling it)."""
    calls: list[int] = []
    real = getattr(module, name)

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, counted)
    return calls


def test_the_grid_goes_first_and_first_come_booking_runs_only_over_the_threshold(monkeypatch) -> None:
    topology = ccviz.load_topology(GRID_FIRST)
    assert forestcoll.grid._few_trees_grid_only(topology) and topology.n_gpus > forestcoll.tuning.SLOTS_AUTO_MAX_GPUS
    first_come = _counting(monkeypatch, forestcoll.copies, "ordered_pipeline")
    monkeypatch.setattr(forestcoll.tuning, "GRID_FIRST_ENOUGH", 10.0)  # any grid schedule is close enough
    grid = ccviz.run(topology, "allgather", "forestcoll", SIZE, options=FEW)
    assert grid.timeline.verified
    assert not first_come  # neither the 8-tree packing's booking ...
    assert "slot grid" in grid.schedule.notes[1] and grid.schedule.options["trees"] == forestcoll.tuning.GRID_TREES
    monkeypatch.setattr(forestcoll.tuning, "GRID_FIRST_ENOUGH", 0.0)  # no grid schedule is close enough
    both = ccviz.run(topology, "allgather", "forestcoll", SIZE, options=FEW)
    assert both.timeline.verified
    assert first_come  # ... or only then, and the faster of the two kept
    assert both.finish_time_s <= grid.finish_time_s


def test_first_come_booking_runs_where_the_grid_is_refused(monkeypatch) -> None:
    topology = ccviz.load_topology(GRID_FIRST)
    monkeypatch.setattr(forestcoll.grid, "_few_trees_slotted", lambda *args, **kwargs: None)
    first_come = _counting(monkeypatch, forestcoll.copies, "ordered_pipeline")
    result = ccviz.run(topology, "allgather", "forestcoll", SIZE, options=FEW)
    assert result.timeline.verified and first_come
    assert "first come first served" in result.schedule.notes[1]


def test_stop_after_the_grid_first_offer_keeps_a_complete_schedule(stop_at_first_offer) -> None:
    """The grid's schedule is offered the moment it is booked (the app's Stop then has an answer), and a
    Stop right after it ends the synthesis with a complete, verified schedule and a note saying so."""
    topology = ccviz.load_topology(GRID_FIRST)
    options, offers = stop_at_first_offer
    result = ccviz.run(topology, "allgather", "forestcoll", SIZE, options=options)
    assert offers and ccviz.simulate(offers[0]).verified
    assert offers[0].options["trees"] == forestcoll.tuning.GRID_TREES  # the grid's, the first complete schedule
    assert result.timeline.verified
    assert any(note.startswith("stopped during synthesis") for note in result.schedule.notes)


def _mirror_problem(spec: str) -> tuple:
    """A ReduceScatter's mirror on ``spec`` with GRID_TREES packed trees: what the grid books."""
    topology = ccviz.load_topology(spec)
    fabric = mirror_fabric(topology)
    collective = mirror_collective(ccviz.make_collective("reducescatter", topology, 1e9))
    limit = ccviz.bandwidth_limit(fabric, collective.name, 1e9).limit_s
    unit_s = collective.size_bytes / topology.n_gpus / 1e9 / limit
    roots = list(collective.ranks)
    capacities = forestcoll.grid._slot_capacities_differ(fabric)
    packing = forestcoll.best_packing(fabric, roots, unit_s, forestcoll.tuning.GRID_TREES, Budget(SynthOptions()),
                                      slotted=capacities)
    return fabric, collective, roots, unit_s, capacities, packing


def _balance_one_at_a_time(packer: forestcoll.TreePacker, packing: forestcoll.Packing) -> dict:
    """``TreePacker.balance`` as it was written before it scored every new parent at once: one candidate
    parent at a time, in the same order, the first of equals kept. Returns each tree's edges."""
    share = 1.0 / packing.k
    n = len(packer.closure.gpus)
    trees = forestcoll.packing.copied_trees(packing)
    load = np.zeros(len(packer.capacity))
    for ts in trees.values():
        for t in ts:
            np.add.at(load, t.links, share)
    scale = packer.unit_s / packer.capacity
    for _ in range(forestcoll.tuning.BALANCE_MOVES):
        ratio = load * scale
        top = float(ratio.max())
        if top <= 1.0 + 1e-9:
            break
        worst = set(np.flatnonzero(ratio >= top - 1e-9).tolist())
        cost, info = packer.closure.costs(packer.lengths(load))
        reachable = np.isfinite(cost)
        after = ((load + share) * scale).tolist()
        routes_from: dict[int, list] = {}
        best = None
        for t, u, i, v, old in forestcoll.packing.edges_crossing(trees, worst):
            below = forestcoll.packing._below(t, v)
            for w in packer.closure.gpus:
                if w == u or w in below or not reachable[packer.index[w], packer.index[v]]:
                    continue
                if w not in routes_from:
                    parent = np.full(n, packer.index[w])
                    parent[packer.index[w]] = -1
                    routes_from[w] = packer.closure.tree_routes(parent, info)
                new = routes_from[w][packer.index[v]]
                peak = max(after[link] for link in new if link not in set(old))
                if peak < top - 1e-9 and (best is None or (peak, len(new)) < best[0]):
                    best = ((peak, len(new)), t, u, i, v, w, new, old)
        if best is None:
            break
        forestcoll.move_edge(*best[1:], load, share)
    return {r: [t.children for t in ts] for r, ts in trees.items()}


@pytest.mark.parametrize("spec", ["dragonfly:groups=4,routers=2,gpus=2", "dragonfly:groups=3,routers=2,gpus=3"])
def test_balance_moves_the_edges_the_one_at_a_time_search_moved(spec: str) -> None:
    fabric, _, roots, unit_s, capacities, packing = _mirror_problem(spec)
    packer = forestcoll.TreePacker(fabric, roots, unit_s, capacities)
    balanced = packer.balance(packing)
    reference = _balance_one_at_a_time(packer, packing)
    assert {r: [t.children for t in ts] for r, ts in balanced.trees.items()} == reference
    assert balanced.congestion <= packing.congestion


class _WalkingBooking(slotted.SlotBooking):
    """The grid as it read candidates before ``heads``: every receiver's heap walked in every slot."""

    def _candidates(self, k: int) -> dict:
        out = {}
        free: dict = {}
        for lid, ends in self.by_end.items():
            if len(self.used.get((lid, k), ())) >= self.lanes[lid]:
                continue
            items = []
            for heap in ends.values():
                while heap and heap[0][2] in self.taken:
                    heapq.heappop(heap)
                if heap:
                    items.append(heap[0])
            items.sort()
            fits = slotted.Fitting(self._fitting(items[:slotted.CANDIDATES], k, free))
            if fits.get(0) is not None:
                out[lid] = fits
        return out


@pytest.mark.parametrize("name", ["reducescatter", "allgather"])
def test_the_grid_books_what_walking_every_receivers_heap_booked(name: str) -> None:
    topology = ccviz.load_topology("dragonfly:groups=4,routers=2,gpus=2")
    fabric, _, roots, unit_s, capacities, packing = _mirror_problem("dragonfly:groups=4,routers=2,gpus=2")
    if name == "allgather":  # the real fabric: its switches copy, so riders branch off booked routes
        fabric, collective = topology, ccviz.make_collective("allgather", topology, 1e9)
    else:
        collective = mirror_collective(ccviz.make_collective("reducescatter", topology, 1e9))
    trees = forestcoll.TreePacker(fabric, roots, unit_s, capacities).balance(packing)
    refined = forestcoll.booking._refined(fabric, collective, trees, 4)
    fast = slotted.SlotBooking(fabric, refined, forestcoll.booking._OutTrees(trees), 0.0, deep_first=True).run()
    walked = _WalkingBooking(fabric, refined, forestcoll.booking._OutTrees(trees), 0.0, deep_first=True).run()
    assert fast[1] == walked[1] and fast[0] == walked[0]


def test_a_grid_booking_is_kept_and_moved_to_another_start(monkeypatch) -> None:
    """The AllReduce's AllGather half books its grid from 0 and again from the ReduceScatter's end: where the
    grid goes first (33-64 GPUs) the second is the first moved, taken from ``packed`` without matching a slot
    again; other trees book anew, and so does every booking without ``reuse``."""
    fabric, collective, roots, unit_s, capacities, packing = _mirror_problem("dragonfly:groups=4,routers=2,gpus=2")
    refined = forestcoll.booking._refined(fabric, collective, packing, 4)
    calls = _counting(monkeypatch, forestcoll.grid, "slotted_pipeline")
    plan_of = forestcoll.grid._plan_maker(fabric, refined)
    packed: dict = {}
    budget = Budget(SynthOptions())
    first = forestcoll.grid._deep_first_grid(fabric, refined, packing, plan_of, 0.0, budget, False, packed, reuse=True)
    later = forestcoll.grid._deep_first_grid(fabric, refined, packing, plan_of, 0.5, budget, False, packed, reuse=True)
    assert len(calls) == 1
    assert later[1] == pytest.approx(first[1] + 0.5, abs=1e-15)
    assert [(t.chunk, t.src, t.dst) for t in later[0]] == [(t.chunk, t.src, t.dst) for t in first[0]]
    assert all(abs(b.start_s - a.start_s - 0.5) < 1e-12 for a, b in zip(first[0], later[0], strict=True))
    other = forestcoll.TreePacker(fabric, roots, unit_s, capacities).balance(packing)
    forestcoll.grid._deep_first_grid(fabric, refined, other, plan_of, 0.0, budget, False, packed, reuse=True)
    assert len(calls) == 2
    forestcoll.grid._deep_first_grid(fabric, refined, packing, plan_of, 0.5, budget, False, packed)  # up to 32 GPUs
    assert len(calls) == 3  # booked anew from its own start
