"""The fabric's limit: the exact bandwidth-bound time of a collective and the cut that sets it.

AllGather of M bytes over the N GPUs of a directed fabric (switches and NICs are nodes too) can never
finish before

    T* = (M / N) * max over node sets S leaving a GPU outside of |S ∩ GPUs| / B+(S)

with B+(S) the bandwidth of the links leaving S (lanes counted): the shards of the GPUs in S must all
leave S. ForestColl (Zhao et al., arXiv 2402.06787) shows spanning-tree packings reach it, switches
included. ReduceScatter is AllGather on the reversed fabric; AllReduce as ReduceScatter then
AllGather is the sum; Broadcast from r is M over the smallest r->v max flow; Reduce is Broadcast on
the reversed fabric. AllToAll's is a maximum concurrent flow LP (``ccviz.bounds.concurrent_flow``).
Alpha plays no part: the limit is what bandwidth alone allows.

Switches that add in the network (``Node.reduce``: NVLS, SHARP) change AllReduce only
(``in_network_allreduce_limit``): each GPU then sends M up and receives M down once, so the limit is
M over the smallest GPU-separating cut in either direction (M/BW on a reducing star, not 2(N-1)/N M/BW).
ReduceScatter and Reduce keep theirs: their cuts count the results that must enter a set, one
partial sum each, and a sum added in a switch is still one result crossing.

Computed exactly, never by enumerating cuts: Newton (Dinkelbach) iterations on the ratio. At a trial
ratio t, give every link capacity t * bandwidth and a super-source an edge of capacity 1 to every GPU;
some S violates ``|S ∩ GPUs| <= t B+(S)`` exactly when the min cut from the super-source to some GPU v
is below N, and the most violated cut is the next (strictly larger) ratio. A handful of rounds of N
max flows each settle it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np

from ccviz.bounds.cut import CACHE as _CACHE  # noqa: F401  (tests and the AllToAll limit read it)
from ccviz.bounds.cut import BandwidthLimit, Cut
from ccviz.bounds.cut import cached as _cached
from ccviz.bounds.cut import gpu_list as _gpu_list
from ccviz.bounds.cut import leaving as _leaving
from ccviz.errors import CcvizError
from ccviz.model.collectives import normalize_name
from ccviz.model.topology import Topology
from ccviz.model.units import format_time

LIMITED = ("allgather", "reducescatter", "allreduce", "broadcast", "reduce", "alltoall")
_SOURCE = "source"
_REL = 1e-9  # relative tolerance of a cut "below N" (capacities are products of floats)


# ------------------------------------------------------------------------------ max flows
def _capacities(topology: Topology) -> dict[tuple[int, int], float]:
    """Each link's capacity in GB/s: a link with several lanes carries that many sends at once."""
    return {key: link.bandwidth_GBps * link.lanes for key, link in topology.links.items()}


_INT32 = 2**31 - 1  # scipy's maximum_flow works in int32 (larger values wrap silently)


def _whole_bandwidths(capacity: dict[tuple[int, int], float]) -> tuple[float, dict[tuple[int, int], int]] | None:
    """(D, capacity x D) with D a scale making every capacity whole, or None for bandwidths with no small
    common denominator (those take the float path).

    D is first sought per GB/s (12.5 GB/s -> D = 2), then per the smallest capacity, which makes fabrics of
    one odd bandwidth (50 GiB/s = 53.6870912 GB/s) and its small multiples whole too: a common factor of
    every capacity changes no cut, only the unit the limit is counted in.
    """
    positive = [cap for cap in capacity.values() if cap > 0]
    if len(positive) < len(capacity):
        return None
    for unit in dict.fromkeys((1.0, min(positive, default=1.0))):
        found = _whole_in(capacity, unit)
        if found is not None:
            return found
    return None


