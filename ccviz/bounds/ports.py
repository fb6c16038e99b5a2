"""The port budget of a formula: how many links a rank drives at once, and what fewer ports cost.

A textbook formula silently assumes every rank can drive as many links at once as its schedule wants: pipelined
DBT's interior node receives from two children while, as a leaf of the other tree, it sends to a parent; a
pipelined tree's node feeds two children; the bidirectional ring sends both ways. On a fabric whose GPUs have
fewer ports (a star: one link per GPU to the switch), those links share one port and the M/BW term grows by
``links / P`` at its steady state (``port_load``). Without the budget the formula can sit below the fabric's own limit (pipelined DBT on an 8-GPU
star at 16 MB: 372.6 us against the 560 us limit), which no schedule can. ``ports_needed`` says how many links
the formula drives per direction; ``apply_ports`` raises its M/BW term to the bytes its busiest rank moves through ``P`` ports; the one-port
floor (``one_port_floor``) is the bandwidth any schedule needs when each rank has a single port, so a formula
below it names the assumption that puts it there. The validation of ``--ports`` lives here only.
"""

from __future__ import annotations

from dataclasses import dataclass

from ccviz.errors import CcvizError
from ccviz.model.topology import Topology

# Links a rank drives at once per direction in the formula's own model (absent: 1, one partner at a time).
_DRIVEN: dict[str, int] = {
    "dbt": 2,  # interior of one tree (two children) while a leaf of the other (its parent): 2 links each way
    "pipelined-tree": 2,  # a node's two children at once (reduce: in, broadcast: out)
    "ring-bidir": 2,  # both ring neighbours at once
}
_WHY = {
    "dbt": "DBT's two trees at once: a rank is an interior node of one tree (two children) and a leaf of the other "
           "(its parent), so it drives 2 links each way (the reference counts up to 3 concurrent partners)",
    "pipelined-tree": "a pipelined binary tree node talks to its two children at once",
    "ring-bidir": "the bidirectional ring sends to both neighbours at once",
}


def check_ports(ports: int | None, n: int | None = None) -> int | None:
    """The one place ``--ports`` is validated: None (the formula's own assumption) or 1 <= P (<= N-1)."""
    if ports is None:
        return None
    if isinstance(ports, bool) or not isinstance(ports, int) or ports < 1:
        raise CcvizError(f"ports: the per-rank port budget is a whole number >= 1, got {ports!r}", "ports")
    if n is not None and ports > max(1, n - 1):
        raise CcvizError(f"ports: a rank has at most N-1 = {n - 1} partners, got {ports}; use --ports 1 to "
                         f"{n - 1}", "ports")
    return ports


def ports_needed(collective: str, algorithm: str) -> int:
    """Links per direction a rank drives at once in the formula's model (1: one partner at a time)."""
    if algorithm == "dbt" or algorithm == "pipelined-tree":
        return _DRIVEN[algorithm] if collective in ("allreduce", "broadcast", "reduce") else 1
    return _DRIVEN.get(algorithm, 1)


def port_load(collective: str, algorithm: str, n: int) -> float:
    """Bytes (in units of M) the formula's busiest rank moves each way in all, at its steady state: the links it
    drives at once times the formula's asymptotic M/BW coefficient (ring-bidir: the ring's, one direction each).
    Through P ports they need at least ``port_load / P`` M/BW."""
    from ccviz.bounds.cost import formula

    base = "ring" if algorithm == "ring-bidir" else algorithm
    steady = formula(collective, base, n, 1.0, 1.0, 1.0, segments=1 << 20).n_beta
    return steady if algorithm == "ring-bidir" else ports_needed(collective, algorithm) * steady


def one_port_floor(collective: str, n: int) -> float | None:
    """The M/BW coefficient no schedule beats when each rank has one port of BW each way (None: none known).

    AllReduce: each rank must send and receive 2(N-1)/N M in the reduce-scatter/all-gather model (Patarasuk and
    Yuan's bound, which pipelined trees into a hub beat only by reducing in a switch); AllGather, ReduceScatter
    and AllToAll: (N-1)/N M enters or leaves each rank; Broadcast, Reduce: M enters each non-root rank.
    """
    share = (n - 1) / n
    return {"allreduce": 2 * share, "allgather": share, "reducescatter": share, "alltoall": share,
            "broadcast": 1.0, "reduce": 1.0, "scatter": share, "gather": share}.get(collective)


@dataclass(frozen=True)
class PortBudget:
    """What the port budget did to one formula (``to_dict`` goes into ``cost --json`` as ``port_budget``)."""

    ports: int  # the budget the answer is priced at
    needed: int  # links per direction the formula drives at once
    assumed: bool  # True: no --ports given, the formula's own assumption (ports = needed) was used
    factor: float  # the M/BW term was multiplied by this (at least 1)
    one_port_floor: float | None  # M/BW coefficient of the one-port bound, None where none is known
    note: str

    def to_dict(self) -> dict[str, object]:
        return {"ports": self.ports, "ports_needed": self.needed, "ports_assumed": self.assumed,
                "beta_factor": self.factor, "one_port_floor_n_beta": self.one_port_floor, "note": self.note}


def apply_ports(collective: str, algorithm: str, n: int, n_beta: float, ports: int | None) -> tuple[float, PortBudget]:
    """(n_beta under the budget, what was done): ``ports`` None keeps the formula's own assumption and says so."""
    ports = check_ports(ports, n)
    needed = ports_needed(collective, algorithm)
    floor = one_port_floor(collective, n)
    assumed = ports is None
    p = needed if assumed else ports
    scaled = max(n_beta, port_load(collective, algorithm, n) / p) if needed > p else n_beta
    factor = scaled / n_beta if n_beta > 0 else 1.0
    why = _WHY.get(algorithm, "one partner at a time")
    if assumed and needed > 1:
        note = (f"{needed} ports per rank assumed ({why}); with fewer, the rank's "
                f"{port_load(collective, algorithm, n):.4g} M each way share them (--ports 1 prices a one-link GPU, "
                "e.g. a star)")
    elif factor > 1:
        note = (f"{p} port(s) per rank for {needed} links driven at once ({why}): the rank's "
                f"{port_load(collective, algorithm, n):.4g} M each way through {p} port(s) sets M/BW to "
                f"{scaled:.4g}")
    else:
        note = f"{p} port(s) per rank suffice ({why})"
    if floor is not None and scaled < floor - 1e-9:
        note += (f"; {scaled:.4g} M/BW is below the one-port bound {floor:.4g} M/BW: it holds only on a fabric "
                 f"giving each rank {max(needed, 2)}+ ports")
    return scaled, PortBudget(p, needed, assumed, factor, floor, note)


def fabric_ports(topology: Topology, ranks: list[int] | None = None) -> int:
    """Ports the fabric gives every rank: the fewest distinct out-links any of the ranks has (a star: 1)."""
    ranks = ranks if ranks is not None else topology.gpus
    counts = [len({lk.dst for lk in topology.out_links[g] if lk.dst != g}) for g in ranks]
    return max(1, min(counts, default=1))
