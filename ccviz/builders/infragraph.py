"""InfraGraph (ASTRA-sim 3.0's infrastructure description) both ways, through the ``infragraph`` package
(the ``ccviz[infragraph]`` extra).

Writing: the fabric becomes one InfraGraph device, ``ccviz-fabric``, with one instance. Its components are
the GPUs (``gpu``, type xpu) and the switches, one component per kind of switch (``switch_c1b0r0``: copies,
buffers, reduces); its links are the fabric's link classes (bandwidth in GB/s, latency in us, each an
exact float); its edges join ``gpu[i]``/``switch_...[j]`` one to one. InfraGraph's edges are undirected: a
cable whose two directions differ becomes two edges on links marked ``oneway`` in their description, which
ccviz reads back as directed links (another tool sees an undirected link). Lanes, a switch's reduction
rate, each node's id, label, group and position, the switch-hop rule, the layout and the fabric's meta (with
its hardware link model, ``meta.link_model``: the sustained rates, protocol overheads and per-operation
latency the judge charges) ride in descriptions starting ``ccviz:``, so a schedule on the read-back fabric
finishes at the same time as on the written one.

Reading: any InfraGraph file goes through ``InfraGraphService.set_graph`` (InfraGraph's own validation and
its expansion of instances, slices and many-to-many edges); xpu components become GPUs, every other
component (switch, NIC, CPU, port, ...) a switch that forwards without copying, and every edge a cable at
its link's bandwidth and latency. A file ccviz wrote is read edge by edge so its directions come back.
``lstopo`` XML goes through InfraGraph's lstopo translator when the installed package has one.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from ccviz.errors import CcvizError
from ccviz.model.link_model import LinkModel
from ccviz.model.topology import Link, Node, Topology

FIELD = "infragraph"
DEVICE = "ccviz-fabric"
INSTANCE = "ccviz"
TAG = "ccviz:"
LATENCY_UNITS = {"us": 1.0, "ns": 1e-3, "ms": 1e3}  # to us


def _package():
    try:
        import infragraph
        from infragraph.infragraph_service import InfraGraphService
    except ImportError:
        raise CcvizError("infragraph: InfraGraph support needs the infragraph package; pip install "
                         "'ccviz[infragraph]'", FIELD) from None
    return infragraph, InfraGraphService


def _switch_component(node: Node) -> str:
    return f"switch_c{int(node.copy)}b{int(node.buffer)}r{int(node.reduce)}"


def to_infragraph(topology: Topology):
    """The fabric as an ``infragraph.Infrastructure``."""
    ig, _ = _package()
    infra = ig.Infrastructure(name=re.sub(r"[^\sa-zA-Z0-9\-_()<>\[\]]", "_", topology.name) or "ccviz",
                              description=topology.description or f"ccviz fabric {topology.name}")
    device = infra.devices.add(name=DEVICE, description="every GPU and switch of a ccviz fabric")
    index: dict[int, tuple[str, int]] = {}
    for i, g in enumerate(topology.gpus):
        index[g] = ("gpu", i)
    kinds: dict[str, list[int]] = {}
    for s in topology.switches:
        kinds.setdefault(_switch_component(topology.nodes[s]), []).append(s)
    component = device.components.add(name="gpu", count=len(topology.gpus),
                                      description=f"{TAG} {json.dumps({'nodes': _node_rows(topology, topology.gpus)})}")
    component.choice = ig.Component.XPU
    for name, ids in kinds.items():
        rates = [topology.nodes[s].reduce_GBps for s in ids]
        extras = {"reduce_GBps": rates, "nodes": _node_rows(topology, ids)}
        component = device.components.add(name=name, count=len(ids), description=f"{TAG} {json.dumps(extras)}")
        component.choice = ig.Component.SWITCH
        for j, s in enumerate(ids):
            index[s] = (name, j)
    classes: dict[tuple, str] = {}
    for (u, v), link in sorted(topology.links.items()):
        back = topology.links.get((v, u))
        two_way = back is not None and (back.bandwidth_GBps, back.alpha_us, back.lanes) == \
            (link.bandwidth_GBps, link.alpha_us, link.lanes)
        if two_way and u > v:
            continue  # written with (v, u)
        key = (link.bandwidth_GBps, link.alpha_us, link.lanes, not two_way)
        if key not in classes:
            classes[key] = f"link{len(classes)}"
            extras = {"lanes": link.lanes, "oneway": not two_way}
            new = device.links.add(name=classes[key], description=f"{TAG} {json.dumps(extras)}")
            new.physical.bandwidth.gigabytes_per_second = float(link.bandwidth_GBps)
            new.physical.latency.us = float(link.alpha_us)
        edge = device.edges.add(scheme=ig.DeviceEdge.ONE2ONE, link=classes[key])
        edge.ep1.component = "{}[{}]".format(*index[u])
        edge.ep2.component = "{}[{}]".format(*index[v])
    extras = {"switch_hop": topology.switch_hop, "meta": topology.meta, "name": topology.name,
              "layout": topology.layout}
    infra.instances.add(name=INSTANCE, device=DEVICE, count=1, description=f"{TAG} {json.dumps(extras)}")
    return infra


def _node_rows(topology: Topology, ids: list[int]) -> list[list]:
    """``[id, label, group, pos]`` of each node: the hardware link model tells a NIC's hop by its switch's
    group and a box by its GPUs' group, and the drawing needs labels and positions."""
    rows = []
    for i in ids:
        node = topology.nodes[i]
        rows.append([node.id, node.label, node.group, list(node.pos) if node.pos is not None else None])
    return rows


