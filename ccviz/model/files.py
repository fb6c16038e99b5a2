"""Reading the project's JSON and YAML files (topologies, schedules, sweep grids): every failure is one
line that names the file and where in it."""

from __future__ import annotations

import json
from pathlib import Path

from ccviz.errors import CcvizError
from ccviz.model.validate import one_line


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