def _whole_in(capacity: dict[tuple[int, int], float], unit: float) -> tuple[float, dict[tuple[int, int], int]] | None:
    """Capacities as whole multiples of ``unit / D`` (the smallest D up to a million), with ``D / unit``."""
    scale = 1
    fractions = {}
    for key, cap in capacity.items():
        frac = Fraction(cap / unit).limit_denominator(1000)
        if abs(float(frac) * unit - cap) > 1e-12 * cap:
            return None
        fractions[key] = frac
        scale = math.lcm(scale, frac.denominator)
        if scale > 10**6:
            return None
    return scale / unit, {key: int(frac * scale) for key, frac in fractions.items()}


class _IntegerFlows:
    """Exact max flows in whole numbers on scipy's compiled Dinic (one CSR matrix, capacities rewritten).

    Every capacity is a whole multiple of 1/D (GB/s, or of the smallest capacity), so a Newton round at
    ratio t = c / B (c GPUs, B the whole-number bandwidth of the last cut) scales to integers exactly:
    links c x bandwidth, source edges B. "Below N" is then an exact integer comparison, never a tolerance.
    """

    def __init__(self, topology: Topology, scale: float, whole: dict[tuple[int, int], int]) -> None:
        self.topology = topology
        self.scale = scale
        self.nodes = list(topology.nodes)
        self.index = {n: i for i, n in enumerate(self.nodes)}
        self.source = len(self.nodes)
        keys = list(whole)
        gpus = topology.gpus
        rows = np.array([self.index[u] for u, _ in keys] + [self.source] * len(gpus), dtype=np.int32)
        cols = np.array([self.index[v] for _, v in keys] + [self.index[g] for g in gpus], dtype=np.int32)
        self.link_caps = np.array([whole[key] for key in keys], dtype=np.int64)
        self.link_gcd = math.gcd(*whole.values()) if whole else 1
        size = self.source + 1
        # imported here: a synthesis that computes no limit never loads scipy
        from scipy.sparse import csr_matrix

        tags = np.arange(1, len(rows) + 1, dtype=np.int32)  # find where each entry lands in the CSR data
        self.matrix = csr_matrix((tags, (rows, cols)), shape=(size, size), dtype=np.int32)
        where = np.empty(len(rows), dtype=np.int64)
        where[self.matrix.data - 1] = np.arange(len(rows))
        self.link_pos, self.source_pos = where[:len(keys)], where[len(keys):]

    def set_capacities(self, link_factor: int, source_cap: int) -> int | None:
        """Links ``link_factor`` x whole bandwidth, source edges ``source_cap`` (both divided by their
        common divisor); the scaled capacity of all N source edges, or None where int32 would overflow."""
        g = math.gcd(link_factor * self.link_gcd, source_cap)
        links = self.link_caps * link_factor // g
        source = source_cap // g
        total = source * len(self.topology.gpus)
        if total > _INT32 or (len(links) and int(links.max()) > _INT32):
            return None
        self.matrix.data[self.link_pos] = links
        self.matrix.data[self.source_pos] = source
        return total

    def max_flow(self, source: int, sink: int):
        from scipy.sparse.csgraph import maximum_flow

        return maximum_flow(self.matrix, source, sink, method="dinic")

    def source_side(self, result, source: int) -> frozenset:
        """Nodes reachable from the source in the residual graph: the source side of a min cut."""
        residual = self.matrix - result.flow
        residual.data = (residual.data > 0).astype(np.int8)
        residual.eliminate_zeros()
        from scipy.sparse.csgraph import breadth_first_order

        reached = breadth_first_order(residual, source, directed=True, return_predecessors=False)
        return frozenset(self.nodes[i] for i in reached if i != self.source)


