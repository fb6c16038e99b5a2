"""The choice NCCL's tuner makes: for each algorithm and protocol a latency plus size over bandwidth, the fastest
one wins (NCCL ``src/graph/tuning.cc``, ``ncclTopoTuneModel`` and ``ncclTopoGetAlgoTime``, 2.19-2.21).

Our own code of NCCL's model, fed by this fabric instead of NCCL's topology search:

* bandwidth per GPU: the sustained scale-up rate of its links (link model ``efficiency``) the rings use; across
  boxes the NICs of a box (``gpus x`` NIC rate) bound the ring; NVLS runs at the switches' summed engine rate;
* NCCL's refinements: ring LL at 1/4 of Simple capped by ``llMaxBw``, ring LL128 at 0.92 capped by
  channels x ``perChMaxRingLL128Bw``; tree at 0.92 capped by channels x ``perChMaxTreeBw``, tree LL at 1/3.8,
  tree LL128 at 7/9 (one box) or 120/128; bus to algorithm bandwidth by nRanks/nsteps (ring), 1/2 (tree);
* latencies: ``baseLat`` + steps x ``hwLat`` (NVLink inside a box, network across; LL's intra-box latency x 1.8
  when there are several boxes); tree 2 x ((ranks per box - 1) x intra + log2(boxes) x inter); NVLS its hwLat.

The tuner only *chooses*; the chosen schedule is judged by the simulator under the fabric's link model.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ccviz.model.link_model import BASE_US, STEP_US, LinkModel
from ccviz.model.topology import Topology
from ccviz.model.units import BYTES_PER_GB, SECONDS_PER_US
from ccviz.synth.nccl.options import PROTOS

# NCCL tuning.cc hwLat (us) for Tree and NVLS/NVLSTree/CollNet; the ring's rows are the link model's step_us.
TREE_HW_US = {"scaleup": {"ll": 0.6, "ll128": 1.25, "simple": 28.0}, "net": {"ll": 5.0, "ll128": 8.5, "simple": 28.0}}
NVLS_HW_US = {"net": 14.0}  # NVLSTree's network hwLat (NVLS: 18); on NVLink: BASE_US nvls / nvlstree (23 us)
LL_MAX_BW = 87.7  # llMaxBws, one box (Ampere/Hopper row), GB/s
LL_MAX_BW_NODES = {2: 22.5, 3: 19.0}  # llMaxBws for 2 and more boxes (AMD CPU row; Intel 39.0/20.4)
PER_CH_RING_LL128 = 36.7  # perChMaxRingLL128Bws, Hopper (Ampere: 20.0)
HOPPER_OR_LATER = ("dgxh100", "hgxh200", "hgxb200", "nvl72")  # presets whose GPUs take NCCL's Hopper row
PER_CH_TREE = {1: 38.7, 2: 41.4, 3: 36.0}  # perChMaxTreeBws, Hopper, by 1 / 2 / more boxes


@dataclass(frozen=True)
class Fabric:
    """What the tuner reads of a fabric (as NCCL reads its topology search's graphs)."""

    ranks: int
    boxes: int
    channels: int
    scaleup_GBps: float  # sustained, per GPU, over the links its rings use
    net_GBps: float | None  # sustained NIC rate per GPU (None on one box)
    nvls_GBps: float | None  # the box's summed NVLS engine rate (None: no reducing NVSwitch)
    sharp: bool  # the rail leaves reduce (CollNet)
    hopper: bool  # Hopper-class per-channel caps (else Ampere's)


@dataclass(frozen=True)
class Estimate:
    """One algorithm+protocol in NCCL's model: its latency and algorithm bandwidth, and the time they give."""

    algo: str
    proto: str
    latency_us: float
    algbw_GBps: float
    time_s: float

    def text(self) -> str:
        return (f"{self.algo}/{self.proto}: {self.latency_us:.1f} us + size / {self.algbw_GBps:.1f} GB/s = "
                f"{self.time_s * 1e6:.1f} us")


def estimates(fabric: Fabric, collective: str, size_bytes: float) -> list[Estimate]:
    """NCCL's estimate of every algorithm+protocol it would consider for this collective on this fabric. Its
    latencies are NCCL's constants (``STEP_US``, ``BASE_US``), never a calibrated fabric's: NCCL's tuner does
    not know how slow a machine's steps really are, so it chooses as it would anywhere, and the simulator then
    charges the fabric's own latencies."""
    n, nodes = fabric.ranks, fabric.boxes
    nsteps = 2 * (n - 1) if collective == "allreduce" else n - 1
    inter_steps = (2 * nodes if nodes > 1 else 0) if collective == "allreduce" else nodes - 1
    out: list[Estimate] = []
    ring_bus = fabric.scaleup_GBps if nodes == 1 else min(fabric.scaleup_GBps, (n // nodes) * (fabric.net_GBps or 0))
    ll_cap = LL_MAX_BW if nodes == 1 else LL_MAX_BW_NODES[min(nodes, 3)]
    ll128_cap = fabric.channels * (PER_CH_RING_LL128 if fabric.hopper else 20.0)
    for proto in PROTOS:
        bus = {"ll": min(ll_cap, ring_bus / 4 if collective == "allreduce" or nodes > 1 else ring_bus / 3),
               "ll128": min(ring_bus * 0.92, ll128_cap), "simple": ring_bus}[proto]
        intra = STEP_US["scaleup"][proto] * (1.8 if nodes > 1 and proto == "ll" else 1.0)
        inter = STEP_US["net"][proto]
        latency = BASE_US["ring"][proto] + (nsteps - inter_steps) * intra + inter_steps * inter
        out.append(_estimate("ring", proto, latency, bus * n / nsteps, size_bytes))
    if collective == "allreduce":
        per_ch = PER_CH_TREE[min(nodes, 3)] if fabric.hopper else 24.0
        tree_bw = fabric.scaleup_GBps if nodes == 1 else min(fabric.scaleup_GBps, (n // nodes) * (fabric.net_GBps or 0))
        for proto in PROTOS:
            bus = min(tree_bw * 0.92, fabric.channels * per_ch)
            bus = {"ll": min(bus / 3.8, ll_cap), "ll128": bus * (7 / 9 if nodes == 1 else 120 / 128),
                   "simple": bus}[proto]
            intra = TREE_HW_US["scaleup"][proto] * (1.8 if nodes > 1 and proto == "ll" else 1.0)
            latency = BASE_US["tree"][proto] + 2 * ((n // nodes - 1) * intra
                                                         + math.log2(nodes) * TREE_HW_US["net"][proto])
            out.append(_estimate("tree", proto, latency, bus * 0.5, size_bytes))
    if collective in ("allgather", "reducescatter") and nodes == n > 1:  # PAT: one GPU per node (ncclPatEnable)
        latency = 8 + math.floor(math.log2(nodes)) * TREE_HW_US["net"]["simple"] / 3.5 + n * 2.8  # tuning.cc
        out.append(_estimate("pat", "simple", latency, ring_bus * 0.75, size_bytes))  # busBw *= .75, no ratio
    if fabric.nvls_GBps and collective in ("allreduce", "allgather", "reducescatter"):
        if nodes == 1:
            out.append(_estimate("nvls", "simple", BASE_US["nvls"]["simple"], fabric.nvls_GBps, size_bytes))
        elif fabric.sharp:  # NVLS with CollNet: NCCL enables NVLS across boxes only where the network reduces
            algbw = min(fabric.nvls_GBps, (n // nodes) * (fabric.net_GBps or 0))
            out.append(_estimate("nvls", "simple", BASE_US["nvls"]["simple"] + NVLS_HW_US["net"], algbw,
                                 size_bytes))
        if nodes >= 2 and collective == "allreduce":  # NVLSTree: the network halved beyond 2 nodes, 2(nodes-1) hops
            inter = (n // nodes) * (fabric.net_GBps or 0) / (1 if nodes == 2 else 2)  # tuning.cc: bwInter/2
            latency = BASE_US["nvlstree"]["simple"] + 2 * (nodes - 1) * NVLS_HW_US["net"]
            out.append(_estimate("nvlstree", "simple", latency, min(fabric.nvls_GBps, inter), size_bytes))
    return out


def _estimate(algo: str, proto: str, latency_us: float, algbw_GBps: float, size_bytes: float) -> Estimate:
    if algbw_GBps <= 0:  # the fabric gives this algorithm no path NCCL would use (no scale-up or no network links)
        return Estimate(algo, proto, latency_us, 0.0, math.inf)
    time_s = latency_us * SECONDS_PER_US + size_bytes / (algbw_GBps * BYTES_PER_GB)
    return Estimate(algo, proto, latency_us, algbw_GBps, time_s)


def choose(candidates: list[Estimate], algo: str | None, proto: str | None) -> Estimate | None:
    """The fastest estimate among those the forced algorithm / protocol leave (None: nothing left)."""
    left = [e for e in candidates if (algo is None or e.algo == algo) and (proto is None or e.proto == proto)
            and math.isfinite(e.time_s)]
    return min(left, key=lambda e: e.time_s, default=None)


def read_fabric(topology: Topology, ranks: tuple[int, ...], boxes: list[tuple[int, ...]], channels: int,
                model: LinkModel, ring_links_GBps: float) -> Fabric:
    """The tuner's view of ``topology`` for a collective over ``ranks`` (grouped in ``boxes``)."""
    first = boxes[0][0]
    net = [link.bandwidth_GBps for link in topology.out_links.get(first, [])
           if model.medium(topology, link.src, link.dst) == "net"]
    hubs = {link.dst for link in topology.out_links.get(first, [])
            if topology.nodes[link.dst].kind == "switch" and model.medium(topology, link.src, link.dst) == "scaleup"}
    engines = [topology.nodes[h] for h in hubs if topology.nodes[h].reduce]
    nvls = None
    if engines and len(engines) == len(hubs):
        per_gpu = ring_links_GBps
        nvls = sum(e.reduce_GBps or per_gpu / len(engines) for e in engines)
    leaves = {link.dst for link in topology.out_links.get(first, []) if model.medium(topology, link.src, link.dst)
              == "net"}
    sharp = bool(leaves) and all(topology.nodes[leaf].reduce for leaf in leaves)
    hopper = topology.meta.get("system") in HOPPER_OR_LATER
    return Fabric(len(ranks), len(boxes), channels, ring_links_GBps,
                  (max(net) * model.efficiency["net"]) if net and len(boxes) > 1 else None, nvls, sharp, hopper)
