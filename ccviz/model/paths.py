"""Equal-cost paths, chosen by load: spreading sends over every fastest route of a multi-path fabric.

A shortest-path tree sends everything from one source the same way: on a 4x4 leaf-spine, pairwise
AllToAll then crosses one spine (8 of 16 leaf-spine links busy, 48 chunks each). ``SpreadRoutes``
keeps the fastest route's time but chooses, hop by hop along the fastest-route graph, the link that
has carried the fewest bytes so far (ECMP made load-aware). A link already carrying the same chunk at
the same step is free (a multicast shares it). On a fabric with one fastest route per pair the routes
are those of ``ccviz.model.routing.Router``, whose next hop also wins every tie.
"""

from __future__ import annotations

import bisect
import math
from collections import defaultdict
from collections.abc import Callable

from ccviz.model.topology import Topology

REL_TOL = 1e-9


class SpreadRoutes:
    """Routes for one chunk size whose links are booked as they are handed out."""

    def __init__(self, topology: Topology, chunk_bytes: float) -> None:
        from ccviz.model.routing import router_for

        self.topology = topology
        self.chunk_bytes = chunk_bytes
        self.router = router_for(topology, chunk_bytes)
        self.load: dict[tuple[int, int], float] = defaultdict(float)  # bytes booked per link
        self.step_load: dict[tuple[int, int, float], float] = defaultdict(float)  # bytes per link and step
        self._carrying: set[tuple[int, int, int, int]] = set()  # (chunk, u, v, step) already booked
        self._from: dict[int, dict[int, float]] = {}
        self._to: dict[int, dict[int, float]] = {}
        self._weight = {key: topology.arrival_delay(*key, chunk_bytes) for key in topology.links}

    def _dist_from(self, src: int) -> dict[int, float]:
        if src not in self._from:
            from ccviz.model.routing import earliest_arrivals

            self._from[src] = earliest_arrivals(self.topology, {src: 0.0}, self._weight)
        return self._from[src]

    def _dist_to(self, dst: int) -> dict[int, float]:
        if dst not in self._to:
            from ccviz.model.routing import earliest_arrivals

            self._to[dst] = earliest_arrivals(self.topology, {dst: 0.0}, self._weight, reverse=True)
        return self._to[dst]

    def route(self, src: int, dst: int, chunk: int = -1, step: float = 0.0) -> list[int] | None:
        """A fastest route src..dst through the least-loaded links, booked; None when dst is unreachable."""
        default = self.router.route(src, dst)
        if default is None or src == dst:
            return default
        total = self._dist_to(dst)[src]
        there = self._dist_from(src)
        to_dst = self._dist_to(dst)
        preferred = dict(zip(default, default[1:], strict=False))
        route = [src]
        seen = {src}
        u = src
        while u != dst:
            best = None
            for link in self.topology.out_links[u]:
                v = link.dst
                if v in seen:
                    continue
                cost = there[u] + self._weight[(u, v)] + to_dst[v]
                if not math.isfinite(cost) or cost > total * (1 + REL_TOL) + 1e-15:
                    continue
                key = (0 if (chunk, u, v, step + len(route) - 1) in self._carrying else 1,
                       self.step_load[(u, v, step + len(route) - 1)], self.load[(u, v)],
                       0 if preferred.get(u) == v else 1, v)
                if best is None or key < best[0]:
                    best = (key, v)
            if best is None:  # cannot happen on a consistent distance table; keep the router's route
                route = default
                break
            u = best[1]
            route.append(u)
            seen.add(u)
        for h, (a, b) in enumerate(zip(route, route[1:], strict=False)):
            key = (chunk, a, b, step + h)
            if key not in self._carrying:
                self._carrying.add(key)
                self.load[(a, b)] += self.chunk_bytes
                self.step_load[(a, b, step + h)] += self.chunk_bytes
        return route


MAX_PATHS = 32  # fastest routes tried per send (a 4-ary fat tree has 4 between pods, a leaf-spine one per spine)


TOUCH_S = 1e-15  # booked intervals this close on a lane are one busy stretch (no send fits between them)


