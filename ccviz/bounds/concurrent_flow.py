"""AllToAll's exact bandwidth limit: the maximum concurrent multi-commodity flow of a uniform demand.

Every ordered GPU pair (s, t) must move ``M / N`` bytes (N GPUs, M the send buffer). Whatever the
schedule, the bytes that cross a link in time T are at most T x its bandwidth, so the fastest any
schedule finishes is the smallest T for which a fractional flow routes every pair's demand within
T x bandwidth on every link. Relaying through GPUs is allowed (they store), switches only forward
(flow conservation), and the per-hop alpha plays no part: like every limit in ``ccviz.bounds.limit`` it is
what bandwidth alone allows.

Solved as one LP on HiGHS with the commodities aggregated by source: the flows of source s form one
single-source flow that delivers ``M / N`` to each other GPU. N flows of |links| variables each
instead of N^2 (exact: every source-aggregated flow decomposes into per-pair paths with the same
link loads). Where the fabric is a Cayley graph of its GPUs (tori, rings, hypercubes, fully
connected: ``Translations``), the flows of all sources are translates of one, and the LP shrinks to
one source's flow with a capacity row per link orbit: exact too, by averaging any optimum over the
group.

The bottleneck comes from the LP's duals: a link's dual price is positive only where it binds (every
optimal flow fills it). A sweep over the dual distances finds the tightest cut among the node sets
it orders (for tori the bisection); its bound ``pairs across / bandwidth across`` is a lower bound
too, and equals the LP where the cut explains the whole limit.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ccviz.bounds.solver_output import quiet_highs
from ccviz.errors import CcvizError
from ccviz.model.topology import Topology

BINDING = 1e-7  # a link's dual price (relative to the largest) above which it binds
OPTIMAL_SLACK = 1e-9  # the flows mcf splits into paths may take T this much over the optimum (solver tolerance)


@dataclass(frozen=True)
class ConcurrentFlow:
    """The LP's answer for one unit (1 GB) per ordered GPU pair.

    ``seconds_per_pair_GB``: the limit when every pair moves 1 GB (scale by the pair's bytes / 1e9).
    ``flows[s, e]``: GB of source s's commodity on link ``links[e]`` (rows in ``sources`` order), None
    when the LP was reduced by symmetry and flows were not asked for.
    ``prices[e]``: the capacity rows' duals, normalized so that sum(price x bandwidth) = 1.
    ``fabric``: the node positions and link order every array here is indexed by.
    """

    seconds_per_pair_GB: float
    fabric: FabricArrays
    prices: np.ndarray
    sources: list[int]
    flows: np.ndarray | None
    method: str
    solve_s: float
    translations: Translations | None = None  # set where the LP was reduced by the fabric's symmetry
    # where it was reduced by twin GPUs: the classes (node positions, first the one whose flow the others'
    # are images of: ``swap_links``)
    twins: list[np.ndarray] | None = None

    @property
    def links(self) -> list[tuple[int, int]]:
        return self.fabric.links

    @property
    def capacity_GBps(self) -> np.ndarray:
        return self.fabric.capacity

    def binding_links(self) -> list[tuple[int, int]]:
        """Links whose dual price is positive: every optimal flow keeps them full."""
        top = float(self.prices.max(initial=0.0))
        return [self.links[e] for e in np.flatnonzero(self.prices > BINDING * top)] if top > 0 else []


# ------------------------------------------------------------------------------ the fabric as arrays
@dataclass(frozen=True)
class FabricArrays:
    """The fabric as node positions and link indices: the LP's rows and columns, and (carried on
    ``ConcurrentFlow``) the order in which ``mcf`` reads the LP's flows, so the two cannot drift apart."""

    nodes: list[int]
    index: dict[int, int]
    links: list[tuple[int, int]]
    tail: np.ndarray
    head: np.ndarray
    capacity: np.ndarray
    gpus: np.ndarray  # node positions of the GPUs

    @property
    def is_gpu(self) -> np.ndarray:
        """A mask over node positions: True at the GPUs."""
        mask = np.zeros(len(self.nodes), dtype=bool)
        mask[self.gpus] = True
        return mask


