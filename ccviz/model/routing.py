"""Shortest routes, ring orders, and laying logical sends onto physical links.

Textbook algorithms speak of "rank a sends chunk c to rank b at step s". On a
real fabric that send follows a route (through switches, sometimes through
other GPUs). ``Layout`` turns logical sends into per-hop ``Transfer`` rows of
an *untimed* schedule: hop h of a send at logical step s gets step
``s * scale + h`` so each hop waits for the previous one (ARCHITECTURE.md,
untimed rule), and only the last hop carries the logical op.

Why relays need care: the simulator's ``copy`` overwrites the receiver's
value, so a partial sum crossing a GPU that still holds its own partial of
the chunk (rhd partners that are not neighbours) would destroy it. Every hop
of a partial sum but the last is therefore a ``relay`` (the receiver parks
the value and the next transfer carries it on, ``ccviz.judge.simulate``), and only
the last hop adds it into the destination.
"""

from __future__ import annotations

import heapq
import math
import weakref
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence

from ccviz.model.topology import Topology

RelayFilter = Callable[[int], bool]


def earliest_arrivals(topology: Topology, starts: Mapping[int, float], weight: Mapping[tuple[int, int], float],
                      reverse: bool = False, through: Callable[[int], bool] | None = None,
                      parents: dict[int, int] | None = None) -> dict[int, float]:
    """Earliest arrival at every node from the start nodes (value = start time), ignoring capacity.

    ``weight[(u, v)]`` is the cost of link u->v (seconds, epochs, ...); with ``reverse`` the result is the
    shortest time from every node *to* the starts. ``through`` (optional) says which nodes a path may
    cross: others are reached but not left (MTEG's chains cross only switches). Unreachable nodes get
    ``math.inf``. ``parents`` (optional, filled in) gets, for every node reached from another, its
    neighbour on a fastest path (ties to the path of fewest hops, then to the first found), so the paths
    themselves can be walked back (TACOS's routes through switches). Lower bounds, TE-CCL's reachability
    pruning, MTEG's switch chains and TACOS's switched routes stand on this one search.
    """
    dist = dict.fromkeys(topology.nodes, math.inf)
    heap = [(t, n) for n, t in starts.items()]
    for t, n in heap:
        dist[n] = min(dist[n], t)
    heapq.heapify(heap)
    neighbours = topology.in_links if reverse else topology.out_links
    settled: set[int] = set()
    hops = dict.fromkeys(starts, 0)
    while heap:
        t, n = heapq.heappop(heap)
        if t > dist[n] or (through is not None and n not in starts and not through(n)):
            continue
        if parents is not None:
            if n in settled:
                continue
            settled.add(n)
        for link in neighbours[n]:
            other = link.src if reverse else link.dst
            arrive = t + weight[(link.src, link.dst)]
            if arrive < dist[other]:
                dist[other] = arrive
                heapq.heappush(heap, (arrive, other))
                if parents is not None:
                    parents[other], hops[other] = n, hops[n] + 1
            elif parents is not None and arrive == dist[other] < math.inf and other not in settled \
                    and hops[n] + 1 < hops[other]:
                parents[other], hops[other] = n, hops[n] + 1
    return dist


