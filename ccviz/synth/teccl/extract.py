"""From solver values to transfers: prune silly flows, split LP flows into chunk paths.

The MILP may send chunks nobody needs (they cost nothing in the objective).
``prune_copy_sends`` keeps only what a reverse walk from each destination
reaches: the earliest arrival that gives the destination its chunk, and
recursively what fed that sender in time. ``split_flows`` turns the LP's
fractional flows of one source into whole-chunk paths, taking for each
destination the widest remaining path through the time-expanded graph.
``to_transfers`` writes epoch sends as untimed transfers ordered by epoch
(``step``), so the simulator replays them in order and ASAP.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable

from ccviz.model.schedule import Transfer
from ccviz.model.topology import Topology
from ccviz.synth.teccl.epochs import EpochGrid, LinkEpochs
from ccviz.synth.teccl.time_expanded import Commodity, Send, TimeExpandedGraph

USED = 0.5  # a binary send above this is taken
FLOW_EPS = 1e-6

Hop = tuple[int, int, int, int]  # (collective chunk, src, dst, epoch)


def landings(links: dict[tuple[int, int], LinkEpochs], used: Iterable[Send]
             ) -> defaultdict[tuple[int, int], list[tuple[int, Send]]]:
    """The used sends by where they land: (commodity, node) -> [(landing epoch, send)], earliest first."""
    landing: defaultdict[tuple[int, int], list[tuple[int, Send]]] = defaultdict(list)
    for s in used:
        c, i, j, k = s
        landing[(c, j)].append((k + links[(i, j)].offset, s))
    for arrivals in landing.values():
        arrivals.sort()
    return landing


def prune_copy_sends(teg: TimeExpandedGraph, used: Iterable[Send],
                     targets: dict[int, Iterable[int]] | None = None) -> list[Send]:
    """The used sends that serve a demand, each GPU fed by its earliest arrival.

    ``targets[commodity]`` replaces the destinations (A* rounds keep relays that made progress).
    """
    topo = teg.topology
    landing = landings(teg.grid.links, used)
    kept: set[Send] = set()
    fed: set[tuple[int, int]] = set()
    spent: set[Send] = set()  # arrivals a no-copy switch already forwarded

    def feed(c: int, node: int, by_epoch: int) -> None:
        """Make sure ``node`` has c by ``by_epoch`` (GPU) or exactly then (switch)."""
        if node in teg.commodities[c].holders or (c, node) in fed:
            return
        if topo.is_switch(node):
            options = [s for land, s in landing[(c, node)] if land == by_epoch]
            if not topo.nodes[node].copy:
                options = [s for s in options if s not in spent]
            if not options:
                return
            chosen = options[0]
            spent.add(chosen)
        else:
            fed.add((c, node))
            options = [s for land, s in landing[(c, node)] if land <= by_epoch]
            if not options:
                return
            chosen = options[0]
        kept.add(chosen)
        feed(c, chosen[1], chosen[3])

    for com in teg.commodities:
        for d in sorted(com.destinations if targets is None else targets.get(com.id, ())):
            if landing[(com.id, d)]:
                feed(com.id, d, landing[(com.id, d)][0][0] if topo.is_switch(d) else teg.horizon)
    return sorted(kept, key=lambda s: (s[3], s[0], s[1], s[2]))


def chunk_hops(teg: TimeExpandedGraph, sends: Iterable[Send]) -> list[Hop]:
    """Copy-model sends as (collective chunk, src, dst, epoch)."""
    return [(teg.commodities[c].chunks[0], i, j, k) for c, i, j, k in sends]


def split_flows(teg: TimeExpandedGraph, flow: dict[Send, float], carry: dict[tuple[int, int, int], float],
                read: dict[tuple[int, int, int], float], posts: dict[int, frozenset[int]]) -> list[Hop]:
    """Whole-chunk paths from the LP of each source commodity.

    ``flow`` per send, ``carry[(c, n, k)]`` what GPU n keeps from epoch k to k+1, ``read[(c, d, k)]``
    what destination d takes in epoch k; ``posts``: chunk -> its post ranks.
    """
    def of(c, values):
        return {key[1:]: v for key, v in values.items() if key[0] == c and v > FLOW_EPS}

    by_commodity: dict[int, dict[Send, float]] = defaultdict(dict)
    for s, v in flow.items():
        if v > FLOW_EPS:
            by_commodity[s[0]][s] = v
    hops: list[Hop] = []
    for com in teg.commodities:
        paths = _FlowPaths(teg, com, by_commodity.get(com.id, {}), of(com.id, carry), of(com.id, read), posts)
        hops.extend(paths.hops())
    return hops


_STAY = "stay"


class _FlowPaths:
    """Widest-path decomposition of one source's flow over (node, epoch)."""

    def __init__(self, teg: TimeExpandedGraph, com: Commodity, flow: dict[Send, float],
                 carry: dict[tuple[int, int], float], read: dict[tuple[int, int], float],
                 posts: dict[int, frozenset[int]]) -> None:
        self.teg = teg
        self.com = com
        self.flow = dict(flow)
        self.carry = dict(carry)  # (node, k) -> kept from k to k+1
        self.read = dict(read)  # (destination, k) -> read off in epoch k
        self.posts = posts
        self.source = next(iter(com.holders))

    def hops(self) -> list[Hop]:
        out: list[Hop] = []
        for cid in self.com.chunks:
            for d in sorted(self.posts[cid] - self.com.holders):
                path, stays, end = self._widest_path(d, self.flow, self.carry, self.read)
                if not path and end is None:  # rounding used the flow up: any route, the simulator times it
                    every = {s: FLOW_EPS for s in self.teg.sends if s[0] == self.com.id}
                    path, stays, end = self._widest_path(d, every, _Unbounded(), _Unbounded())
                for s in path:
                    if s in self.flow:
                        self.flow[s] = max(0.0, self.flow[s] - 1.0)
                for key in stays:
                    if key in self.carry:
                        self.carry[key] = max(0.0, self.carry[key] - 1.0)
                if end in self.read:
                    self.read[end] = max(0.0, self.read[end] - 1.0)
                out.extend((cid, i, j, k) for _, i, j, k in path)
        return out

    def _widest_path(self, dest: int, flow, carry, read):
        """Dynamic programme in time order: width of the best path to each (node, epoch).

        (sends, stays (node, k) kept to k+1, end (dest, k)) of the widest source-to-dest path."""
        teg, topo, links = self.teg, self.teg.topology, self.teg.grid.links
        out_by: dict[tuple[int, int], list[Send]] = defaultdict(list)
        for s, v in flow.items():
            if v > 0:
                out_by[(s[1], s[3])].append(s)
        start = (self.source, 0)
        width: dict[tuple[int, int], float] = {start: math.inf}
        came: dict[tuple[int, int], Send | str | None] = {start: None}
        order = sorted(topo.nodes, key=lambda n: (not topo.is_switch(n), n))  # switches first within an epoch
        best: tuple[float, tuple[int, int]] | None = None
        for k in range(teg.horizon + 1):
            for n in order:
                here = (n, k)
                kept = min(width.get((n, k - 1), -1.0), carry.get((n, k - 1), 0.0))
                if not topo.is_switch(n) and kept > FLOW_EPS and kept > width.get(here, -1.0):
                    width[here], came[here] = kept, _STAY  # a GPU keeps what it holds
                if here not in width:
                    continue
                taken = min(width[here], read.get(here, 0.0))
                if n == dest and taken > FLOW_EPS and (best is None or taken > best[0] + FLOW_EPS):
                    best = (taken, here)
                for s in out_by.get(here, ()):
                    land = (s[2], k + links[(s[1], s[2])].offset)
                    value = min(width[here], flow[s])
                    if value > width.get(land, -1.0):
                        width[land], came[land] = value, s
        if best is None:
            return [], [], None
        path: list[Send] = []
        stays: list[tuple[int, int]] = []
        state = best[1]
        while came[state] is not None:
            step = came[state]
            if step == _STAY:
                state = (state[0], state[1] - 1)
                stays.append(state)
            else:
                path.append(step)
                state = (step[1], step[3])
        return path[::-1], stays, best[1]


class _Unbounded(dict):
    """Any amount may be kept or read (the fallback route ignores the LP's values)."""

    def get(self, key, default=None):
        return 1.0


def to_transfers(topology: Topology, grid: EpochGrid, hops: Iterable[Hop], op: str = "copy") -> list[Transfer]:
    """Untimed transfers ordered so every send follows the arrivals it needs.

    A GPU's send in epoch k has step k. A switch forwards in the epoch k the chunk reached it:
    step k + 0.5 when its receiver holds it a later epoch, k - 0.25 when the hop is free (the
    receiver holds it in epoch k and may send it on at step k).
    """
    transfers = []
    for chunk, i, j, k in hops:
        if topology.is_switch(i):
            step = k + 0.5 if grid.links[(i, j)].offset >= 1 else k - 0.25
        else:
            step = float(k)
        transfers.append(Transfer(chunk, i, j, None, None, op, step))
    transfers.sort(key=lambda t: (t.step, t.src, t.dst, t.chunk))
    return transfers
