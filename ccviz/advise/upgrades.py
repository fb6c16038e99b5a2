"""An upgrade is one edit of the fabric file: a cable added, cables made faster, a switch that reduces,
a NIC added to a box. Each knows its cost and how to apply itself to a ``Topology`` (which never mutates).

The four kinds are the ``ccviz advise --json`` contract: ``{"kind": "add_link"|"set_bw"|"reduce_switch"|
"add_nic", "src", "dst", "bw_GBps", "cost"}``; ``set_bw`` of a whole link class also lists its cables in
``links``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from ccviz.errors import CcvizError
from ccviz.model.topology import Link, Topology

KINDS = ("add_link", "set_bw", "reduce_switch", "add_nic")
_APPLY_ORDER = {"set_bw": 0, "reduce_switch": 1, "add_link": 2, "add_nic": 2}
MAX_CANDIDATES = 2_000


@dataclass(frozen=True)
class Upgrade:
    """One purchasable change. ``links`` are the cables (both directions) a ``set_bw`` raises."""

    kind: str
    cost: float
    src: int | None = None
    dst: int | None = None
    bw_GBps: float | None = None
    alpha_us: float | None = None
    links: tuple[tuple[int, int], ...] = ()
    label: str = ""
    switches: tuple[int, ...] = ()  # reduce_switch over several switches (a whole network's SHARP)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "src": self.src, "dst": self.dst, "bw_GBps": self.bw_GBps,
                               "cost": self.cost, "label": self.label}
        if self.alpha_us is not None:
            out["alpha_us"] = self.alpha_us
        if self.links:
            out["links"] = [list(link) for link in self.links]
        if self.switches:
            out["switches"] = list(self.switches)
        return out

    def apply(self, topology: Topology) -> Topology:
        """The fabric with this upgrade made."""
        return apply_upgrades(topology, [self])


def apply_upgrades(topology: Topology, upgrades: Iterable[Upgrade]) -> Topology:
    """Every upgrade made: ``set_bw`` raises existing cables' bandwidth, ``reduce_switch`` turns on a switch's
    adder, then new cables are added (another lane beside cables of their bandwidth). Made in that order
    whatever order they are given in, so a plan's fabric does not depend on the order of its purchases (a
    second cable bought beside a class that is also upgraded keeps the rate it was bought at)."""
    nodes = dict(topology.nodes)
    links = dict(topology.links)
    for up in sorted(upgrades, key=lambda u: _APPLY_ORDER[u.kind]):
        if up.kind in ("add_link", "add_nic"):
            for u, v in ((up.src, up.dst), (up.dst, up.src)):
                links[(u, v)] = _with_cable(links.get((u, v)), u, v, float(up.bw_GBps), up.alpha_us, topology)
        elif up.kind == "set_bw":
            for u, v in up.links or ((up.src, up.dst),):
                for key in ((u, v), (v, u)):
                    if key in links and links[key].bandwidth_GBps < up.bw_GBps:
                        links[key] = replace(links[key], bandwidth_GBps=float(up.bw_GBps))
        elif up.kind == "reduce_switch":
            for switch in up.switches or (up.src,):
                nodes[switch] = replace(nodes[switch], reduce=True, copy=True)
    return topology.with_changes(nodes=nodes.values(), links=links.values())


def _with_cable(old: Link | None, u: int, v: int, bw: float, alpha_us: float | None, topology: Topology) -> Link:
    """A link with one more cable: another lane beside cables of the same bandwidth, or, beside others, the
    link's bandwidth raised by the new cable's share so its capacity grows by exactly ``bw``."""
    if old is None:
        alpha = alpha_us if alpha_us is not None else _typical_alpha(topology)
        return Link(u, v, bw, alpha)
    if math.isclose(old.bandwidth_GBps, bw):
        return replace(old, lanes=old.lanes + 1)
    return replace(old, bandwidth_GBps=old.bandwidth_GBps + bw / old.lanes)


def _typical_alpha(topology: Topology) -> float:
    alphas = sorted(link.alpha_us for link in topology.links.values())
    return alphas[len(alphas) // 2] if alphas else 0.5


# ------------------------------------------------------------------------------ reading a candidates file
_KEYS = {"kind", "src", "dst", "bw_GBps", "cost", "label", "alpha_us", "links", "switches"}


def upgrades_from_list(data: Any, topology: Topology) -> list[Upgrade]:
    """Candidates as ``--candidates FILE`` gives them (the ``candidates`` list of ``advise --json``), each
    checked against the fabric; a mistake names the entry and the field."""
    if isinstance(data, dict) and "candidates" in data:
        data = data["candidates"]
    if not isinstance(data, list) or not data:
        raise CcvizError("candidates: give a non-empty JSON list of upgrades ({\"kind\": \"add_link\", \"src\": 0, "
                         "\"dst\": 1, \"bw_GBps\": 50, \"cost\": 1100}, ...)", "candidates")
    if len(data) > MAX_CANDIDATES:
        raise CcvizError(f"candidates: {len(data)} upgrades; at most {MAX_CANDIDATES}", "candidates")
    return [_upgrade_from_dict(entry, i, topology) for i, entry in enumerate(data)]


def _upgrade_from_dict(entry: Any, i: int, topology: Topology) -> Upgrade:
    where = f"candidates[{i}]"
    if not isinstance(entry, dict):
        raise CcvizError(f"candidates: {where} must be an object with kind, src, dst, bw_GBps, cost", "candidates")
    unknown = sorted(set(map(str, entry)) - _KEYS)
    if unknown:
        raise CcvizError(f"candidates: {where} has unknown key(s) {', '.join(unknown)}; known: "
                         f"{', '.join(sorted(_KEYS))}", "candidates")
    kind = entry.get("kind")
    if kind not in KINDS:
        raise CcvizError(f"candidates: {where}.kind is {kind!r}; use one of {', '.join(KINDS)}", "candidates")
    cost = _number(entry.get("cost"), f"{where}.cost", minimum=0.0)
    src = _node(entry.get("src"), f"{where}.src", topology, required=kind != "set_bw" or not entry.get("links"))
    dst = _node(entry.get("dst"), f"{where}.dst", topology, required=kind in ("add_link", "add_nic")
                or (kind == "set_bw" and not entry.get("links")))
    bw = None if kind == "reduce_switch" else _number(entry.get("bw_GBps"), f"{where}.bw_GBps", minimum=0.0,
                                                      positive=True)
    alpha = entry.get("alpha_us")
    alpha = None if alpha is None else _number(alpha, f"{where}.alpha_us", minimum=0.0)
    links = tuple(_cable(pair, f"{where}.links", topology) for pair in entry.get("links") or ())
    if kind in ("add_link", "add_nic") and src == dst:
        raise CcvizError(f"candidates: {where} joins node {src} to itself; give two different nodes", "candidates")
    if kind == "add_nic" and not (topology.nodes[src].kind == "gpu" and topology.nodes[dst].is_switch):
        raise CcvizError(f"candidates: {where} add_nic goes from a GPU (src) to a switch (dst)", "candidates")
    switches = tuple(_node(n, f"{where}.switches", topology, required=True) for n in entry.get("switches") or ())
    for n in (src, *switches) if kind == "reduce_switch" else ():
        if not topology.nodes[n].is_switch:
            raise CcvizError(f"candidates: {where} reduce_switch names node {n}, which is a GPU; name a switch",
                             "candidates")
    if kind == "set_bw" and not links and (src, dst) not in topology.links:
        raise CcvizError(f"candidates: {where} set_bw names {src}->{dst}, which is not a link of the fabric",
                         "candidates")
    return Upgrade(kind, cost, src, dst, bw, alpha, links, str(entry.get("label") or ""), switches)


def _number(value: Any, where: str, minimum: float, positive: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise CcvizError(f"candidates: {where} must be a number, got {value!r}", "candidates")
    if value < minimum or (positive and value <= 0):
        raise CcvizError(f"candidates: {where} must be {'> 0' if positive else '>= 0'}, got {value}", "candidates")
    return float(value)


def _node(value: Any, where: str, topology: Topology, required: bool) -> int | None:
    if value is None and not required:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value not in topology.nodes:
        raise CcvizError(f"candidates: {where} must be a node id of the fabric (0..{max(topology.nodes)}), got "
                         f"{value!r}", "candidates")
    return value


def _cable(pair: Any, where: str, topology: Topology) -> tuple[int, int]:
    if not (isinstance(pair, (list, tuple)) and len(pair) == 2 and tuple(pair) in topology.links):
        raise CcvizError(f"candidates: {where} entry {pair!r} is not a link [src, dst] of the fabric", "candidates")
    return (int(pair[0]), int(pair[1]))
