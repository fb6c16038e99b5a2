"""The library's arguments checked for their type at the entry points (``synthesize``, ``run``, ``lower_bound``,
``bandwidth_limit``): a caller passing None or a name where an object belongs gets one line saying what to pass,
not an AttributeError from deep inside."""

from __future__ import annotations

from typing import Any

from ccviz.errors import CcvizError
from ccviz.model.collectives import Collective
from ccviz.model.topology import Topology


def expect_topology(topology: Any) -> Topology:
    if not isinstance(topology, Topology):
        raise CcvizError(f"topology: expected a ccviz Topology (ccviz.load_topology('ring:n=8')), got "
                         f"{type(topology).__name__}", "topology")
    return topology


def expect_collective(collective: Any) -> Collective:
    if not isinstance(collective, Collective):
        raise CcvizError(f"collective: expected a ccviz Collective (ccviz.make_collective({collective!r:.40}, "
                         f"topology, size_bytes)), got {type(collective).__name__}", "collective")
    return collective