def _node_identity(extras: dict, k: int, fallback: int, name: str) -> dict:
    """The id, label, group and position ccviz wrote for the ``k``-th node of a component (older files: none)."""
    rows = extras.get("nodes")
    if not isinstance(rows, list) or k >= len(rows):
        return {"id": fallback}
    row = rows[k]
    if not (isinstance(row, list) and len(row) == 4 and isinstance(row[0], int) and isinstance(row[1], str)
            and (row[2] is None or isinstance(row[2], str))
            and (row[3] is None or (isinstance(row[3], list) and len(row[3]) == 2))):
        raise CcvizError(f"infragraph: {name}: a component's ccviz node row {row!r:.60} is not [id, label, group, "
                         "[x, y] or null]", FIELD)
    return {"id": row[0], "label": row[1], "group": row[2], "pos": tuple(row[3]) if row[3] is not None else None}


def infragraph_text(topology: Topology, fmt: str = "yaml") -> str:
    infra = to_infragraph(topology)
    return infra.serialize(encoding=infra.YAML if fmt == "yaml" else infra.JSON)


def write_infragraph(topology: Topology, path: str | Path) -> None:
    """Write the fabric as InfraGraph (JSON for a ``.json`` path, YAML otherwise), checked by InfraGraph."""
    p = Path(path)
    text = infragraph_text(topology, "json" if p.suffix.lower() == ".json" else "yaml")
    _validated(text, p.name)
    p.write_text(text)


def is_infragraph(data: Any) -> bool:
    """An InfraGraph document (``devices`` and ``instances``) rather than a ccviz fabric (``nodes``/``links``)."""
    return isinstance(data, dict) and "instances" in data and "devices" in data and "nodes" not in data


def _validated(payload: str | Any, name: str):
    """InfraGraph's own checks (schema, endpoints, self loops); one line naming what it refused."""
    _, service_class = _package()
    import warnings

    service = service_class()
    try:
        with warnings.catch_warnings():  # unconnected nodes: ccviz's own check names the GPUs that cannot meet
            warnings.simplefilter("ignore")
            service.set_graph(payload)
    except Exception as exc:  # noqa: BLE001 - the package raises ValueError, its own errors, KeyError, ...
        message = " ".join(str(exc).split())[:200] or type(exc).__name__
        if isinstance(exc, KeyError) and exc.args:
            message = f"it refers to {exc.args[0]!r}, which it does not define"
        raise CcvizError(f"infragraph: {name} is not a valid InfraGraph ({message})", FIELD) from None
    return service


def topology_from_infragraph(data: dict, name: str = "infragraph") -> Topology:
    """A ccviz fabric from an InfraGraph document (already parsed JSON/YAML)."""
    ig, _ = _package()
    try:
        infra = ig.Infrastructure().deserialize(json.dumps(data))
    except Exception as exc:  # noqa: BLE001 - openapiart raises TypeError/ValueError/KeyError
        message = " ".join(str(exc).split())[:200] or type(exc).__name__
        raise CcvizError(f"infragraph: {name} does not follow the InfraGraph schema ({message})", FIELD) from None
    service = _validated(infra, name)
    if _written_by_ccviz(infra):
        return _ccviz_fabric(infra, name)
    return _graph_fabric(service.get_networkx_graph(), infra, name)