class Calendar:
    """Busy intervals of every lane of every link; a send may take any gap it fits in (backfilling)."""

    def __init__(self, topology: Topology) -> None:
        self.busy: dict[tuple[int, int], list[list[tuple[float, float]]]] = {
            key: [[] for _ in range(max(1, link.lanes))] for key, link in topology.links.items()}

    def _lane_conflict(self, lane: list[tuple[float, float]], start: float, end: float) -> float | None:
        """The end of the first interval overlapping [start, end) on a lane, None when it is free."""
        k = bisect.bisect_left(lane, (start, start))
        for a, b in lane[max(0, k - 1):k + 1]:
            if a < end - 1e-15 and start < b - 1e-15:
                return b
        return None

    def lane_free(self, key: tuple[int, int], start: float, end: float) -> tuple[int | None, float]:
        """A lane free over [start, end) (None and the earliest end of a conflict when there is none)."""
        soonest = math.inf
        for n, lane in enumerate(self.busy[key]):
            conflict = self._lane_conflict(lane, start, end)
            if conflict is None:
                return n, start
            soonest = min(soonest, conflict)
        return None, soonest

    def book(self, key: tuple[int, int], start: float, end: float) -> None:
        """Book [start, end) on a free lane (lane 0 when none is). Intervals touching on a lane are kept as one,
        so a gap search steps over a busy stretch at once (the same conflicts: a send overlaps the union
        exactly where it overlaps a part), not piece by piece."""
        lane, _ = self.lane_free(key, start, end)
        intervals = self.busy[key][lane if lane is not None else 0]
        k = bisect.bisect_left(intervals, (start, start))
        if k > 0 and intervals[k - 1][1] >= start - TOUCH_S:
            k -= 1
            start, end = intervals[k][0], max(end, intervals[k][1])
            del intervals[k]
        while k < len(intervals) and intervals[k][0] <= end + TOUCH_S:
            end = max(end, intervals[k][1])
            del intervals[k]
        intervals.insert(k, (start, end))


class PlannedRoutes(SpreadRoutes):
    """Routes chosen by *when* they deliver: each send takes, among the fastest routes, the one whose links
    let it land first given the sends planned before it (first come, first served per link; a hop through
    a bufferless switch leaves on arrival, so such hops are booked together, as the simulator times them).

    ``planned`` returns every hop's start: the caller writes them as the schedule's times (the simulator
    judges them). A send may fill a gap its link left earlier. Meant for independent sends (direct
    AllToAll): a send is ready at the time given, its source holding it.
    """

    def __init__(self, topology: Topology, chunk_bytes: float) -> None:
        from ccviz.model.physics import link_costs

        super().__init__(topology, chunk_bytes)
        self.costs = link_costs(topology, chunk_bytes)
        self.calendar = Calendar(topology)
        self.bufferless = {n for n, node in topology.nodes.items() if node.is_switch and not node.buffer}

    def fastest_routes(self, src: int, dst: int) -> list[list[int]]:
        """Up to ``MAX_PATHS`` fastest routes src..dst (the router's first), loop-free."""
        default = self.router.route(src, dst)
        if default is None:
            return []
        total = self._dist_to(dst)[src]
        there, to_dst = self._dist_from(src), self._dist_to(dst)
        found: list[list[int]] = [default]
        stack = [[src]]
        while stack and len(found) < MAX_PATHS:
            path = stack.pop()
            u = path[-1]
            if u == dst:
                if path != default:
                    found.append(path)
                continue
            for link in reversed(self.topology.out_links[u]):
                v = link.dst
                cost = there[u] + self._weight[(u, v)] + to_dst[v]
                if v not in path and math.isfinite(cost) and cost <= total * (1 + REL_TOL) + 1e-15:
                    stack.append([*path, v])
        return found

    def _timing(self, route: list[int], ready: float) -> list[float]:
        """Each hop's start on this route from ``ready``: the earliest gaps that fit (not booked)."""
        starts: list[float] = []
        hops = list(zip(route, route[1:], strict=False))
        i = 0
        t = ready
        while i < len(hops):
            j = i  # hops i..j cross bufferless switches in one go
            while j + 1 < len(hops) and hops[j][1] in self.bufferless:
                j += 1
            offsets, offset = [], 0.0
            for key in hops[i:j + 1]:
                offsets.append(offset)
                offset += self.costs[key].delay
            first = t
            moved = True
            while moved:
                moved = False
                for key, off in zip(hops[i:j + 1], offsets, strict=True):
                    lane, when = self.calendar.lane_free(key, first + off, first + off + self.costs[key].busy)
                    if lane is None:
                        first, moved = when - off, True
                        break
            starts.extend(first + off for off in offsets)
            t = first + offset
            i = j + 1
        return starts

    def planned(self, src: int, dst: int, ready: float = 0.0) -> tuple[list[int], list[float]] | None:
        """The route landing first (ties: fewer bytes booked on it, then the router's) and its hops' starts,
        booked; None when dst is unreachable."""
        best = None
        for k, route in enumerate(self.fastest_routes(src, dst)):
            starts = self._timing(route, ready)
            hops = list(zip(route, route[1:], strict=False))
            lands = starts[-1] + self.costs[hops[-1]].delay
            key = (lands, max(self.load[h] for h in hops), k)
            if best is None or key < best[0]:
                best = (key, route, starts)
        if best is None:
            return None
        _, route, starts = best
        for (a, b), s in zip(zip(route, route[1:], strict=False), starts, strict=True):
            self.calendar.book((a, b), s, s + self.costs[(a, b)].busy)
            self.load[(a, b)] += self.chunk_bytes
        return route, starts


