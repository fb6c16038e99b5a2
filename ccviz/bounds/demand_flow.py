"""AllToAllv's exact bandwidth limit: the maximum concurrent flow of an arbitrary traffic matrix.

Rank s must move ``D[s, t]`` bytes to rank t. As for uniform AllToAll (``ccviz.bounds.concurrent_flow``,
whose fabric arrays and LP solver this reuses), no schedule moves more than T x bandwidth over a link in
time T, so the limit is the least T for which a fractional flow routes every pair's bytes within
T x bandwidth on every link; GPUs relay (they store), switches only forward, alpha plays no part.
A skewed matrix has no symmetry to fold: one LP with the commodities aggregated by source (source s's
flow delivers ``D[s, t]`` to each t; exact, every such flow splits into per-pair paths with the same
link loads), one commodity per rank that sends anything.

The interior point's value is then replaced by the bound its duals certify (weak duality: for link
prices p >= 0 with sum(p x bandwidth) = 1, T >= sum over pairs of D[s, t] x the p-shortest s -> t
distance), so the limit can only err low. Links with a positive price bind; a cut swept along the dual
distances (bytes that must leave a node set over the bandwidth leaving it) names the bottleneck, and its
time is a lower bound too.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ccviz.bounds.concurrent_flow import (
    BINDING,
    OPTIMAL_SLACK,
    FabricArrays,
    _incidence,
    _solve_lp,
    fabric_arrays,
)
from ccviz.errors import CcvizError
from ccviz.model.topology import Topology

if TYPE_CHECKING:
    from ccviz.bounds.cut import BandwidthLimit
    from ccviz.model.collectives import Collective

SWEEP_ROOTS = 64
# up to here the simplex (a vertex: duals exact, the certified value exact too); above, the interior point
# without crossover (its duals within ~1e-5 relative, so the certified value may be that much low, never high)
SIMPLEX_VARIABLES = 5_000  # measured: simplex 5.4 s vs interior point 0.8 s on dgxh100:boxes=4 (10k)


@dataclass(frozen=True)
class DemandFlow:
    """The LP's answer for ``demand_GB`` (n x n over ``ranks``, GB).

    ``seconds``: the limit. ``flows[k, e]``: GB of source ``sources[k]``'s commodity on link ``fabric.links[e]``
    (None unless asked for). ``prices``: the capacity rows' duals, normalized so sum(price x bandwidth) = 1.
    """

    seconds: float
    fabric: FabricArrays
    prices: np.ndarray
    ranks: tuple[int, ...]
    demand_GB: np.ndarray
    sources: list[int]  # rank indices with something to send, in ``flows`` row order
    flows: np.ndarray | None
    solve_s: float

    def binding_links(self) -> list[tuple[int, int]]:
        top = float(self.prices.max(initial=0.0))
        return [self.fabric.links[e] for e in np.flatnonzero(self.prices > BINDING * top)] if top > 0 else []


def demand_flow(topology: Topology, ranks: tuple[int, ...], demand_GB: np.ndarray, *, need_flows: bool = False,
                time_limit: float | None = None) -> DemandFlow:
    """The maximum concurrent flow of ``demand_GB[i, j]`` GB from ``ranks[i]`` to ``ranks[j]`` on ``topology``
    (other GPUs relay). ``need_flows`` also returns every source's flow, the one carrying the least link-bytes
    among the optimal ones (no needless detours: ``mcf`` splits it into paths)."""
    from scipy.sparse import hstack, identity, kron, vstack

    t0 = time.perf_counter()
    demand = np.array(demand_GB, dtype=float)
    np.fill_diagonal(demand, 0.0)
    a = fabric_arrays(topology)
    n_links = len(a.links)
    position = [a.index[r] for r in ranks]
    sources = [i for i in range(len(ranks)) if demand[i].sum() > 0]
    if not sources:
        raise CcvizError("matrix: nothing to send off the diagonal", "matrix")
    supplies = []
    for i in sources:
        b = np.zeros(len(a.nodes))
        np.add.at(b, position, -demand[i])
        b[position[i]] += demand[i].sum()
        supplies.append(b)
    k = len(sources)
    if k * n_links > MAX_LP_VARIABLES:
        raise CcvizError(f"matrix: its flow LP would have {k:,} senders x {n_links:,} links = {k * n_links:,} "
                         f"variables; at most {MAX_LP_VARIABLES:,} are solved here (fewer ranks, or a smaller fabric)",
                         "matrix")
    incidence = _incidence(a)
    conservation = kron(identity(k, format="csc"), incidence, format="csc")
    capacity = kron(np.ones((1, k)), identity(n_links, format="csc"), format="csc")
    t_column = np.concatenate([np.zeros(conservation.shape[0]), -a.capacity])[:, None]
    matrix = hstack([vstack([conservation, capacity]), t_column], format="csc")
    supply = np.concatenate(supplies)
    lower = np.concatenate([supply, np.full(n_links, -np.inf)])
    upper = np.concatenate([supply, np.zeros(n_links)])
    cost = np.zeros(k * n_links + 1)
    cost[-1] = 1.0
    simplex = k * n_links <= SIMPLEX_VARIABLES
    x, duals, value = _solve_lp(cost, matrix, lower, upper, np.full(k * n_links + 1, np.inf), time_limit, simplex)
    if need_flows:
        x = _least_weighted_flow(a, k, matrix, lower, upper, value, time_limit, simplex)
    prices = np.abs(duals[-n_links:])
    total = float((prices * a.capacity).sum())
    if total > 0:
        prices = prices / total
        value = min(value, certified_time(a, position, demand, prices))
    return DemandFlow(value, a, prices, tuple(ranks), demand, sources,
                      x[:-1].reshape(k, n_links) if need_flows else None, time.perf_counter() - t0)


MAX_LP_VARIABLES = 4_000_000  # 512 GPUs of dgxh100 (5,120 links): 2.6 M
SPINE_WEIGHT = 1.5  # a switch-to-switch link's weight in the least-flow tie-break (see _least_weighted_flow)


def _least_weighted_flow(a: FabricArrays, k: int, matrix, lower: np.ndarray, upper: np.ndarray, value: float,
                         time_limit: float | None, simplex: bool) -> np.ndarray:
    """Among the flows at the optimal time, one of least weighted link-bytes: no needless detour, and between
    two routes of as many links, the one relaying through a GPU (which stores) over the one through a chain
    of switches (leaf, spine, leaf), whose links must all be free at once: measured on railclos:boxes=4,gpus=8
    with a zipf:1.2 MoE matrix, mcf's booking ended 1.143 x the limit along the chains."""
    is_switch = ~a.is_gpu
    weight = np.where(is_switch[a.tail] & is_switch[a.head], SPINE_WEIGHT, 1.0)
    cost = np.concatenate([np.tile(weight, k), [0.0]])
    col_upper = np.full(len(cost), np.inf)
    col_upper[-1] = value * (1 + OPTIMAL_SLACK)
    x, _, _ = _solve_lp(cost, matrix, lower, upper, col_upper, time_limit, simplex)
    return x


