"""Drawing positions of built topologies: where each node sits in a 2D figure, apart from how it is cabled.

Builders place every node (``Node.pos``) so that front ends can draw any built topology without
guessing. A builder constructs nodes and cables only; where they are drawn is decided here, by plain
functions returning positions (a list in node order, or ``{node id: position}`` for ``Fabric.place``),
next to ``rounded``, which keeps saved files tidy and deterministic.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

Position = tuple[float, float]

CHASSIS_SPACING = 3.6  # distance between the centres of two drawn chassis
TIER_HEIGHT = 1.5  # vertical distance between the rows of a switched tree (GPUs, then each switch tier)
# DGX-1 cube drawing: GPUs 0-3 an inner square, 4-7 the outer square.
DGX1_POSITIONS = ((-0.5, 0.5), (0.5, 0.5), (-0.5, -0.5), (0.5, -0.5),
                  (-1.2, 1.2), (1.2, 1.2), (-1.2, -1.2), (1.2, -1.2))

def rounded(pos: Position | None) -> Position | None:
    """Drawing positions rounded so saved files stay tidy and deterministic."""
    return None if pos is None else (round(float(pos[0]), 4) + 0.0, round(float(pos[1]), 4) + 0.0)


def circle_positions(n: int, radius: float = 1.0, center: Position = (0.0, 0.0)) -> list[Position]:
    """n points evenly on a circle, the first at the top, going clockwise (reads like a clock face)."""
    return [
        (center[0] + radius * math.sin(2 * math.pi * i / n), center[1] + radius * math.cos(2 * math.pi * i / n))
        for i in range(n)
    ]


def spread(count: int, width: float, center: float = 0.0) -> list[float]:
    """``count`` x-coordinates spaced evenly over ``width`` around ``center`` (one row of a tree drawing)."""
    if count == 1:
        return [center]
    return [center - width / 2 + width * i / (count - 1) for i in range(count)]


def ring_positions(n: int) -> list[Position]:
    """n points on the unit circle, the first on the right, going counter-clockwise."""
    return [(math.cos(2 * math.pi * i / n), math.sin(2 * math.pi * i / n)) for i in range(n)]


def hypercube_position(i: int, k: int) -> Position:
    """Classic hypercube drawing: even bits step right, odd bits step down, each pair of bits twice as far
    as the previous with a slight skew so that no edge passes through a node."""
    x = y = 0.0
    for bit in range(k):
        if not (i >> bit) & 1:
            continue
        scale = 2.2 ** (bit // 2)
        skew = 0.3 * (bit // 2)
        if bit % 2 == 0:
            x, y = x + scale, y - skew
        else:
            x, y = x + skew, y - scale
    return (x, y)


def grid_position(c: tuple[int, ...]) -> tuple[float, float]:
    """2D drawing position from the first two axes; a third axis becomes an oblique offset."""
    x = float(c[0])
    y = float(c[1]) if len(c) > 1 else 0.0
    if len(c) > 2:
        x += 0.3 * c[2]
        y += 0.2 * c[2]
    return (x, -y)


def fan_out(router: Position, center: Position, index: int, count: int) -> Position:
    """Place GPU ``index`` of ``count`` near its router, fanned out on the side away from ``center``."""
    away = math.atan2(router[1] - center[1], router[0] - center[0]) if router != center else math.pi / 2
    angle = away + (index - (count - 1) / 2) * 0.5
    return (router[0] + 0.7 * math.cos(angle), router[1] + 0.7 * math.sin(angle))


def tiled_grid_position(dims: Sequence[int], coords: Sequence[int]) -> Position:
    """Axis 1 -> x, axis 2 -> y; higher axes tile the 2D slices in a near-square grid of blocks."""
    width = dims[0] + 1
    height = (dims[1] if len(dims) > 1 else 1) + 1
    blocks_per_row = _blocks_per_row(dims)
    block = sum(c * math.prod(dims[2:2 + i]) for i, c in enumerate(coords[2:]))
    bx, by = block % blocks_per_row, block // blocks_per_row
    return (coords[0] + bx * width, -((coords[1] if len(coords) > 1 else 0) + by * height))


def tiled_switch_position(dims: Sequence[int], axis: int, first: Sequence[int]) -> Position:
    """The switch of a line along ``axis`` whose first NPU is at ``first``: row switches left of their
    row, column switches above their column, higher ones in a side panel."""
    first = list(first)
    if axis < 2:
        first[axis] = -1
        return tiled_grid_position(dims, first)
    x0 = _blocks_per_row(dims) * (dims[0] + 1) + 1 + (axis - 2) * (dims[0] + 1)
    return (x0 + first[0], -float(first[1] if len(first) > 1 else 0))


def _blocks_per_row(dims: Sequence[int]) -> int:
    """2D slices per row of the tiling (the slices beyond axis 2, in a near-square grid)."""
    return math.ceil(math.sqrt(math.prod(dims[2:])))


def hub_positions(hub: int, spokes: Sequence[int], radius: float = 1.0, center: Position = (0.0, 0.0)
                  ) -> dict[int, Position]:
    """A switch at ``center`` with its GPUs on a circle around it (a star, a DGX-2 or A100 box)."""
    return {hub: center, **dict(zip(spokes, circle_positions(len(spokes), radius, center), strict=True))}


def tree_positions(gpus: Sequence[int], tiers: Sequence[Sequence[tuple[Sequence[int], range]]]
                   ) -> dict[int, Position]:
    """A switched tree drawn bottom-up: the GPUs in a row (x = their index), then one row per tier.

    Each tier is a list of (switches, the GPU indices below them): those switches are spread evenly
    over the span of those GPUs (one switch sits centred above them), ``TIER_HEIGHT`` per tier higher.
    """
    positions = {gpu: (float(x), 0.0) for x, gpu in enumerate(gpus)}
    for height, tier in enumerate(tiers, start=1):
        for switches, below in tier:
            first, last = below[0], below[-1]
            xs = spread(len(switches), last - first, (first + last) / 2)
            positions.update({s: (x, height * TIER_HEIGHT) for s, x in zip(switches, xs, strict=True)})
    return positions


def dragonfly_positions(gpus: Sequence[int], routers: Sequence[Sequence[int]]) -> dict[int, Position]:
    """Groups on a circle, each group's routers on a small circle, each router's GPUs fanned outwards.

    ``routers[g][r]`` is a router's id; ``gpus`` are dealt to the routers in order, as many each.
    """
    groups, per_group = len(routers), len(routers[0])
    per_router = len(gpus) // (groups * per_group)
    centers = circle_positions(groups, radius=3.0 * per_group ** 0.5 if groups > 1 else 0.0)
    at = [circle_positions(per_group, radius=0.8 if per_group > 1 else 0.0, center=c) for c in centers]
    positions = {router: at[g][r] for g, group in enumerate(routers) for r, router in enumerate(group)}
    for k, gpu in enumerate(gpus):
        g, r = divmod(k // per_router, per_group)
        positions[gpu] = fan_out(at[g][r], centers[g], k % per_router, per_router)
    return positions


def dgx1_positions(gpus: Sequence[int], x_offset: float = 0.0) -> dict[int, Position]:
    """A DGX-1 chassis's eight GPUs as a cube seen from the front, shifted right by ``x_offset``."""
    return {gpu: (x + x_offset, y) for gpu, (x, y) in zip(gpus, DGX1_POSITIONS, strict=True)}


