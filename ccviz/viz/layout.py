"""Where to draw each node: builder hints when present, a readable layout otherwise.

Builders give nodes a ``pos`` (rings as circles, grids as grids); reference
files give nothing, so we group GPUs into chassis (the GPU islands left when
switches are removed), draw each chassis as a circle side by side, and put
switches above the GPUs they join, so switches never hide inside a cluster.
"""

from __future__ import annotations

import math

import networkx as nx
import numpy as np

from ccviz.model.topology import Topology

Position = tuple[float, float]


def node_positions(topology: Topology) -> dict[int, Position]:
    """A 2D position per node, normalised to roughly [0, 1] x [0, 1]."""
    nodes = topology.nodes
    if all(node.pos is not None for node in nodes.values()):
        raw = {n: (float(node.pos[0]), float(node.pos[1])) for n, node in nodes.items()}
    else:
        raw = _computed_positions(topology)
        for n, node in nodes.items():
            if node.pos is not None and not topology.switches:
                raw[n] = (float(node.pos[0]), float(node.pos[1]))
    return _normalised(raw)


def _computed_positions(topology: Topology) -> dict[int, Position]:
    chassis = _chassis(topology)
    if topology.switches or len(chassis) > 1:
        return _chassis_layout(topology, chassis)
    return _single_island_layout(topology, topology.gpus)


def _chassis(topology: Topology) -> list[list[int]]:
    """GPU groups: the declared ``group`` if every GPU has one, else islands without switches."""
    groups: dict[str, list[int]] = {}
    if all(topology.nodes[g].group for g in topology.gpus):
        for g in topology.gpus:
            groups.setdefault(str(topology.nodes[g].group), []).append(g)
        return [sorted(members) for _, members in sorted(groups.items())]
    undirected = nx.Graph()
    undirected.add_nodes_from(topology.gpus)
    undirected.add_edges_from(
        (u, v) for (u, v) in topology.links if not topology.is_switch(u) and not topology.is_switch(v)
    )
    return sorted((sorted(c) for c in nx.connected_components(undirected)), key=lambda c: c[0])


def _single_island_layout(topology: Topology, gpus: list[int]) -> dict[int, Position]:
    """A circle when the island is a ring (or too big to relax), a seeded spring layout otherwise."""
    sub = nx.Graph()
    sub.add_nodes_from(gpus)
    sub.add_edges_from((u, v) for (u, v) in topology.links if u in sub and v in sub)
    is_ring = all(d == 2 for _, d in sub.degree()) and nx.is_connected(sub) if len(gpus) > 2 else True
    dense = len(gpus) <= 16 and sub.number_of_edges() >= 0.3 * len(gpus) * (len(gpus) - 1) / 2
    if is_ring or dense or len(gpus) > 400 or sub.number_of_edges() == 0:  # dense chassis: a spring makes a clump
        order = _ring_order(sub) if is_ring and len(gpus) > 2 else sorted(gpus)
        return _circle(order)
    pos = nx.spring_layout(sub, seed=7, iterations=200)
    return {n: (float(p[0]), float(p[1])) for n, p in pos.items()}


def _ring_order(ring: nx.Graph) -> list[int]:
    start = min(ring.nodes)
    return [start] + [v for _, v in nx.dfs_edges(ring, start)]


def _circle(order: list[int], radius: float = 1.0, center: Position = (0.0, 0.0)) -> dict[int, Position]:
    n = max(len(order), 1)
    return {
        node: (center[0] + radius * math.sin(2 * math.pi * k / n), center[1] + radius * math.cos(2 * math.pi * k / n))
        for k, node in enumerate(order)
    }


