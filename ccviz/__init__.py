"""ccviz: synthesize, verify and show collective-communication schedules.

Library entry points (the app and the CLI call exactly these)::

    import ccviz
    topo = ccviz.load_topology("dgx1")
    coll = ccviz.make_collective("allgather", topo, ccviz.parse_size("1GB"))
    sched = ccviz.synthesize(topo, coll, "ring")
    timeline = ccviz.simulate(sched)   # the judge: finish time, link use, violations

    result = ccviz.run(topo, "allgather", "tacos", size_bytes=1e9)   # all of it, plus the lower bound
    limit = ccviz.bandwidth_limit(topo, "allgather", 1e9)   # the fabric's limit and its bottleneck cut
"""

from ccviz.collectives import COLLECTIVES, Chunk, Collective, custom_collective, make_collective
from ccviz.errors import CcvizError
from ccviz.limit import BandwidthLimit, bandwidth_limit
from ccviz.loading import load_topology, load_topology_file
from ccviz.pipeline import RunResult, run
from ccviz.schedule import Schedule, Transfer
from ccviz.simulate import Timeline, Violation, simulate, verify
from ccviz.synth import REGISTRY, SynthOptions, algorithms_for, get_algorithm, synthesize
from ccviz.topology import Link, Node, Topology
from ccviz.units import format_size, format_time, parse_size

__version__ = "0.1.0"

__all__ = [
    "COLLECTIVES", "REGISTRY", "BandwidthLimit", "CcvizError", "Chunk", "Collective", "Link", "Node", "RunResult", "Schedule", "SynthOptions",
    "Timeline", "Topology", "Transfer", "Violation", "algorithms_for", "bandwidth_limit", "custom_collective", "format_size",
    "format_time", "get_algorithm", "load_topology", "load_topology_file", "make_collective", "parse_size",
    "run", "simulate", "synthesize", "verify",
]