class _FlowNetwork:
    """Float max flows on networkx (the fallback for bandwidths with no small common denominator)."""

    def __init__(self, topology: Topology) -> None:
        self.topology = topology
        self.capacity = _capacities(topology)
        import networkx as nx  # imported here: only the float fallback needs it

        self.graph = nx.DiGraph()
        self.graph.add_nodes_from(topology.nodes)
        for key, cap in self.capacity.items():
            self.graph.add_edge(*key, capacity=cap)

    def min_cut(self, source: Any, sink: int) -> tuple[float, frozenset]:
        """Max-flow value and the largest source side of a min cut (everything that cannot reach the
        sink in the residual graph; valid after preflow-push's first phase, as in networkx)."""
        from networkx.algorithms.flow import preflow_push

        residual = preflow_push(self.graph, source, sink, capacity="capacity", value_only=True)
        value = residual.graph["flow_value"]
        reaches_sink = {sink}
        todo = [sink]
        pred = residual.pred
        while todo:
            w = todo.pop()
            for u, attr in pred[w].items():
                if u not in reaches_sink and attr["flow"] < attr["capacity"]:
                    reaches_sink.add(u)
                    todo.append(u)
        return value, frozenset(n for n in residual if n not in reaches_sink)


def _single_gpu_start(topology: Topology, capacity: dict[tuple[int, int], float]) -> tuple[frozenset[int], int]:
    """The GPU whose in-links are thinnest: "everything but v" is the usual bottleneck and Newton's start."""
    into = dict.fromkeys(topology.gpus, 0.0)
    for (_, v), cap in capacity.items():
        if v in into:
            into[v] += cap
    v = min(topology.gpus, key=lambda g: (into[g], g))
    if into[v] <= 0:
        raise CcvizError(f"links: GPU {v} has no link into it; every GPU must reach every other GPU", "links")
    return frozenset(topology.nodes) - {v}, v


def max_gather_ratio(topology: Topology) -> tuple[float, frozenset[int]]:
    """max over S (a GPU outside) of |S ∩ GPUs| / B+(S), in GPUs per GB/s, and the maximizing S.

    Newton iterations: at ratio t the cut function N - |S ∩ GPUs| + t B+(S) is minimized by N max
    flows (one per GPU sink); a minimum below N names an S with a larger ratio, which becomes t.
    Exact in integers on scipy where the bandwidths have a small common denominator (a round stops
    at the first violated sink: only the last, certifying round needs all N), else in floats.
    """
    capacity = _capacities(topology)
    best_set, _ = _single_gpu_start(topology, capacity)
    whole = _whole_bandwidths(capacity)
    if whole is not None:
        found = _integer_gather(topology, best_set, *whole)
        if found is not None:
            return found
    return _float_gather(topology, capacity, best_set)


def _integer_gather(topology: Topology, best_set: frozenset[int], scale: float, whole: dict[tuple[int, int], int]
                    ) -> tuple[float, frozenset[int]] | None:
    """Newton in whole numbers: the ratio is c x D / B exactly; None if a round would overflow int32."""
    flows = _IntegerFlows(topology, scale, whole)
    gpus = topology.gpus

    def count_and_bandwidth(inside: frozenset[int]) -> tuple[int, int]:
        out = sum(whole[key] for key in _leaving(topology, inside))
        if out <= 0:
            raise CcvizError("links: a set of nodes holding GPUs has no link leaving it; every GPU must reach "
                             "every other GPU", "links")
        return sum(1 for g in gpus if g in inside), out

    count, bandwidth = count_and_bandwidth(best_set)
    order = list(gpus)
    for _ in range(200):
        target = flows.set_capacities(count, bandwidth)
        if target is None:
            return None
        violated = None
        for i, v in enumerate(order):  # the first violated sink is enough to raise the ratio
            result = flows.max_flow(flows.source, flows.index[v])
            if result.flow_value < target:
                violated = result
                order.insert(0, order.pop(i))  # and is tried first next round
                break
        if violated is None:
            break
        inside = flows.source_side(violated, flows.source)
        c, b = count_and_bandwidth(inside)
        if c * bandwidth <= count * b:  # not a larger ratio (cannot happen with exact cuts; a guard)
            break
        best_set, count, bandwidth = inside, c, b
    return count * scale / bandwidth, best_set


