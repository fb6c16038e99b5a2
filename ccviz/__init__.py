"""ccviz: synthesize, verify and show collective-communication schedules.

Library entry points (the app and the CLI call exactly these)::

    import ccviz
    topo = ccviz.load_topology("dgx1")
    coll = ccviz.make_collective("allgather", topo, ccviz.parse_size("1GB"))
    sched = ccviz.synthesize(topo, coll, "ring")
    timeline = ccviz.simulate(sched)   # the judge: finish time, link use, violations

    result = ccviz.run(topo, "allgather", "tacos", size_bytes=1e9)   # all of it, plus the lower bound
    limit = ccviz.bandwidth_limit(topo, "allgather", 1e9)   # the fabric's limit and its bottleneck cut
    second = ccviz.replay(sched, engine="ns3")   # packet-level replay beside the judge (the ns3 extra)

The names are resolved on first use (module ``__getattr__``): ``import ccviz`` stays instant, so the
command line does not pay for numpy, networkx or the solvers before it needs them.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_HOME = {
    "COLLECTIVES": "ccviz.model.collectives", "Chunk": "ccviz.model.collectives", "Collective": "ccviz.model.collectives",
    "custom_collective": "ccviz.model.collectives", "make_collective": "ccviz.model.collectives",
    "CcvizError": "ccviz.errors",
    "BandwidthLimit": "ccviz.bounds.limit", "bandwidth_limit": "ccviz.bounds.limit",
    "load_topology": "ccviz.builders.loading", "load_topology_file": "ccviz.builders.loading",
    "RunResult": "ccviz.runs.pipeline", "run": "ccviz.runs.pipeline",
    "Schedule": "ccviz.model.schedule", "Transfer": "ccviz.model.schedule",
    "Timeline": "ccviz.judge.simulate", "Violation": "ccviz.judge.simulate", "simulate": "ccviz.judge.simulate",
    "verify": "ccviz.judge.simulate",
    "Replay": "ccviz.judge.replay", "replay": "ccviz.judge.replay",
    "REGISTRY": "ccviz.synth", "SynthOptions": "ccviz.synth", "algorithms_for": "ccviz.synth",
    "get_algorithm": "ccviz.synth", "synthesize": "ccviz.synth",
    "Link": "ccviz.model.topology", "Node": "ccviz.model.topology", "Topology": "ccviz.model.topology",
    "format_size": "ccviz.model.units", "format_time": "ccviz.model.units", "parse_size": "ccviz.model.units",
    "explained_cost": "ccviz.bounds.explained", "reproduce_explainer": "ccviz.runs.explainer",
}

__all__ = [
    "COLLECTIVES", "REGISTRY", "BandwidthLimit", "CcvizError", "Chunk", "Collective", "Link", "Node", "Replay", "RunResult", "Schedule", "SynthOptions",
    "Timeline", "Topology", "Transfer", "Violation", "algorithms_for", "bandwidth_limit", "custom_collective", "format_size",
    "format_time", "get_algorithm", "load_topology", "load_topology_file", "make_collective", "parse_size",
    "replay", "run", "simulate", "synthesize", "verify", "explained_cost", "reproduce_explainer",
]


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'ccviz' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOME})


class _Package(types.ModuleType):
    """Keeps ``ccviz.judge.simulate`` the function: importing the old module path of the same name (an alias of
    ``ccviz.judge.simulate``) would otherwise overwrite the package attribute with the module."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _HOME and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package

# Module paths from before the stage subpackages (``ccviz.judge.simulate`` -> ``ccviz.judge.simulate``): notebooks
# that import them keep working. Each old path is the same module object, imported only when asked for.
MOVED = {
    f"ccviz.{module}": f"ccviz.{stage}.{module}"
    for stage, modules in {
        "model": ("units", "validate", "topology", "physics", "collectives", "schedule", "routing", "footprint",
                  "files"),
        "builders": ("loading",),
        "judge": ("simulate", "simulate_fast", "timeline"),
        "bounds": ("cost", "limit"),
        "interop": ("msccl", "export", "importers"),
        "runs": ("pipeline", "compare", "sweep", "grid", "reproduce"),
    }.items()
    for module in modules
}


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Answers an old module path with the module at its new home (the same object, not a copy)."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        return importlib.util.spec_from_loader(fullname, self) if fullname in MOVED else None

    def __init__(self) -> None:
        self._own_specs: dict[str, importlib.machinery.ModuleSpec] = {}

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = importlib.import_module(MOVED[spec.name])
        self._own_specs[spec.name] = module.__spec__
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        # the import system stamped the alias's spec on the module: put its own back
        module.__spec__ = self._own_specs.pop(module.__spec__.name, module.__spec__)


if not any(isinstance(finder, _MovedModules) for finder in sys.meta_path):
    sys.meta_path.append(_MovedModules())


if TYPE_CHECKING:  # static analysers and IDEs see the eager imports
    from ccviz.bounds.limit import BandwidthLimit, bandwidth_limit
    from ccviz.builders.loading import load_topology, load_topology_file
    from ccviz.errors import CcvizError
    from ccviz.judge.replay import Replay, replay
    from ccviz.judge.simulate import Timeline, Violation, simulate, verify
    from ccviz.model.collectives import COLLECTIVES, Chunk, Collective, custom_collective, make_collective
    from ccviz.model.schedule import Schedule, Transfer
    from ccviz.model.topology import Link, Node, Topology
    from ccviz.model.units import format_size, format_time, parse_size
    from ccviz.runs.pipeline import RunResult, run
    from ccviz.synth import REGISTRY, SynthOptions, algorithms_for, get_algorithm, synthesize
