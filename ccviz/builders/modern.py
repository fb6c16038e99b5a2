"""Today's GPU fabrics with in-network reduction: DGX H100 boxes, GB200 NVL72 racks, rail-optimized Clos.

Every switch built here has a reduction engine (``reduce=true``, NVLink SHARP on NVSwitch, Quantum SHARP
on the InfiniBand leaves and spines) unless ``reduce=false``; all of them multicast. Scale-out is
rail-optimized: GPU i of every box (or rack) plugs its NIC into the leaf of rail i, so rail-aligned
traffic crosses one leaf. The link latencies (alpha) are model values inside the published orders
(an NVSwitch crossing 0.1-0.2 us, an InfiniBand NIC-plus-switch hop 0.5-1 us), not measurements.
"""

from __future__ import annotations

from ccviz.builders.fabric import Fabric, require
from ccviz.builders.layout import spread
from ccviz.builders.registry import builder
from ccviz.model.topology import Topology

H100_LINKS_PER_NVSWITCH = (5, 4, 4, 5)  # a DGX H100 GPU's 18 NVLinks over its 4 NVSwitches
NVLINK4_GBPS = 25.0  # GB/s per NVLink 4 link per direction (18 links = 900 GB/s both directions)
NVLINK5_GBPS = 50.0  # GB/s per NVLink 5 link per direction (18 links = 1.8 TB/s both directions)
NDR_GBPS = 50.0  # GB/s per direction of a 400 Gb/s ConnectX-7 / InfiniBand NDR port
NVLINK_ALPHA = 0.1  # us per NVLink hop (model value)
IB_ALPHA = 0.5  # us per InfiniBand hop (model value)
LEAF_PORTS = 64  # Quantum-2 QM9700: 64 ports of 400 Gb/s


@builder("dgxh100")
def dgxh100(boxes: int = 1, nvlink_bw: float = NVLINK4_GBPS, nic_bw: float = NDR_GBPS,
            nvlink_alpha: float = NVLINK_ALPHA, nic_alpha: float = IB_ALPHA, reduce: bool = True) -> Topology:
    """NVIDIA DGX H100: 8 H100 GPUs on 4 NVSwitches with NVLS per box; 8 NICs per box to one leaf per rail.

    Numbers used, from NVIDIA's DGX H100 user guide and H100 architecture whitepaper: each GPU has 18
    NVLink 4 links, 25 GB/s per direction each (900 GB/s bidirectional per GPU), spread 5/4/4/5 over
    the box's 4 third-generation NVSwitches, which support NVLink SHARP (NVLS: in-switch reduction and
    multicast); each GPU has its own ConnectX-7 NIC, 400 Gb/s = 50 GB/s per direction (InfiniBand NDR).
    With boxes >= 2, NIC i of every box plugs into the leaf of rail i (8 leaves, Quantum-2 class, 64
    ports: up to 64 boxes), and the leaves reduce too (SHARP). A single box has no scale-out network in
    the model (its NICs would lead nowhere). nvlink_bw is per NVLink link; reduce=false removes the
    switches' reduction engines.
    """
    require(1 <= boxes <= LEAF_PORTS, "boxes", f"dgxh100 takes 1 to {LEAF_PORTS} boxes (one leaf port each), "
            f"got {boxes}")
    for key, value in (("nvlink_bw", nvlink_bw), ("nic_bw", nic_bw)):
        require(value > 0, key, f"{key} must be positive GB/s, got {value}")
    fabric = Fabric()
    gpus = [[fabric.add_gpu(group=f"box{b}") for _ in range(8)] for b in range(boxes)]
    positions: dict[int, tuple[float, float]] = {}
    for b in range(boxes):
        nvswitches = [fabric.add_switch(group=f"box{b}", label=f"nvsw{b}.{s}", reduce=reduce) for s in range(4)]
        for gpu in gpus[b]:
            for switch, links in zip(nvswitches, H100_LINKS_PER_NVSWITCH, strict=True):
                fabric.cable(gpu, switch, links * nvlink_bw, nvlink_alpha)
        _place_box(positions, b, gpus[b], nvswitches, width=4.0)
    _add_rails(fabric, positions, gpus, nic_bw, nic_alpha, reduce, rails=8)
    fabric.place(positions)
    kind = "NVLS" if reduce else "no in-switch reduction"
    return fabric.topology(f"dgxh100_x{boxes}", f"DGX H100: {boxes} box(es) x 8 GPUs, 4 NVSwitches each ({kind})"
                           + (", one InfiniBand leaf per rail" if boxes > 1 else ""), "tree", meta={"boxes": boxes})


