"""Systems from their spec sheets: DGX A100, DGX H100, HGX H200, HGX B200, GB200 NVL72 and MI300X, each one box
(or NVLink domain) or ``nodes=N`` of them on rail-optimized InfiniBand, each declaring the hardware link
model (``ccviz.model.link_model``) that the simulator judges every schedule on them with.

Link counts and rates (per direction) and where they come from:

* DGX A100: 8 A100 SXM4, 12 NVLink 3 links each at 25 GB/s (300 GB/s; "600 GB/s" bidirectional in the A100
  datasheet), 2 links to each of 6 NVSwitch 2 chips (NVIDIA DGX A100 System Architecture whitepaper); NICs
  ConnectX-6 HDR 200 Gb/s, one per GPU. No NVLink SHARP (NVSwitch 2 has no reduction engine).
* DGX H100 / HGX H200: 8 GPUs, 18 NVLink 4 links each at 25 GB/s (450 GB/s; "900 GB/s" bidirectional in the
  H100 and H200 datasheets), 5/4/4/5 links to 4 NVSwitch 3 chips that reduce (NVLS) (DGX H100 user guide,
  H100 architecture whitepaper); NICs ConnectX-7 NDR 400 Gb/s, one per GPU.
* HGX B200: 8 B200, 18 NVLink 5 links each at 50 GB/s (900 GB/s; "1.8 TB/s" bidirectional, B200 datasheet
  and DGX B200 user guide), 9 to each of 2 NVLink 5 switch chips that reduce; NICs ConnectX-7 NDR 400 Gb/s.
* GB200 NVL72: 72 B200, 18 NVLink 5 links each (one to each of 18 NVSwitch chips in 9 switch trays), 50 GB/s
  per link per direction (GB200 NVL72 product page: 130 TB/s per domain); 4 GPUs per compute tray.
* MI300X (AMD Instinct MI300X platform): 8 GPUs fully connected by Infinity Fabric, 7 links per GPU, one to
  every peer, 64 GB/s per direction each ("128 GB/s" bidirectional peer-to-peer, 896 GB/s aggregate, MI300X
  data sheet); no switch. NICs 400 Gb/s (e.g. Azure ND MI300X v5: 8 x 400 Gb/s).
* NICs: HDR 200 Gb/s = 25 GB/s, NDR 400 Gb/s = 50 GB/s, XDR 800 Gb/s = 100 GB/s per direction (InfiniBand
  Trade Association roadmap; ConnectX-6/-7/-8 product briefs).

Sustained shares (the link model's ``efficiency``): NVLink 3 20.0 of 25, NVLink 4 20.6 of 25, NVLink 5 40.1
of 50 GB/s, NCCL's own per-link bandwidths (``src/graph/topo.h``: SM80/SM90/SM100_NVLINK_BW); InfiniBand 48.5
of 50 GB/s (Alibaba SimAI's calbusbw.h, CX7_BW 48.5); Infinity Fabric 0.80 (no published constant: an
assumption, fit it with ``ccviz calibrate``). The NVLS engine's sum rate (``reduce_GBps`` of each reducing
NVSwitch) is NCCL's NVLS model: a GPU's sustained NVLink rate x n/(n+1) (NVLS moves M/n more than M each
way) x 5/6 (NCCL's NVLS algorithm-bandwidth ratio, ``tuning.cc``), shared over the switches by their links;
on NVLink 5 a share fitted to one published NVL72 measurement (``NVLS_SHARE``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ccviz.builders.fabric import Fabric, require
from ccviz.builders.layout import circle_positions
from ccviz.builders.modern import IB_ALPHA, LEAF_PORTS, NVLINK_ALPHA, _add_rails, _place_box
from ccviz.builders.registry import builder
from ccviz.model.link_model import LinkModel
from ccviz.model.topology import Topology

NIC_GBPS = {"hdr": 25.0, "ndr": 50.0, "xdr": 100.0}  # GB/s per direction: 200, 400, 800 Gb/s
NET_EFFICIENCY = 48.5 / 50.0  # SimAI calbusbw.h CX7_BW 48.5 (of 50 GB/s)
NVLS_RATIO = 5.0 / 6.0  # NCCL tuning.cc: NVLS / NVLSTree bus-to-algorithm bandwidth ratio


@dataclass(frozen=True)
class SystemSpec:
    """One box (or NVLink domain) as its spec sheet gives it."""

    name: str
    title: str
    gpus: int
    links_per_switch: tuple[int, ...]  # per GPU, to each scale-up switch; () = GPUs cabled to each other
    link_GBps: float  # per link per direction
    efficiency: float  # sustained share of link_GBps (see the module docstring)
    nvls: bool  # the switches reduce (NVLink SHARP)
    nic: str  # the usual NIC
    rails: int  # rail leaves when nodes >= 2 (GPU i of every box on leaf i mod rails)


SPECS = {
    "dgxa100": SystemSpec("dgxa100", "DGX A100", 8, (2,) * 6, 25.0, 20.0 / 25.0, False, "hdr", 8),
    "dgxh100": SystemSpec("dgxh100", "DGX H100", 8, (5, 4, 4, 5), 25.0, 20.6 / 25.0, True, "ndr", 8),
    "hgxh200": SystemSpec("hgxh200", "HGX H200", 8, (5, 4, 4, 5), 25.0, 20.6 / 25.0, True, "ndr", 8),
    "hgxb200": SystemSpec("hgxb200", "HGX B200", 8, (9, 9), 50.0, 40.1 / 50.0, True, "ndr", 8),
    "nvl72": SystemSpec("nvl72", "GB200 NVL72", 72, (1,) * 18, 50.0, 40.1 / 50.0, True, "ndr", 4),
    "mi300x": SystemSpec("mi300x", "MI300X platform", 8, (), 64.0, 0.80, False, "ndr", 8),
}


def hardware_model(spec: SystemSpec) -> LinkModel:
    """The link model a preset declares (its sustained shares; NCCL's protocol and latency tables)."""
    return LinkModel(efficiency={"scaleup": spec.efficiency, "net": NET_EFFICIENCY}, name="hardware",
                     source=f"{spec.title} spec sheet + NCCL tuner constants (see ccviz.builders.presets)")


# NVLS's rate of sums (GB/s of AllReduce result per GPU) as a share of a GPU's sustained NVLink rate.
# NVLink 4 boxes: NCCL's NVLS model, n/(n+1) (NVLS moves M/n more than M each way) x 5/6 (tuning.cc) for n = 8.
# NVLink 5 (GB200 NVL72, HGX B200): fitted once to CoreWeave's GB200 NVL72 nccl-tests AllReduce at 8 GiB
# (20006 us, 846.82 GB/s busbw on 72 GPUs, NCCL 2.26.2, a row of ccviz/data/measured_nccl.csv) under the same
# model that judges it (``_nvlink5_share``); used unfitted for HGX B200 and the 4-GPU rows.


def _nvlink5_share() -> float:
    """The NVL72 row's rate: its time less the operation latency (launch + NVLS's 23 us), at the share of the
    full rate the 64 KiB chunk NCCL's NVLS moves there reaches (24 channels x 72 heads: below 64 x 1728 x 128 KiB,
    ``ccviz.synth.nccl.chunking``; ``LinkModel.chunk_share``)."""
    model = LinkModel()
    size, time_s, chunk = 8 * 2**30, 20006e-6, 64 * 1024
    latency_s = (model.launch_us + model.base_us["nvls"]["simple"]) * 1e-6
    rate = size / (time_s - latency_s) / model.chunk_share(chunk, 128 * 1024)
    return rate / 1e9 / (18 * 40.1)


NVLS_SHARE = {"nvlink4": 8 / 9 * NVLS_RATIO, "nvlink5": _nvlink5_share()}


def nvls_engine_GBps(spec: SystemSpec, links: int) -> float:
    """One NVSwitch's sum rate: the box's NVLS rate (``NVLS_SHARE`` of a GPU's sustained NVLink rate) shared
    over the switches by their links."""
    per_gpu = sum(spec.links_per_switch) * spec.link_GBps * spec.efficiency
    share = NVLS_SHARE["nvlink5" if spec.link_GBps >= 50 else "nvlink4"]
    return per_gpu * share * links / sum(spec.links_per_switch)


def system(spec: SystemSpec, nodes: int, nic: str, model: str, link_GBps: float | None = None,
           nic_GBps: float | None = None, reduce: bool | None = None, sharp: bool = False) -> Topology:
    """``nodes`` boxes of ``spec`` on one rail leaf per GPU slot; the declared link model unless alphabeta."""
    nic = nic.strip().lower()
    require(nic in NIC_GBPS, "nic", f"nic must be one of {', '.join(NIC_GBPS)}, got {nic!r}")
    require(model in ("hardware", "alphabeta"), "model", f"model must be hardware or alphabeta, got {model!r}")
    per_rail = max(1, spec.gpus // spec.rails)
    require(1 <= nodes <= LEAF_PORTS // per_rail, "nodes", f"{spec.name} takes 1 to {LEAF_PORTS // per_rail} "
            f"nodes (one leaf port per GPU of each rail), got {nodes}")
    link_bw = spec.link_GBps if link_GBps is None else link_GBps
    nic_bw = NIC_GBPS[nic] if nic_GBps is None else nic_GBps
    for key, value in (("nvlink_bw", link_bw), ("nic_bw", nic_bw)):
        require(value > 0, key, f"{key} must be positive GB/s, got {value}")
    nvls = spec.nvls if reduce is None else reduce
    fabric = Fabric()
    gpus = [[fabric.add_gpu(group=f"box{b}") for _ in range(spec.gpus)] for b in range(nodes)]
    positions: dict[int, tuple[float, float]] = {}
    width = 4.0 if spec.gpus <= 8 else 24.0
    for b in range(nodes):
        switches = []
        for s, links in enumerate(spec.links_per_switch):
            switch = fabric.add_switch(group=f"box{b}", label=f"nvsw{b}.{s}", reduce=nvls)
            if nvls and model == "hardware":
                fabric.nodes[switch] = replace(fabric.nodes[switch], reduce_GBps=nvls_engine_GBps(spec, links))
            switches.append(switch)
            for gpu in gpus[b]:
                fabric.cable(gpu, switch, links * link_bw, NVLINK_ALPHA)
        if not spec.links_per_switch:  # direct-connected GPUs (MI300X): one link to every peer
            for i, u in enumerate(gpus[b]):
                for v in gpus[b][i + 1:]:
                    fabric.cable(u, v, link_bw, NVLINK_ALPHA)
            positions.update(zip(gpus[b], circle_positions(spec.gpus, 1.6, (b * 5.5, 0.0)), strict=True))
        else:
            _place_box(positions, b, gpus[b], switches, width=width)
    _add_rails(fabric, positions, gpus, nic_bw, IB_ALPHA, sharp, rails=spec.rails)
    fabric.place(positions)
    meta: dict = {"boxes": nodes, "nodes": nodes, "system": spec.name, "nic": nic}
    if model == "hardware":
        meta["link_model"] = hardware_model(spec).to_dict()
    kind = "NVLS" if nvls else "no in-switch reduction"
    net = f", {spec.rails} InfiniBand rail leaves ({nic.upper()})" if nodes > 1 else ""
    judged = "hardware link model" if model == "hardware" else "alpha-beta"
    return fabric.topology(f"{spec.name}_x{nodes}", f"{spec.title}: {nodes} x {spec.gpus} GPUs ({kind}){net}; "
                           f"{judged}", "tree", meta=meta)


def _nodes(nodes: int | None, boxes: int | None) -> int:
    require(nodes is None or boxes is None or nodes == boxes, "nodes", "give nodes (or its alias boxes), not both")
    return nodes if nodes is not None else boxes if boxes is not None else 1


@builder("dgxa100")
def dgxa100(nodes: int = 1, nic: str = "hdr", model: str = "hardware") -> Topology:
    """NVIDIA DGX A100: 8 A100 on 6 NVSwitches (12 NVLink 3 x 25 GB/s); nodes=N on HDR rails; hardware model."""
    return system(SPECS["dgxa100"], nodes, nic, model)


@builder("dgxh100")
def dgxh100(nodes: int | None = None, boxes: int | None = None, nic: str = "ndr", model: str = "hardware",
            nvlink_bw: float = 25.0, nic_bw: float | None = None, reduce: bool = True, sharp: bool | None = None
            ) -> Topology:
    """NVIDIA DGX H100: 8 H100 on 4 NVSwitches with NVLS (18 NVLink 4 x 25 GB/s); nodes=N (alias boxes) on rails.

    nvlink_bw is per NVLink link; reduce=false removes the NVSwitches' reduction engines; sharp=true gives the
    rail leaves SHARP reduction engines (default: with boxes=N, as this builder always had; with nodes=N, not,
    as most InfiniBand clusters run NCCL without its SHARP plugin); model=alphabeta judges it with the textbook
    rule instead of the hardware model.
    """
    leaves_reduce = (boxes is not None) if sharp is None else sharp
    return system(SPECS["dgxh100"], _nodes(nodes, boxes), nic, model, nvlink_bw, nic_bw, reduce,
                  leaves_reduce and reduce)


@builder("hgxh200")
def hgxh200(nodes: int = 1, nic: str = "ndr", model: str = "hardware") -> Topology:
    """NVIDIA HGX H200: 8 H200 on 4 NVSwitches with NVLS (18 NVLink 4 x 25 GB/s); nodes=N on rails."""
    return system(SPECS["hgxh200"], nodes, nic, model)


@builder("hgxb200")
def hgxb200(nodes: int = 1, nic: str = "ndr", model: str = "hardware") -> Topology:
    """NVIDIA HGX B200: 8 B200 on 2 NVLink 5 switches with NVLS (18 NVLink 5 x 50 GB/s); nodes=N on rails."""
    return system(SPECS["hgxb200"], nodes, nic, model)


@builder("nvl72")
def nvl72(nodes: int | None = None, racks: int | None = None, gpus: int = 72, nic: str = "ndr",
          model: str = "hardware", nvlink_bw: float = 50.0, nic_bw: float | None = None, reduce: bool = True
          ) -> Topology:
    """NVIDIA GB200 NVL72: 72 GPUs on 18 NVSwitch chips with NVLS (18 NVLink 5 x 50 GB/s); nodes=N (alias racks).

    gpus=G uses G of a domain's GPUs (a job on one compute tray: gpus=4), every one on all 18 chips.
    """
    require(2 <= gpus <= 72, "gpus", f"an NVL72 domain has 2 to 72 GPUs in use, got {gpus}")
    spec = SPECS["nvl72"] if gpus == 72 else replace(SPECS["nvl72"], gpus=gpus, rails=min(4, gpus))
    return system(spec, _nodes(nodes, racks), nic, model, nvlink_bw, nic_bw, reduce, reduce)


@builder("mi300x")
def mi300x(nodes: int = 1, nic: str = "ndr", model: str = "hardware") -> Topology:
    """AMD Instinct MI300X platform: 8 GPUs fully connected (7 Infinity Fabric links x 64 GB/s); nodes=N on rails."""
    return system(SPECS["mi300x"], nodes, nic, model)