def fabric_arrays(topology: Topology) -> FabricArrays:
    nodes = sorted(topology.nodes)
    index = {n: i for i, n in enumerate(nodes)}
    links = sorted(topology.links)  # one order however the fabric was made (built, or read from a file)
    tail = np.array([index[u] for u, _ in links], dtype=np.int64)
    head = np.array([index[v] for _, v in links], dtype=np.int64)
    capacity = np.array([topology.links[k].bandwidth_GBps * topology.links[k].lanes for k in links], dtype=float)
    gpus = np.array([index[g] for g in topology.gpus], dtype=np.int64)
    return FabricArrays(nodes, index, links, tail, head, capacity, gpus)


def _incidence(a: FabricArrays):
    """Node x link matrix: +1 where the link leaves the node, -1 where it enters."""
    from scipy.sparse import csc_matrix

    n_links = len(a.links)
    rows = np.concatenate([a.tail, a.head])
    cols = np.concatenate([np.arange(n_links), np.arange(n_links)])
    vals = np.concatenate([np.ones(n_links), -np.ones(n_links)])
    return csc_matrix((vals, (rows, cols)), shape=(len(a.nodes), n_links))


# ------------------------------------------------------------------------------ symmetry
class Translations:
    """A group of fabric automorphisms acting on the GPUs as a regular (simply transitive) group.

    ``perms[g]`` maps node positions to node positions and sends GPU 0 to GPU g (one element per GPU);
    ``link_perm[g]`` is the same map on links. Found for Cayley graphs by ``find_translations``.
    """

    def __init__(self, perms: np.ndarray, link_perm: np.ndarray) -> None:
        self.perms = perms
        self.link_perm = link_perm


def find_translations(topology: Topology, a: FabricArrays) -> Translations | None:
    """Translations of a fabric built on coordinates (tori, rings, hypercubes, fully connected, fat-trees),
    or None.

    Candidates come from the GPUs' coordinates (``_gpu_group``), carried to the switches by what each
    switch is nearest to (``_extend_to_switches``); each is then checked to map every link to a link of
    the same bandwidth, alpha and lanes, so a wrong guess only means the full LP is solved.
    """
    n = len(a.gpus)
    if n < 3 or list(a.gpus) != sorted(a.gpus):
        return None
    gpu_perms = _gpu_group(topology, a)
    if gpu_perms is None:
        return None
    perms = _extend_to_switches(a, gpu_perms) if len(a.nodes) > n else a.gpus[gpu_perms]
    if perms is None:
        return None
    attrs = [(topology.links[k].bandwidth_GBps, topology.links[k].alpha_us, topology.links[k].lanes) for k in a.links]
    kinds = {attr: i for i, attr in enumerate(dict.fromkeys(attrs))}
    kind = np.array([kinds[attr] for attr in attrs])
    link_perm = np.empty((n, len(a.links)), dtype=np.int64)
    for g in range(n):
        image = _link_index(a, perms[g][a.tail], perms[g][a.head])
        if image is None or not np.array_equal(kind[image], kind):
            return None
        link_perm[g] = image
    return Translations(perms, link_perm)


