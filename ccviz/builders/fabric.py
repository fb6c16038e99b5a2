"""What every builder shares: default link values, per-dimension parameters, and ``Fabric``, the
scratchpad a builder adds GPUs, switches and cables to before freezing it into a validated Topology."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from ccviz.builders.layout import Position, rounded
from ccviz.errors import CcvizError
from ccviz.model.topology import Link, Node, Topology

DEFAULT_BW = 50.0  # GB/s (TACOS's default)
DEFAULT_ALPHA = 0.5  # microseconds (TACOS's default)


def per_dim(value: float | Sequence[float], ndims: int, key: str, what: str = "dimensions") -> tuple[float, ...]:
    """Broadcast a scalar to every dimension (or link class), or check a tuple has the right length."""
    if isinstance(value, (int, float)):
        return (float(value),) * ndims
    values = tuple(float(v) for v in value)
    if len(values) == 1:
        return values * ndims
    if len(values) != ndims:
        raise CcvizError(f"topology: {key} has {len(values)} values for {ndims} {what}", key)
    return values


def link_classes(value: float | Sequence[float], classes: Sequence[str], key: str) -> tuple[float, ...]:
    """Per-link-class values (``bw=50/25/12.5``), naming the classes in the error when the count is wrong."""
    return per_dim(value, len(classes), key, what=f"link classes ({'/'.join(classes)})")


def bidirectional(u: int, v: int, bw: float, alpha: float) -> list[Link]:
    """A full-duplex cable: one link each way."""
    return [Link(u, v, bw, alpha), Link(v, u, bw, alpha)]


def gpu_nodes(n: int, start: int = 0, group: str | None = None, positions=None) -> list[Node]:
    """GPUs ``start``..``start + n - 1`` in one group, at ``positions`` (rounded) when given."""
    return [
        Node(start + i, "gpu", group=group, pos=rounded(positions[i]) if positions else None)
        for i in range(n)
    ]


def require(condition: bool, field: str, message: str) -> None:
    """Raise the user-facing error for a bad builder parameter."""
    if not condition:
        raise CcvizError(f"{field}: {message}", field)


def exact_dims(dims: Sequence[int], n: int, name: str) -> tuple[int, ...]:
    """The dims of a builder with a fixed number of dimensions, checked (torus2d needs two sizes)."""
    if len(dims) != n:
        raise CcvizError(f"topology: {name} needs dims with {n} sizes such as {'x'.join(['4'] * n)}", "dims")
    return tuple(dims)


class Fabric:
    """A builder's scratchpad: add GPUs, switches and cables, then freeze it into a validated Topology.

    Ids are given explicitly where a reference file fixes them, otherwise the next free id is used.
    """

    def __init__(self) -> None:
        self.nodes: dict[int, Node] = {}
        self.links: list[Link] = []

    @property
    def next_id(self) -> int:
        """The id a node added without one gets: one past the largest so far."""
        return max(self.nodes, default=-1) + 1

    def add_gpu(self, node_id: int | None = None, group: str | None = None) -> int:
        """Add a GPU (the next free id unless given) and return its id; ``place`` draws it."""
        node_id = self.next_id if node_id is None else node_id
        self.nodes[node_id] = Node(node_id, "gpu", group=group)
        return node_id

    def add_switch(self, node_id: int | None = None, group: str | None = None, copy: bool = True,
                   label: str | None = None, buffer: bool = False, reduce: bool = False) -> int:
        """Add a switch (multicasting unless ``copy=False``; queueing chunks when ``buffer``; summing chunks
        in the network when ``reduce``) and return its id."""
        node_id = self.next_id if node_id is None else node_id
        self.nodes[node_id] = Node(node_id, "switch", label=label or "", group=group, copy=copy, buffer=buffer,
                                   reduce=reduce)
        return node_id

    def place(self, positions: Mapping[int, Position]) -> None:
        """Draw the nodes built so far where ``positions`` (from ``ccviz.builders.layout``) says."""
        for node_id, pos in positions.items():
            self.nodes[node_id] = replace(self.nodes[node_id], pos=rounded(pos))

    def cable(self, u: int, v: int, bw: float, alpha: float) -> None:
        """A full-duplex cable (two directed links)."""
        self.links.extend(bidirectional(u, v, bw, alpha))

    def one_way(self, u: int, v: int, bw: float, alpha: float) -> None:
        """A single directed link (the reference systems have a few)."""
        self.links.append(Link(u, v, bw, alpha))

    def topology(self, name: str, description: str, layout: str, meta: dict | None = None) -> Topology:
        """The validated Topology of everything added, nodes in id order."""
        return Topology(name, sorted(self.nodes.values(), key=lambda n: n.id), self.links,
                        description=description, layout=layout, meta=meta)
