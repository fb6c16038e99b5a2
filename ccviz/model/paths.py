"""Equal-cost paths, chosen by load: spreading sends over every fastest route of a multi-path fabric.

A shortest-path tree sends everything from one source the same way: on a 4x4 leaf-spine, pairwise
AllToAll then crosses one spine (8 of 16 leaf-spine links busy, 48 chunks each). ``SpreadRoutes``
keeps the fastest route's time but chooses, hop by hop along the fastest-route graph, the link that
has carried the fewest bytes so far (ECMP made load-aware). A link already carrying the same chunk at
the same step is free (a multicast shares it). On a fabric with one fastest route per pair the routes
are those of ``ccviz.routing.Router``, whose next hop also wins every tie.
"""

from __future__ import annotations

import math
from collections import defaultdict

from ccviz.topology import Topology

REL_TOL = 1e-9


class SpreadRoutes:
    """Routes for one chunk size whose links are booked as they are handed out."""

    def __init__(self, topology: Topology, chunk_bytes: float) -> None:
        from ccviz.routing import router_for

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
            from ccviz.routing import earliest_arrivals

            self._from[src] = earliest_arrivals(self.topology, {src: 0.0}, self._weight)
        return self._from[src]

    def _dist_to(self, dst: int) -> dict[int, float]:
        if dst not in self._to:
            from ccviz.routing import earliest_arrivals

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
