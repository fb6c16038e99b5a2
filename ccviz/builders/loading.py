"""Resolve a topology argument: a file path (project or reference format) or a builder spec."""

from __future__ import annotations

from pathlib import Path

from ccviz.builders import ALIASES, BUILDERS, build
from ccviz.errors import CcvizError
from ccviz.model.files import read_structured
from ccviz.model.topology import Topology


def load_topology(spec: str | Path | Topology) -> Topology:
    """Accept ``path.json``/``path.yaml`` or ``name[:key=value,...]`` (the CLI and library topology argument)."""
    if isinstance(spec, Topology):
        return spec
    text = str(spec).strip()
    if not text:
        raise CcvizError("topology: empty topology argument; give a file path or a builder such as ring:n=8",
                         "topology")
    path = Path(text)
    if path.is_file() or path.suffix.lower() in (".json", ".yaml", ".yml", ".xml"):
        return load_topology_file(path)
    name = text.partition(":")[0].strip().lower()
    if "/" in text and name not in BUILDERS and name not in ALIASES:
        return load_topology_file(path)
    return build(text)


def load_topology_file(path: str | Path) -> Topology:
    """Read a topology file in the project's format or the papers' reference format."""
    p = Path(path)
    if p.suffix.lower() == ".xml":  # hwloc's lstopo output, through InfraGraph's translator
        from ccviz.builders.infragraph import lstopo_to_fabric

        return lstopo_to_fabric(p)
    data = read_structured(p, "topology")
    from ccviz.builders.infragraph import is_infragraph

    if is_infragraph(data):  # ASTRA-sim 3.0's infrastructure description
        from ccviz.builders.infragraph import topology_from_infragraph

        return topology_from_infragraph(data, p.name)
    try:
        return Topology.from_dict(data, name=p.stem)
    except CcvizError as exc:
        raise CcvizError(f"{p.name}: {exc}", exc.field) from None
