"""Drawing positions of built topologies: where each node sits in a 2D figure, apart from how it is cabled.

Builders place every node (``Node.pos``) so that front ends can draw any built topology without
guessing; the shapes that take more than a line of arithmetic live here, next to ``rounded``, which keeps
saved files tidy and deterministic.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

Position = tuple[float, float]

CHASSIS_SPACING = 3.6  # distance between the centres of two drawn chassis
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