class Router:
    """Shortest routes for one chunk size: by alpha + bytes/bandwidth time, tie-broken by hops.

    Routes may pass through switches; GPUs are allowed as relays unless a
    ``relay_ok`` filter says otherwise. Unfiltered shortest-path trees are
    cached per source, so all routes from one source form a tree (their
    prefixes coincide, which lets a multicast share links).
    """

    def __init__(self, topology: Topology, chunk_bytes: float) -> None:
        self.topology = topology
        self.chunk_bytes = chunk_bytes
        self._delay = {key: topology.arrival_delay(*key, chunk_bytes) for key in topology.links}
        self._trees: dict[int, dict[int, int | None]] = {}
        self._routes: dict[tuple[int, int], list[int] | None] = {}
        self._queries: dict[int, int] = defaultdict(int)

    def delay(self, src: int, dst: int) -> float:
        """Seconds from sending one chunk on src->dst to its arrival."""
        return self._delay[(src, dst)]

    def route_time(self, route: list[int]) -> float:
        return sum(self._delay[(u, v)] for u, v in zip(route, route[1:], strict=False))

    def route(self, src: int, dst: int, relay_ok: RelayFilter | None = None) -> list[int] | None:
        """Node list src..dst of a shortest route, or None when the filter leaves no route."""
        if src == dst:
            return [src]
        if relay_ok is None:
            key = (src, dst)
            if key not in self._routes:
                self._routes[key] = _walk_back(self._tree_towards(src, dst), src, dst)
            return self._routes[key]
        return _walk_back(self._shortest_tree(src, relay_ok, dst), src, dst)

    def _tree_towards(self, src: int, dst: int) -> dict[int, int | None]:
        """A search stopped at dst (same path as the full tree, since settling order is deterministic);
        sources asked for many destinations get their full shortest-path tree once."""
        if src in self._trees:
            return self._trees[src]
        self._queries[src] += 1
        if self._queries[src] > 4:
            self._trees[src] = self._shortest_tree(src, None, None)
            return self._trees[src]
        return self._shortest_tree(src, None, dst)

    def _shortest_tree(self, src: int, relay_ok: RelayFilter | None, target: int | None) -> dict[int, int | None]:
        """Dijkstra on (time, hops); GPUs other than src/target relay only if ``relay_ok`` allows."""
        topo = self.topology
        best: dict[int, tuple[float, int]] = {src: (0.0, 0)}
        parent: dict[int, int | None] = {src: None}
        heap = [(0.0, 0, src)]
        done: set[int] = set()
        while heap:
            t, hops, u = heapq.heappop(heap)
            if u in done:
                continue
            done.add(u)
            if u == target:
                break
            if u != src and not topo.is_switch(u) and relay_ok is not None and not relay_ok(u):
                continue  # this GPU may be reached but not relayed through
            for link in topo.out_links[u]:
                v = link.dst
                cand = (t + self._delay[(u, v)], hops + 1)
                if v not in best or cand < best[v]:
                    best[v] = cand
                    parent[v] = u
                    heapq.heappush(heap, (cand[0], cand[1], v))
        return parent


def _walk_back(parent: dict[int, int | None], src: int, dst: int) -> list[int] | None:
    if dst not in parent:
        return None
    route = [dst]
    while route[-1] != src:
        route.append(parent[route[-1]])  # type: ignore[arg-type]
    return route[::-1]


_ROUTERS: weakref.WeakKeyDictionary[Topology, dict[float, Router]] = weakref.WeakKeyDictionary()


def router_for(topology: Topology, chunk_bytes: float) -> Router:
    """The cached router of a topology for one chunk size."""
    per_size = _ROUTERS.setdefault(topology, {})
    if chunk_bytes not in per_size:
        per_size[chunk_bytes] = Router(topology, chunk_bytes)
    return per_size[chunk_bytes]


# ------------------------------------------------------------------ ring orders
def neighbour_gpus(topology: Topology, chunk_bytes: float = 1.0) -> dict[int, dict[int, float]]:
    """GPU -> {GPU reachable by a direct link or through switches only: route time}."""
    router = router_for(topology, chunk_bytes)
    out: dict[int, dict[int, float]] = {}
    for g in topology.gpus:
        tree = router._shortest_tree(g, lambda _gpu: False, None)
        out[g] = {
            h: router.route_time(_walk_back(tree, g, h))  # type: ignore[arg-type]
            for h in tree if h != g and not topology.is_switch(h)
        }
    return out


def ring_order(topology: Topology, chunk_bytes: float = 1.0, budget: int = 20000,
               group: Sequence[int] | None = None) -> tuple[list[int], bool]:
    """A cyclic order of all GPUs, each next GPU a physical neighbour when such a cycle is found cheaply.

    Depth-first search preferring the fastest neighbour, then the one with the
    fewest unvisited neighbours (Warnsdorff), within ``budget`` expansions.
    Returns (order, physical); when no cycle is found the order is rank order
    and ``physical`` is False (consecutive ranks may then need relays).

    ``group`` (a process group) orders only its GPUs: neighbours are members reached without crossing
    another GPU; without such a cycle, the members in order of their shortest routes to each other (the
    ring is then laid over those routes, relayed by GPUs outside the group where they lie on them).
    """
    gpus = topology.gpus if group is None else list(group)
    if len(gpus) > 2048:
        return list(gpus), False
    adj = _group_neighbours(topology, chunk_bytes, gpus, group is not None)
    found = _hamiltonian_cycle(gpus, adj, budget)
    if found or group is None:
        return (found, True) if found else (list(gpus), False)
    closest = _hamiltonian_cycle(gpus, _route_times(topology, chunk_bytes, gpus), budget)
    return closest or list(gpus), False


