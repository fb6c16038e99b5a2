"""The time-expanded graph, pruned to where a commodity can still matter.

A send of commodity c on link (i, j) in epoch k gets a variable only when c
can be at i by epoch k (earliest arrival from its holders) and can still
reach one of its destinations by the horizon from j (``to_go``). A GPU that
never needs c and lies on no useful route gets nothing. Everything the model
builder needs (sends, holdings, arrivals per node and epoch, capacity
windows) is precomputed here as plain index lists.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from ccviz.model.collectives import Collective
from ccviz.model.routing import earliest_arrivals
from ccviz.model.topology import Topology
from ccviz.synth.teccl.epochs import EpochGrid

Send = tuple[int, int, int, int]  # (commodity, src, dst, epoch)
NodeEpoch = tuple[int, int, int]  # (commodity, node, epoch)
INF = math.inf


@dataclass(frozen=True)
class Commodity:
    """What flows: one chunk (copy model) or every chunk one source sends (flow LP)."""

    id: int
    chunks: tuple[int, ...]  # collective chunk ids it carries
    holders: frozenset[int]  # GPUs holding it at epoch 0
    needs: tuple[tuple[int, int], ...]  # (destination GPU, number of chunks it needs)

    @property
    def destinations(self) -> frozenset[int]:
        return frozenset(d for d, _ in self.needs)

    @property
    def amount(self) -> int:
        return len(self.chunks)


def chunk_commodities(collective: Collective) -> list[Commodity]:
    """One commodity per chunk: what the copy (MILP) model routes."""
    out = []
    for c in collective.chunks:
        dests = sorted(c.post - c.pre)
        if dests:
            out.append(Commodity(len(out), (c.id,), frozenset(c.pre), tuple((d, 1) for d in dests)))
    return out


def source_commodities(collective: Collective) -> list[Commodity]:
    """One commodity per source rank (all its chunks): what the flow LP routes when no copy helps."""
    groups: dict[frozenset[int], list] = defaultdict(list)
    for c in collective.chunks:
        if c.post - c.pre:
            groups[frozenset(c.pre)].append(c)
    out = []
    for holders, chunks in sorted(groups.items(), key=lambda kv: sorted(kv[0])):
        need: dict[int, int] = defaultdict(int)
        for c in chunks:
            for d in c.post - c.pre:
                need[d] += 1
        out.append(Commodity(len(out), tuple(c.id for c in chunks), holders, tuple(sorted(need.items()))))
    return out


def epoch_distances(topology: Topology, grid: EpochGrid, starts: dict[int, int], reverse: bool = False
                    ) -> dict[int, float]:
    """Fewest epochs from the start nodes (value = start epoch) to every node, ignoring capacity."""
    offsets = {key: link.offset for key, link in grid.links.items()}
    return earliest_arrivals(topology, starts, offsets, reverse)


def candidate_send_bound(topology: Topology, grid: EpochGrid, commodities: Iterable[Commodity], horizon: int) -> int:
    """The sends ``TimeExpandedGraph`` would consider before it drops switch sends without an arrival (so at
    least as many as it keeps), counted without building anything: whether the graph itself can be built in
    the time left (NVL72 AllToAll at 8 epochs: 1.4 million sends, about 5 s of Python before any model)."""
    total = 0
    for c in commodities:
        earliest = epoch_distances(topology, grid, {n: 0 for n in c.holders})
        to_go = epoch_distances(topology, grid, {d: 0 for d in c.destinations}, reverse=True)
        for (i, j), link in grid.links.items():
            if j in c.holders or earliest[i] == INF or to_go[j] == INF:
                continue
            total += max(0, int(horizon - link.offset - to_go[j]) - int(earliest[i]) + 1)
    return total


class TimeExpandedGraph:
    """Reachability-pruned index sets of the TE-CCL model over epochs 0..horizon."""

    def __init__(self, topology: Topology, grid: EpochGrid, commodities: Iterable[Commodity], horizon: int,
                 require_demands: bool = True) -> None:
        self.topology = topology
        self.grid = grid
        self.commodities = list(commodities)
        self.horizon = horizon
        self.require_demands = require_demands
        self.earliest = [self._earliest(c) for c in self.commodities]
        self.to_go = [self._to_go(c) for c in self.commodities]
        self.sends = self._candidate_sends()
        self.holds = self._holding_epochs()
        self.arrivals, self.switch_arrivals = self._arrivals()

    def _earliest(self, c: Commodity) -> dict[int, float]:
        """Earliest epoch each node can hold (GPU) or receive (switch) the commodity."""
        return epoch_distances(self.topology, self.grid, {n: 0 for n in c.holders})

    def _to_go(self, c: Commodity) -> dict[int, float]:
        """Fewest epochs from each node to the nearest destination (0 at a destination); A* rounds keep every
        reachable node (progress counts even short of a destination)."""
        if not self.require_demands:
            return {n: 0 for n in self.topology.nodes}
        return epoch_distances(self.topology, self.grid, {d: 0 for d in c.destinations}, reverse=True)

    def _candidate_sends(self) -> list[Send]:
        """Sends that can happen in time and still serve a destination; switch sends need an arrival that epoch."""
        topo, grid, horizon = self.topology, self.grid, self.horizon
        sends: list[Send] = []
        for c in self.commodities:
            earliest, to_go = self.earliest[c.id], self.to_go[c.id]
            for (i, j), link in grid.links.items():
                if j in c.holders or earliest[i] == INF or to_go[j] == INF:
                    continue
                last = horizon - link.offset - to_go[j]
                if not self.require_demands and topo.is_switch(j):
                    last = horizon - link.offset - 1  # a switch must forward inside the round
                sends.extend((c.id, i, j, k) for k in range(int(earliest[i]), int(last) + 1))
        return self._drop_switch_sends_without_arrival(sends)

    def _drop_switch_sends_without_arrival(self, sends: list[Send]) -> list[Send]:
        topo, links = self.topology, self.grid.links
        while True:
            reach = {(c, j, k + links[(i, j)].offset) for c, i, j, k in sends if topo.is_switch(j)}
            kept = [s for s in sends if not topo.is_switch(s[1]) or (s[0], s[1], s[3]) in reach]
            if len(kept) == len(sends):
                return kept
            sends = kept

    def _holding_epochs(self) -> list[NodeEpoch]:
        """Holding variables: a GPU that is not an initial holder, from its earliest epoch to the last useful
        one."""
        holds = []
        for c in self.commodities:
            earliest, to_go = self.earliest[c.id], self.to_go[c.id]
            for n in self.topology.gpus:
                if n in c.holders or earliest[n] == INF or to_go[n] == INF:
                    continue
                holds.extend((c.id, n, k) for k in range(int(earliest[n]), int(self.horizon - to_go[n]) + 1))
        return holds

    def _arrivals(self):
        """Which sends land where and when."""
        topo, links = self.topology, self.grid.links
        arrivals: dict[NodeEpoch, list[Send]] = defaultdict(list)
        switch_arrivals: dict[NodeEpoch, list[Send]] = defaultdict(list)
        for s in self.sends:
            c, i, j, k = s
            target = switch_arrivals if topo.is_switch(j) else arrivals
            target[(c, j, k + links[(i, j)].offset)].append(s)
        return arrivals, switch_arrivals

    # -------------------------------------------------------------- queries
    def capacity_windows(self, every_window: bool = False) -> dict[tuple[int, int, int], list[Send]]:
        """Per (link, first epoch of a window of kappa epochs): the sends that window covers.

        Unless ``every_window`` (flows of several chunks per variable), windows that
        cannot overflow (few binary sends) are left out, and so are windows with no send at all (candidate
        epochs with a gap wider than kappa: their constraint would read 0 <= limit); a window
        reaching past the first or last candidate epoch is implied by one inside.
        """
        by_link_epoch: dict[tuple[int, int], dict[int, list[Send]]] = defaultdict(lambda: defaultdict(list))
        for s in self.sends:
            by_link_epoch[(s[1], s[2])][s[3]].append(s)
        windows = {}
        for key, per_epoch in by_link_epoch.items():
            link = self.grid.links[key]
            epochs = sorted(per_epoch)
            for w in range(epochs[0], max(epochs[0], epochs[-1] - link.kappa + 1) + 1):
                covered = [s for k in range(w, w + link.kappa) for s in per_epoch.get(k, ())]
                if covered and (every_window or len(covered) > link.window_slots):  # an empty one binds nothing
                    windows[(key[0], key[1], w)] = covered
        return windows

    def sends_from(self) -> dict[NodeEpoch, list[Send]]:
        out: dict[NodeEpoch, list[Send]] = defaultdict(list)
        for s in self.sends:
            out[(s[0], s[1], s[3])].append(s)
        return out

    def unreachable_demands(self) -> list[tuple[int, int]]:
        """(commodity, destination) pairs no schedule can serve by the horizon (then the model is infeasible)."""
        return [(c.id, d) for c in self.commodities for d in sorted(c.destinations)
                if self.earliest[c.id][d] > self.horizon]

    def size(self) -> str:
        return f"{len(self.sends)} sends, {len(self.holds)} holdings over {self.horizon} epochs"