def _float_gather(topology: Topology, capacity: dict[tuple[int, int], float], best_set: frozenset[int]
                  ) -> tuple[float, frozenset[int]]:
    n = topology.n_gpus
    net = _FlowNetwork(topology)
    g = net.graph
    for v in topology.gpus:
        g.add_edge(_SOURCE, v, capacity=1.0)
    best_ratio = _ratio(topology, capacity, best_set)
    for _ in range(200):
        for (u, w), cap in capacity.items():
            g[u][w]["capacity"] = best_ratio * cap
        worst_value, worst_set = n * (1 - _REL), None
        for v in topology.gpus:
            value, side = net.min_cut(_SOURCE, v)
            if value < worst_value:
                worst_value, worst_set = value, side - {_SOURCE}
        if worst_set is None:
            break
        ratio = _ratio(topology, capacity, frozenset(worst_set))
        if ratio <= best_ratio * (1 + 1e-12):
            break
        best_set, best_ratio = frozenset(worst_set), ratio
    return best_ratio, best_set


def _ratio(topology: Topology, capacity: dict[tuple[int, int], float], inside: frozenset[int]) -> float:
    out = sum(capacity[key] for key in _leaving(topology, inside))
    count = sum(1 for g in topology.gpus if g in inside)
    if out <= 0:
        raise CcvizError("links: a set of nodes holding GPUs has no link leaving it; every GPU must reach every "
                         "other GPU", "links")
    return count / out


def min_broadcast_cut(topology: Topology, root: int) -> tuple[float, frozenset[int]]:
    """The smallest root->GPU max flow (GB/s) and the root side of its min cut."""
    capacity = _capacities(topology)
    whole = _whole_bandwidths(capacity)
    if whole is not None and sum(whole[1].values()) <= _INT32:
        flows = _IntegerFlows(topology, *whole)
        flows.set_capacities(1, 1)
        worst = None
        for v in topology.gpus:
            if v != root:
                result = flows.max_flow(flows.index[root], flows.index[v])
                if worst is None or result.flow_value < worst.flow_value:
                    worst = result
        if worst is None:
            return float("inf"), frozenset()
        return worst.flow_value / whole[0], flows.source_side(worst, flows.index[root])
    net = _FlowNetwork(topology)
    best, best_side = float("inf"), frozenset()
    for v in topology.gpus:
        if v == root:
            continue
        value, side = net.min_cut(root, v)
        if value < best:
            best, best_side = value, side
    return best, best_side


# ------------------------------------------------------------------------------ the limit
def _gather_cut(topology: Topology, shard_bytes_per_size: float, reverse: bool) -> Cut:
    """AllGather's cut (or ReduceScatter's: the same on the reversed fabric, reported in real links)."""
    fabric = topology.reversed() if reverse else topology
    ratio, inside = _cached(topology, ("gather", reverse), lambda: max_gather_ratio(fabric))
    gpus_in = sorted(g for g in topology.gpus if g in inside)
    if reverse:  # links leaving S on the reversed fabric enter S on the real one: report the complement
        nodes = frozenset(topology.nodes) - inside
    else:
        nodes = inside
    links = tuple(_leaving(topology, nodes))
    bandwidth = sum(topology.links[key].bandwidth_GBps * topology.links[key].lanes for key in links)
    return Cut(nodes, links, bandwidth, ratio * shard_bytes_per_size / 1e9,
               _gather_words(topology, nodes, gpus_in, links, bandwidth, reverse))


def _gather_words(topology: Topology, nodes: frozenset[int], gpus_in: list[int], links, bandwidth: float,
                  reverse: bool) -> str:
    gpus = topology.gpus
    outside = [g for g in gpus if g not in nodes]
    cables = f"{len(links)} link{'s' if len(links) != 1 else ''}, {bandwidth:g} GB/s in all"
    if not reverse:
        if len(outside) == 1:
            return f"everything but GPU {outside[0]} must reach GPU {outside[0]} over its {cables}"
        return (f"the shards of {_gpu_list(gpus_in)} must all leave the set {{{_node_list(topology, nodes)}}} "
                f"over its {cables}")
    inside = [g for g in gpus if g in nodes]
    if len(inside) == 1:
        return (f"GPU {inside[0]} must send its contributions to every other GPU's result over its {cables}")
    return (f"the contributions of {_gpu_list(inside)} to the results of {_gpu_list(gpus_in)} must all leave "
            f"the set {{{_node_list(topology, nodes)}}} over its {cables}")


