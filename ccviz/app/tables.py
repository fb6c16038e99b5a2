"""Topologies as two editable tables (nodes, links) and back, for the app's designer.

Tables are how users edit a fabric by hand; turning them back into a
``Topology`` goes through its validation, so a bad edit becomes a
``CcvizError`` naming the row and field instead of a broken topology.

The link table has one row per *cable*: a row whose ``direction`` is
"both" stands for the two directed links (edit its bandwidth once, both
directions change; delete it, the cable is gone). A cable whose two
directions differ, or that exists one way only, shows one "one way" row
per direction; ``per_direction=True`` shows every direction on its own
row. Blank bandwidth or alpha take the fabric's defaults (its most
common link), so a new cable needs only its two ends.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import replace

import pandas as pd

from ccviz.errors import CcvizError
from ccviz.model.topology import Link, Node, Topology

NODE_COLUMNS = ("id", "kind", "label", "group", "copy", "reduce")
LINK_COLUMNS = ("src", "dst", "direction", "bandwidth_GBps", "alpha_us", "lanes")
BOTH, ONE_WAY = "both", "one way"
DIRECTIONS = (BOTH, ONE_WAY)


def node_table(topology: Topology) -> pd.DataFrame:
    rows = [(n.id, n.kind, n.label, n.group or "", n.copy, n.reduce)
            for n in sorted(topology.nodes.values(), key=lambda n: n.id)]
    return pd.DataFrame(rows, columns=list(NODE_COLUMNS))


def fabric_defaults(topology: Topology) -> tuple[float, float]:
    """Bandwidth (GB/s) and alpha (us) of the most common link: what a new cable gets by default. A tie goes to the
    fastest (then the lowest alpha), whatever the links' order: DGX-1's 16 links at 50 and 16 at 25 GB/s gave 50
    before an edit and 25 after it, which reordered them."""
    if not topology.links:
        return 50.0, 0.5
    counts = Counter((lk.bandwidth_GBps, lk.alpha_us) for lk in topology.links.values())
    (bw, alpha) = max(counts, key=lambda key: (counts[key], key[0], -key[1]))
    return bw, alpha


def link_table(topology: Topology, per_direction: bool = False) -> pd.DataFrame:
    """One row per cable ("both"), or per direction where they differ (or with ``per_direction``)."""
    rows = []
    for lk in sorted(topology.links.values(), key=lambda lk: (min(lk.src, lk.dst), max(lk.src, lk.dst), lk.src)):
        back = topology.links.get((lk.dst, lk.src))
        same = back is not None and (back.bandwidth_GBps, back.alpha_us, back.lanes) == (
            lk.bandwidth_GBps, lk.alpha_us, lk.lanes)
        if same and not per_direction:
            if lk.src > lk.dst:
                continue  # the cable's row is the one from its lower end
            rows.append((lk.src, lk.dst, BOTH, lk.bandwidth_GBps, lk.alpha_us, lk.lanes))
        else:
            rows.append((lk.src, lk.dst, ONE_WAY, lk.bandwidth_GBps, lk.alpha_us, lk.lanes))
    return pd.DataFrame(rows, columns=list(LINK_COLUMNS))


TEXT_NUMBERS = ("bandwidth_GBps", "alpha_us", "lanes")


def editable_link_table(topology: Topology, per_direction: bool = False) -> pd.DataFrame:
    """``link_table`` with its numbers as text cells: a number cell of the grid dropped 'abc' without a word, a
    text cell hands it to ``topology_from_tables``, which names the row and field."""
    table = link_table(topology, per_direction)
    for column in TEXT_NUMBERS:
        table[column] = [f"{value:g}" for value in table[column]]
    return table


def topology_from_tables(base: Topology, nodes: pd.DataFrame, links: pd.DataFrame) -> Topology:
    """A validated topology from edited tables; positions of surviving nodes are kept."""
    new_nodes = [_node(base, k, row) for k, row in enumerate(nodes.to_dict("records")) if not _blank(row)]
    defaults = fabric_defaults(base)
    new_links: dict[tuple[int, int], Link] = {}
    for k, row in enumerate(links.to_dict("records")):
        if _blank(row):
            continue
        for link in _links(k, row, defaults):
            if (link.src, link.dst) in new_links:
                raise CcvizError(f"links: link row {k + 1} repeats the link {link.src}->{link.dst}; keep one row "
                                 "per cable (or per direction)", "links")
            new_links[(link.src, link.dst)] = link
    keep_pos = {n.id for n in new_nodes} == set(base.nodes)
    if not keep_pos:  # a new or removed node: let the layout place everything afresh
        new_nodes = [replace(n, pos=None) for n in new_nodes]
    return base.with_changes(nodes=new_nodes, links=new_links.values(), layout=base.layout if keep_pos else None)


def _missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value)) or value == ""


def _blank(row: dict) -> bool:
    return all(_missing(v) for v in row.values())


def _number(row: dict, key: str, where: str, cast=float, default=None):
    value = row.get(key)
    if isinstance(value, str):
        value = value.strip()  # a text cell: ' 50 ' is 50, '' is blank
    if _missing(value):
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
    reduce = not _missing(row.get("reduce")) and bool(row.get("reduce"))  # a switch that sums in the network
    return Node(node_id, kind, label, str(row.get("group") or "") or None, old.pos if old else None,
                True if _missing(copy) else bool(copy), buffer=bool(old and old.buffer), reduce=reduce,
                reduce_GBps=old.reduce_GBps if old and old.reduce and reduce else None)


def _links(k: int, row: dict, defaults: tuple[float, float]) -> list[Link]:
    """The directed links of one table row (two for a "both" cable); blanks take the fabric's defaults."""
    where = f"link row {k + 1}"
    src, dst = _number(row, "src", where, int), _number(row, "dst", where, int)
    bandwidth = _number(row, "bandwidth_GBps", where, default=defaults[0])
    alpha = _number(row, "alpha_us", where, default=defaults[1])
    lanes = _number(row, "lanes", where, float, default=1)
    if not (lanes >= 1 and float(lanes).is_integer()):
        raise CcvizError(f"lanes: {where} has {lanes:g} lanes; give a whole number of 1 or more", "lanes")
    lanes = int(lanes)
    if not (bandwidth > 0 and math.isfinite(bandwidth)):
        raise CcvizError(f"bandwidth_GBps: {where} has bandwidth {bandwidth:g}; it must be a positive number of "
                         "GB/s (leave it blank for the fabric's default); nothing was applied", "bandwidth_GBps")
    if not (alpha >= 0 and math.isfinite(alpha)):
        raise CcvizError(f"alpha_us: {where} has alpha {alpha:g}; it must be zero or positive microseconds; "
                         "nothing was applied", "alpha_us")
    direction = row.get("direction")
    direction = BOTH if _missing(direction) else str(direction).strip().lower()
    if direction not in DIRECTIONS:
        raise CcvizError(f"direction: {where} has direction {direction!r}; choose 'both' or 'one way'", "direction")
    pairs = [(src, dst)] + ([(dst, src)] if direction == BOTH else [])
    return [Link(a, b, bandwidth, alpha, lanes) for a, b in pairs]