def certified_time(a: FabricArrays, position: list[int], demand: np.ndarray, prices: np.ndarray) -> float:
    """sum over pairs of demand x the price-shortest distance: a lower bound for any prices (weak duality)."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import dijkstra

    graph = csr_matrix((prices, (a.tail, a.head)), shape=(len(a.nodes), len(a.nodes)))
    senders = np.flatnonzero(demand.sum(axis=1) > 0)
    dist = dijkstra(graph, directed=True, indices=[position[i] for i in senders])[:, position]
    return float((demand[senders] * dist).sum())


def demand_sweep_cut(flow: DemandFlow) -> tuple[frozenset[int], float, float]:
    """Among node sets ordered by dual distances, the one whose bytes leaving (or entering) over the bandwidth
    leaving (entering) it is largest: (node set, seconds, GB crossing)."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import dijkstra

    a = flow.fabric
    n_nodes = len(a.nodes)
    position = np.array([a.index[r] for r in flow.ranks])
    length = flow.prices + 1e-9 * max(float(flow.prices.max(initial=0.0)), 1e-12)
    graph = csr_matrix((length, (a.tail, a.head)), shape=(n_nodes, n_nodes))
    roots = position[np.linspace(0, len(position) - 1, min(SWEEP_ROOTS, len(position))).astype(int)]
    dist = dijkstra(graph, indices=roots)
    dist[~np.isfinite(dist)] = dist[np.isfinite(dist)].max() + 1
    orders = [*dist, *(-dist), np.arange(n_nodes, dtype=float)]
    src, dst = np.nonzero(flow.demand_GB)
    amount = flow.demand_GB[src, dst]
    best = (-1.0, frozenset(), 0.0)
    for key in orders:
        order = np.argsort(key, kind="stable")
        pos = np.empty(n_nodes, dtype=np.int64)
        pos[order] = np.arange(n_nodes)
        for sign in (1, -1):  # bytes leaving the prefix over links leaving it; then entering over entering
            tail, head = (a.tail, a.head) if sign == 1 else (a.head, a.tail)
            s_pos, t_pos = (pos[position[src]], pos[position[dst]]) if sign == 1 else \
                (pos[position[dst]], pos[position[src]])
            cap = np.zeros(n_nodes + 1)
            out = pos[tail] < pos[head]
            np.add.at(cap, pos[tail][out], a.capacity[out])
            np.add.at(cap, pos[head][out], -a.capacity[out])
            need = np.zeros(n_nodes + 1)
            cross = s_pos < t_pos
            np.add.at(need, s_pos[cross], amount[cross])
            np.add.at(need, t_pos[cross], -amount[cross])
            leaving, crossing = np.cumsum(cap)[:-2], np.cumsum(need)[:-2]
            with np.errstate(divide="ignore", invalid="ignore"):
                seconds = np.where((crossing > 0) & (leaving > 0), crossing / np.maximum(leaving, 1e-300), -1.0)
            if len(seconds) and seconds.max() > best[0] * (1 + 1e-12):
                i = int(seconds.argmax())
                inside = frozenset(a.nodes[j] for j in order[:i + 1])
                best = (float(seconds[i]), inside if sign == 1 else frozenset(a.nodes) - inside, float(crossing[i]))
    return best[1], max(best[0], 0.0), best[2]