def _chassis_layout(topology: Topology, chassis: list[list[int]]) -> dict[int, Position]:
    """Chassis side by side (wrapping into rows), switches above the chassis they connect."""
    per_row = max(1, math.ceil(math.sqrt(len(chassis))))
    pos: dict[int, Position] = {}
    center_of: dict[int, Position] = {}
    for k, members in enumerate(chassis):
        cx, cy = 2.6 * (k % per_row), -2.8 * (k // per_row)
        center_of.update(dict.fromkeys(members, (cx, cy)))
        island = _single_island_layout(topology, members)
        scaled = _normalised(island) if len(members) > 1 else {members[0]: (0.5, 0.5)}
        for n, (x, y) in scaled.items():
            pos[n] = (cx + 2.0 * (x - 0.5), cy + 2.0 * (y - 0.5))
    switches = topology.switches
    for k, s in enumerate(switches):
        neighbours = [v for v in _neighbours(topology, s) if v in pos]
        if neighbours:  # centred over the chassis it joins (each chassis counts once, however many links)
            centers = {center_of[v] for v in neighbours if v in center_of} or {pos[v] for v in neighbours}
            x = sum(c[0] for c in centers) / len(centers)
            top = max(pos[v][1] for v in neighbours)
        else:
            x, top = 2.6 * k, 0.0
        pos[s] = (x + 0.35 * (k % 3 - 1) * (len(switches) > 1), top + 1.6 + 0.5 * (k % 2))
    return pos


def _neighbours(topology: Topology, node: int) -> set[int]:
    return {link.dst for link in topology.out_links[node]} | {link.src for link in topology.in_links[node]}


def _normalised(raw: dict[int, Position]) -> dict[int, Position]:
    """Scale into [0, 1] keeping the aspect ratio, so figure code can use fixed offsets."""
    if not raw:
        return {}
    xs = [p[0] for p in raw.values()]
    ys = [p[1] for p in raw.values()]
    span = max(max(xs) - min(xs), max(ys) - min(ys)) or 1.0
    x0, y0 = min(xs), min(ys)
    return {n: (round((x - x0) / span, 4), round((y - y0) / span, 4)) for n, (x, y) in raw.items()}


Segment = tuple[Position, ...]  # a polyline: two points for a straight link, more for an arc


def link_segments(topology: Topology, positions: dict[int, Position]) -> dict[tuple[int, int], Segment]:
    """Where each directed link is drawn.

    A cable whose two directions are alike is one line (both keys share it);
    directions that differ (or a one-way link) get their own line, nudged
    sideways so both stay visible and clickable. A line that would run
    through another node (a torus wrap-around) is bent into an arc bulging
    away from the drawing's centre.
    """
    bent = _cables_through_nodes(topology, positions)
    cx = sum(p[0] for p in positions.values()) / max(len(positions), 1)
    cy = sum(p[1] for p in positions.values()) / max(len(positions), 1)
    segments: dict[tuple[int, int], Segment] = {}
    for u, v in topology.links:
        lo, hi = min(u, v), max(u, v)
        path: Segment = (positions[lo], positions[hi])
        if (lo, hi) in bent:
            path = _arc(positions[lo], positions[hi], (cx, cy))
        if (u, v) != (lo, hi):
            path = path[::-1]
        if not is_symmetric(topology, u, v) and (v, u) in topology.links:
            path = _shifted(path, 0.012)
        segments[(u, v)] = tuple((round(x, 4), round(y, 4)) for x, y in path)
    return segments


def _cables_through_nodes(topology: Topology, positions: dict[int, Position]) -> set[tuple[int, int]]:
    """Cables (lo, hi) whose straight line passes close to a third node."""
    cables = sorted({(min(u, v), max(u, v)) for u, v in topology.links})
    if len(positions) < 3 or not cables:
        return set()
    ids = list(positions)
    pts = np.array([positions[n] for n in ids])
    lengths = [math.dist(positions[u], positions[v]) for u, v in cables]
    tolerance = 0.2 * float(np.median(lengths))
    bent = set()
    for (u, v), length in zip(cables, lengths, strict=True):
        a, b = np.array(positions[u]), np.array(positions[v])
        if length <= 0:
            continue
        t = np.clip(((pts - a) @ (b - a)) / (length * length), 0.0, 1.0)
        distance = np.linalg.norm(pts - (a + t[:, None] * (b - a)), axis=1)
        inside = (t > 1e-6) & (t < 1 - 1e-6)
        if np.any((distance < tolerance) & inside):
            bent.add((u, v))
    return bent


def _arc(a: Position, b: Position, centre: Position, bulge: float = 0.22, points: int = 13) -> Segment:
    """A quadratic Bezier from a to b bulging away from ``centre``."""
    mx, my = (a[0] + b[0]) / 2, (a[1] + b[1]) / 2
    dx, dy = b[0] - a[0], b[1] - a[1]
    length = math.hypot(dx, dy) or 1.0
    nx_, ny_ = -dy / length, dx / length
    if (mx - centre[0]) * nx_ + (my - centre[1]) * ny_ < 0:
        nx_, ny_ = -nx_, -ny_
    ctrl = (mx + nx_ * bulge * length, my + ny_ * bulge * length)
    out = []
    for k in range(points):
        t = k / (points - 1)
        out.append(((1 - t) ** 2 * a[0] + 2 * (1 - t) * t * ctrl[0] + t * t * b[0],
                    (1 - t) ** 2 * a[1] + 2 * (1 - t) * t * ctrl[1] + t * t * b[1]))
    return tuple(out)


def _shifted(path: Segment, offset: float) -> Segment:
    """The path moved sideways (to the left of its direction) by ``offset``."""
    (x0, y0), (x1, y1) = path[0], path[-1]
    length = math.hypot(x1 - x0, y1 - y0) or 1.0
    nx_, ny_ = -(y1 - y0) / length * offset, (x1 - x0) / length * offset
    return tuple((x + nx_, y + ny_) for x, y in path)


def is_symmetric(topology: Topology, u: int, v: int) -> bool:
    """True when v->u exists with the same bandwidth and alpha (drawn as one undirected line)."""
    there, back = topology.links.get((u, v)), topology.links.get((v, u))
    return (
        there is not None and back is not None
        and there.bandwidth_GBps == back.bandwidth_GBps and there.alpha_us == back.alpha_us
    )


def _locate(path: Segment, fraction: float) -> tuple[int, float]:
    """(index of the piece, fraction within it) of the point ``fraction`` of the way along ``path``."""
    pieces = [math.dist(path[i], path[i + 1]) for i in range(len(path) - 1)]
    target = fraction * sum(pieces)
    for i, piece in enumerate(pieces):
        if target <= piece or i == len(pieces) - 1:
            return i, (target / piece if piece else 0.0)
        target -= piece
    return 0, 0.0


def point_along(path: Segment, fraction: float) -> Position:
    i, f = _locate(path, fraction)
    (x0, y0), (x1, y1) = path[i], path[i + 1]
    return (round(x0 + (x1 - x0) * f, 4), round(y0 + (y1 - y0) * f, 4))


def direction_deg(path: Segment, fraction: float = 0.5) -> float:
    """Plotly marker angle (degrees clockwise from up) of an arrow along the path at ``fraction``."""
    i, _ = _locate(path, fraction)
    (x0, y0), (x1, y1) = path[i], path[i + 1]
    return 90.0 - math.degrees(math.atan2(y1 - y0, x1 - x0))
