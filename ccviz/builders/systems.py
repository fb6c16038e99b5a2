"""Vendor systems: DGX-1, Azure NDv2, DGX-2 and AMD MI250 (link-for-link equal to the TE-CCL paper's
published files, copies in ``tests/fixtures/reference_topologies/``) and ForestColl's A100 cluster."""

from __future__ import annotations

from collections.abc import Sequence

from ccviz.builders.fabric import Fabric, link_classes, require
from ccviz.builders.layout import (
    AMD_SPACING,
    CHASSIS_SPACING,
    a100_positions,
    above_chassis,
    amd_chassis_positions,
    dgx1_positions,
    hub_positions,
)
from ccviz.builders.registry import builder
from ccviz.model.topology import Node, Topology

# DGX-1 hybrid cube-mesh, local GPU ids: (u, v, class) with class 0 = double NVLink, 1 = single NVLink.
DGX1_CABLES = (
    (0, 1, 0), (0, 2, 1), (0, 3, 1), (0, 4, 0), (1, 2, 1), (1, 3, 0), (1, 5, 1), (2, 3, 0),
    (2, 6, 0), (3, 7, 1), (4, 5, 0), (4, 6, 1), (4, 7, 1), (5, 6, 1), (5, 7, 0), (6, 7, 0),
)


def _add_dgx1_chassis(fabric: Fabric, base: int, group: str, x_offset: float, bws: Sequence[float],
                      alphas: Sequence[float]) -> list[int]:
    """Eight GPUs with ids base..base+7 wired as a DGX-1 hybrid cube-mesh; returns their ids."""
    ids = [fabric.add_gpu(base + i, group=group) for i in range(8)]
    for u, v, cls in DGX1_CABLES:
        fabric.cable(base + u, base + v, bws[cls], alphas[cls])
    fabric.place(dgx1_positions(ids, x_offset))
    return ids


@builder("dgx1")
def dgx1(bw: tuple[float, ...] = (50.0, 25.0), alpha: tuple[float, ...] = (0.7,)) -> Topology:
    """NVIDIA DGX-1 (V100): 8 GPUs, hybrid cube-mesh NVLink; bw per class double/single NVLink."""
    classes = ("double", "single")
    fabric = Fabric()
    _add_dgx1_chassis(fabric, 0, "chassis0", 0.0, link_classes(bw, classes, "bw"), link_classes(alpha, classes, "alpha"))
    return fabric.topology("dgx1", "NVIDIA DGX-1: 8 GPUs, hybrid cube-mesh NVLink (TE-CCL values)", "chassis")


@builder("ndv2")
def ndv2(chassis: int = 2, bw: tuple[float, ...] = (50.0, 25.0, 12.5),
         alpha: tuple[float, ...] = (0.7, 0.7, 1.3), as_run: bool = False) -> Topology:
    """Azure NDv2: DGX-1-like chassis joined by 12.5 GB/s NICs; bw/alpha per class double/single/NIC.

    As in TE-CCL: with 2 chassis, GPU 0 of each chassis sends straight to GPU 1 of the other (no
    switch); otherwise a switch (node 0) receives from GPU 0 of every chassis and sends to GPU 1 of
    every chassis, and chassis c holds GPUs 1+8c..8+8c. ``as_run=true`` (2 chassis only) is the
    fabric as TE-CCL's published runs modelled it: node 0 marked a switch (no buffer, no demand) but
    still counted in the buffer split (chunk = size / 16), switch hops charged by the 'teccl' rule.
    """
    require(chassis >= 1, "chassis", f"ndv2 needs chassis >= 1, got {chassis}")
    require(not as_run or chassis == 2, "as_run", f"the published runs used 2 chassis; as_run needs chassis=2, "
                                                  f"got {chassis}")
    classes = ("double", "single", "nic")
    bws, alphas = link_classes(bw, classes, "bw"), link_classes(alpha, classes, "alpha")
    direct = chassis == 2
    fabric = Fabric()
    first = 0 if direct else 1
    boxes = [_add_dgx1_chassis(fabric, first + 8 * c, f"chassis{c}", c * CHASSIS_SPACING, bws, alphas)
             for c in range(chassis)]
    if direct:
        for c in range(chassis):
            fabric.one_way(boxes[c][0], boxes[(c + 1) % chassis][1], bws[2], alphas[2])
        how = "GPU 0 of each chassis sends directly to GPU 1 of the other"
    else:
        hub = fabric.add_switch(0, group="network", label="NIC switch")
        fabric.place({hub: above_chassis(chassis, CHASSIS_SPACING, 2.4)})
        for box in boxes:
            fabric.one_way(box[0], hub, bws[2], alphas[2])
            fabric.one_way(hub, box[1], bws[2], alphas[2])
        how = "GPU 0 of each chassis sends to a switch that sends to GPU 1 of every chassis"
    if as_run:
        fabric.nodes[0] = Node(0, "switch", group=fabric.nodes[0].group, pos=fabric.nodes[0].pos)
        topology = fabric.topology("ndv2_2chassis_teccl_as_run", "Azure NDv2, 2 chassis, as TE-CCL's published "
                                   "runs modelled it: node 0 marked a switch, chunk = size / 16", "chassis",
                                   meta={"chassis": 2, "buffer_ranks": 16})
        return topology.with_changes(switch_hop="teccl")
    return fabric.topology(f"ndv2_{chassis}chassis", f"Azure NDv2, {chassis} chassis of 8 GPUs; {how} (TE-CCL)",
                           "chassis", meta={"chassis": chassis})


