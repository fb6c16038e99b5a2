"""Switched fabrics: a star, the k-ary fat-tree, leaf-spine and dragonfly."""

from __future__ import annotations

import itertools

from ccviz.builders.fabric import DEFAULT_ALPHA, DEFAULT_BW, Fabric, link_classes, require
from ccviz.builders.layout import Position, dragonfly_positions, hub_positions, tree_positions
from ccviz.builders.registry import builder
from ccviz.model.topology import Topology


@builder("star")
def star(n: int = 8, bw: float = DEFAULT_BW, alpha: float = DEFAULT_ALPHA, copy: bool = True,
         reduce: bool = False) -> Topology:
    """n GPUs around one switch (copy=false: no multicast; reduce=true: it adds in the network).

    reduce=true gives the switch a reduction engine, as NVLink SHARP (NVLS) and Quantum SHARP have."""
    require(n >= 2, "n", f"star needs n >= 2 GPUs, got {n}")
    fabric = Fabric()
    gpus = [fabric.add_gpu(group="gpus") for _ in range(n)]
    hub = fabric.add_switch(copy=copy, label="switch", reduce=reduce)
    for gpu in gpus:
        fabric.cable(gpu, hub, bw, alpha)
    fabric.place(hub_positions(hub, gpus))
    kind = ("multicast" if copy else "non-copying") + (", reducing" if reduce else "")
    return fabric.topology(f"star{n}" + ("_reduce" if reduce else ""), f"{n} GPUs on one {kind} switch", "star")


@builder("fattree")
def fattree(k: int = 4, bw: tuple[float, ...] = (DEFAULT_BW,), alpha: tuple[float, ...] = (DEFAULT_ALPHA,),
            copy: bool = True) -> Topology:
    """k-ary fat-tree: k pods of k/2 edge + k/2 aggregation switches, (k/2)^2 cores, k^3/4 GPUs.

    bw/alpha are per tier: host-edge / edge-aggregation / aggregation-core.
    """
    require(k >= 2 and k % 2 == 0, "k", f"fattree needs an even k >= 2 (4 gives 16 GPUs), got {k}")
    tiers = ("host-edge", "edge-agg", "agg-core")
    tree = FatTree(k, link_classes(bw, tiers, "bw"), link_classes(alpha, tiers, "alpha"), copy)
    tree.add_gpus()
    for pod in range(k):
        tree.add_pod(pod)
    tree.add_core()
    tree.fabric.place(tree.positions())
    return tree.fabric.topology(f"fattree_k{k}", f"{k}-ary fat-tree: {tree.n_gpus} GPUs, {k} pods, "
                                f"{tree.half ** 2} core switches", "tree", meta={"k": k})


class FatTree:
    """The k-ary fat-tree (Al-Fares et al.), drawn bottom-up: GPUs, edge, aggregation, core rows."""

    def __init__(self, k: int, bws: tuple[float, ...], alphas: tuple[float, ...], copy: bool) -> None:
        self.k, self.half = k, k // 2
        self.pod_size = self.half * self.half  # GPUs per pod
        self.n_gpus = k * self.pod_size
        self.bws, self.alphas, self.copy = bws, alphas, copy
        self.fabric = Fabric()
        self.edges: list[list[int]] = []  # per pod, filled by add_pod
        self.aggregation: list[list[int]] = []  # per pod, filled by add_pod
        self.cores: list[int] = []

    def gpu_id(self, pod: int, edge: int, port: int) -> int:
        """The GPU on ``port`` of edge switch ``edge`` in ``pod``."""
        return pod * self.pod_size + edge * self.half + port

    def add_gpus(self) -> None:
        """All GPUs first (ids 0..k^3/4-1, so ranks are contiguous), one pod after another."""
        for gpu in range(self.n_gpus):
            self.fabric.add_gpu(group=f"pod{gpu // self.pod_size}")

    def add_pod(self, pod: int) -> None:
        """Edge switches above their k/2 GPUs, aggregation switches above the pod, edge x aggregation cabled."""
        edges = [self.fabric.add_switch(group=f"pod{pod}", copy=self.copy, label=f"edge{pod}.{e}")
                 for e in range(self.half)]
        aggs = [self.fabric.add_switch(group=f"pod{pod}", copy=self.copy, label=f"agg{pod}.{a}")
                for a in range(self.half)]
        for e, edge in enumerate(edges):
            for port in range(self.half):
                self.fabric.cable(self.gpu_id(pod, e, port), edge, self.bws[0], self.alphas[0])
            for agg in aggs:
                self.fabric.cable(edge, agg, self.bws[1], self.alphas[1])
        self.edges.append(edges)
        self.aggregation.append(aggs)

    def add_core(self) -> None:
        """(k/2)^2 core switches; aggregation switch a of every pod reaches cores a*k/2 .. a*k/2 + k/2 - 1."""
        self.cores = [self.fabric.add_switch(group="core", copy=self.copy, label=f"core{c}")
                      for c in range(self.half ** 2)]
        for aggs in self.aggregation:
            for a, agg in enumerate(aggs):
                for core in self.cores[a * self.half:(a + 1) * self.half]:
                    self.fabric.cable(agg, core, self.bws[2], self.alphas[2])

    def positions(self) -> dict[int, Position]:
        """Bottom-up rows: GPUs; each edge switch above its GPUs; aggregation over its pod; cores over all."""
        pods = [range(pod * self.pod_size, (pod + 1) * self.pod_size) for pod in range(self.k)]
        edges = [([edge], pods[pod][e * self.half:(e + 1) * self.half])
                 for pod in range(self.k) for e, edge in enumerate(self.edges[pod])]
        aggs = [(self.aggregation[pod], pods[pod]) for pod in range(self.k)]
        return tree_positions(range(self.n_gpus), [edges, aggs, [(self.cores, range(self.n_gpus))]])


