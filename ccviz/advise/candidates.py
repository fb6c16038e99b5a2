"""The upgrades worth pricing on a fabric: which cables, classes and switches a designer could buy.

Generated from the fabric's own parts so every candidate is something the designer can build: faster cables
of an existing class (all of them, or one cable on the bottleneck cut), a new cable of an existing class
between two nodes (across the bottleneck cuts first), a switch that reduces, a NIC per box. Candidates are
listed in that order of likely use and cut at ``max_candidates``.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from itertools import combinations

from ccviz.advise.costs import CostTable
from ccviz.advise.upgrades import Upgrade
from ccviz.model.topology import Link, Topology

DEFAULT_MAX_CANDIDATES = 100
SPEEDUP = 2.0  # a faster cable is the next generation: twice the bandwidth


def cables(topology: Topology) -> dict[tuple[int, int], Link]:
    """One entry per cable (u < v), the u->v link standing for both directions."""
    out: dict[tuple[int, int], Link] = {}
    for (u, v), link in topology.links.items():
        key = (min(u, v), max(u, v))
        out.setdefault(key, link)
    return out


def cable_class(topology: Topology, key: tuple[int, int], link: Link) -> tuple[str, float]:
    """(endpoint kinds, bandwidth): cables a designer buys as one kind."""
    kinds = sorted(topology.nodes[n].kind for n in key)
    return ("-".join(kinds), link.bandwidth_GBps)


def generate(topology: Topology, costs: CostTable, cut_nodes: Sequence[frozenset[int]] = (),
             max_candidates: int = DEFAULT_MAX_CANDIDATES, reducing: bool = True) -> list[Upgrade]:
    """Up to ``max_candidates`` upgrades, the likeliest first; ``cut_nodes`` are the node sets of the mix's
    bottleneck cuts (cables across them are the ones that can move a limit); ``reducing``: offer switches
    that reduce (only AllReduce gains from them)."""
    found: list[Upgrade] = []
    seen: set[tuple] = set()

    def offer(upgrades: Iterable[Upgrade]) -> None:
        for up in upgrades:
            key = (up.kind, up.src, up.dst, up.bw_GBps, up.links)
            if key not in seen and len(found) < max_candidates:
                seen.add(key)
                found.append(up)

    offer(_faster_classes(topology, costs))
    offer(_faster_cut_cables(topology, costs, cut_nodes))
    if reducing:
        offer(_reducing_switches(topology, costs))
    offer(_nics(topology, costs))
    offer(_new_cables(topology, costs, cut_nodes))
    return found


def _faster_classes(topology: Topology, costs: CostTable) -> Iterable[Upgrade]:
    by_class: dict[tuple[str, float], list[tuple[int, int]]] = defaultdict(list)
    all_cables = cables(topology)
    for key, link in all_cables.items():
        by_class[cable_class(topology, key, link)].append(key)
    by_rate: dict[float, list[tuple[int, int]]] = defaultdict(list)
    for (_, bw), keys in by_class.items():
        by_rate[bw] += keys
    groups = [(f"{kinds} cable", bw, keys) for (kinds, bw), keys in by_class.items()]
    # cables of one rate on one path (GPU-NIC-switch) only pay off together: every cable of the rate at once
    groups += [("cable", bw, keys) for bw, keys in by_rate.items()
               if sum(1 for (_, b) in by_class if b == bw) > 1]
    for what, bw, keys in sorted(groups, key=lambda g: -len(g[2])):
        added = sum((SPEEDUP - 1) * bw * all_cables[k].lanes for k in keys)
        yield Upgrade("set_bw", round(added * costs.bandwidth_per_GBps, 2), None, None, bw * SPEEDUP,
                      links=tuple(sorted(keys)),
                      label=f"every {what} of {bw:g} GB/s ({len(keys)}) at {bw * SPEEDUP:g} GB/s")


def _crossing(topology: Topology, cut_nodes: Sequence[frozenset[int]]) -> list[tuple[int, int]]:
    """Cables with one end inside a bottleneck cut and one outside, the tightest cuts' first."""
    out: list[tuple[int, int]] = []
    for inside in cut_nodes:
        for key in cables(topology):
            if (key[0] in inside) != (key[1] in inside) and key not in out:
                out.append(key)
    return out


def _faster_cut_cables(topology: Topology, costs: CostTable, cut_nodes) -> Iterable[Upgrade]:
    all_cables = cables(topology)
    for key in _crossing(topology, cut_nodes):
        link = all_cables[key]
        added = (SPEEDUP - 1) * link.bandwidth_GBps * link.lanes
        yield Upgrade("set_bw", round(added * costs.bandwidth_per_GBps, 2), key[0], key[1],
                      link.bandwidth_GBps * SPEEDUP, label=f"cable {_name(topology, key[0])}-{_name(topology, key[1])} "
                      f"at {link.bandwidth_GBps * SPEEDUP:g} GB/s")


