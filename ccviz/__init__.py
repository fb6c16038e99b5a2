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
import sys
import types
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_HOME = {
    "COLLECTIVES": "ccviz.collectives", "Chunk": "ccviz.collectives", "Collective": "ccviz.collectives",
    "custom_collective": "ccviz.collectives", "make_collective": "ccviz.collectives",
    "CcvizError": "ccviz.errors",
    "BandwidthLimit": "ccviz.limit", "bandwidth_limit": "ccviz.limit",
    "load_topology": "ccviz.loading", "load_topology_file": "ccviz.loading",
    "RunResult": "ccviz.pipeline", "run": "ccviz.pipeline",
    "Replay": "ccviz.judge.replay", "replay": "ccviz.judge.replay",
    "Schedule": "ccviz.schedule", "Transfer": "ccviz.schedule",
    "Timeline": "ccviz.simulate", "Violation": "ccviz.simulate", "simulate": "ccviz.simulate",
    "verify": "ccviz.simulate",
    "REGISTRY": "ccviz.synth", "SynthOptions": "ccviz.synth", "algorithms_for": "ccviz.synth",
    "get_algorithm": "ccviz.synth", "synthesize": "ccviz.synth",
    "Link": "ccviz.topology", "Node": "ccviz.topology", "Topology": "ccviz.topology",
    "format_size": "ccviz.units", "format_time": "ccviz.units", "parse_size": "ccviz.units",
}

__all__ = [
    "COLLECTIVES", "REGISTRY", "BandwidthLimit", "CcvizError", "Chunk", "Collective", "Link", "Node", "Replay", "RunResult", "Schedule", "SynthOptions",
    "Timeline", "Topology", "Transfer", "Violation", "algorithms_for", "bandwidth_limit", "custom_collective", "format_size",
    "format_time", "get_algorithm", "load_topology", "load_topology_file", "make_collective", "parse_size",
    "replay", "run", "simulate", "synthesize", "verify",
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
    """Keeps ``ccviz.simulate`` the function: importing the submodule of the same name would otherwise
    overwrite the package attribute with the module (eager imports used to rebind it afterwards)."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _HOME and isinstance(value, types.ModuleType) and value.__name__ == f"{__name__}.{name}":
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


if TYPE_CHECKING:  # static analysers and IDEs see the eager imports
    from ccviz.collectives import COLLECTIVES, Chunk, Collective, custom_collective, make_collective
    from ccviz.errors import CcvizError
    from ccviz.judge.replay import Replay, replay
    from ccviz.limit import BandwidthLimit, bandwidth_limit
    from ccviz.loading import load_topology, load_topology_file
    from ccviz.pipeline import RunResult, run
    from ccviz.schedule import Schedule, Transfer
    from ccviz.simulate import Timeline, Violation, simulate, verify
    from ccviz.synth import REGISTRY, SynthOptions, algorithms_for, get_algorithm, synthesize
    from ccviz.topology import Link, Node, Topology
    from ccviz.units import format_size, format_time, parse_size