@builder("dgx2")
def dgx2(chassis: int = 2, bw: tuple[float, ...] = (125.0, 12.5), alpha: tuple[float, ...] = (0.35, 2.6)) -> Topology:
    """NVIDIA DGX-2: 16 GPUs on an NVSwitch per chassis; bw/alpha per class nvswitch/nic.

    As in TE-CCL: chassis c is switch 17c with GPUs 17c+1..17c+16; each odd local GPU k sends to
    local GPU k-1 of the next chassis (a ring of chassis; with 2 chassis, both ways).
    """
    require(chassis >= 1, "chassis", f"dgx2 needs chassis >= 1, got {chassis}")
    classes = ("nvswitch", "nic")
    bws, alphas = link_classes(bw, classes, "bw"), link_classes(alpha, classes, "alpha")
    fabric = Fabric()
    gpus_per_box = 16
    for c in range(chassis):
        base = c * (gpus_per_box + 1)
        hub = fabric.add_switch(base, group=f"chassis{c}", label=f"NVSwitch{c}")
        gpus = [fabric.add_gpu(base + 1 + local, group=f"chassis{c}") for local in range(gpus_per_box)]
        for gpu in gpus:
            fabric.cable(gpu, hub, bws[0], alphas[0])
        fabric.place(hub_positions(hub, gpus, radius=1.6, center=(c * CHASSIS_SPACING * 1.2, 0.0)))
    if chassis > 1:
        for c in range(chassis):
            here, there = c * (gpus_per_box + 1) + 1, (c + 1) % chassis * (gpus_per_box + 1) + 1
            for local in range(1, gpus_per_box, 2):
                fabric.one_way(here + local, there + local - 1, bws[1], alphas[1])
    return fabric.topology(f"dgx2_{chassis}chassis", f"NVIDIA DGX-2, {chassis} chassis of 16 GPUs (TE-CCL)",
                           "chassis", meta={"chassis": chassis})


@builder("a100")
def a100(boxes: int = 2, bw: tuple[float, ...] = (300.0, 25.0), alpha: tuple[float, ...] = (0.7, 1.3),
         copy: bool = False, buffer: bool = True) -> Topology:
    """ForestColl's A100 cluster: 8 GPUs per box on an NVSwitch, one NIC per GPU, two IB switches.

    bw/alpha per class nvswitch/ib. Each GPU is cabled to its box's NVSwitch and to its own NIC; the
    NICs of even-numbered GPUs meet on one IB switch, odd-numbered on the other. No switch copies
    (ForestColl, arXiv 2402.06787, its 2 x 8 A100 testbed). Its switches buffer (packet switches queue
    a chunk for a busy port, as ForestColl's flow model assumes); ``buffer=false`` makes them forward
    each arrival at once.
    """
    require(boxes >= 1, "boxes", f"a100 needs boxes >= 1, got {boxes}")
    classes = ("nvswitch", "ib")
    bws, alphas = link_classes(bw, classes, "bw"), link_classes(alpha, classes, "alpha")
    fabric = Fabric()
    per_box = 8
    hubs, gpus, nics = [], [], []
    for b in range(boxes):
        hubs.append(fabric.add_switch(group=f"box{b}", copy=copy, label=f"NVSwitch{b}", buffer=buffer))
        gpus.append([])
        nics.append([])
        for local in range(per_box):
            gpus[b].append(fabric.add_gpu(group=f"box{b}"))
            fabric.cable(gpus[b][-1], hubs[b], bws[0], alphas[0])
            nics[b].append(fabric.add_switch(group=f"box{b}", copy=copy, label=f"NIC{b}.{local}", buffer=buffer))
            fabric.cable(gpus[b][-1], nics[b][-1], bws[1], alphas[1])
    ib = [fabric.add_switch(group="network", copy=copy, label=f"IB{k}", buffer=buffer) for k in range(2)]
    for box in nics:
        for local, nic in enumerate(box):
            fabric.cable(nic, ib[local % 2], bws[1], alphas[1])
    fabric.place(a100_positions(hubs, gpus, nics, ib))
    return fabric.topology(f"a100_{boxes}x8", f"{boxes} x 8 A100 (ForestColl): NVSwitch per box, a NIC per GPU, "
                           "even/odd NICs on two IB switches, no switch copies"
                           + (", buffering switches" if buffer else ""), "chassis", meta={"boxes": boxes})