def _node_list(topology: Topology, nodes: frozenset[int]) -> str:
    labels = [topology.nodes[n].label for n in sorted(nodes)]
    if len(labels) <= 8:
        return ", ".join(labels)
    return ", ".join(labels[:6]) + f", ... ({len(labels)} nodes)"


def _broadcast_cut(topology: Topology, root: int, reverse: bool) -> Cut:
    fabric = topology.reversed() if reverse else topology
    flow, side = _cached(topology, ("broadcast", root, reverse), lambda: min_broadcast_cut(fabric, root))
    nodes = frozenset(topology.nodes) - side if reverse else side
    links = tuple(_leaving(topology, nodes))
    bandwidth = sum(topology.links[key].bandwidth_GBps * topology.links[key].lanes for key in links)
    cut_off = sorted(g for g in topology.gpus if (g in nodes) == reverse)
    if reverse:
        words = (f"the partial sums for root {root} must reach it from {_gpu_list(cut_off)} over {len(links)} "
                 f"link(s), {bandwidth:g} GB/s in all (the largest flow into the root)")
    else:
        words = (f"the root {root} must reach {_gpu_list(cut_off)} over {len(links)} link(s), {bandwidth:g} GB/s "
                 "in all (the smallest flow out of the root)")
    return Cut(nodes, links, bandwidth, 1.0 / (flow * 1e9), words)


def judged_fabric(topology: Topology) -> Topology:
    """The fabric as the judge sees it: where it declares the hardware link model, its links at their sustained
    rates (the Simple protocol's, the most any protocol carries; ``ccviz.model.link_model``), so the limit bounds
    what the simulator can measure there and a schedule's ratio to it means the same on every fabric."""
    from ccviz.model.link_model import declared, effective_topology

    return topology if declared(topology) is None else effective_topology(topology, "simple")


def bandwidth_limit(topology: Topology, collective: str, size_bytes: float, root: int | None = None
                    ) -> BandwidthLimit:
    """The fastest any schedule of ``collective`` (AllReduce: ReduceScatter then AllGather) can finish
    on ``topology`` at ``size_bytes``, from bandwidth alone, with the bottleneck cut."""
    from ccviz.model.arguments import expect_topology

    expect_topology(topology)
    name = normalize_name(collective)
    topology = judged_fabric(topology)
    if name not in LIMITED:
        raise CcvizError(f"collective: no exact limit for {name}; the fabric's limit is defined for "
                         f"{', '.join(LIMITED)}", "collective")
    if not (isinstance(size_bytes, (int, float)) and size_bytes > 0):
        raise CcvizError(f"size: the size must be a positive number of bytes, got {size_bytes!r}", "size")
    if name == "alltoall":
        from ccviz.bounds.alltoall_limit import alltoall_limit

        return alltoall_limit(topology, float(size_bytes))
    slots = int(topology.meta.get("buffer_ranks", topology.n_gpus))
    shard = 1.0 / slots  # shard bytes per byte of buffer
    if name in ("allgather", "reducescatter"):
        cut = _gather_cut(topology, shard, reverse=name == "reducescatter")
        return BandwidthLimit(name, float(size_bytes), cut.ratio * size_bytes, cut)
    if name == "allreduce" and topology.reducing_switches:
        return in_network_allreduce_limit(topology, float(size_bytes), _gather_cut(topology, shard, reverse=True),
                                          _gather_cut(topology, shard, reverse=False), _broadcast_cut)
    if name == "allreduce":
        rs = _gather_cut(topology, shard, reverse=True)
        ag = _gather_cut(topology, shard, reverse=False)
        parts = {"reducescatter": rs.ratio * size_bytes, "allgather": ag.ratio * size_bytes}
        main = ag if ag.ratio >= rs.ratio else rs
        return BandwidthLimit(name, float(size_bytes), sum(parts.values()), main, parts,
                              {"reducescatter": rs, "allgather": ag})
    root = topology.gpus[0] if root is None else root
    if root not in topology.gpus:
        raise CcvizError(f"root: root {root} is not a GPU rank; choose one of {topology.gpus}", "root")
    cut = _broadcast_cut(topology, root, reverse=name == "reduce")
    return BandwidthLimit(name, float(size_bytes), cut.ratio * size_bytes, cut)


