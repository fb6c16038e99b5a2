"""AllToAll's limit as a ``BandwidthLimit``: the concurrent-flow LP's time and the bottleneck its duals name.

The LP (``ccviz.bounds.concurrent_flow``) gives the exact time; its dual prices say which links bind.
For a picture and a sentence, a cut: node sets ordered by the dual distances (from each GPU, and by
the difference of the distances to a GPU and to its farthest GPU, which on a torus cuts slabs: the
bisection) are swept, and the one whose ``pairs crossing x M/N / bandwidth crossing`` is largest
is reported. That cut's time is a lower bound as well; the words say whether it explains the whole
limit or the LP is above every cut tried (flows that must take long routes, not one narrow cut).
"""

from __future__ import annotations

import numpy as np

from ccviz.bounds.concurrent_flow import ConcurrentFlow, concurrent_flow
from ccviz.model.topology import Topology

SWEEP_ROOTS = 64  # GPUs whose dual distances order the swept node sets
AUTO_FULL_LP_GPUS = 256  # summaries solve the full (unreduced) LP by themselves up to this many GPUs


def alltoall_is_quick(topology: Topology) -> bool:
    """Whether the LP is quick enough for summaries: solved already, reduced by symmetry, or small."""
    from ccviz.bounds.concurrent_flow import fabric_arrays, find_translations
    from ccviz.bounds.cut import CACHE as _CACHE

    cached = _CACHE.get(topology, {})
    if ("alltoall", True) in cached or ("alltoall", False) in cached or topology.n_gpus <= AUTO_FULL_LP_GPUS:
        return True
    return find_translations(topology, fabric_arrays(topology)) is not None


def alltoall_flow(topology: Topology, need_flows: bool = False) -> ConcurrentFlow:
    """The LP, solved once per topology (the limit, the lower bound and ``mcf`` share it; a solve that
    kept the flows serves the limit too)."""
    from ccviz.bounds.cut import CACHE as _CACHE

    per_topology = _CACHE.setdefault(topology, {})
    found = per_topology.get(("alltoall", True)) or (None if need_flows else per_topology.get(("alltoall", False)))
    if found is None:
        found = per_topology[("alltoall", need_flows)] = concurrent_flow(topology, need_flows=need_flows)
    return found


def sweep_cut(topology: Topology, flow: ConcurrentFlow) -> tuple[frozenset[int], float]:
    """The node set S (a GPU on each side) with the largest ``|S ∩ GPUs| |GPUs - S| / B+(S)`` among those
    the dual distances order, and that ratio (pairs per GB/s)."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import dijkstra

    a = flow.fabric
    nodes, tail, head, gpus, is_gpu = a.nodes, a.tail, a.head, a.gpus, a.is_gpu
    length = flow.prices + 1e-9 * max(float(flow.prices.max(initial=0.0)), 1e-12)  # ties broken by hops
    graph = csr_matrix((length, (tail, head)), shape=(len(nodes), len(nodes)))
    roots = gpus[np.linspace(0, len(gpus) - 1, min(SWEEP_ROOTS, len(gpus))).astype(int)]
    dist = dijkstra(graph, indices=roots)
    dist[~np.isfinite(dist)] = dist[np.isfinite(dist)].max() + 1
    orders = list(dist)
    far_of = dist[:, gpus].argmax(axis=1)
    far_dist = dijkstra(graph, indices=gpus[far_of])
    far_dist[~np.isfinite(far_dist)] = far_dist[np.isfinite(far_dist)].max() + 1
    orders += list(dist - far_dist)
    orders.append(np.arange(len(nodes), dtype=float))  # the builder's order: coordinates (slabs of a torus)
    best, best_set = -1.0, None
    n_gpus = len(gpus)
    for key in orders:
        order = np.argsort(key, kind="stable")
        pos = np.empty(len(nodes), dtype=np.int64)
        pos[order] = np.arange(len(nodes))
        inside_gpus = np.cumsum(is_gpu[order])[:-1]  # prefix k+1 nodes
        # a link leaves prefix {first k+1} when pos[tail] <= k < pos[head]
        delta = np.zeros(len(nodes) + 1)
        out = pos[tail] < pos[head]
        np.add.at(delta, pos[tail][out], flow.capacity_GBps[out])
        np.add.at(delta, pos[head][out], -flow.capacity_GBps[out])
        leaving = np.cumsum(delta)[:-2]
        pairs = inside_gpus * (n_gpus - inside_gpus)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where((pairs > 0) & (leaving > 0), pairs / np.maximum(leaving, 1e-300), -1.0)
        k = int(ratio.argmax())
        if ratio[k] > best * (1 + 1e-12):
            best, best_set = float(ratio[k]), frozenset(nodes[i] for i in order[:k + 1])
    if best_set is None:  # a single GPU's out-links, always a valid cut
        g = topology.gpus[0]
        best_set = frozenset([g])
        best = (n_gpus - 1) / sum(flow.capacity_GBps[e] for e, (u, _) in enumerate(flow.links) if u == g)
    return best_set, best


NAMED_LINKS = 8  # up to this many links are named in the limit's words (src->dst), more are counted


def link_names(links) -> str:
    """' (32->36, 33->40)': the links by name where there are few, else nothing (the count says it)."""
    links = list(links)
    return f" ({', '.join(f'{u}->{v}' for u, v in links)})" if 0 < len(links) <= NAMED_LINKS else ""


def alltoall_limit(topology: Topology, size_bytes: float):
    """AllToAll's ``BandwidthLimit`` at ``size_bytes``: the LP's time, the swept cut and the binding links."""
    from ccviz.bounds.cut import BandwidthLimit, Cut
    from ccviz.bounds.cut import gpu_list as _gpu_list
    from ccviz.bounds.cut import leaving as _leaving

    flow = alltoall_flow(topology)
    slots = int(topology.meta.get("buffer_ranks", topology.n_gpus))
    pair_GB = size_bytes / slots / 1e9
    limit_s = flow.seconds_per_pair_GB * pair_GB
    inside, ratio = sweep_cut(topology, flow)
    links = tuple(_leaving(topology, inside))
    bandwidth = sum(topology.links[key].bandwidth_GBps * topology.links[key].lanes for key in links)
    cut_s = ratio * pair_GB
    gpus_in = sorted(g for g in topology.gpus if g in inside)
    n_out = topology.n_gpus - len(gpus_in)
    binding = flow.binding_links()
    across = (f"the {len(gpus_in) * n_out} pairs from {_gpu_list(gpus_in)} to the {n_out} GPUs outside must "
              f"cross {len(links)} link(s){link_names(links)}, {bandwidth:g} GB/s in all")
    bind = (f"all {len(binding)} of the fabric's links bind in the flow LP" if len(binding) == len(flow.links)
            else f"{len(binding)} link(s) bind in the flow LP{link_names(binding)}")
    if cut_s >= limit_s * (1 - 1e-6) and not set(links) <= set(binding):  # the LP's prices chose a twin cut
        words = (f"{across}; this cut explains the whole limit, and so do others as tight ({bind}, on another "
                 "of them)")
    elif cut_s >= limit_s * (1 - 1e-6):
        words = f"{across}; this cut explains the whole limit ({bind})"
    else:
        words = (f"{bind}, together: no single cut explains the limit (the "
                 f"tightest found, where {across}, accounts for {cut_s / limit_s:.1%} of it)")
    cut = Cut(inside, links, bandwidth, limit_s / size_bytes, words)
    return BandwidthLimit("alltoall", float(size_bytes), limit_s, cut, binding_links=tuple(binding),
                          method=flow.method)