# AMD MI250 chassis, local GPU ids: (u, v, class) with class 0/1/2 = 200/100/50 GB/s (TE-CCL).
AMD_CABLES = (
    (0, 1, 0), (0, 4, 1), (0, 8, 2), (1, 5, 2), (1, 9, 2), (1, 10, 2), (2, 3, 0), (2, 6, 2), (2, 9, 2),
    (2, 10, 2), (3, 7, 1), (3, 11, 2), (4, 5, 0), (4, 6, 2), (5, 6, 2), (5, 7, 2), (6, 7, 0), (8, 9, 0),
    (8, 12, 1), (9, 13, 2), (10, 11, 0), (10, 14, 2), (11, 15, 1), (12, 13, 0), (12, 14, 2), (13, 14, 2),
    (13, 15, 2), (14, 15, 0),
)
AMD_GPUS, AMD_NICS = 16, 8


@builder("amd")
def amd(chassis: int = 1, bw: tuple[float, ...] = (200.0, 100.0, 50.0, 25.0),
        alpha: tuple[float, ...] = (0.7, 0.7, 0.7, 1.3), as_published: bool = True) -> Topology:
    """AMD MI250: 16 GPUs per chassis; several chassis meet through per-GPU-pair NICs and a switch.

    bw/alpha per class 200/100/50/nic. Chassis c is GPUs 1+24c..16+24c, NICs 17+24c..24+24c, central
    switch 0; GPUs 2k, 2k+1 share NIC k (NIC 0 at the 50 GB/s class, as in TE-CCL). TE-CCL's code
    labels ids 16+24c..23+24c as the switches and cables *those* to node 0, so the last GPU of a
    chassis is a switch and its last NIC a GPU; ``as_published=true`` (default) keeps that, to match
    its published runs and the reference file; ``as_published=false`` labels and cables the real NICs.
    """
    require(chassis >= 1, "chassis", f"amd needs chassis >= 1, got {chassis}")
    classes = ("200", "100", "50", "nic")
    bws, alphas = link_classes(bw, classes, "bw"), link_classes(alpha, classes, "alpha")
    fabric = Fabric()
    if chassis == 1:
        _add_amd_chassis(fabric, 0, 0, bws, alphas, switch_ids=set())
        return fabric.topology("amd_1chassis", "AMD MI250, 1 chassis of 16 GPUs (TE-CCL)", "chassis",
                               meta={"chassis": 1})
    stride = AMD_GPUS + AMD_NICS
    shift = 0 if as_published else 1  # TE-CCL's off-by-one: NIC k is declared at 16+24c+k, built at 17+24c+k
    switch_ids = {stride * c + AMD_GPUS + shift + k for c in range(chassis) for k in range(AMD_NICS)}
    hub = fabric.add_switch(0, group="network", copy=True, label="NIC switch")
    fabric.place({hub: above_chassis(chassis, AMD_SPACING, 2.0)})
    for c in range(chassis):
        _add_amd_chassis(fabric, 1 + stride * c, c, bws, alphas, switch_ids)
    for nic in sorted(switch_ids):
        fabric.cable(nic, hub, bws[3], alphas[3])
    note = "as TE-CCL's code labels it" if as_published else "NIC labels corrected"
    return fabric.topology(f"amd_{chassis}chassis", f"AMD MI250, {chassis} chassis of 16 GPUs, {note} (TE-CCL)",
                           "chassis", meta={"chassis": chassis, "as_published": as_published})


def _add_amd_chassis(fabric: Fabric, base: int, c: int, bws: Sequence[float], alphas: Sequence[float],
                     switch_ids: set[int]) -> None:
    """One MI250 chassis at ids base.. (GPUs as a 4x4 grid, NICs in a row below when switch_ids is set)."""
    group = f"chassis{c}"
    gpus = [base + g for g in range(AMD_GPUS)]
    nics = [base + AMD_GPUS + k for k in range(AMD_NICS)] if switch_ids else []
    for node_id in gpus + nics:
        if node_id in switch_ids:
            fabric.add_switch(node_id, group=group)
        else:
            fabric.add_gpu(node_id, group=group)
    fabric.place(amd_chassis_positions(c, gpus, nics))
    for u, v, cls in AMD_CABLES:
        fabric.cable(base + u, base + v, bws[cls], alphas[cls])
    for k, nic in enumerate(nics):
        cls = 2 if k == 0 else 3
        for gpu in (base + 2 * k, base + 2 * k + 1):
            fabric.cable(gpu, nic, bws[cls], alphas[cls])