# The certifying Newton round is one compiled max flow per GPU: 0.02 s for a 64-GPU torus, 0.2-0.9 s at
# 256-512 GPUs, 1-2 s for a 1,024-GPU torus or rfs3d but 6-18 s for a 1,024-GPU ring or DGX-2 (long
# augmenting paths). Summaries, lower bounds and the designer compute it up to here; `ccviz limit` (and
# ``bandwidth_limit``) always.
AUTO_LIMIT_GPUS = 512


def limit_is_quick(topology: Topology, collective: str | None = None) -> bool:
    """Whether summaries compute the limit by themselves (AllToAll's LP without a symmetry to shrink it
    takes minutes at 512 GPUs: up to ``ccviz.bounds.alltoall_limit.AUTO_FULL_LP_GPUS`` there)."""
    if collective is not None and normalize_name(collective) == "alltoall":
        from ccviz.bounds.alltoall_limit import alltoall_is_quick

        return topology.n_gpus <= AUTO_LIMIT_GPUS and alltoall_is_quick(topology)
    return topology.n_gpus <= AUTO_LIMIT_GPUS


def limit_or_none(topology: Topology, collective: str, size_bytes: float, root: int | None = None
                  ) -> BandwidthLimit | None:
    """The limit where one is defined and quick to compute (summaries show ``null`` for custom demands
    and fabrics over ``AUTO_LIMIT_GPUS`` GPUs)."""
    if str(collective).strip().lower() == "custom" or normalize_name(collective) not in LIMITED:
        return None
    if not limit_is_quick(topology, collective):
        return None
    return bandwidth_limit(topology, collective, size_bytes, root)


def switch_sums_sentence(finish_s: float | None, without_s: float | None,
                         sums_in_switches: bool | None = None) -> str | None:
    """Where the limit counts sums made in reducing switches (AllReduce on NVLS / SHARP fabrics), the limit a
    schedule summing at GPUs can reach, and how this one compares with it (None where it does not apply).

    ``sums_in_switches``: whether the schedule adds in a switch (a ``combine`` transfer); None where unknown,
    then only a finish before that limit shows it (no schedule summing at GPUs gets there)."""
    if not without_s:
        return None
    text = (f"that limit counts sums made in the fabric's switches (NVLS, SHARP); without them (ReduceScatter then "
            f"AllGather, summed at GPUs) the limit is {format_time(without_s)}")
    if not finish_s:
        return text + "; `-a inc` sums in the switches"
    if finish_s < without_s * (1 - 1e-9):  # no schedule summing at GPUs gets there
        return (text + f"; this schedule sums in the switches and beats it: it ends in {finish_s / without_s:.1%} "
                f"of that time")
    ratio = f"this schedule ends at {finish_s / without_s:.3f} x it ({without_s / finish_s:.1%} of its speed)"
    if sums_in_switches:
        return text + f"; {ratio}, though it sums in the switches"
    if sums_in_switches is False:
        return text + f"; {ratio}, summing at GPUs; `-a inc` sums in the switches"
    return text + f"; {ratio}; `-a inc` sums in the switches"