@builder("nvl72")
def nvl72(racks: int = 1, nvlink_bw: float = NVLINK5_GBPS, nic_bw: float = NDR_GBPS, nvlink_alpha: float = NVLINK_ALPHA,
          nic_alpha: float = IB_ALPHA, reduce: bool = True) -> Topology:
    """NVIDIA GB200 NVL72: 72 GPUs per NVLink domain on 18 NVSwitch chips (9 switch trays); InfiniBand beyond.

    Numbers used, from NVIDIA's GB200 NVL72 and DGX SuperPOD (GB200) documentation: 72 Blackwell GPUs in
    18 compute trays of 4, 9 NVLink switch trays of 2 NVSwitch chips each; every GPU has 18 NVLink 5
    links, 50 GB/s per direction each (1.8 TB/s bidirectional per GPU), one to each of the 18 chips,
    which support NVLink SHARP; one 400 Gb/s (50 GB/s per direction) InfiniBand NIC per GPU. With
    racks >= 2, the NIC of the GPU in slot i of its compute tray plugs into the leaf of rail i (4 rails,
    each leaf reducing, SHARP), so one leaf holds 18 GPUs of every rack (at most 3 racks on 64 ports).
    """
    require(1 <= racks <= LEAF_PORTS // 18, "racks", f"nvl72 takes 1 to {LEAF_PORTS // 18} racks (18 leaf ports "
            f"per rack and rail), got {racks}")
    for key, value in (("nvlink_bw", nvlink_bw), ("nic_bw", nic_bw)):
        require(value > 0, key, f"{key} must be positive GB/s, got {value}")
    fabric = Fabric()
    gpus = [[fabric.add_gpu(group=f"rack{r}") for _ in range(72)] for r in range(racks)]
    positions: dict[int, tuple[float, float]] = {}
    for r in range(racks):
        chips = [fabric.add_switch(group=f"rack{r}", label=f"nvsw{r}.{t // 2}.{t % 2}", reduce=reduce)
                 for t in range(18)]
        for gpu in gpus[r]:
            for chip in chips:
                fabric.cable(gpu, chip, nvlink_bw, nvlink_alpha)
        _place_box(positions, r, gpus[r], chips, width=24.0)
    _add_rails(fabric, positions, gpus, nic_bw, nic_alpha, reduce, rails=4)
    fabric.place(positions)
    return fabric.topology(f"nvl72_x{racks}", f"GB200 NVL72: {racks} rack(s) x 72 GPUs on 18 NVSwitch chips"
                           + (", InfiniBand leaves per rail" if racks > 1 else ""), "tree", meta={"racks": racks})


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


def _place_box(positions: dict, box: int, gpus: list[int], switches: list[int], width: float) -> None:
    """A box drawn as a column block: its GPUs in a row, its NVSwitches in a row above them."""
    x0 = box * (width + 1.5)
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
    span = max(xs) - min(xs)
    for r, (leaf, x) in enumerate(zip(leaves, spread(rails, span * 0.9, (max(xs) + min(xs)) / 2), strict=True)):
        positions[leaf] = (x, -2.0)
        for row in gpus:
            for i in range(r, len(row), rails):
                fabric.cable(row[i], leaf, nic_bw, nic_alpha)
    return leaves
