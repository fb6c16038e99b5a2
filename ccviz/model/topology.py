"""The fabric model: GPU and switch nodes joined by directed alpha-beta links.

A bidirectional cable is two links. Bandwidth is GB/s (1e9 B/s), alpha is
microseconds. The link-timing rule lives in ``ccviz.model.physics``; ``Topology.arrival_delay``,
``occupancy``, ``busy_epochs`` and ``delay_epochs`` are its shorthands.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ccviz.errors import CcvizError
from ccviz.model import physics
from ccviz.model import validate as check
from ccviz.model.link_model import LinkModel
from ccviz.model.units import BYTES_PER_GB, SECONDS_PER_US

if TYPE_CHECKING:
    import networkx as nx

NodeKind = Literal["gpu", "switch"]
SwitchHop = Literal["paid", "teccl", "free"]
FORMAT_TAG = "ccviz-topology/1"

# How a hop out of a switch is charged (a GPU's hops are always alpha + bytes / bandwidth):
SWITCH_HOPS: dict[str, str] = {
    "paid": "both hops of a switch crossing are charged in full: alpha + bytes/bandwidth (TE-CCL's paper text)",
    "teccl": "a switch->X hop is charged its alpha but no second serialization: arrival = start + alpha, "
             "the link still busy bytes/bandwidth (TE-CCL's published runs)",
    "free": "a switch->X hop adds no time at all, the link still busy bytes/bandwidth (TACCL's convention: "
            "a cut-through switch whose whole port-to-port latency is folded into the link into it)",
}


# Physical ranges: outside them times overflow or vanish below float resolution (1e308 GB/s, 1e-300 GB/s).
MIN_BANDWIDTH_GBPS = 1e-6  # 1 KB/s
MAX_BANDWIDTH_GBPS = 1e6  # 1 PB/s
MAX_ALPHA_US = 1e9  # 1000 s
LINK_KEYS = ("src", "dst", "bandwidth_GBps", "alpha_us", "lanes")
MAX_NODE_ID = 2**31 - 1  # ids index arrays (node x chunk keys): beyond this they overflow them
NODE_KEYS = ("id", "kind", "label", "group", "pos", "copy", "buffer", "reduce", "reduce_GBps")

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
        return self.bandwidth_GBps * BYTES_PER_GB

    @property
    def alpha_s(self) -> float:
        return self.alpha_us * SECONDS_PER_US

    def serialization_s(self, nbytes: float) -> float:
        """Time the link is busy pushing ``nbytes`` (the beta term)."""
        return nbytes / self.bytes_per_s


@dataclass(frozen=True, slots=True)
class Node:
    """A GPU (holds buffers, sends and receives) or a switch (stores nothing).

    ``copy`` matters for switches only: a copy-capable switch (NVSwitch
    multicast, SHARP) may forward one arrival on several out-links.
    ``buffer`` (switches only) declares a switch that may hold a chunk before
    forwarding it; without it a switch forwards each arrival the moment it
    arrives (see ``ccviz.judge.simulate``'s switch rule).
    ``reduce`` (switches only) declares an in-network reduction engine (NVLink SHARP on NVSwitch,
    Quantum SHARP on InfiniBand): transfers with ``op="combine"`` into it are added into one running
    sum per chunk, which it forwards (multicasts, with ``copy``) once the contributions have arrived.
    ``reduce_GBps`` is that engine's throughput in GB/s of summed output when it is slower than the
    ports (None: line rate, the sum is ready the instant its last contribution lands).
    """

    id: int
    kind: NodeKind = "gpu"
    label: str = ""
    group: str | None = None
    pos: tuple[float, float] | None = None
    copy: bool = True
    buffer: bool = False
    reduce: bool = False
    reduce_GBps: float | None = None

    def __post_init__(self) -> None:
        if not self.label:  # one naming rule for every builder, file format and editor
            object.__setattr__(self, "label", ("S" if self.kind == "switch" else "GPU") + str(self.id))

    @property
    def is_switch(self) -> bool:
        return self.kind == "switch"


class Topology:
    """Nodes plus directed links, validated on construction.

    ``switch_hop`` chooses how a hop out of a switch is charged (``SWITCH_HOPS``):
    ``"paid"`` (alpha + beta like any link, the TE-CCL paper's text, the default),
    ``"teccl"`` (alpha only, no second serialization: TE-CCL's published runs) or
    ``"free"`` (no time at all, TACCL's convention). The link stays busy
    bytes/bandwidth under every rule.
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
            if not isinstance(node, Node):
                raise CcvizError(f"nodes: expected ccviz Node objects (Node(id, kind)), got {node!r:.60}", "nodes")
            if node.id in self.nodes:
                raise CcvizError(f"nodes: node id {node.id} appears twice; give every node a unique id", "nodes")
            self.nodes[node.id] = node
        link_list = list(links)
        self.links = {}
        for link in link_list:
            if not isinstance(link, Link):
                raise CcvizError(f"links: expected ccviz Link objects (Link(src, dst, ...)), got {link!r:.60}",
                                 "links")
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

    @cached_property
    def reducing_switches(self) -> list[int]:
        """Switches with an in-network reduction engine (``Node.reduce``), in id order."""
        return [n for n in self.switches if self.nodes[n].reduce]

    def is_switch(self, node: int) -> bool:
        return self.nodes[node].kind == "switch"

    def link(self, src: int, dst: int) -> Link:
        try:
            return self.links[(src, dst)]
        except KeyError:
            raise CcvizError(f"link: there is no link {src}->{dst} in topology {self.name!r}", "link") from None

    @cached_property
    def out_links(self) -> dict[int, list[Link]]:
        """Every node's links leaving it, in link order."""
        return self._links_by(lambda link: link.src)

    @cached_property
    def in_links(self) -> dict[int, list[Link]]:
        """Every node's links entering it, in link order."""
        return self._links_by(lambda link: link.dst)

    def _links_by(self, end: Callable[[Link], int]) -> dict[int, list[Link]]:
        by_node: dict[int, list[Link]] = {n: [] for n in self.nodes}
        for link in self.links.values():
            by_node[end(link)].append(link)
        return by_node

    @cached_property
    def graph(self) -> nx.DiGraph:
        """A networkx view (node attrs kind/label/group/pos/copy; edge attrs bandwidth/alpha)."""
        import networkx as nx  # imported where used: the CLI starts without it

        g = nx.DiGraph(name=self.name)
        for n, node in self.nodes.items():
            g.add_node(n, kind=node.kind, label=node.label, group=node.group, pos=node.pos, copy=node.copy,
                       reduce=node.reduce)
        for (u, v), link in self.links.items():
            g.add_edge(u, v, bandwidth_GBps=link.bandwidth_GBps, alpha_us=link.alpha_us, lanes=link.lanes)
        return g

    # ------------------------------------------------------------------ timing
    def hop_charges(self, src: int, dst: int) -> tuple[bool, bool]:
        """(alpha charged, serialization charged) on the hop src->dst (``physics.hop_charges``)."""
        return physics.hop_charges(self, src, dst)

    def hop_is_free(self, src: int, dst: int) -> bool:
        """True when the hop src->dst adds no time (out of a switch under switch_hop='free')."""
        return self.hop_charges(src, dst) == (False, False)

    def occupancy(self, src: int, dst: int, nbytes: float) -> float:
        """Seconds a lane of the link is busy for one send of ``nbytes`` (``physics.occupancy``)."""
        return physics.occupancy(self, src, dst, nbytes)

    def arrival_delay(self, src: int, dst: int, nbytes: float) -> float:
        """Seconds from the start of a send to its arrival (``physics.arrival_delay``)."""
        return physics.arrival_delay(self, src, dst, nbytes)

    def busy_epochs(self, src: int, dst: int, nbytes: float, tau_s: float) -> int:
        """kappa: epochs one send keeps a lane of the link busy (``physics.busy_epochs``)."""
        return physics.busy_epochs(self, src, dst, nbytes, tau_s)

    def delay_epochs(self, src: int, dst: int, nbytes: float, tau_s: float) -> int:
        """``arrival_delay`` in epochs of ``tau_s`` (``physics.delay_epochs``)."""
        return physics.delay_epochs(self, src, dst, nbytes, tau_s)

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
        check.check_node_count(len(self.nodes))
        if len(self.links) > check.MAX_LINKS:
            raise CcvizError(f"links: {len(self.links)} links; the limit is {check.MAX_LINKS}", "links")
        for node in self.nodes.values():
            if node.kind not in ("gpu", "switch"):
                raise CcvizError(f"nodes: node {node.id} has kind {node.kind!r}; use 'gpu' or 'switch'", "nodes")
            _check_reduction_engine(node)
        if len(self.gpus) < 2:
            raise CcvizError(
                f"nodes: a collective needs at least two GPUs, topology {self.name!r} has {len(self.gpus)}",
                "nodes",
            )
        if self.switch_hop not in SWITCH_HOPS:
            raise CcvizError(f"switch_hop: {self.switch_hop!r} is not one of {', '.join(SWITCH_HOPS)} "
                             "(paid = both hops charged in full; teccl = TE-CCL's published runs, a switch->X hop "
                             "pays alpha only; free = a switch->X hop costs no time)", "switch_hop")
        for (u, v), link in self.links.items():
            where = f"link {u}->{v}"
            if u not in self.nodes or v not in self.nodes:
                bad = u if u not in self.nodes else v
                raise CcvizError(f"links: {where} names unknown node {bad}; add the node or fix the link", "links")
            if u == v:
                raise CcvizError(f"links: {where} is a self-loop; a link must join two different nodes", "links")
            if not (_real(link.bandwidth_GBps) and MIN_BANDWIDTH_GBPS <= link.bandwidth_GBps <= MAX_BANDWIDTH_GBPS):
                raise CcvizError(
                    f"bandwidth_GBps: {where} has bandwidth {link.bandwidth_GBps!r}; it must be a number of GB/s "
                    f"between {MIN_BANDWIDTH_GBPS:g} and {MAX_BANDWIDTH_GBPS:g}", "bandwidth_GBps",
                )
            if not (_real(link.alpha_us) and 0 <= link.alpha_us <= MAX_ALPHA_US):
                raise CcvizError(
                    f"alpha_us: {where} has alpha {link.alpha_us!r}; it must be a number of microseconds between 0 "
                    f"and {MAX_ALPHA_US:g}", "alpha_us",
                )
            if not (isinstance(link.lanes, int) and not isinstance(link.lanes, bool) and link.lanes >= 1):
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
                    "buffer": True if n.kind == "switch" and n.buffer else None,
                    "reduce": True if n.kind == "switch" and n.reduce else None,
                    "reduce_GBps": n.reduce_GBps if n.kind == "switch" and n.reduce else None,
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
        raw_nodes = data["nodes"]
        if isinstance(raw_nodes, (int, float)) and not isinstance(raw_nodes, bool):
            nodes = _reference_nodes(data)
        else:
            check.sequence(raw_nodes, "nodes", max_len=check.MAX_NODES)
            nodes = [_node_from_dict(d, i) for i, d in enumerate(raw_nodes)]
        check.sequence(data["links"], "links", max_len=check.MAX_LINKS)
        links = [_link_from_dict(d, i) for i, d in enumerate(data["links"])]
        meta = dict(check.mapping(data.get("meta") or {}, "meta"))
        switch_hop = data.get("switch_hop") or "paid"
        if name.endswith("_teccl_as_run") and not isinstance(raw_nodes, list):
            # TE-CCL's published runs: the switch-marked node still owns a slot of every buffer (it has
            # no data and no demand), so chunks are size / all nodes, and a switch->GPU hop pays its alpha
            # but no second serialization (the rule its runs used).
            meta.setdefault("buffer_ranks", len(nodes))
            switch_hop = data.get("switch_hop") or "teccl"
        if "buffer_ranks" in meta:
            meta["buffer_ranks"] = check.integer(meta["buffer_ranks"], "meta.buffer_ranks", lo=1)
        if "link_model" in meta:  # a declared hardware model: every key checked (ccviz.model.link_model)
            meta["link_model"] = LinkModel.from_dict(meta["link_model"]).to_dict()
        layout = data.get("layout")
        if layout is not None:
            check.text(layout, "layout")
        return cls(
            name,
            nodes,
            links,
            description=str(data.get("description") or data.get("source") or ""),
            switch_hop=switch_hop,
            layout=layout,
            meta=meta,
        )

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1)

    def save(self, path: str | Path) -> None:
        Path(path).write_text(self.to_json())

    def summary(self) -> str:
        bws = sorted({link.bandwidth_GBps for link in self.links.values()})
        k = len(self.switches)
        return (
            f"{self.name}: {self.n_gpus} GPUs, {k} switch{'' if k == 1 else 'es'}, {len(self.links)} links, "
            f"bandwidths {', '.join(f'{b:g}' for b in bws)} GB/s"
        )


def _check_reduction_engine(node: Node) -> None:
    """Only a switch reduces in the network, and its engine's throughput is a positive number of GB/s."""
    if node.reduce and node.kind != "switch":
        raise CcvizError(f"nodes: node {node.id} is a GPU with reduce=true; only switches reduce in the network "
                         "(a GPU adds what it receives with op 'reduce' anyway)", "reduce")
    rate = node.reduce_GBps
    if rate is not None and not (_real(rate) and 0 < rate < math.inf):
        raise CcvizError(f"reduce_GBps: node {node.id} has reduce_GBps {rate!r}; give a positive number of GB/s "
                         "or leave it out (line rate)", "reduce_GBps")
    if rate is not None and not node.reduce:
        raise CcvizError(f"reduce_GBps: node {node.id} has a reduction throughput but reduce is false; set "
                         "reduce=true or drop reduce_GBps", "reduce_GBps")


def _real(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _reference_nodes(data: dict[str, Any]) -> list[Node]:
    """Nodes of the reference format: ids 0..nodes-1, listed switches, the rest GPUs."""
    count = check.integer(data["nodes"], "nodes", lo=1)
    check.check_node_count(count)
    switches = check.sequence(data.get("switches") or [], "switches")
    for i, s in enumerate(switches):
        if not 0 <= check.integer(s, f"switches[{i}]") < count:
            raise CcvizError(f"switches: switch id {s} is outside 0..{count - 1}", "switches")
    switches = {int(s) for s in switches}
    copy = check.boolean(data.get("switch_copy", True), "switch_copy")
    buffer = check.boolean(data.get("switch_buffer", False), "switch_buffer")
    return [
        Node(i, "switch" if i in switches else "gpu", copy=copy, buffer=buffer)
        for i in range(count)
    ]


def _node_from_dict(d: Any, index: int) -> Node:
    where = f"nodes[{index}]"
    if not isinstance(d, dict):
        return Node(check.integer(d, where, lo=0), "gpu")
    check.known_keys(d, NODE_KEYS, where)
    if "id" not in d:
        raise CcvizError(f"{where}: each node needs an integer 'id'", "nodes")
    node_id = check.integer(d["id"], f"{where}.id", lo=0, hi=MAX_NODE_ID)
    kind = d.get("kind", "gpu")
    if kind not in ("gpu", "switch"):
        raise CcvizError(f"{where}.kind: {kind!r} is not 'gpu' or 'switch'", "kind")
    pos = d.get("pos")
    if pos is not None:
        check.sequence(pos, f"{where}.pos")
        if len(pos) != 2:
            raise CcvizError(f"{where}.pos: expected [x, y], got {pos!r}", "pos")
        pos = (check.number(pos[0], f"{where}.pos"), check.number(pos[1], f"{where}.pos"))
    label = d.get("label")
    group = d.get("group")
    return Node(
        node_id,
        kind,
        label="" if label is None else check.text(label, f"{where}.label"),
        group=None if group is None else str(group),
        pos=pos,
        copy=check.boolean(d.get("copy", True), f"{where}.copy"),
        buffer=check.boolean(d.get("buffer", False), f"{where}.buffer"),
        reduce=check.boolean(d.get("reduce", False), f"{where}.reduce"),
        reduce_GBps=(None if d.get("reduce_GBps") is None
                     else check.number(d["reduce_GBps"], f"{where}.reduce_GBps", positive=True)),
    )


def _link_from_dict(d: Any, index: int) -> Link:
    where = f"links[{index}]"
    if not isinstance(d, dict):
        raise CcvizError(f"{where}: each link is an object with src, dst, bandwidth_GBps, alpha_us", "links")
    check.known_keys(d, LINK_KEYS, where)
    missing = [k for k in ("src", "dst", "bandwidth_GBps") if k not in d]
    if missing:
        raise CcvizError(f"{where}: missing {', '.join(missing)}", "links")
    return Link(
        check.integer(d["src"], f"{where}.src", lo=0),
        check.integer(d["dst"], f"{where}.dst", lo=0),
        check.number(d["bandwidth_GBps"], f"{where}.bandwidth_GBps", positive=True),
        check.number(d.get("alpha_us", 0.0), f"{where}.alpha_us", nonnegative=True),
        check.integer(d.get("lanes", 1), f"{where}.lanes", lo=1, hi=1024),
    )


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