def limit_sentence(finish_s: float | None, limit_s: float | None, n_gpus: int | None = None,
                   collective: str | None = None) -> str:
    """How a result compares with the fabric's limit, in one line (CLI and app)."""
    if not limit_s and n_gpus is not None and n_gpus > AUTO_LIMIT_GPUS:
        return (f"the fabric's limit is not computed automatically above {AUTO_LIMIT_GPUS} GPUs (it can take "
                "seconds per collective there); `ccviz limit` computes it")
    if not limit_s and collective == "alltoall":  # a summary's collective, canonical
        from ccviz.bounds.alltoall_limit import AUTO_FULL_LP_GPUS

        return (f"the fabric's limit is not computed automatically for AllToAll above {AUTO_FULL_LP_GPUS} GPUs "
                "on a fabric without a symmetry to shrink its LP (it can take minutes); `ccviz limit` computes it")
    if not limit_s:
        return "no fabric limit is defined for this collective (custom demands, gather, scatter)"
    if not finish_s:
        return f"the fabric's limit is {format_time(limit_s)} (bandwidth only, alpha ignored)"
    # the ratio first, as the page's bound reads ("finish = 1.45 x bound"): a bare "69% of the limit" read
    # as 69% of the limit's time to a student; the share of the limit's speed follows, named as such
    text = (f"finish = {finish_s / limit_s:.3f} x the fabric's limit: {format_time(finish_s)} against a limit of "
            f"{format_time(limit_s)} (bandwidth only, alpha ignored), so the schedule runs at "
            f"{limit_s / finish_s:.1%} of the limit's speed; `ccviz limit` shows the bottleneck cut")
    if limit_s > finish_s * (1 + 1e-9):
        text += ("; below 1 x (over 100%) because this fabric's switch-hop rule (teccl or free) delivers a hop out "
                 "of a switch before its bytes have crossed that link")
    return text


# ------------------------------------------------------------------ switches that reduce
def in_network_allreduce_limit(topology: Topology, size_bytes: float, rs, ag, broadcast_cut: Callable):
    """AllReduce's limit with reducing switches: the worst of M over the min cut, ReduceScatter's and
    AllGather's limits (``rs``/``ag`` are their cuts), with the cut that sets it.

    A reducing switch (``Node.reduce``: NVLS, SHARP) fuses AllReduce's halves: each GPU sends its M
    bytes up once and receives the M-byte result down once, both directions of its link at once. The
    bound holds for any schedule: cut the nodes into S and the rest with GPUs on both sides; every GPU
    outside S needs, for each byte of the result, information from the GPUs inside S (a partial sum is
    as small as the data, never smaller), so M bytes must leave S and M must enter it:
    T >= M / min over such S of min(B+(S), B-(S)). The smallest B+(S) is the smallest GPU->GPU max flow
    from one fixed GPU or into it, so 2(N-1) max flows settle it exactly. AllReduce also solves
    ReduceScatter and AllGather, so their limits bound it too. On a reducing star it is M/BW, reached
    (up to pipelining, where the switch can also copy) by ``ccviz.synth.inc``; where only some switches reduce, or sit where no
    aggregation tree can use them, it is a lower bound schedules may not reach.
    """
    root = topology.gpus[0]
    out_cut = broadcast_cut(topology, root, False)  # smallest flow out of GPU root: a set holding it
    in_cut = broadcast_cut(topology, root, True)  # smallest flow into it: a set without it, seen from outside
    worst = max(out_cut, in_cut, key=lambda c: c.ratio)
    inside = sorted(g for g in topology.gpus if g in worst.nodes)
    words = (f"every GPU's result needs all M bytes from both sides of the cut, even with switches adding in the "
             f"network: M must leave the set {{{_node_list(topology, worst.nodes)}}} ({len(inside)} of "
             f"{topology.n_gpus} GPUs) over its {len(worst.links)} link(s), {worst.bandwidth_GBps:g} GB/s in all")
    cut = Cut(worst.nodes, worst.links, worst.bandwidth_GBps, worst.ratio, words)
    candidates = [("in-network", cut, cut.ratio), ("reducescatter", rs, rs.ratio), ("allgather", ag, ag.ratio)]
    _, binding, ratio = max(candidates, key=lambda c: c[2])
    return BandwidthLimit("allreduce", size_bytes, ratio * size_bytes, binding, {},
                          {"in-network": cut, "reducescatter": rs, "allgather": ag},
                          without_switch_sums_s=(rs.ratio + ag.ratio) * size_bytes)
