"""Reading the project's JSON and YAML files (topologies, schedules, sweep grids): every failure is one
line that names the file and where in it."""

from __future__ import annotations

import json
import re
from pathlib import Path

from ccviz.errors import CcvizError
from ccviz.model.validate import one_line


def read_structured(path: str | Path, field: str) -> object:
    """Parse a JSON or YAML file; every failure (missing, not UTF-8, syntax) is one line with line/column."""
    p = Path(path)
    check_readable_file(p, field)
    try:
        text = p.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CcvizError(f"{field}: {p.name} is not UTF-8 text (byte {exc.start}); save it as UTF-8", field) from None
    except OSError as exc:
        raise CcvizError(f"{field}: cannot read {p.name} ({exc.strerror})", field) from None
    if p.suffix.lower() in (".yaml", ".yml"):
        return parse_yaml(text, p.name, field)
    try:
        return json.loads(text, parse_constant=_refuse_constant)
    except json.JSONDecodeError as exc:
        raise CcvizError(
            f"{field}: {p.name} is not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})", field
        ) from None
    except RecursionError:
        raise CcvizError(f"{field}: {p.name} is nested too deeply", field) from None


MAX_FILE_BYTES = 200_000_000  # a topology or schedule file larger than this is not one a person meant
MAX_YAML_VALUES = 5_000_000  # an alias bomb (a: &a [x,x], b: [*a,*a], ...) expands exponentially when walked
MAX_YAML_DEPTH = 200  # 10,000 nested [ would exhaust the parser's recursion


def check_readable_file(p: Path, field: str) -> None:
    """Name the real problem: missing, a directory, a device (/dev/null), or too large to be a topology."""
    if not p.exists():
        raise CcvizError(f"{field}: file {str(p)!r} does not exist", field)
    if p.is_dir():
        raise CcvizError(f"{field}: {str(p)!r} is a directory; give a .json or .yaml file inside it", field)
    if not p.is_file():
        raise CcvizError(f"{field}: {str(p)!r} is not a regular file (a device or pipe); give a .json or .yaml "
                         "file", field)
    size = p.stat().st_size
    if size == 0:
        raise CcvizError(f"{field}: {p.name} is empty", field)
    if size > MAX_FILE_BYTES:
        raise CcvizError(f"{field}: {p.name} is {size / 1e6:.0f} MB; ccviz reads files up to "
                         f"{MAX_FILE_BYTES / 1e6:.0f} MB", field)


def parse_yaml(text: str, name: str, field: str) -> object:
    """YAML text parsed safely; a syntax error is one line naming the file, line and column."""
    import yaml

    try:
        return safe_yaml(text, name, field)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise CcvizError(f"{field}: {name} is not valid YAML ({exc.problem}{where})", field) from None
    except yaml.YAMLError as exc:
        raise CcvizError(f"{field}: {name} is not valid YAML ({one_line(exc)})", field) from None


def safe_yaml(text: str, name: str, field: str) -> object:
    """``yaml.safe_load`` that refuses alias bombs and deep nesting before they cost memory or the stack."""
    import yaml

    class Loader(yaml.SafeLoader):
        aliases = 0
        depth = 0

        def compose_node(self, parent, index):  # noqa: ANN001, ANN202 - PyYAML's hook
            Loader.depth += 1
            try:
                if Loader.depth > MAX_YAML_DEPTH:
                    raise CcvizError(f"{field}: {name} nests deeper than {MAX_YAML_DEPTH} levels", field)
                return super().compose_node(parent, index)
            finally:
                Loader.depth -= 1

    sizes: dict[int, int] = {}

    def expanded(node) -> int:  # noqa: ANN001 - a yaml Node; aliases share nodes, so memoize by identity
        if id(node) not in sizes:
            sizes[id(node)] = 1  # a recursive alias counts once
            if isinstance(node, yaml.SequenceNode):
                sizes[id(node)] = 1 + sum(expanded(c) for c in node.value)
            elif isinstance(node, yaml.MappingNode):
                sizes[id(node)] = 1 + sum(expanded(k) + expanded(v) for k, v in node.value)
        return sizes[id(node)]

    loader = Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        if expanded(node) > MAX_YAML_VALUES:
            raise CcvizError(f"{field}: {name} expands to {expanded(node):.3g} values through YAML aliases (*name); "
                             f"ccviz reads up to {MAX_YAML_VALUES:,} (an alias bomb would take gigabytes)", field)
        return loader.construct_document(node)
    except RecursionError:
        raise CcvizError(f"{field}: {name} nests too deeply", field) from None
    finally:
        loader.dispose()


def _refuse_constant(name: str) -> float:
    """JSON has no Infinity/NaN; Python's reader accepts them, we do not."""
    raise CcvizError(f"{name} is not a JSON number; write a finite number", "json")


def read_text_file(p: Path, field: str) -> str:
    """UTF-8 text, or an XML file in the encoding its declaration names (Latin-1 MSCCL files exist)."""
    raw = p.read_bytes()
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        declared = re.match(rb'\s*<\?xml[^>]*encoding=["\']([A-Za-z0-9._-]+)["\']', raw)
        if declared:
            try:
                return re.sub(r'encoding=["\'][A-Za-z0-9._-]+["\']', 'encoding="UTF-8"',
                              raw.decode(declared.group(1).decode()), count=1)
            except (LookupError, UnicodeDecodeError):
                pass
        raise CcvizError(f"{field}: {p.name} is not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start}) "
                         "and declares no encoding it is in; save it as UTF-8", field) from None
