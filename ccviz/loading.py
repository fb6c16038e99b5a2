"""Resolve a topology argument: a file path (project or reference format) or a builder spec."""

from __future__ import annotations

import json
from pathlib import Path

from ccviz.builders import ALIASES, BUILDERS, build
from ccviz.errors import CcvizError
from ccviz.topology import Topology


def load_topology(spec: str | Path | Topology) -> Topology:
    """Accept ``path.json``/``path.yaml`` or ``name[:key=value,...]`` (DESIGN section 5)."""
    if isinstance(spec, Topology):
        return spec
    text = str(spec).strip()
    if not text:
        raise CcvizError("topology: empty topology argument; give a file path or a builder such as ring:n=8",
                         "topology")
    path = Path(text)
    if path.is_file() or path.suffix.lower() in (".json", ".yaml", ".yml"):
        return load_topology_file(path)
    name = text.partition(":")[0].strip().lower()
    if "/" in text and name not in BUILDERS and name not in ALIASES:
        return load_topology_file(path)
    return build(text)


def load_topology_file(path: str | Path) -> Topology:
    """Read a topology file in the project's format or the papers' reference format."""
    p = Path(path)
    if not p.is_file():
        raise CcvizError(f"topology: file {str(path)!r} does not exist", "topology")
    text = p.read_text()
    try:
        if p.suffix.lower() in (".yaml", ".yml"):
            import yaml

            data = yaml.safe_load(text)
        else:
            data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CcvizError(f"topology: {p.name} is not valid JSON ({exc.msg} at line {exc.lineno})", "topology") from None
    except Exception as exc:  # yaml.YAMLError and friends
        raise CcvizError(f"topology: {p.name} could not be parsed ({exc})", "topology") from None
    try:
        return Topology.from_dict(data, name=p.stem)
    except CcvizError as exc:
        raise CcvizError(f"{p.name}: {exc}", exc.field) from None
