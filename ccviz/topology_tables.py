"""Topologies as two editable tables (nodes, links) and back, for the app's designer.

Tables are how users edit a fabric by hand; turning them back into a
``Topology`` goes through its validation, so a bad edit becomes a
``CcvizError`` naming the row and field instead of a broken topology.
"""

from __future__ import annotations

import math

import pandas as pd

from ccviz.errors import CcvizError
from ccviz.topology import Link, Node, Topology

NODE_COLUMNS = ("id", "kind", "label", "group", "copy")
LINK_COLUMNS = ("src", "dst", "bandwidth_GBps", "alpha_us", "lanes")


def node_table(topology: Topology) -> pd.DataFrame:
    rows = [(n.id, n.kind, n.label, n.group or "", n.copy) for n in sorted(topology.nodes.values(), key=lambda n: n.id)]
    return pd.DataFrame(rows, columns=list(NODE_COLUMNS))


def link_table(topology: Topology) -> pd.DataFrame:
    rows = [(lk.src, lk.dst, lk.bandwidth_GBps, lk.alpha_us, lk.lanes)
            for lk in sorted(topology.links.values(), key=lambda lk: (lk.src, lk.dst))]
    return pd.DataFrame(rows, columns=list(LINK_COLUMNS))


def topology_from_tables(base: Topology, nodes: pd.DataFrame, links: pd.DataFrame) -> Topology:
    """A validated topology from edited tables; positions of surviving nodes are kept."""
    new_nodes = [_node(base, k, row) for k, row in enumerate(nodes.to_dict("records")) if not _blank(row)]
    new_links = [_link(k, row) for k, row in enumerate(links.to_dict("records")) if not _blank(row)]
    keep_pos = {n.id for n in new_nodes} == set(base.nodes)
    if not keep_pos:  # a new or removed node: let the layout place everything afresh
        new_nodes = [Node(n.id, n.kind, n.label, n.group, None, n.copy) for n in new_nodes]
    return base.with_changes(nodes=new_nodes, links=new_links, layout=base.layout if keep_pos else None)


def _blank(row: dict) -> bool:
    return all(v is None or (isinstance(v, float) and math.isnan(v)) or v == "" for v in row.values())


def _number(row: dict, key: str, where: str, cast=float, default=None):
    value = row.get(key)
    if value is None or (isinstance(value, float) and math.isnan(value)) or value == "":
        if default is not None:
            return default
        raise CcvizError(f"{key}: {where} has no {key}; fill it in or delete the row", key)
    try:
        return cast(value)
    except (TypeError, ValueError):
        raise CcvizError(f"{key}: {where} has {key} {value!r}, which is not a number", key) from None


def _node(base: Topology, k: int, row: dict) -> Node:
    where = f"node row {k + 1}"
    node_id = _number(row, "id", where, int)
    kind = str(row.get("kind") or "gpu").strip().lower()
    old = base.nodes.get(node_id)
    label = str(row.get("label") or "")
    copy = row.get("copy")
    return Node(node_id, kind, label, str(row.get("group") or "") or None, old.pos if old else None,
                True if copy is None or (isinstance(copy, float) and math.isnan(copy)) else bool(copy))


def _link(k: int, row: dict) -> Link:
    where = f"link row {k + 1}"
    return Link(_number(row, "src", where, int), _number(row, "dst", where, int),
                _number(row, "bandwidth_GBps", where), _number(row, "alpha_us", where, default=0.0),
                _number(row, "lanes", where, int, default=1))
