"""The fabric model: GPU and switch nodes joined by directed alpha-beta links.

A bidirectional cable is two links. Bandwidth is GB/s (1e9 B/s), alpha is
microseconds; the link-timing rule of DESIGN section 3 lives here, in
``Topology.arrival_delay`` and ``Topology.occupancy``, so that every
synthesizer and the simulator share one definition of physics.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ccviz.errors import CcvizError

if TYPE_CHECKING:
    import networkx as nx

NodeKind = Literal["gpu", "switch"]
SwitchHop = Literal["paid", "free"]
FORMAT_TAG = "ccviz-topology/1"


@dataclass(frozen=True, slots=True)
class Link:
    """A directed link. ``lanes`` > 1 lets that many transfers serialize at once."""

    src: int
    dst: int
    bandwidth_GBps: float
    alpha_us: float
    lanes: int = 1

    @property
    def bytes_per_s(self) -> float:
        return self.bandwidth_GBps * 1e9

    @property
    def alpha_s(self) -> float:
        return self.alpha_us * 1e-6

    def serialization_s(self, nbytes: float) -> float:
        """Time the link is busy pushing ``nbytes`` (the beta term)."""
        return nbytes / self.bytes_per_s


@dataclass(frozen=True, slots=True)
class Node:
    """A GPU (holds buffers, sends and receives) or a switch (stores nothing).

    ``copy`` matters for switches only: a copy-capable switch (NVSwitch
    multicast, SHARP) may forward one arrival on several out-links.
    """

    id: int
    kind: NodeKind = "gpu"
    label: str = ""
    group: str | None = None
    pos: tuple[float, float] | None = None
    copy: bool = True

    def __post_init__(self) -> None:
        if not self.label:  # one naming rule for every builder, file format and editor
            object.__setattr__(self, "label", ("S" if self.kind == "switch" else "GPU") + str(self.id))

    @property
    def is_switch(self) -> bool:
        return self.kind == "switch"


class Topology:
    """Nodes plus directed links, validated on construction.

    ``switch_hop`` chooses how a hop out of a switch is charged: ``"paid"``
    (alpha + beta like any link, the TE-CCL paper's text) or ``"free"`` (the
    switch->X hop adds no time of its own but still occupies the link, the
    convention TE-CCL's published runs used, inherited from TACCL).
    """

    def __init__(
        self,
        name: str,
        nodes: Iterable[Node],
        links: Iterable[Link],
        description: str = "",
        switch_hop: SwitchHop = "paid",
        layout: str | None = None,
        meta: dict[str, Any] | None = None,
        validate: bool = True,
    ) -> None:
        self.name = name
        self.description = description
        self.switch_hop = switch_hop
        self.layout = layout
        self.meta = dict(meta or {})
        self.nodes = {}
        for node in nodes:
            if node.id in self.nodes:
                raise CcvizError(f"nodes: node id {node.id} appears twice; give every node a unique id", "nodes")
            self.nodes[node.id] = node
        link_list = list(links)
        self.links = {}
        for link in link_list:
            key = (link.src, link.dst)
            if key in self.links:
                raise CcvizError(
                    f"links: duplicate link {link.src}->{link.dst}; keep one (use lanes=k for a multi-lane link)",
                    "links",
                )
            self.links[key] = link
        if validate:
            self.validate()

    def __repr__(self) -> str:
        return f"Topology({self.summary()})"

    # ----------------------------------------------------------------- queries
    @cached_property
    def gpus(self) -> list[int]:
        """GPU (rank) node ids in ascending order; these are the collective's ranks."""
        return sorted(n for n, node in self.nodes.items() if node.kind == "gpu")

    @cached_property
    def switches(self) -> list[int]:
        return sorted(n for n, node in self.nodes.items() if node.kind == "switch")

    @property
    def n_gpus(self) -> int:
        return len(self.gpus)

    def is_switch(self, node: int) -> bool:
        return self.nodes[node].kind == "switch"

    def link(self, src: int, dst: int) -> Link:
        try:
            return self.links[(src, dst)]
        except KeyError:
            raise CcvizError(f"link: there is no link {src}->{dst} in topology {self.name!r}", "link") from None

    @cached_property
    def out_links(self) -> dict[int, list[Link]]:
        out: dict[int, list[Link]] = {n: [] for n in self.nodes}
        for link in self.links.values():
            out[link.src].append(link)
        return out

    @cached_property
    def in_links(self) -> dict[int, list[Link]]:
        inn: dict[int, list[Link]] = {n: [] for n in self.nodes}
        for link in self.links.values():
            inn[link.dst].append(link)
        return inn

    @cached_property
    def graph(self) -> nx.DiGraph:
        """A networkx view (node attrs kind/label/group/pos/copy; edge attrs bandwidth/alpha)."""
        import networkx as nx  # imported where used: the CLI starts without it

        g = nx.DiGraph(name=self.name)
        for n, node in self.nodes.items():
            g.add_node(n, kind=node.kind, label=node.label, group=node.group, pos=node.pos, copy=node.copy)
        for (u, v), link in self.links.items():
            g.add_edge(u, v, bandwidth_GBps=link.bandwidth_GBps, alpha_us=link.alpha_us, lanes=link.lanes)
        return g

    # ------------------------------------------------------------------ timing
    def hop_is_free(self, src: int, dst: int) -> bool:
        """True when the hop src->dst adds no time (out of a switch under switch_hop='free')."""
        return self.switch_hop == "free" and self.nodes[src].kind == "switch"

    def occupancy(self, src: int, dst: int, nbytes: float) -> float:
        """Seconds the link's serialization is busy for one transfer of ``nbytes``."""
        return self.links[(src, dst)].serialization_s(nbytes)

    def arrival_delay(self, src: int, dst: int, nbytes: float) -> float:
        """Seconds from the start of a send to its arrival: alpha + bytes/bandwidth."""
        if self.hop_is_free(src, dst):
            return 0.0
        link = self.links[(src, dst)]
        return link.alpha_s + link.serialization_s(nbytes)

    # -------------------------------------------------------------- transforms
    def reversed(self) -> Topology:
        """Every link turned around (used to synthesize reductions from broadcasts)."""
        return Topology(
            self.name + "-reversed",
            self.nodes.values(),
            (replace(link, src=link.dst, dst=link.src) for link in self.links.values()),
            description=self.description,
            switch_hop=self.switch_hop,
            layout=self.layout,
            meta=self.meta,
            validate=False,
        )

    def with_changes(
        self,
        nodes: Iterable[Node] | None = None,
        links: Iterable[Link] | None = None,
        **attrs: Any,
    ) -> Topology:
        """A validated copy with nodes/links/attributes replaced (edits never mutate)."""
        return Topology(
            attrs.pop("name", self.name),
            self.nodes.values() if nodes is None else nodes,
            self.links.values() if links is None else links,
            description=attrs.pop("description", self.description),
            switch_hop=attrs.pop("switch_hop", self.switch_hop),
            layout=attrs.pop("layout", self.layout),
            meta=attrs.pop("meta", self.meta),
        )

    # -------------------------------------------------------------- validation
    def validate(self) -> None:
        """Raise CcvizError naming the first problem and how to fix it."""
        if not self.nodes:
            raise CcvizError("nodes: the topology is empty; add at least two GPU nodes", "nodes")
        for node in self.nodes.values():
            if node.kind not in ("gpu", "switch"):
                raise CcvizError(f"nodes: node {node.id} has kind {node.kind!r}; use 'gpu' or 'switch'", "nodes")
        if len(self.gpus) < 2:
            raise CcvizError(
                f"nodes: a collective needs at least two GPUs, topology {self.name!r} has {len(self.gpus)}",
                "nodes",
            )
        if self.switch_hop not in ("paid", "free"):
            raise CcvizError(f"switch_hop: {self.switch_hop!r} is not 'paid' or 'free'", "switch_hop")
        for (u, v), link in self.links.items():
            where = f"link {u}->{v}"
            if u not in self.nodes or v not in self.nodes:
                bad = u if u not in self.nodes else v
                raise CcvizError(f"links: {where} names unknown node {bad}; add the node or fix the link", "links")
            if u == v:
                raise CcvizError(f"links: {where} is a self-loop; a link must join two different nodes", "links")
            if not (isinstance(link.bandwidth_GBps, (int, float)) and link.bandwidth_GBps > 0):
                raise CcvizError(
                    f"bandwidth_GBps: {where} has bandwidth {link.bandwidth_GBps!r}; it must be a positive number of GB/s",
                    "bandwidth_GBps",
                )
            if not (isinstance(link.alpha_us, (int, float)) and link.alpha_us >= 0):
                raise CcvizError(
                    f"alpha_us: {where} has alpha {link.alpha_us!r}; it must be zero or a positive number of microseconds",
                    "alpha_us",
                )
            if not (isinstance(link.lanes, int) and link.lanes >= 1):
                raise CcvizError(f"lanes: {where} has lanes {link.lanes!r}; use a whole number >= 1", "lanes")
        self._check_gpu_reachability()

    def _check_gpu_reachability(self) -> None:
        forward: dict[int, list[int]] = {n: [] for n in self.nodes}
        backward: dict[int, list[int]] = {n: [] for n in self.nodes}
        for u, v in self.links:
            forward[u].append(v)
            backward[v].append(u)
        gpus = set(self.gpus)
        first = self.gpus[0]
        reach_fwd = _reachable(forward, first) & gpus
        reach_back = _reachable(backward, first) & gpus
        missing = (gpus - {first}) - (reach_fwd & reach_back)
        if missing:
            other = min(missing)
            direction = "reach" if other not in reach_fwd else "be reached from"
            raise CcvizError(
                f"links: GPU {first} cannot {direction} GPU {other}; the topology is disconnected, "
                "add links so every GPU can reach every other GPU",
                "links",
            )

    # ------------------------------------------------------------ serialization
    def to_dict(self) -> dict[str, Any]:
        """The project's own JSON format (round-trips through ``from_dict``)."""
        return {
            "format": FORMAT_TAG,
            "name": self.name,
            "description": self.description,
            "switch_hop": self.switch_hop,
            "layout": self.layout,
            "meta": self.meta,
            "nodes": [
                {k: v for k, v in {
                    "id": n.id, "kind": n.kind, "label": n.label, "group": n.group,
                    "pos": list(n.pos) if n.pos is not None else None,
                    "copy": n.copy if n.kind == "switch" else None,
                }.items() if v is not None}
                for n in sorted(self.nodes.values(), key=lambda n: n.id)
            ],
            "links": [
                {"src": link.src, "dst": link.dst, "bandwidth_GBps": link.bandwidth_GBps, "alpha_us": link.alpha_us,
                 **({"lanes": link.lanes} if link.lanes != 1 else {})}
                for link in sorted(self.links.values(), key=lambda link: (link.src, link.dst))
            ],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any], name: str | None = None) -> Topology:
        """Read the project format or the reference format (``nodes`` as a count)."""
        if not isinstance(data, dict):
            raise CcvizError("topology: expected a JSON/YAML object with 'nodes' and 'links'", "topology")
        if "nodes" not in data or "links" not in data:
            raise CcvizError("topology: the file needs both a 'nodes' and a 'links' entry", "topology")
        name = str(data.get("name") or name or "topology")
        if isinstance(data["nodes"], int):
            nodes = _reference_nodes(data)
        else:
            nodes = [_node_from_dict(d, i) for i, d in enumerate(data["nodes"])]
        links = [_link_from_dict(d, i) for i, d in enumerate(data["links"])]
        meta = dict(data.get("meta") or {})
        switch_hop = data.get("switch_hop") or "paid"
        if name.endswith("_teccl_as_run") and isinstance(data["nodes"], int):
            # TE-CCL's published runs: the switch-marked node still owns a slot of every buffer (it has
            # no data and no demand), so chunks are size / all nodes, and switch->GPU hops cost no time.
            meta.setdefault("buffer_ranks", data["nodes"])
            switch_hop = data.get("switch_hop") or "free"
        return cls(
            name,
            nodes,
            links,
            description=str(data.get("description") or data.get("source") or ""),
            switch_hop=switch_hop,
            layout=data.get("layout"),
            meta=meta,
        )

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1)

    def save(self, path: str | Path) -> None:
        Path(path).write_text(self.to_json())

    def summary(self) -> str:
        bws = sorted({link.bandwidth_GBps for link in self.links.values()})
        return (
            f"{self.name}: {self.n_gpus} GPUs, {len(self.switches)} switches, {len(self.links)} links, "
            f"bandwidths {', '.join(f'{b:g}' for b in bws)} GB/s"
        )


