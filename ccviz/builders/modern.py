"""Today's GPU fabrics with in-network reduction: rail-optimized Clos (DGX H100 and GB200 NVL72, with their
spec sheets and hardware link model, are in ``ccviz.builders.presets``; they use the helpers here).

Every switch built here has a reduction engine (``reduce=true``, NVLink SHARP on NVSwitch, Quantum SHARP
on the InfiniBand leaves and spines) unless ``reduce=false``; all of them multicast. Scale-out is
rail-optimized: GPU i of every box (or rack) plugs its NIC into the leaf of rail i, so rail-aligned
traffic crosses one leaf. The link latencies (alpha) are model values inside the published orders
(an NVSwitch crossing 0.1-0.2 us, an InfiniBand NIC-plus-switch hop 0.5-1 us), not measurements.
"""

from __future__ import annotations

from ccviz.builders.fabric import Fabric, require
from ccviz.builders.layout import circle_positions, spread
from ccviz.builders.registry import builder
from ccviz.model.topology import Topology

H100_LINKS_PER_NVSWITCH = (5, 4, 4, 5)  # a DGX H100 GPU's 18 NVLinks over its 4 NVSwitches
NVLINK4_GBPS = 25.0  # GB/s per NVLink 4 link per direction (18 links = 900 GB/s both directions)
NVLINK5_GBPS = 50.0  # GB/s per NVLink 5 link per direction (18 links = 1.8 TB/s both directions)
NDR_GBPS = 50.0  # GB/s per direction of a 400 Gb/s ConnectX-7 / InfiniBand NDR port
NVLINK_ALPHA = 0.1  # us per NVLink hop (model value)
IB_ALPHA = 0.5  # us per InfiniBand hop (model value)
LEAF_PORTS = 64  # Quantum-2 QM9700: 64 ports of 400 Gb/s


@builder("railclos")
def railclos(boxes: int = 4, gpus: int = 8, spines: int = 2, oversub: float = 1.0, nvlink_bw: float = 450.0,
             nic_bw: float = NDR_GBPS, nvlink_alpha: float = NVLINK_ALPHA, nic_alpha: float = IB_ALPHA,
             reduce: bool = True) -> Topology:
    """Rail-optimized Clos: boxes of GPUs on one NVLink switch each, GPU i of every box on rail leaf i, spines above.

    Numbers used: nvlink_bw 450 GB/s per GPU per direction into its box switch (H100 NVLink 4, 900 GB/s
    bidirectional, as in ``dgxh100`` but drawn as one switch), nic_bw 50 GB/s (400 Gb/s NDR). Every
    leaf is cabled to every spine; the leaf->spine bandwidth is boxes x nic_bw / (spines x oversub), so
    oversub=1 is non-blocking and oversub=2 halves what crosses rails. reduce=false: no switch reduces.
    """
    require(boxes >= 1 and gpus >= 1 and spines >= 1, "boxes",
            f"railclos needs boxes, gpus and spines >= 1, got {boxes}, {gpus}, {spines}")
    require(boxes * gpus >= 2, "gpus", "railclos needs at least two GPUs (boxes x gpus >= 2)")
    require(oversub > 0, "oversub", f"oversub must be positive, got {oversub}")
    for key, value in (("nvlink_bw", nvlink_bw), ("nic_bw", nic_bw)):
        require(value > 0, key, f"{key} must be positive GB/s, got {value}")
    fabric = Fabric()
    box_gpus = [[fabric.add_gpu(group=f"box{b}") for _ in range(gpus)] for b in range(boxes)]
    positions: dict[int, tuple[float, float]] = {}
    for b in range(boxes):
        hub = fabric.add_switch(group=f"box{b}", label=f"nvsw{b}", reduce=reduce)
        for gpu in box_gpus[b]:
            fabric.cable(gpu, hub, nvlink_bw, nvlink_alpha)
        _place_box(positions, b, box_gpus[b], [hub], width=max(2.0, gpus / 2))
    leaves = _add_rails(fabric, positions, box_gpus, nic_bw, nic_alpha, reduce, rails=gpus, always=True)
    uplink = boxes * nic_bw / (spines * oversub)
    spine_ids = [fabric.add_switch(group="spine", label=f"spine{s}", reduce=reduce) for s in range(spines)]
    xs = [positions[g][0] for row in box_gpus for g in row]
    for spine, x in zip(spine_ids, spread(spines, (max(xs) - min(xs)) * 0.6, (max(xs) + min(xs)) / 2), strict=True):
        positions[spine] = (x, -4.0)
        for leaf in leaves:
            fabric.cable(leaf, spine, uplink, nic_alpha)
    fabric.place(positions)
    return fabric.topology(f"railclos_{boxes}x{gpus}_s{spines}",
                           f"rail-optimized Clos: {boxes} boxes x {gpus} GPUs, {gpus} rail leaves, {spines} spines, "
                           f"{uplink:g} GB/s uplinks (oversubscription {oversub:g}:1)", "tree",
                           meta={"oversubscription": oversub, "boxes": boxes})


BOX_ROW_GPUS = 18  # a box with more GPUs is drawn as a wheel: its GPUs on a circle round its switches


def _place_box(positions: dict, box: int, gpus: list[int], switches: list[int], width: float) -> None:
    """A box drawn as a column block: its GPUs in a row, its NVSwitches in a row above them; a box of more than
    ``BOX_ROW_GPUS`` GPUs (NVL72) as a wheel, its GPUs on a circle round a ring of its switches, so that no cable
    runs through another GPU (one row of 72 drew a flat strip 16 times wider than tall, every cable on top of the
    others)."""
    x0 = box * (width + 1.5)
    if len(gpus) > BOX_ROW_GPUS:
        radius = width / 2
        positions.update(zip(gpus, circle_positions(len(gpus), radius, (x0, 0.0)), strict=True))
        positions.update(zip(switches, circle_positions(len(switches), 0.4 * radius, (x0, 0.0)), strict=True))
        return
    for gpu, x in zip(gpus, spread(len(gpus), width), strict=True):
        positions[gpu] = (x0 + x, 0.0)
    for switch, x in zip(switches, spread(len(switches), width * 0.7), strict=True):
        positions[switch] = (x0 + x, 1.5)


def _add_rails(fabric: Fabric, positions: dict, gpus: list[list[int]], nic_bw: float, nic_alpha: float,
               reduce: bool, rails: int, always: bool = False) -> list[int]:
    """One leaf per rail below the boxes; GPU i of every box plugs its NIC into leaf i mod rails."""
    if len(gpus) < 2 and not always:
        return []
    leaves = [fabric.add_switch(group="rails", label=f"leaf{r}", reduce=reduce) for r in range(rails)]
    xs = [positions[g][0] for row in gpus for g in row]
    bottom = min(positions[g][1] for row in gpus for g in row)
    span = max(xs) - min(xs)
    for r, (leaf, x) in enumerate(zip(leaves, spread(rails, span * 0.9, (max(xs) + min(xs)) / 2), strict=True)):
        positions[leaf] = (x, -2.0 if bottom >= -1.6 else bottom - 2.0)  # under a row or small circle; a wheel's foot
        for row in gpus:
            for i in range(r, len(row), rails):
                fabric.cable(row[i], leaf, nic_bw, nic_alpha)
    return leaves