def _reducing_switches(topology: Topology, costs: CostTable) -> Iterable[Upgrade]:
    """Every switch summing in the network (NVLS in a box, SHARP across the network), bought together: where
    only some switches reduce, the fabric's AllReduce limit is a bound that no schedule may reach (an
    aggregation tree needs adders at every level it crosses), so a lone reducing switch among others would
    promise what schedules cannot deliver."""
    todo = [s for s in topology.switches if not topology.nodes[s].reduce]
    gpu_neighbours = Counter(v for (u, v) in topology.links if topology.nodes[u].kind == "gpu")
    if not todo or not any(gpu_neighbours[s] >= 2 for s in topology.switches):
        return
    names = _name(topology, todo[0]) if len(todo) == 1 else f"all {len(todo)} switches"
    yield Upgrade("reduce_switch", costs.reduce_switch * len(todo), todo[0], None, None,
                  label=f"{names} reducing in the network (SHARP/NVLS)", switches=tuple(todo))


def _nics(topology: Topology, costs: CostTable) -> Iterable[Upgrade]:
    """One more NIC per box: a cable from the box's GPU with the fewest network cables to the network switch
    the box uses most, at the box's NIC rate. Boxes are node groups; the network is what lies outside them."""
    boxes: dict[str, list[int]] = defaultdict(list)
    for g in topology.gpus:
        if topology.nodes[g].group is not None:
            boxes[topology.nodes[g].group].append(g)
    if len(boxes) < 2:
        return
    for box, gpus in sorted(boxes.items()):
        outside = Counter()
        rates = Counter()
        per_gpu = Counter({g: 0 for g in gpus})
        for g in gpus:
            for (u, v), link in topology.links.items():
                if u == g and topology.nodes[v].is_switch and topology.nodes[v].group != box:
                    outside[v] += 1
                    rates[link.bandwidth_GBps] += 1
                    per_gpu[g] += 1
        if not outside:
            continue
        switch = outside.most_common(1)[0][0]
        gpu = min(gpus, key=lambda g: (per_gpu[g], g))
        rate = rates.most_common(1)[0][0]
        yield Upgrade("add_nic", costs.nic, gpu, switch, rate,
                      label=f"a NIC on {_name(topology, gpu)} ({box}) to {_name(topology, switch)}, {rate:g} GB/s")


def _new_cables(topology: Topology, costs: CostTable, cut_nodes) -> Iterable[Upgrade]:
    """A cable between two GPUs that have none (across the bottleneck cuts before the rest), then a second
    cable beside existing ones. GPU-GPU cables are offered only where the fabric already has them (inside a
    box of directly cabled GPUs such as DGX-1's, or between boxes that are cabled GPU to GPU; not inside an
    NVSwitch box, whose GPUs' ports all go to the switches), of the class their ends already use: inside a
    box the box's commonest cable, between boxes the commonest cable that leaves a box."""
    all_cables = cables(topology)
    if not all_cables:
        return
    inside, between = Counter(), Counter()
    for (u, v), link in all_cables.items():
        gu, gv = topology.nodes[u].group, topology.nodes[v].group
        (inside if gu == gv else between)[(gu, link.bandwidth_GBps)] += 1
    commonest = Counter(link.bandwidth_GBps for link in all_cables.values()).most_common(1)[0][0]

    def rate(u: int, v: int) -> float:
        gu, gv = topology.nodes[u].group, topology.nodes[v].group
        if gu == gv:
            mine = [(n, bw) for (g, bw), n in inside.items() if g == gu]
            return max(mine)[1] if mine else commonest
        leaving = [(n, bw) for (_, bw), n in between.items()]
        return max(leaving)[1] if leaving else commonest

    gpu_gpu_inside = {topology.nodes[u].group for (u, v) in all_cables if topology.nodes[u].kind == "gpu"
                      and topology.nodes[v].kind == "gpu" and topology.nodes[u].group == topology.nodes[v].group}
    gpu_gpu_between = any(topology.nodes[u].kind == "gpu" and topology.nodes[v].kind == "gpu"
                          and topology.nodes[u].group != topology.nodes[v].group for (u, v) in all_cables)

    def offered(u: int, v: int) -> bool:
        gu, gv = topology.nodes[u].group, topology.nodes[v].group
        return gu in gpu_gpu_inside if gu == gv else gpu_gpu_between

    pairs = [p for p in combinations(topology.gpus, 2) if p not in all_cables and offered(*p)]
    inside_sets = list(cut_nodes)
    pairs.sort(key=lambda p: (not any((p[0] in s) != (p[1] in s) for s in inside_sets), p))
    for u, v in pairs:
        bw = rate(u, v)
        yield Upgrade("add_link", round(bw * costs.cable_per_GBps, 2), u, v, bw,
                      label=f"new cable {_name(topology, u)}-{_name(topology, v)}, {bw:g} GB/s")
    for key in _crossing(topology, cut_nodes) + sorted(all_cables):
        link = all_cables[key]
        yield Upgrade("add_link", round(link.bandwidth_GBps * costs.cable_per_GBps, 2), key[0], key[1],
                      link.bandwidth_GBps, label=f"second cable {_name(topology, key[0])}-{_name(topology, key[1])}, "
                      f"{link.bandwidth_GBps:g} GB/s")


def _name(topology: Topology, node: int) -> str:
    label = topology.nodes[node].label
    return label if label.endswith(str(node)) else f"{label} ({node})"