Send = tuple[int, int, int]  # (chunk, src, dst)
Planned = list[tuple[int, list[int], list[float]]]  # per send in the given order: (its index, route, hop starts)
WINDOW = 8  # destinations a source weighs at once in the earliest-free-source order
WINDOW_GPUS = 32  # ... tried up to this many GPUs (it weighs WINDOW x routes per send)


GIVE_UP_EVERY = 256  # sends planned between two looks at ``give_up``


class PlanningEnded(Exception):  # noqa: N818 (not an error: the caller's time limit or Stop ended the planning)
    """The first order was not planned in full when ``give_up`` said why (``'time_limit'`` or ``'stopped'``)."""

    def __init__(self, reason: str, planned: int, total: int) -> None:
        super().__init__(reason)
        self.reason, self.planned, self.total = reason, planned, total


def plan_sends(topology: Topology, chunk_bytes: float, sends: list[Send], ranks: list[int],
               give_up: Callable[[], str | None] | None = None) -> tuple[Planned, str, str | None]:
    """Independent copies planned in a few orders, keeping the one that lands last earliest.

    Orders: pairwise (as given: each source's k-th send to the rank k places on), offsets alternating
    (k, N-k, ...), and (up to ``WINDOW_GPUS`` GPUs) the source whose first link frees first sending to
    whichever of its next ``WINDOW`` destinations lands first. Returns the plan, the order's name, and why
    the other orders were not tried (``give_up``'s reason, asked every ``GIVE_UP_EVERY`` sends: two NVL72
    racks' AllToAll planned 162 s past a 60 s limit), else None. ``PlanningEnded`` when not even the first
    order was planned in full.
    """
    position = {r: i for i, r in enumerate(ranks)}
    n = len(ranks)

    def offset(s: Send) -> int:
        return (position[s[2]] - position[s[1]]) % n

    alternating = {k: i for i, k in enumerate(dict.fromkeys(x for k in range(1, n // 2 + 1) for x in (k, n - k)))}
    orders = {
        "pairwise": list(range(len(sends))),
        "alternating offsets": sorted(range(len(sends)), key=lambda i: (alternating.get(offset(sends[i]), n),
                                                                        position[sends[i][1]])),
    }
    best: tuple[float, Planned, str] | None = None
    ended = None
    for name, order in orders.items():
        planner = PlannedRoutes(topology, chunk_bytes)
        plan: Planned = []
        for k, i in enumerate(order):
            if give_up is not None and k % GIVE_UP_EVERY == GIVE_UP_EVERY - 1 and (ended := give_up()):
                break
            plan.append((i, *planner.planned(sends[i][1], sends[i][2])))
        if ended:
            if best is None:
                raise PlanningEnded(ended, len(plan), len(sends))
            break
        best = _better(best, plan, name, planner)
    if n <= WINDOW_GPUS and not ended:
        planner = PlannedRoutes(topology, chunk_bytes)
        best = _better(best, _earliest_source_first(planner, sends), "earliest free source first", planner)
    assert best is not None
    return best[1], best[2], ended


def _better(best, plan: Planned, name: str, planner: PlannedRoutes):
    last = max((starts[-1] + planner.costs[(route[-2], route[-1])].delay for _, route, starts in plan), default=0.0)
    return best if best is not None and best[0] <= last else (last, plan, name)


def _earliest_source_first(planner: PlannedRoutes, sends: list[Send]) -> Planned:
    import heapq

    queue: dict[int, list[int]] = defaultdict(list)
    for i, (_, src, _) in enumerate(sends):
        queue[src].append(i)
    heap = [(0.0, src) for src in queue]
    heapq.heapify(heap)
    plan: Planned = []
    while heap:
        _, src = heapq.heappop(heap)
        choice = None
        for i in queue[src][:WINDOW]:
            for route in planner.fastest_routes(src, sends[i][2]):
                starts = planner._timing(route, 0.0)
                key = (starts[-1] + planner.costs[(route[-2], route[-1])].delay, starts[0])
                if choice is None or key < choice[0]:
                    choice = (key, i, route, starts)
        assert choice is not None
        _, i, route, starts = choice
        for (a, b), s in zip(zip(route, route[1:], strict=False), starts, strict=True):
            planner.calendar.book((a, b), s, s + planner.costs[(a, b)].busy)
            planner.load[(a, b)] += planner.chunk_bytes
        plan.append((i, route, starts))
        queue[src].remove(i)
        if queue[src]:
            heapq.heappush(heap, (starts[0] + planner.costs[(route[0], route[1])].busy, src))
    return plan
