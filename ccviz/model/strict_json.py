"""Strict JSON for every ``--json`` answer: a non-finite number (which no valid result holds) is written as
null, never as Infinity or NaN, which JSON does not have."""

from __future__ import annotations

import json
import math
from typing import Any


def dumps(obj: Any) -> str:
    """``obj`` as strict JSON (non-finite floats as null)."""
    return json.dumps(_finite(obj), allow_nan=False)


def _finite(obj: Any) -> Any:
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj
