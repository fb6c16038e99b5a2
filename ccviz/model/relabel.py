"""Fabric symmetries that carry one process group onto another, and a schedule carried along.

Groups of one kind are usually images of each other under a symmetry of the fabric (box i <-> box j),
so one synthesized schedule, relabeled, serves them all. ``group_automorphism`` looks for a permutation
of the fabric's nodes that maps every link to a link of the same bandwidth, alpha and lanes, every node
to one of the same kind and abilities, and the first group's i-th rank to the second group's i-th rank
(so chunk ids keep their meaning). ``relabel_schedule`` carries a schedule by it. A relabeled schedule
is a schedule like any other: the caller has the simulator judge it, and synthesizes the group itself
where no map is found or the judge refuses the map's schedule.

The search is color refinement with backtracking (the idea behind nauty, at a small scale): both sides
start colored by node kind and group position, colors are refined by the colors of each node's links
until stable, and a class of several nodes is split by trying each pairing in turn. A budget bounds
the search on fabrics where it would branch widely; running out only means the group is synthesized.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import replace

from ccviz.model.collectives import Chunk, Collective
from ccviz.model.schedule import Schedule, Transfer
from ccviz.model.topology import Topology

SEARCH_BUDGET = 200  # pairings tried before the search gives up (the caller then synthesizes)

Coloring = dict[int, int]


class _Fabric:
    """The fabric as colored adjacency: each node's in- and out-links as (link kind, neighbour)."""

    def __init__(self, topology: Topology) -> None:
        self.topology = topology
        self.nodes = sorted(topology.nodes)
        node_kinds: dict[tuple, int] = {}
        self.node_kind = {n: node_kinds.setdefault(_node_key(topology, n), len(node_kinds)) for n in self.nodes}
        link_kinds: dict[tuple, int] = {}
        self.link_kind: dict[tuple[int, int], int] = {}
        self.out: dict[int, list[tuple[int, int]]] = {n: [] for n in self.nodes}
        self.into: dict[int, list[tuple[int, int]]] = {n: [] for n in self.nodes}
        for (u, v), link in topology.links.items():
            kind = link_kinds.setdefault((link.bandwidth_GBps, link.alpha_us, link.lanes), len(link_kinds))
            self.link_kind[(u, v)] = kind
            self.out[u].append((kind, v))
            self.into[v].append((kind, u))

    def initial(self, ranks: Sequence[int]) -> dict[int, tuple[int, int]]:
        position = {r: i for i, r in enumerate(ranks)}
        return {n: (self.node_kind[n], position.get(n, -1)) for n in self.nodes}

    def signature(self, colors: Mapping[int, int], n: int) -> tuple:
        return (colors[n], tuple(sorted((k, colors[v]) for k, v in self.out[n])),
                tuple(sorted((k, colors[u]) for k, u in self.into[n])))

    def is_automorphism(self, mapping: Mapping[int, int]) -> bool:
        if sorted(mapping.values()) != self.nodes:
            return False
        return all(self.node_kind[n] == self.node_kind[mapping[n]] for n in self.nodes) and all(
            self.link_kind.get((mapping[u], mapping[v])) == kind for (u, v), kind in self.link_kind.items())


def _node_key(topology: Topology, n: int) -> tuple:
    node = topology.nodes[n]
    return (node.kind, node.copy, node.buffer, node.reduce, node.reduce_GBps)


def _renumber(left: Mapping[int, object], right: Mapping[int, object]) -> tuple[Coloring, Coloring] | None:
    """Both sides' keys as small integers named jointly; None when a color's class sizes differ."""
    names = {key: i for i, key in enumerate(sorted(set(left.values()) | set(right.values())))}
    a = {n: names[k] for n, k in left.items()}
    b = {n: names[k] for n, k in right.items()}
    return (a, b) if Counter(a.values()) == Counter(b.values()) else None


def _refine(fabric: _Fabric, a: Coloring, b: Coloring) -> tuple[Coloring, Coloring] | None:
    """Split colors by the colors of each node's links until nothing splits (on both sides alike)."""
    while True:
        count = len(set(a.values()))
        pair = _renumber({n: fabric.signature(a, n) for n in a}, {n: fabric.signature(b, n) for n in b})
        if pair is None:
            return None
        a, b = pair
        if len(set(a.values())) == count:
            return a, b


def _search(fabric: _Fabric, a: Coloring, b: Coloring, budget: list[int]) -> dict[int, int] | None:
    refined = _refine(fabric, a, b)
    if refined is None:
        return None
    a, b = refined
    classes = Counter(a.values())
    open_classes = [c for c, size in classes.items() if size > 1]
    if not open_classes:
        where = {color: n for n, color in b.items()}
        mapping = {n: where[color] for n, color in a.items()}
        return mapping if fabric.is_automorphism(mapping) else None
    color = min(open_classes, key=lambda c: (classes[c], c))
    x = min(n for n, c in a.items() if c == color)
    fresh = max(classes) + 1
    for y in sorted(n for n, c in b.items() if c == color):
        if budget[0] <= 0:
            return None
        budget[0] -= 1
        found = _search(fabric, {**a, x: fresh}, {**b, y: fresh}, budget)
        if found is not None:
            return found
    return None


def group_automorphism(topology: Topology, source: Sequence[int], target: Sequence[int],
                       budget: int = SEARCH_BUDGET) -> dict[int, int] | None:
    """A node permutation of ``topology`` preserving every node's kind and abilities and every link's
    bandwidth, alpha and lanes, taking ``source[i]`` to ``target[i]``; None if none is found within
    ``budget`` pairings (there may be none)."""
    if len(source) != len(target):
        return None
    fabric = _Fabric(topology)
    start = _renumber(fabric.initial(source), fabric.initial(target))
    if start is None:
        return None
    return _search(fabric, start[0], start[1], [budget])


def relabel_collective(collective: Collective, mapping: Mapping[int, int]) -> Collective:
    """The collective with every rank renamed by ``mapping`` (chunk ids, sizes and order unchanged)."""
    def ranks(nodes: frozenset[int]) -> frozenset[int]:
        return frozenset(mapping[n] for n in nodes)

    chunks = tuple(Chunk(c.id, ranks(c.pre), ranks(c.post), c.reduce,
                         None if c.source is None else mapping[c.source], c.index) for c in collective.chunks)
    return replace(collective, ranks=tuple(mapping[r] for r in collective.ranks), chunks=chunks,
                   root=None if collective.root is None else mapping[collective.root],
                   dest=None if collective.dest is None else mapping[collective.dest], meta=dict(collective.meta))


def relabel_schedule(schedule: Schedule, mapping: Mapping[int, int], note: str = "") -> Schedule:
    """The schedule carried by a fabric symmetry: every transfer's ends renamed, times and steps kept
    (the symmetry preserves every link's timing). Judge it like any other schedule."""
    transfers = [Transfer(t.chunk, mapping[t.src], mapping[t.dst], t.start_s, t.end_s, t.op, t.step)
                 for t in schedule.transfers]
    notes = list(schedule.notes) + ([note] if note else [])
    return replace(schedule, collective=relabel_collective(schedule.collective, mapping), transfers=transfers,
                   notes=notes, options=dict(schedule.options))