def _written_by_ccviz(infra) -> bool:
    instances = list(infra.instances)
    return len(instances) == 1 and instances[0].name == INSTANCE and instances[0].device == DEVICE \
        and len(list(infra.edges)) == 0


def _extras(description: str | None) -> dict:
    text = (description or "").strip()
    if not text.startswith(TAG):
        return {}
    try:
        out = json.loads(text[len(TAG):])
    except json.JSONDecodeError:
        raise CcvizError(f"infragraph: a description starting '{TAG}' is not JSON: {text[:60]!r}", FIELD) from None
    return out if isinstance(out, dict) else {}


def _bandwidth_latency(link, name: str, notes: list[str] | None = None) -> tuple[float, float]:
    """GB/s and us of an InfraGraph link; GT/s is read as one bit per transfer (and said so in ``notes``)."""
    physical = link.physical
    bw = physical.bandwidth if physical is not None else None
    choice = bw.choice if bw is not None else None
    value = getattr(bw, choice) if choice else None
    if value is None:
        what = f" ({link.description})" if link.description else ""
        raise CcvizError(f"infragraph: {name}: link {link.name!r}{what} has no bandwidth; ccviz needs one per link "
                         "(physical: bandwidth: gigabytes_per_second: ...)", FIELD)
    gbps = value * {"gigabytes_per_second": 1.0, "gigabits_per_second": 1 / 8, "gigatransfers_per_second": 1 / 8}[choice]
    if choice == "gigatransfers_per_second" and notes is not None:
        notes.append(f"link {link.name!r} is given as {value:g} GT/s, read as {value:g} Gb/s = {gbps:g} GB/s (the "
                     "file names neither lanes nor line encoding)")
    lat = physical.latency
    alpha = 0.0
    lat_choice = lat.choice if lat is not None else None
    if lat_choice and getattr(lat, lat_choice) is not None:
        alpha = getattr(lat, lat_choice) * LATENCY_UNITS[lat_choice]
    elif notes is not None:
        notes.append(f"link {link.name!r} gives no latency: 0 us")
    return float(gbps), float(alpha)


def _ccviz_fabric(infra, name: str) -> Topology:
    """A file ccviz wrote: component indices and edge order give the fabric back link for link."""
    device = next(d for d in infra.devices if d.name == DEVICE)
    ids: dict[str, list[int]] = {}
    nodes: list[Node] = []
    for component in device.components:
        ids[component.name] = []
        extras = _extras(component.description)
        for k in range(component.count or 0):
            identity = _node_identity(extras, k, len(nodes), name)
            ids[component.name].append(identity["id"])
            if component.choice == "xpu":
                nodes.append(Node(kind="gpu", **identity))
            else:
                flags = re.fullmatch(r"switch_c([01])b([01])r([01])", component.name)
                if not flags:
                    raise CcvizError(f"infragraph: {name}: component {component.name!r} is not one ccviz writes",
                                     FIELD)
                rates = extras.get("reduce_GBps") or []
                rate = rates[k] if len(rates) > k else None
                reduce = flags.group(3) == "1"
                nodes.append(Node(kind="switch", copy=flags.group(1) == "1", buffer=flags.group(2) == "1",
                                  reduce=reduce, reduce_GBps=rate if reduce else None, **identity))
    if len({node.id for node in nodes}) != len(nodes):
        raise CcvizError(f"infragraph: {name}: the components' ccviz node rows give one id to several nodes", FIELD)
    links_by_name = {link.name: link for link in device.links}
    links: list[Link] = []
    for edge in device.edges:
        ends = []
        for ep in (edge.ep1, edge.ep2):
            m = re.fullmatch(r"([^\[\]]+)\[(\d+)\]", ep.component or "")
            if not m or m.group(1) not in ids or int(m.group(2)) >= len(ids[m.group(1)]):
                raise CcvizError(f"infragraph: {name}: edge endpoint {ep.component!r} names no component", FIELD)
            ends.append(ids[m.group(1)][int(m.group(2))])
        link = links_by_name[edge.link]
        gbps, alpha = _bandwidth_latency(link, name)
        extras = _extras(link.description)
        lanes = int(extras.get("lanes", 1))
        links.append(Link(ends[0], ends[1], gbps, alpha, lanes))
        if not extras.get("oneway"):
            links.append(Link(ends[1], ends[0], gbps, alpha, lanes))
    extras = _extras(next(iter(infra.instances)).description)
    layout = extras.get("layout")
    meta = extras.get("meta") or {}
    if not isinstance(meta, dict):
        raise CcvizError(f"infragraph: {name}: the instance's ccviz meta is not an object", FIELD)
    if "link_model" in meta:  # every key checked, one line naming a bad one
        meta = {**meta, "link_model": LinkModel.from_dict(meta["link_model"]).to_dict()}
    return Topology(str(extras.get("name") or infra.name or name), nodes, links, description=infra.description or "",
                    switch_hop=extras.get("switch_hop", "paid"), meta=meta,
                    layout=layout if isinstance(layout, str) else None)


