"""The closed form for the schedule that ran: the formula's alpha and bandwidth read from the links the schedule
used, its M/BW priced at the ports the fabric gives each rank (``ccviz.bounds.ports``).

Apart from ``ccviz.bounds.cost`` because the port budget itself needs the formulas (``ports.port_load``)."""

from __future__ import annotations

from collections.abc import Iterable

from ccviz.bounds.cost import FORMULAS, CostResult, formula, used_link_parameters
from ccviz.bounds.ports import apply_ports, fabric_ports
from ccviz.errors import CcvizError
from ccviz.model.collectives import Collective
from ccviz.model.topology import Topology


def schedule_formula(topology: Topology, collective: Collective, algorithm: str,
                     links: Iterable[tuple[int, int]]) -> CostResult | None:
    """The textbook cost evaluated for exactly one schedule: its rank count, buffer, chunks per GPU as the
    pipelining depth S, the links it uses and the ports the fabric gives each rank (``ccviz.bounds.ports``).
    None when the algorithm has no closed form."""
    if (collective.name, algorithm) not in FORMULAS:
        return None
    alpha_us, bw = used_link_parameters(topology, links)
    try:
        result = formula(collective.name, algorithm, collective.n_ranks, collective.size_bytes, alpha_us, bw,
                         segments=collective.chunks_per_rank)
    except CcvizError:  # e.g. a power-of-two formula on another rank count
        return None
    ports = min(fabric_ports(topology, list(collective.ranks)), max(1, collective.n_ranks - 1))
    n_beta, budget = apply_ports(collective.name, algorithm, collective.n_ranks, result.n_beta, ports)
    if budget.factor == 1:
        return result
    beta_s = collective.size_bytes / (bw * 1e9)
    return CostResult(result.time_s + (n_beta - result.n_beta) * beta_s, result.n_alpha, n_beta,
                      f"{result.text}; M/BW x{budget.factor:.4g}: the fabric gives each rank {budget.ports} port(s), "
                      f"the formula drives {budget.needed} links at once")
