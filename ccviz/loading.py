"""Resolve a topology argument: a file path (project or reference format) or a builder spec."""

from __future__ import annotations

import json
from pathlib import Path

from ccviz.builders import ALIASES, BUILDERS, build
from ccviz.errors import CcvizError
from ccviz.topology import Topology
from ccviz.validate import one_line


def load_topology(spec: str | Path | Topology) -> Topology:
    """Accept ``path.json``/``path.yaml`` or ``name[:key=value,...]`` (the CLI and library topology argument)."""
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


def read_structured(path: str | Path, field: str) -> object:
    """Parse a JSON or YAML file; every failure (missing, not UTF-8, syntax) is one line with line/column."""
    p = Path(path)
    if not p.is_file():
        raise CcvizError(f"{field}: file {str(path)!r} does not exist", field)
    try:
        text = p.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CcvizError(f"{field}: {p.name} is not UTF-8 text (byte {exc.start}); save it as UTF-8", field) from None
    except OSError as exc:
        raise CcvizError(f"{field}: cannot read {p.name} ({exc.strerror})", field) from None
    if p.suffix.lower() in (".yaml", ".yml"):
        import yaml

        try:
            return yaml.safe_load(text)
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark
            where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
            raise CcvizError(f"{field}: {p.name} is not valid YAML ({exc.problem}{where})", field) from None
        except yaml.YAMLError as exc:
            raise CcvizError(f"{field}: {p.name} is not valid YAML ({one_line(exc)})", field) from None
    try:
        return json.loads(text, parse_constant=_refuse_constant)
    except json.JSONDecodeError as exc:
        raise CcvizError(
            f"{field}: {p.name} is not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})", field
        ) from None
    except RecursionError:
        raise CcvizError(f"{field}: {p.name} is nested too deeply", field) from None


def _refuse_constant(name: str) -> float:
    """JSON has no Infinity/NaN; Python's reader accepts them, we do not."""
    raise CcvizError(f"{name} is not a JSON number; write a finite number", "json")


def load_topology_file(path: str | Path) -> Topology:
    """Read a topology file in the project's format or the papers' reference format."""
    p = Path(path)
    data = read_structured(p, "topology")
    try:
        return Topology.from_dict(data, name=p.stem)
    except CcvizError as exc:
        raise CcvizError(f"{p.name}: {exc}", exc.field) from None