def _gpu_group(topology: Topology, a: FabricArrays) -> np.ndarray | None:
    """perms[g][i]: the GPU (as an index into the GPUs) that GPU i goes to under the translation taking
    GPU 0 to GPU g.

    GPUs in id order are read as mixed-radix coordinates: ``meta['dims']`` (tori, rings; hypercubes,
    translated by XOR), a fat-tree's (pod, edge switch, port), else a switch-free ring or fully
    connected fabric as one cyclic coordinate.
    """
    n = len(a.gpus)
    dims = topology.meta.get("dims")
    switch_free = len(a.nodes) == n
    degree = len(a.links) / n
    xor = False
    if isinstance(dims, (list, tuple)) and dims and int(np.prod(dims)) == n:
        radix = [int(d) for d in dims]
        xor = switch_free and all(d == 2 for d in radix)
    elif isinstance(topology.meta.get("k"), int) and n == topology.meta["k"] ** 3 // 4:
        k = int(topology.meta["k"])
        radix = [k, k // 2, k // 2]
    elif switch_free and degree in (2, n - 1):  # a ring, or fully connected
        radix = [n]
    else:
        return None
    coords = np.array(np.unravel_index(np.arange(n), radix)).T
    perms = np.empty((n, n), dtype=np.int64)
    for g in range(n):
        moved = (coords ^ coords[g]) if xor else (coords + coords[g]) % np.array(radix)
        perms[g] = np.ravel_multi_index(moved.T, radix)
    return perms


def _extend_to_switches(a: FabricArrays, gpu_perms: np.ndarray) -> np.ndarray | None:
    """Node permutations (positions) from GPU permutations: a switch goes to the switch whose nearest GPUs
    are the images of its own, the k-th of those (in id order) to the k-th; None where none matches."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import shortest_path

    n_nodes, n = len(a.nodes), len(a.gpus)
    graph = csr_matrix((np.ones(len(a.tail)), (a.tail, a.head)), shape=(n_nodes, n_nodes))
    is_gpu = np.zeros(n_nodes, dtype=bool)
    is_gpu[a.gpus] = True
    switches = np.flatnonzero(~is_gpu)
    hops = shortest_path(graph, directed=False, unweighted=True, indices=switches)[:, a.gpus]
    nearest = hops == hops.min(axis=1, keepdims=True)  # switch x GPU
    by_signature: dict[bytes, list[int]] = {}
    for row, sw in enumerate(switches):
        by_signature.setdefault(np.packbits(nearest[row]).tobytes(), []).append(int(sw))
    rank = {sw: members.index(sw) for members in by_signature.values() for sw in members}
    perms = np.empty((n, n_nodes), dtype=np.int64)
    for g in range(n):
        inverse = np.empty(n, dtype=np.int64)
        inverse[gpu_perms[g]] = np.arange(n)
        perms[g, a.gpus] = a.gpus[gpu_perms[g]]
        moved = nearest[:, inverse]  # the image of each switch's nearest set
        for row, sw in enumerate(switches):
            members = by_signature.get(np.packbits(moved[row]).tobytes())
            if members is None or len(members) <= rank[int(sw)]:
                return None
            perms[g, sw] = members[rank[int(sw)]]
    return perms


# ------------------------------------------------------------------------------ the LP
def _solve_lp(cost: np.ndarray, a_matrix, row_lower: np.ndarray, row_upper: np.ndarray, col_upper: np.ndarray,
              time_limit: float | None, simplex: bool = False) -> tuple[np.ndarray, np.ndarray, float]:
    """min cost.x subject to row bounds, 0 <= x <= col_upper, on HiGHS; (x, row duals, objective)."""
    import highspy

    a_matrix = a_matrix.tocsc()
    a_matrix.sort_indices()
    lp = highspy.HighsLp()
    lp.num_col_ = a_matrix.shape[1]
    lp.num_row_ = a_matrix.shape[0]
    lp.col_cost_ = cost
    lp.col_lower_ = np.zeros(lp.num_col_)
    lp.col_upper_ = col_upper
    lp.row_lower_ = row_lower
    lp.row_upper_ = row_upper
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = a_matrix.indptr.astype(np.int32)
    lp.a_matrix_.index_ = a_matrix.indices.astype(np.int32)
    lp.a_matrix_.value_ = a_matrix.data
    h = quiet_highs()
    if not simplex:
        # the simplex stalls on source-aggregated LPs (52 s on a 4x4x4 torus, 0.3 s by interior point); the
        # interior point's optimum (no crossover) is exact to its tolerance, about 1e-8 relative
        h.setOptionValue("solver", "ipm")
        h.setOptionValue("run_crossover", "off")
    if time_limit is not None:
        h.setOptionValue("time_limit", float(time_limit))
    h.passModel(lp)
    h.run()
    status = h.getModelStatus()
    if status != highspy.HighsModelStatus.kOptimal:
        raise CcvizError(f"time_limit: the AllToAll flow LP ended {h.modelStatusToString(status)}; "
                         "give it more time (--time-limit)", "time_limit")
    solution = h.getSolution()
    return (np.maximum(np.asarray(solution.col_value, dtype=float), 0.0), np.asarray(solution.row_dual, dtype=float),
            float(h.getInfo().objective_function_value))


def concurrent_flow(topology: Topology, *, need_flows: bool = False, symmetry: bool = True,
                    time_limit: float | None = None) -> ConcurrentFlow:
    """The max concurrent flow of 1 GB per ordered GPU pair on ``topology`` (see the module's docstring).

    ``need_flows`` asks for every source's flow (the ``mcf`` synthesizer's input); with a symmetry the
    flows of the other sources are the translates of source 0's. ``symmetry=False`` always solves the
    source-aggregated LP in full (tests compare the two).
    """
    if topology.n_gpus < 2:
        raise CcvizError("topology: AllToAll needs at least 2 GPUs", "topology")
    t0 = time.perf_counter()
    a = fabric_arrays(topology)
    group = find_translations(topology, a) if symmetry else None
    twins = _merge_twin_switches(a) if symmetry and group is None else None
    if twins is not None:
        merged, link_map = twins
        value, merged_prices, merged_flows, how, twins = _reduced(merged, time_limit, need_flows, symmetry)
        if twins is not None:  # merged GPU positions are the full fabric's in the same (GPU) order
            at = {int(m): int(f) for m, f in zip(merged.gpus, a.gpus, strict=True)}
            twins = [np.array([at[int(g)] for g in members], dtype=np.int64) for members in twins]
        prices = merged_prices[link_map]  # twin links bind alike: each keeps its merged link's price
        share = a.capacity / merged.capacity[link_map]  # a merged link's flow split over its twins by bandwidth
        flows = merged_flows[:, link_map] * share if need_flows else None
        method = (f"{how}, {len(a.nodes) - len(merged.nodes)} twin switches merged "
                  "(switches with the same links: one switch of their summed bandwidth)")
    elif group is not None:
        value, prices, flow0 = _symmetric(a, group, time_limit, shortest=need_flows)
        flows = None
        if need_flows:
            flows = np.empty((len(a.gpus), len(a.links)))
            for g in range(len(a.gpus)):
                flows[g, group.link_perm[g]] = flow0
        method = "one source's flow, the others its translates (the fabric's symmetry)"
    else:
        value, prices, flows, method, twins = _reduced(a, time_limit, need_flows, symmetry)
    total = float((prices * a.capacity).sum())
    if total > 0:
        prices = prices / total
        value = min(value, _dual_bound(a, prices, one_source=group is not None))
    return ConcurrentFlow(value, a, prices, list(topology.gpus), flows if need_flows else None,
                          method, time.perf_counter() - t0, group, twins)


def _merge_twin_switches(a: FabricArrays) -> tuple[FabricArrays, np.ndarray] | None:
    """The fabric with twin switches (the same neighbours over links of the same bandwidth, both ways) merged
    into one, and each link's index in it; None when there are no twins.

    Exact for the concurrent flow: merging only adds routes' capacity together, and any flow of the merged
    fabric splits back over the twins in proportion to bandwidth (every twin carries 1/k of what enters and
    leaves their merged switch, so conservation holds at each). NVL72's 18 NVSwitch chips become one switch:
    the LP of 72 sources shrinks from 2,592 links per source to 144.
    """
    n_nodes = len(a.nodes)
    is_gpu = a.is_gpu
    touching: dict[int, tuple[list, list]] = {i: ([], []) for i in range(n_nodes) if not is_gpu[i]}
    for e in range(len(a.links)):
        u, w, c = int(a.tail[e]), int(a.head[e]), float(a.capacity[e])
        if u in touching:
            touching[u][0].append((w, c))
        if w in touching:
            touching[w][1].append((u, c))
    classes: dict[tuple, list[int]] = {}
    for i, (out, into) in touching.items():
        classes.setdefault((tuple(sorted(out)), tuple(sorted(into))), []).append(i)
    rep = np.arange(n_nodes)
    for members in classes.values():
        rep[members] = members[0]
    if all(len(m) == 1 for m in classes.values()):
        return None
    kept = np.flatnonzero(rep == np.arange(n_nodes))
    position = np.full(n_nodes, -1, dtype=np.int64)
    position[kept] = np.arange(len(kept))
    pairs = position[rep[a.tail]] * n_nodes + position[rep[a.head]]
    unique, link_map = np.unique(pairs, return_inverse=True)
    tail, head = unique // n_nodes, unique % n_nodes
    capacity = np.bincount(link_map, weights=a.capacity, minlength=len(unique))
    nodes = [a.nodes[i] for i in kept]
    merged = FabricArrays(nodes, {n: i for i, n in enumerate(nodes)},
                          [(nodes[u], nodes[w]) for u, w in zip(tail, head, strict=True)],
                          tail.astype(np.int64), head.astype(np.int64), capacity, position[a.gpus])
    return merged, link_map.astype(np.int64)


def _dual_bound(a: FabricArrays, prices: np.ndarray, one_source: bool) -> float:
    """The time the link prices certify (weak duality): for any prices p >= 0 with sum(p x bandwidth) = 1,
    every pair's unit of flow costs at least its shortest path under p, so T >= the sum over ordered GPU pairs.

    Why: the interior point's optimum is exact only to its tolerance, and a value 1e-8 over the true optimum is
    no bound (a schedule on a 3-GPU line finished 1.4e-8 under it). Recomputed from the duals with exact
    shortest paths, the limit can only err low. ``one_source``: the prices are invariant under the fabric's
    translations, so every source's sum is source 0's."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import dijkstra

    graph = csr_matrix((prices, (a.tail, a.head)), shape=(len(a.nodes), len(a.nodes)))  # explicit zeros are edges
    sources = a.gpus[:1] if one_source else a.gpus
    dist = dijkstra(graph, directed=True, indices=sources)[:, a.gpus]
    per_source = dist.sum(axis=1)
    return float(per_source[0] * len(a.gpus)) if one_source else float(per_source.sum())


def _supplies(a: FabricArrays, source_pos: int) -> np.ndarray:
    """Net outflow per node for one source: N-1 at the source, -1 at every other GPU, 0 at switches."""
    b = np.zeros(len(a.nodes))
    b[a.gpus] = -1.0
    b[source_pos] = len(a.gpus) - 1.0
    return b


def _aggregated(a: FabricArrays, time_limit: float | None,
                shortest: bool = False) -> tuple[float, np.ndarray, np.ndarray]:
    """Variables x[s, e] (source s's flow on link e) and T; min T s.t. conservation and
    sum_s x[s, e] <= T c_e."""
    from scipy.sparse import hstack, identity, kron, vstack

    n, n_links = len(a.gpus), len(a.links)
    incidence = _incidence(a)
    conservation = kron(identity(n, format="csc"), incidence, format="csc")
    capacity = kron(np.ones((1, n)), identity(n_links, format="csc"), format="csc")
    t_column = np.concatenate([np.zeros(conservation.shape[0]), -a.capacity])[:, None]
    matrix = hstack([vstack([conservation, capacity]), t_column], format="csc")
    supply = np.concatenate([_supplies(a, s) for s in a.gpus])
    lower = np.concatenate([supply, np.full(n_links, -np.inf)])
    upper = np.concatenate([supply, np.zeros(n_links)])
    cost = np.zeros(n * n_links + 1)
    cost[-1] = 1.0
    x, duals, value = _solve_lp(cost, matrix, lower, upper, np.full(n * n_links + 1, np.inf), time_limit)
    if shortest:
        x = _least_total_flow(cost, matrix, lower, upper, value, time_limit)
    prices = np.abs(duals[-n_links:])
    return value, prices, x[:-1].reshape(n, n_links)


def _reduced(a: FabricArrays, time_limit: float | None, need_flows: bool, symmetry: bool
             ) -> tuple[float, np.ndarray, np.ndarray | None, str, list[np.ndarray] | None]:
    """The LP without a translation group: by twin-GPU classes where GPUs have twins, else aggregated by
    source; (value, link prices, flows per source or None, how it was solved, the twin classes or None)."""
    classes = _gpu_twin_classes(a) if symmetry else None
    if classes is None:
        value, prices, flows = _aggregated(a, time_limit, shortest=need_flows)
        return value, prices, flows, "commodities aggregated by source", None
    value, prices, flows = _by_classes(a, classes, time_limit, need_flows)
    how = (f"one flow per class of twin GPUs ({len(classes)} class{'es' if len(classes) > 1 else ''} of "
           f"{len(a.gpus)} GPUs: GPUs with the same links are interchangeable, so their flows are each other's "
           "images)")
    return value, prices, flows, how, classes


def _gpu_twin_classes(a: FabricArrays) -> list[np.ndarray] | None:
    """The GPUs (node positions, in ``a.gpus`` order within a class) grouped by their links: twins have the same
    neighbours over links of the same bandwidth, both ways (NVL72 racks: the GPUs of a rack on one NIC rail).
    Swapping two twins maps the fabric onto itself. None when no GPU has a twin."""
    is_gpu = a.is_gpu
    out: dict[int, list] = {int(g): [] for g in a.gpus}
    into: dict[int, list] = {int(g): [] for g in a.gpus}
    for u, w, c in zip(a.tail.tolist(), a.head.tolist(), a.capacity.tolist(), strict=True):
        if is_gpu[u]:
            out[u].append((w, c))
        if is_gpu[w]:
            into[w].append((u, c))
    classes: dict[tuple, list[int]] = {}
    for g in a.gpus.tolist():
        classes.setdefault((tuple(sorted(out[g])), tuple(sorted(into[g]))), []).append(g)
    if len(classes) == len(a.gpus):
        return None
    return [np.array(members, dtype=np.int64) for members in classes.values()]


def _link_index(a: FabricArrays, tails: np.ndarray, heads: np.ndarray) -> np.ndarray | None:
    """The index of link (tails[i], heads[i]) (node positions) for every i, or None if one is not a link."""
    n_nodes = len(a.nodes)
    codes = a.tail * n_nodes + a.head
    order = np.argsort(codes)
    sorted_codes = codes[order]
    image = tails * n_nodes + heads
    at = np.minimum(np.searchsorted(sorted_codes, image), len(codes) - 1)
    return order[at] if np.array_equal(sorted_codes[at], image) else None


def _by_classes(a: FabricArrays, classes: list[np.ndarray], time_limit: float | None,
                need_flows: bool) -> tuple[float, np.ndarray, np.ndarray | None]:
    """One flow y_k per class of twin GPUs (from its first member) and T.

    Exact: the swaps of twins form a group G of the fabric's automorphisms; averaging any optimum over G
    leaves an optimum in which a twin's flow is the image of its class representative's. Then a link's load
    depends only on its G-orbit O (the links from one class of nodes to another: twins are linked to the
    same nodes), and equals sum_k |C_k| sum_{e in O} y_k[e] / |O|: one capacity row per orbit. A solution's
    flows are averaged over what fixes the representative, then carried to each twin by swapping the two.
    144 GPUs of two NVL72 racks: 8 classes, 8 flows instead of 144.
    """
    from scipy.sparse import csc_matrix, hstack, identity, kron, vstack

    n_nodes, n_links = len(a.nodes), len(a.links)
    kind = np.arange(n_nodes)  # a node's class: twins share their first member's position
    for members in classes:
        kind[members] = members[0]
    _, orbit = np.unique(kind[a.tail] * n_nodes + kind[a.head], return_inverse=True)
    orbit = orbit.astype(np.int64)
    n_orbits = int(orbit.max()) + 1
    size = np.bincount(orbit, minlength=n_orbits)
    counts = np.array([len(m) for m in classes], dtype=float)
    m = len(classes)
    loads = csc_matrix((1.0 / size[orbit], (orbit, np.arange(n_links))), shape=(n_orbits, n_links))
    conservation = kron(identity(m, format="csc"), _incidence(a), format="csc")
    capacity_rows = kron(counts[None, :], loads, format="csc")
    t_column = np.concatenate([np.zeros(conservation.shape[0]), -a.capacity[_first_of(orbit)]])[:, None]
    matrix = hstack([vstack([conservation, capacity_rows]), t_column], format="csc")
    supply = np.concatenate([_supplies(a, int(members[0])) for members in classes])
    lower = np.concatenate([supply, np.full(n_orbits, -np.inf)])
    upper = np.concatenate([supply, np.zeros(n_orbits)])
    cost = np.zeros(m * n_links + 1)
    cost[-1] = 1.0
    col_upper = np.full(m * n_links + 1, np.inf)
    x, duals, value = _solve_lp(cost, matrix, lower, upper, col_upper, time_limit)
    prices = np.abs(duals[-n_orbits:])[orbit] / size[orbit]  # an orbit's price spread over its links
    if not need_flows:
        return value, prices, None
    least = np.concatenate([np.repeat(counts, n_links), [0.0]])  # link-bytes of all sources: no needless detour
    x = _least_total_flow(cost, matrix, lower, upper, value, time_limit, weights=least)
    return value, prices, _twin_flows(a, classes, kind, x[:-1].reshape(m, n_links))


def _twin_flows(a: FabricArrays, classes: list[np.ndarray], kind: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Every source's flow (rows in ``a.gpus`` order) from its class representative's: ``y[k]`` averaged over
    the swaps that fix the representative (the links between the same classes, the representative a class of
    its own, share their flow evenly), then carried to each twin by swapping it with the representative."""
    n_nodes = len(a.nodes)
    row_of = {int(g): i for i, g in enumerate(a.gpus.tolist())}
    flows = np.empty((len(a.gpus), len(a.links)))
    for k, members in enumerate(classes):
        rep = int(members[0])
        fixed = kind.copy()
        fixed[rep] = n_nodes  # the representative apart from its twins
        _, part = np.unique(fixed[a.tail] * (n_nodes + 1) + fixed[a.head], return_inverse=True)
        even = (np.bincount(part, weights=y[k]) / np.bincount(part))[part]
        for s in members.tolist():
            flows[row_of[s]] = even[swap_links(a, rep, s)]  # a swap is its own inverse
    return flows


def swap_links(a: FabricArrays, first: int, second: int) -> np.ndarray:
    """Link e's image when twin GPUs ``first`` and ``second`` (node positions) trade places."""
    swap = np.arange(len(a.nodes))
    swap[first], swap[second] = second, first
    return permuted_links(a, swap)


def permuted_links(a: FabricArrays, perm: np.ndarray) -> np.ndarray:
    """Link e's image under the node permutation ``perm`` (positions), which must map the fabric onto itself
    (twins trading places): the index of link (perm[tail], perm[head]) for every link."""
    image = _link_index(a, perm[a.tail], perm[a.head])
    if image is None:
        raise ValueError("the node permutation does not map the fabric's links onto its links")
    return image


def _symmetric(a: FabricArrays, group: Translations, time_limit: float | None,
               shortest: bool = False) -> tuple[float, np.ndarray, np.ndarray]:
    """One source's flow y (from GPU 0's position) and T; the load on link e is the sum of y over e's
    orbit under the group, so sum_{e' in orbit(e)} y[e'] <= T c_e, one row per orbit."""
    from scipy.sparse import csc_matrix, hstack, vstack

    n_links = len(a.links)
    orbit = np.full(n_links, -1, dtype=np.int64)
    n_orbits = 0
    for e in range(n_links):
        if orbit[e] < 0:
            orbit[np.unique(group.link_perm[:, e])] = n_orbits
            n_orbits += 1
    # load(e) = sum_g y[g^-1 e]: each link of the orbit is hit |G| / |orbit| times
    members_count = np.bincount(orbit, minlength=n_orbits)
    weight = len(group.perms) / members_count[orbit]
    loads = csc_matrix((weight, (orbit, np.arange(n_links))), shape=(n_orbits, n_links))
    source = int(a.gpus[0])  # the element g takes it to GPU g
    incidence = _incidence(a)
    t_column = np.concatenate([np.zeros(len(a.nodes)), -a.capacity[_first_of(orbit)]])
    matrix = hstack([vstack([incidence, loads]), t_column[:, None]], format="csc")
    supply = _supplies(a, source)
    lower = np.concatenate([supply, np.full(n_orbits, -np.inf)])
    upper = np.concatenate([supply, np.zeros(n_orbits)])
    cost = np.zeros(n_links + 1)
    cost[-1] = 1.0
    y, duals, value = _solve_lp(cost, matrix, lower, upper, np.full(n_links + 1, np.inf), time_limit, simplex=True)
    if shortest:
        y = _least_total_flow(cost, matrix, lower, upper, value, time_limit, simplex=True)
    orbit_price = np.abs(duals[len(a.nodes):])
    prices = orbit_price[orbit] * weight / len(group.perms)  # spread over the orbit's links
    return value, prices, y[:-1]


def _least_total_flow(cost: np.ndarray, matrix, lower: np.ndarray, upper: np.ndarray, value: float,
                      time_limit: float | None, simplex: bool = False, weights: np.ndarray | None = None) -> np.ndarray:
    """Among the flows that reach the optimal time ``value`` (the last column, T), one carrying the least
    link-bytes in all: no detour the optimum does not need. Without it the solver returns whichever optimal
    vertex its column order reaches first, and the same fabric loaded from a file (links in another order)
    got other paths (4x4 torus AllToAll by mcf: 1.000 x the limit built, 1.031 x loaded from JSON)."""
    least = np.ones_like(cost) if weights is None else weights.astype(float)  # weights: link-bytes per column
    least[-1] = 0.0
    col_upper = np.full(len(cost), np.inf)
    col_upper[-1] = value * (1 + OPTIMAL_SLACK)
    x, _, _ = _solve_lp(least, matrix, lower, upper, col_upper, time_limit, simplex=simplex)
    return x


def _first_of(orbit: np.ndarray) -> np.ndarray:
    """A link of each orbit (its first), in orbit order."""
    first = np.full(orbit.max() + 1, -1, dtype=np.int64)
    for e in range(len(orbit) - 1, -1, -1):
        first[orbit[e]] = e
    return first