def _group_neighbours(topology: Topology, chunk_bytes: float, gpus: Sequence[int],
                      is_group: bool) -> dict[int, dict[int, float]]:
    """``neighbour_gpus`` cut down to a group's members (all GPUs when ``is_group`` is False)."""
    adj = neighbour_gpus(topology, chunk_bytes)
    if not is_group:
        return adj
    members = set(gpus)
    return {g: {h: t for h, t in adj[g].items() if h in members} for g in gpus}


def _route_times(topology: Topology, chunk_bytes: float, gpus: Sequence[int]) -> dict[int, dict[int, float]]:
    """Every member to every other member: the time of the shortest route (any node may relay)."""
    router = router_for(topology, chunk_bytes)
    out: dict[int, dict[int, float]] = {}
    for g in gpus:
        out[g] = {}
        for h in gpus:
            route = router.route(g, h) if h != g else None
            if route is not None:
                out[g][h] = router.route_time(route)
    return out


def reverse_ring_order(topology: Topology, order: list[int], chunk_bytes: float = 1.0,
                       budget: int = 20000) -> tuple[list[int], bool]:
    """A second cycle for the opposite direction: the forward cycle reversed when its links exist
    both ways, else a cycle that prefers links the forward cycle leaves idle."""
    backward = order[:1] + order[:0:-1]
    group = len(order) != topology.n_gpus
    adj = _group_neighbours(topology, chunk_bytes, order, group) if len(order) <= 2048 else {}
    if adj and all(b in adj[a] for a, b in zip(backward, backward[1:] + backward[:1], strict=True)):
        return backward, True
    if not any(adj.values()):
        return backward, False
    used = set(zip(order, order[1:] + order[:1], strict=True))
    penalty = 1.0 + 10 * max(t for outs in adj.values() for t in outs.values())
    spare = {u: {v: t + (penalty if (u, v) in used else 0.0) for v, t in outs.items()} for u, outs in adj.items()}
    found = _hamiltonian_cycle(order if group else topology.gpus, spare, budget)
    return (found, True) if found else (backward, False)


def _hamiltonian_cycle(gpus: list[int], adj: dict[int, dict[int, float]], budget: int) -> list[int] | None:
    """Budgeted depth-first search for a directed cycle through every GPU.

    Candidates: fastest link first, then GPUs that could close the cycle last
    (so the way home stays open), then fewest onward options (Warnsdorff).
    Branches that strand an unvisited GPU (no unvisited way into it) are cut.
    """
    start = gpus[0]
    n = len(gpus)
    into: dict[int, set[int]] = {g: set() for g in gpus}
    for u, outs in adj.items():
        for v in outs:
            into[v].add(u)
    path = [start]
    on_path = {start}

    def candidates(u: int) -> list[int]:
        free = [v for v in adj[u] if v not in on_path]
        return sorted(free, key=lambda v: (adj[u][v], sum(w not in on_path for w in adj[v]), start in adj[v], v))

    def strands_someone(u: int) -> bool:
        if n > 128 or len(path) == n:
            return False
        return any(not any(p == u or p not in on_path for p in into[w]) for w in gpus if w not in on_path)

    stack = [iter(candidates(start))]
    expansions = 0
    while stack:
        if len(path) == n and start in adj[path[-1]]:
            return path
        nxt = next(stack[-1], None) if len(path) < n else None
        if nxt is None:
            stack.pop()
            on_path.discard(path.pop())
            continue
        expansions += 1
        if expansions > budget:
            return None
        path.append(nxt)
        on_path.add(nxt)
        if strands_someone(nxt):
            on_path.discard(path.pop())
            continue
        stack.append(iter(candidates(nxt)))
    return None
