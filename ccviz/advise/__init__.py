"""The fabric advisor: which cable, bandwidth or switch to buy for a workload mix (``ccviz advise``).

Names resolve on first use, so the command line can register ``advise`` without loading numpy or networkx."""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {
    "Advice": "advisor", "advise": "advisor", "CostTable": "costs", "load_costs": "costs", "MixItem": "mix",
    "parse_mix": "mix", "Upgrade": "upgrades", "apply_upgrades": "upgrades", "upgrades_from_list": "upgrades",
}
__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'ccviz.advise' has no attribute {name!r}")
    return getattr(importlib.import_module(f"ccviz.advise.{_WHERE[name]}"), name)