def alltoallv_flow(topology: Topology, collective: Collective, need_flows: bool = False) -> DemandFlow:
    """The LP for a collective's matrix, solved once per topology and matrix (limit, bound and mcf share it)."""
    from ccviz.bounds.cut import CACHE
    from ccviz.model.traffic import matrix_of

    matrix = matrix_of(collective)
    key = ("alltoallv", tuple(collective.ranks), matrix.tobytes())
    per_topology = CACHE.setdefault(topology, {})
    found = per_topology.get((*key, True)) or (None if need_flows else per_topology.get((*key, False)))
    if found is None:
        found = per_topology[(*key, need_flows)] = demand_flow(topology, tuple(collective.ranks), matrix / 1e9,
                                                               need_flows=need_flows)
    return found


def matrix_limit_s(topology: Topology, collective: Collective) -> float:
    """The seconds bandwidth alone allows a collective's matrix on ``topology``: where it is AllToAll's uniform
    demand, AllToAll's own LP (reduced by the fabric's symmetry or twins: two NVL72 racks' matrix LP, 144 flows
    without them, took twophase past its time limit for 547 s), else the matrix's."""
    if uniform_over_fabric(topology, collective):
        from ccviz.bounds.alltoall_limit import alltoall_flow

        return alltoall_flow(topology).seconds_per_pair_GB * float(collective.meta["matrix"][0, 1]) / 1e9
    return alltoallv_flow(topology, collective).seconds


def uniform_over_fabric(topology: Topology, collective: Collective) -> bool:
    """Whether the matrix asks the same bytes of every ordered pair of the fabric's GPUs (AllToAll's demand)."""
    m = collective.meta.get("matrix")
    if m is None or tuple(collective.ranks) != tuple(topology.gpus):
        return False
    off = m[~np.eye(len(m), dtype=bool)]
    return bool(off[0] > 0 and np.all(off == off[0]))


def alltoallv_limit(topology: Topology, collective: Collective) -> BandwidthLimit:
    """The ``BandwidthLimit`` of an AllToAllv: the LP's time, its binding links and the swept cut in words."""
    from ccviz.bounds.alltoall_limit import link_names
    from ccviz.bounds.cut import BandwidthLimit, Cut, leaving
    from ccviz.bounds.limit import judged_fabric

    topology = judged_fabric(topology)  # sustained rates where the fabric declares the hardware model
    if uniform_over_fabric(topology, collective):  # AllToAll itself: its LP (folded by symmetry where it can)
        from dataclasses import replace

        from ccviz.bounds.alltoall_limit import alltoall_limit

        slots = int(topology.meta.get("buffer_ranks", topology.n_gpus))
        pair = float(collective.meta["matrix"][0, 1])
        limit = alltoall_limit(topology, pair * slots)
        return replace(limit, collective=collective.name, size_bytes=collective.size_bytes,
                       method=limit.method + " (the matrix is uniform: AllToAll's own LP)")
    flow = alltoallv_flow(topology, collective)
    inside, cut_s, crossing_GB = demand_sweep_cut(flow)
    outward = sum(flow.demand_GB[i, j] for i, r in enumerate(flow.ranks) for j, q in enumerate(flow.ranks)
                  if r in inside and q not in inside)
    links = tuple(leaving(topology, inside)) if outward >= crossing_GB * (1 - 1e-9) else \
        tuple(sorted(k for k in topology.links if k[1] in inside and k[0] not in inside))
    bandwidth = sum(topology.links[k].bandwidth_GBps * topology.links[k].lanes for k in links)
    binding = flow.binding_links()
    gpus_in = sorted(g for g in flow.ranks if g in inside)
    across = (f"{crossing_GB:.4g} GB must cross the {len(links)} link(s){link_names(links)} between "
              f"{len(gpus_in)} GPU(s) and the rest, {bandwidth:g} GB/s")
    bind = f"{len(binding)} link(s) bind in the flow LP{link_names(binding)}"
    if cut_s >= flow.seconds * (1 - 1e-6):
        words = f"{across}; this cut explains the whole limit ({bind})"
    else:
        words = (f"{bind}, together: no single cut explains the limit (the tightest found, where {across}, "
                 f"accounts for {cut_s / flow.seconds:.1%} of it)")
    size = collective.size_bytes
    cut = Cut(inside, links, bandwidth, flow.seconds / size, words)
    return BandwidthLimit(collective.name, float(size), flow.seconds, cut, binding_links=tuple(binding),
                          method=f"{len(flow.sources)} commodities aggregated by source, solved in "
                                 f"{flow.solve_s:.2f} s; the value certified by its duals")
