"""The Collectives Explainer's two Clos shapes as builders: the rail-optimized GB200 SuperPOD and Leiserson's
fat-tree.

``superpod``: L NVL72 racks (72 GPUs on one NVSwitch domain each, drawn as one switch), each rack striped across
4 rails (GPU i of a rack on rail i mod 4, as the compute tray's four NICs are); per rail, leaves of 144 ports (72
down to NICs, 72 up at oversubscription 1) and spines cabled to every leaf with an equal share of the uplinks. At
L = 32 that is 8 leaves + 4 spines per rail, 18 cables per leaf-spine pair (the reference's 03 Appendix A; 144-port
Quantum-X800 switches). A leaf-spine pair's cables are one link of ``lanes`` = cables, each at the NIC's rate.

``leiserson``: a complete ``arity``-ary tree of switches over GPUs whose link bandwidth grows by ``growth`` per
level toward the root (Leiserson 1985: a fat-tree's channels thicken toward the root so that the root is not
the bottleneck; growth = arity keeps every level's total bandwidth equal, i.e. full bisection).
"""

from __future__ import annotations

import math

from ccviz.builders.fabric import Fabric, per_dim, require
from ccviz.builders.layout import spread
from ccviz.builders.registry import builder
from ccviz.model.topology import Link, Topology
from ccviz.model.validate import check_node_count

# 03 Appendix A of the reference (copied into ccviz/data/explainer_tables.csv's sources): NVL72 racks of 72 GPUs,
# 4 NICs per compute tray (4 rails), 144-port Quantum-X800 leaves and spines, ConnectX-7 NDR at 50 GB/s per
# direction, NVLink 5 at 900 GB/s per GPU per direction.
RACK_GPUS = 72
RAILS = 4
SWITCH_PORTS = 144
NVLINK5_GPU_GBPS = 900.0
NDR_GBPS = 50.0
ALPHA_INNER_US = 0.5  # the reference's alpha_inner (NVSwitch cut-through + endpoint software), 03 section 1.2
ALPHA_IB_HOP_US = 1.0  # one InfiniBand hop, so NIC->leaf->NIC (2 hops) is the reference's alpha_leaf ~ 2 us; its
# alpha_spine ~ 8 us includes NIC serialization, which the 4 hops here (4 us) leave to the bandwidth term


def _trunk(fabric: Fabric, u: int, v: int, cables: int, bw: float, alpha: float) -> None:
    """``cables`` parallel cables between two switches: one link each way with that many lanes."""
    fabric.links.extend([Link(u, v, bw, alpha, lanes=cables), Link(v, u, bw, alpha, lanes=cables)])


