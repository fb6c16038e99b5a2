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
the value and the next transfer carries it on, ``ccviz.simulate``), and only
the last hop adds it into the destination.
"""

from __future__ import annotations

import heapq
import math
import weakref
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple

from ccviz.collectives import Collective
from ccviz.errors import CcvizError
from ccviz.schedule import Op, Transfer
from ccviz.topology import Topology

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


# ---------------------------------------------------------------------- layout
class LogicalSend(NamedTuple):
    """Rank ``src`` sends ``chunk`` to rank ``dst`` at logical ``step``; ``reduce`` adds a partial."""

    chunk: int
    src: int
    dst: int
    step: int
    op: Op = "copy"


class Layout:
    """Collects logical sends and lays them on shortest routes as untimed per-hop transfers.

    A ``copy`` of a reducing chunk is taken to carry a finished (fully reduced)
    value; partial sums always travel with ``op="reduce"``.
    """

    def __init__(self, topology: Topology, collective: Collective) -> None:
        self.topology = topology
        self.collective = collective
        self.router = router_for(topology, collective.chunk_bytes)
        self.sends: list[LogicalSend] = []
        self.rounds: list[int] = []  # per emitted transfer: the logical step of the send it belongs to
        self.labels: dict[int, str] = {}  # logical step -> what the algorithm does in it
        # independent copies (direct AllToAll): each send's route and hop order planned by when it lands
        # (``ccviz.model.paths.PlannedRoutes``) instead of hop numbers
        self.planned = False

    def send(self, chunk: int, src: int, dst: int, step: int, op: Op = "copy") -> None:
        if src != dst:
            self.sends.append(LogicalSend(chunk, src, dst, step, op))

    def label(self, step: int, text: str) -> None:
        """Name what the algorithm does at a logical step ("reduce-scatter, distance 2")."""
        self.labels.setdefault(step, text)

    def numbered_rounds(self) -> tuple[list[int], list[str]]:
        """After ``transfers()``: each transfer's 1-based round (used steps renumbered densely) and the
        label of every round (the algorithm's, else a phase name read from the sends)."""
        steps = sorted(set(self.rounds))
        number = {step: k + 1 for k, step in enumerate(steps)}
        ops = defaultdict(set)
        for s in self.sends:
            ops[s.step].add(s.op)
        labels = [self.labels.get(step) or self._phase(ops[step]) for step in steps]
        return [number[step] for step in self.rounds], labels

    def _phase(self, ops: set[str]) -> str:
        name = self.collective.name
        if "reduce" in ops:
            return "reduce" if name == "reduce" else "reduce-scatter"
        return {"allreduce": "all-gather", "reducescatter": "reduce-scatter"}.get(name, name.replace("all", "all-"))

    def hint(self) -> str:
        return (f"{self.collective.name} on {self.topology.name!r} needs another algorithm "
                "(ring over a cycle of neighbouring GPUs is the most widely applicable)")

    def routes(self) -> list[list[int]]:
        """Step 1: every send takes a fastest route, spread over equal-cost ones by load in step order
        (``ccviz.model.paths``); a partial sum crosses other GPUs as a relay."""
        from ccviz.model.paths import SpreadRoutes

        spread = SpreadRoutes(self.topology, self.collective.chunk_bytes)
        scale = self._hop_scale()
        routes: list[list[int]] = [[] for _ in self.sends]
        for i in sorted(range(len(self.sends)), key=lambda i: self.sends[i].step):
            s = self.sends[i]
            route = spread.route(s.src, s.dst, s.chunk, float(s.step * scale))
            if route is None:
                raise CcvizError(f"topology: no route from GPU {s.src} to GPU {s.dst}: {self.hint()}", "topology")
            routes[i] = route
        return routes

    def _hop_scale(self) -> int:
        """The longest fastest route's hop count: hop h of a send at step s goes at step s * scale + h."""
        route_of = self.router.route
        return max((len(r) - 1 for s in self.sends if (r := route_of(s.src, s.dst)) is not None), default=1)

    def transfers(self) -> list[Transfer]:
        """Step 2: expand routes into per-hop transfers with increasing steps; shared copy hops are sent once."""
        if self.planned:
            return self._planned_transfers()
        routes = self.routes()
        scale = max((len(r) - 1 for r in routes), default=1)
        plain_switches = {n.id for n in self.topology.nodes.values() if n.is_switch and not n.copy}
        emitted: set[tuple[int, int, int, int]] = set()
        out: list[Transfer] = []
        order = sorted(range(len(self.sends)), key=lambda i: self.sends[i].step)
        for i in order:
            chunk, _, _, logical_step, logical_op = self.sends[i]
            route = routes[i]
            last = len(route) - 2
            base = logical_step * scale
            for h in range(last + 1):
                u, v = route[h], route[h + 1]
                key = (chunk, u, v, base + h)
                if key in emitted and logical_op == "copy" and v not in plain_switches:
                    continue  # a multicast already carries this chunk over this hop at this step
                emitted.add(key)
                hop_op = logical_op if h == last else "relay" if logical_op == "reduce" else "copy"
                out.append(Transfer(chunk, u, v, None, None, hop_op, float(base + h)))
                self.rounds.append(logical_step)
        return out

    def _planned_transfers(self) -> list[Transfer]:
        """Every send (a plain copy from a GPU that holds it) on the fastest route that lands first, timed
        (``ccviz.model.paths.plan_sends``): a *timed* schedule, which the simulator verifies as it stands."""
        from ccviz.model.paths import plan_sends

        sends = sorted(self.sends, key=lambda s: s.step)
        if any(s.op != "copy" for s in sends):
            raise CcvizError("algorithm: a planned layout carries plain copies only", "algorithm")
        for s in sends:
            if self.router.route(s.src, s.dst) is None:
                raise CcvizError(f"topology: no route from GPU {s.src} to GPU {s.dst}: {self.hint()}", "topology")
        plan, self.order = plan_sends(self.topology, self.collective.chunk_bytes,
                                      [(s.chunk, s.src, s.dst) for s in sends], list(self.collective.ranks))
        out: list[Transfer] = []
        for i, route, starts in plan:
            s = sends[i]
            for (u, v), start in zip(zip(route, route[1:], strict=False), starts, strict=True):
                end = start + self.topology.arrival_delay(u, v, self.collective.chunk_bytes)
                out.append(Transfer(s.chunk, u, v, start, end, "copy", float(s.step)))
                self.rounds.append(s.step)
        return out