def _reference_nodes(data: dict[str, Any]) -> list[Node]:
    """Nodes of the reference format: ids 0..nodes-1, listed switches, the rest GPUs."""
    count = data["nodes"]
    switches = set(data.get("switches") or [])
    bad = [s for s in switches if not (isinstance(s, int) and 0 <= s < count)]
    if bad:
        raise CcvizError(f"switches: switch id {bad[0]} is outside 0..{count - 1}", "switches")
    copy = bool(data.get("switch_copy", True))
    return [
        Node(i, "switch" if i in switches else "gpu", copy=copy)
        for i in range(count)
    ]


def _node_from_dict(d: Any, index: int) -> Node:
    if isinstance(d, int):
        return Node(d, "gpu")
    if not isinstance(d, dict) or "id" not in d:
        raise CcvizError(f"nodes[{index}]: each node needs an integer 'id'", "nodes")
    try:
        node_id = int(d["id"])
    except (TypeError, ValueError):
        raise CcvizError(f"nodes[{index}]: id {d['id']!r} is not an integer", "nodes") from None
    kind = d.get("kind", "gpu")
    pos = d.get("pos")
    return Node(
        node_id,
        kind,
        label=str(d.get("label") or ""),
        group=d.get("group"),
        pos=tuple(pos) if pos is not None else None,
        copy=bool(d.get("copy", True)),
    )


def _link_from_dict(d: Any, index: int) -> Link:
    if not isinstance(d, dict):
        raise CcvizError(f"links[{index}]: each link is an object with src, dst, bandwidth_GBps, alpha_us", "links")
    missing = [k for k in ("src", "dst", "bandwidth_GBps") if k not in d]
    if missing:
        raise CcvizError(f"links[{index}]: missing {', '.join(missing)}", "links")
    try:
        return Link(
            int(d["src"]),
            int(d["dst"]),
            float(d["bandwidth_GBps"]),
            float(d.get("alpha_us", 0.0)),
            int(d.get("lanes", 1)),
        )
    except (TypeError, ValueError) as exc:
        raise CcvizError(f"links[{index}]: {exc}; src/dst are node ids, bandwidth_GBps and alpha_us numbers", "links") from None


def _reachable(adjacency: dict[int, list[int]], start: int) -> set[int]:
    """Nodes reachable from ``start`` (excluding it unless on a cycle), by an iterative search."""
    seen: set[int] = set()
    stack = list(adjacency.get(start, ()))
    while stack:
        node = stack.pop()
        if node not in seen:
            seen.add(node)
            stack.extend(adjacency.get(node, ()))
    return seen