@builder("superpod")
def superpod(racks: int = 2, oversub: float = 1.0, nvlink_bw: float = NVLINK5_GPU_GBPS, nic_bw: float = NDR_GBPS,
             nvlink_alpha: float = ALPHA_INNER_US, nic_alpha: float = ALPHA_IB_HOP_US) -> Topology:
    """Rail-optimized GB200 SuperPOD: NVL72 racks striped over 4 rails of 144-port leaves and spines (L=32: 8+4 per rail).

    Numbers used: 72 GPUs per rack, 4 rails, 144-port leaves (72 NICs down, 72/oversub cables up), spines of 144
    ports each cabled to every leaf, NDR 50 GB/s per NIC and per cable, NVLink 5 900 GB/s per GPU into its rack's
    NVSwitch domain (drawn as one switch). racks=32 is the reference's SuperPOD (2,304 GPUs); the default 2 keeps a
    first look small. A leaf holds 144 oversub/(1+oversub) NICs, rounded down to whole racks (18 NICs each).
    """
    require(racks >= 1, "racks", f"superpod needs racks >= 1 (32 is the reference's SuperPOD), got {racks}")
    check_node_count(racks * (RACK_GPUS + 1), "racks")
    require(1 <= oversub < math.inf, "oversub", f"oversub must be a finite number >= 1 (1 = non-blocking), got {oversub}")
    for key, value in (("nvlink_bw", nvlink_bw), ("nic_bw", nic_bw), ("nvlink_alpha", nvlink_alpha + 1),
                       ("nic_alpha", nic_alpha + 1)):
        require(0 < value < math.inf, key, f"{key} must be a finite positive number, got {value}")
    per_rail = RACK_GPUS // RAILS  # 18 NICs of each rack on each rail
    down = int(SWITCH_PORTS * oversub / (1 + oversub))  # NIC ports of a leaf (72 at oversub 1)
    down -= down % per_rail  # whole racks per leaf
    require(down >= per_rail, "oversub", f"a {SWITCH_PORTS}-port leaf at oversub {oversub:g} holds no whole rack")
    racks_per_leaf = down // per_rail
    leaves = math.ceil(racks / racks_per_leaf)
    up = math.ceil(down / oversub)  # uplink cables per leaf
    spines = max(1, math.ceil(leaves * up / SWITCH_PORTS)) if leaves > 1 else 0
    fabric = Fabric()
    positions: dict[int, tuple[float, float]] = {}
    rack_gpus = []
    for r in range(racks):
        gpus = [fabric.add_gpu(group=f"rack{r}") for _ in range(RACK_GPUS)]
        hub = fabric.add_switch(group=f"rack{r}", label=f"nvl72-{r}", reduce=True)
        for i, g in enumerate(gpus):
            fabric.cable(g, hub, nvlink_bw, nvlink_alpha)
            positions[g] = (r * 10 + (i % 18) * 0.5, 0.0 - (i // 18) * 0.3)
        positions[hub] = (r * 10 + 4.5, 1.5)
        rack_gpus.append(gpus)
    for rail in range(RAILS):
        leaf_ids = [fabric.add_switch(group=f"rail{rail}", label=f"rail{rail}-leaf{j}") for j in range(leaves)]
        for j, leaf in enumerate(leaf_ids):
            positions[leaf] = (j * racks_per_leaf * 10 + rail * 2.0, -3.0 - rail * 0.4)
        for r, gpus in enumerate(rack_gpus):
            leaf = leaf_ids[r // racks_per_leaf]
            for g in gpus[rail::RAILS]:
                fabric.cable(g, leaf, nic_bw, nic_alpha)
        spine_ids = [fabric.add_switch(group=f"rail{rail}", label=f"rail{rail}-spine{s}") for s in range(spines)]
        for s, x in zip(spine_ids, spread(spines, racks * 10.0, racks * 5.0), strict=True):
            positions[s] = (x + rail * 2.0, -6.0 - rail * 0.4)
            for leaf in leaf_ids:
                _trunk(fabric, leaf, s, max(1, up // spines), nic_bw, nic_alpha)
    fabric.place(positions)
    n = racks * RACK_GPUS
    return fabric.topology(
        f"superpod_L{racks}", f"GB200 SuperPOD: {racks} NVL72 racks ({n} GPUs), {RAILS} rails x ({leaves} leaves + "
        f"{spines} spines) of {SWITCH_PORTS}-port switches, {max(1, up // spines) if spines else 0} cables per "
        f"leaf-spine pair, oversubscription {oversub:g}:1", "tree",
        meta={"oversubscription": oversub, "racks": racks, "rails": RAILS, "leaves_per_rail": leaves,
              "spines_per_rail": spines})


@builder("leiserson", aliases=("fattree_leiserson",))
def leiserson(levels: int = 3, arity: int = 2, bw: float = 50.0, growth: tuple[float, ...] = (2.0,),
              alpha: float = 0.5) -> Topology:
    """Leiserson fat-tree: an arity-ary switch tree over arity^levels GPUs, links thicker by growth per level up.

    A GPU's link runs at bw; the links one level up at bw x growth, and so on to the root. growth = arity gives
    every level the same total bandwidth (full bisection); growth = 1 is a plain tree whose root is the bottleneck.
    One growth per level above the first (growth=4/2 with levels=3, arity=4) makes a Clos whose tiers are
    oversubscribed arity/growth each (1:1 then 2:1): per-tier oversubscription, compounded toward the root.
    """
    require(levels >= 1, "levels", f"leiserson needs levels >= 1, got {levels}")
    require(arity >= 2, "arity", f"leiserson needs arity >= 2, got {arity}")
    require(arity ** levels <= 4096, "levels", f"arity^levels = {arity ** levels} GPUs; keep it at most 4096")
    growths = per_dim(growth, max(1, levels - 1), "growth", what="levels above the first")
    require(0 < bw < math.inf and all(1 <= g < math.inf for g in growths) and 0 <= alpha < math.inf, "growth",
            f"bw must be positive, growth >= 1 and alpha >= 0, all finite; got bw={bw}, growth={growth}, alpha={alpha}")
    fabric = Fabric()
    n = arity ** levels
    gpus = [fabric.add_gpu() for _ in range(n)]
    positions = {g: (float(i), 0.0) for i, g in enumerate(gpus)}
    below = gpus
    for level in range(1, levels + 1):
        link_bw = bw * math.prod(growths[:level - 1])
        above = []
        for j in range(len(below) // arity):
            sw = fabric.add_switch(group=f"level{level}", label=f"L{level}.{j}")
            children = below[j * arity:(j + 1) * arity]
            for c in children:
                fabric.cable(c, sw, link_bw, alpha)
            positions[sw] = (sum(positions[c][0] for c in children) / arity, float(level) * 1.5)
            above.append(sw)
        below = above
    fabric.place(positions)
    top = bw * math.prod(growths[:levels - 1])
    return fabric.topology(f"leiserson_{arity}^{levels}", f"Leiserson fat-tree: {n} GPUs, {levels} levels of "
                           f"{arity}-ary switches, link bandwidth x{'/'.join(f'{g:g}' for g in growths)} per level "
                           f"toward the root ({bw:g} .. {top:g} GB/s)", "tree",
                           meta={"growth": list(growths), "levels": levels, "arity": arity,
                                 "oversubscription_per_tier": [arity / g for g in growths]})