def _graph_fabric(graph, infra, name: str) -> Topology:
    """Any other InfraGraph: xpus are GPUs, every other component a forwarding switch, edges cables."""
    def natural(node: str) -> list:
        return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", node)]

    gpus = sorted((n for n, d in graph.nodes(data=True) if d.get("type") == "xpu"), key=natural)
    if not gpus:
        raise CcvizError(f"infragraph: {name} has no xpu component (no GPU); ccviz needs at least one", FIELD)
    others = sorted((n for n in graph.nodes if n not in set(gpus)), key=natural)
    ids = {n: i for i, n in enumerate(gpus + others)}
    nodes = [Node(i, "gpu", label=n) for i, n in enumerate(gpus)]
    nodes += [Node(ids[n], "switch", label=n, copy=False) for n in others]
    links_by_name = _all_links(infra)
    links: list[Link] = []
    notes: list[str] = []
    for u, v, data in graph.edges(data=True):
        link = links_by_name.get(data.get("link"))
        if link is None:
            raise CcvizError(f"infragraph: {name}: edge {u} - {v} names link {data.get('link')!r}, which is not "
                             "defined", FIELD)
        gbps, alpha = _bandwidth_latency(link, name, notes)
        links += [Link(ids[u], ids[v], gbps, alpha), Link(ids[v], ids[u], gbps, alpha)]
    kinds = sorted({d.get("type", "?") for n, d in graph.nodes(data=True) if n not in set(gpus)})
    meta = {"source": "infragraph", "assumptions": [
        f"{len(gpus)} xpu component(s) are the GPUs; the {len(others)} other component(s) ({', '.join(kinds)}) "
        "forward without copying or summing", "InfraGraph edges are undirected: each is a cable of its link's "
        "bandwidth in both directions", *sorted(set(notes))]}
    try:
        return Topology(infra.name or name, nodes, links, description=infra.description or "", meta=meta)
    except CcvizError as exc:
        raise CcvizError(f"infragraph: {name}: {exc}", FIELD) from None


def _all_links(infra) -> dict[str, Any]:
    out = {link.name: link for link in infra.links}
    for device in infra.devices:
        for link in device.links:
            out.setdefault(link.name, link)
    return out


def lstopo_to_fabric(path: str | Path) -> Topology:
    """An ``lstopo`` XML (hwloc's machine description) through InfraGraph's lstopo translator, then read like
    any InfraGraph (its links must carry bandwidths for ccviz to time them)."""
    _package()
    try:
        from infragraph.translators.lstopo_translator import LstopoParser
    except ImportError:
        raise CcvizError("infragraph: the installed infragraph has no lstopo translator", FIELD) from None
    p = Path(path)
    try:
        infra = LstopoParser(str(p)).parse()
    except Exception as exc:  # noqa: BLE001 - the translator's own errors (XML syntax, missing objects)
        raise CcvizError(f"infragraph: {p.name}: InfraGraph's lstopo translator refused it "
                         f"({' '.join(str(exc).split())[:160]})", FIELD) from None
    return topology_from_infragraph(json.loads(infra.serialize(encoding=infra.JSON)), p.name)