def above_chassis(chassis: int, spacing: float, height: float) -> Position:
    """The network switch of ``chassis`` chassis drawn ``spacing`` apart: centred above them at ``height``."""
    return ((chassis - 1) * spacing / 2, height)


def a100_positions(hubs: Sequence[int], gpus: Sequence[Sequence[int]], nics: Sequence[Sequence[int]],
                   ib: Sequence[int]) -> dict[int, Position]:
    """ForestColl's A100 boxes side by side (NVSwitch in the middle, GPUs around it, their NICs in a row
    below), the two IB switches under the middle of the row of boxes."""
    spacing = CHASSIS_SPACING * 1.2
    positions: dict[int, Position] = {}
    for b, hub in enumerate(hubs):
        center = (b * spacing, 0.0)
        positions.update(hub_positions(hub, gpus[b], radius=1.2, center=center))
        positions.update({nic: (center[0] - 1.4 + local * 0.4, -2.2) for local, nic in enumerate(nics[b])})
    width = (len(hubs) - 1) * spacing
    positions.update({switch: (width / 2 + dx, -3.6) for switch, dx in zip(ib, (-0.8, 0.8), strict=True)})
    return positions


AMD_SPACING = CHASSIS_SPACING * 1.4  # an MI250 chassis is drawn wider than a DGX-1


def amd_chassis_positions(c: int, gpus: Sequence[int], nics: Sequence[int]) -> dict[int, Position]:
    """MI250 chassis ``c``: its GPUs a 4x4 grid, its NICs (if any) in a row below."""
    x0 = c * AMD_SPACING
    positions = {gpu: (x0 + (g % 4) * 0.8, -(g // 4) * 0.8) for g, gpu in enumerate(gpus)}
    positions.update({nic: (x0 - 0.4 + k * 0.4, -3.4) for k, nic in enumerate(nics)})
    return positions