@builder("leafspine")
def leafspine(leaves: int = 4, hosts: int = 4, spines: int = 2, bw: float = DEFAULT_BW,
              alpha: float = DEFAULT_ALPHA, oversub: float | None = None, uplink_bw: float | None = None,
              copy: bool = True, reduce: bool = False) -> Topology:
    """Two-tier leaf-spine: leaves x hosts GPUs, every leaf cabled to every spine.

    The leaf->spine cable bandwidth is ``uplink_bw``, or derived from the oversubscription
    ratio (host bandwidth into a leaf / its uplink bandwidth; 1 = non-blocking, the default).
    """
    require(leaves >= 1 and hosts >= 1 and spines >= 1, "leaves",
            f"leafspine needs leaves, hosts and spines >= 1, got {leaves}, {hosts}, {spines}")
    require(leaves * hosts >= 2, "hosts", "leafspine needs at least two GPUs (leaves x hosts >= 2)")
    require(oversub is None or uplink_bw is None, "oversub", "give either oversub or uplink_bw, not both")
    require(oversub is None or oversub > 0, "oversub", f"oversub must be positive, got {oversub}")
    require(uplink_bw is None or uplink_bw > 0, "uplink_bw", f"uplink_bw must be positive GB/s, got {uplink_bw}")
    if uplink_bw is None:
        uplink_bw = hosts * bw / (spines * (oversub or 1.0))
    ratio = hosts * bw / (spines * uplink_bw)
    n_gpus = leaves * hosts
    fabric = Fabric()
    gpus = [fabric.add_gpu(group=f"leaf{gpu // hosts}") for gpu in range(n_gpus)]
    leaf_ids = [fabric.add_switch(group=f"leaf{i}", copy=copy, label=f"leaf{i}", reduce=reduce)
                for i in range(leaves)]
    spine_ids = [fabric.add_switch(group="spine", copy=copy, label=f"spine{s}", reduce=reduce) for s in range(spines)]
    for gpu in gpus:
        fabric.cable(gpu, leaf_ids[gpu // hosts], bw, alpha)
    for leaf in leaf_ids:
        for spine in spine_ids:
            fabric.cable(leaf, spine, uplink_bw, alpha)
    fabric.place(tree_positions(gpus, [[([leaf], range(i * hosts, (i + 1) * hosts)) for i, leaf in enumerate(leaf_ids)],
                                       [(spine_ids, range(n_gpus))]]))
    return fabric.topology(
        f"leafspine_{leaves}x{hosts}_s{spines}",
        f"leaf-spine: {leaves} leaves x {hosts} GPUs, {spines} spines, {uplink_bw:g} GB/s uplinks "
        f"(oversubscription {ratio:g}:1)",
        "tree", meta={"oversubscription": ratio},
    )


@builder("dragonfly")
def dragonfly(groups: int = 4, routers: int = 4, gpus: int = 2, bw: tuple[float, ...] = (50.0, 50.0, 25.0),
              alpha: tuple[float, ...] = (0.5, 0.5, 1.0), copy: bool = True) -> Topology:
    """Dragonfly: routers (switches) all-to-all inside a group, one global cable per pair of groups.

    bw/alpha per link class: GPU-router / local (router-router in a group) / global (between groups).
    Global cables leave a group round-robin over its routers (the "consecutive" arrangement).
    """
    require(groups >= 1 and routers >= 1 and gpus >= 1, "groups",
            f"dragonfly needs groups, routers and gpus >= 1, got {groups}, {routers}, {gpus}")
    require(groups * routers * gpus >= 2, "gpus", "dragonfly needs at least two GPUs")
    classes = ("terminal", "local", "global")
    bws, alphas = link_classes(bw, classes, "bw"), link_classes(alpha, classes, "alpha")
    n_gpus = groups * routers * gpus
    fabric = Fabric()
    gpu_ids = [fabric.add_gpu(group=f"group{gpu // (gpus * routers)}") for gpu in range(n_gpus)]
    router_ids = [[fabric.add_switch(group=f"group{g}", copy=copy, label=f"R{g}.{r}") for r in range(routers)]
                  for g in range(groups)]
    for gpu in range(n_gpus):
        g, r = divmod(gpu // gpus, routers)
        fabric.cable(gpu, router_ids[g][r], bws[0], alphas[0])
    for g in range(groups):
        for a, b in itertools.combinations(router_ids[g], 2):
            fabric.cable(a, b, bws[1], alphas[1])
    for g, h in itertools.combinations(range(groups), 2):
        fabric.cable(router_ids[g][_global_port(g, h, routers)], router_ids[h][_global_port(h, g, routers)],
                     bws[2], alphas[2])
    fabric.place(dragonfly_positions(gpu_ids, router_ids))
    return fabric.topology(f"dragonfly_{groups}x{routers}x{gpus}",
                           f"dragonfly: {groups} groups x {routers} routers x {gpus} GPUs", "dragonfly")


def _global_port(group: int, other: int, routers: int) -> int:
    """Router of ``group`` that holds its global cable to ``other``: ports dealt round-robin."""
    port = other if other < group else other - 1
    return port % routers
