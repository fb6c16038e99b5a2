"""The hardware link model: what a real fabric does that the textbook alpha-beta rule leaves out.

A fabric that declares it (``topology.meta["link_model"]``, written by the system presets and loadable
from a fabric JSON file) is judged by the simulator on its *effective* fabric for the schedule's protocol
(``effective_topology``) plus a fixed per-operation latency (``operation_latency_s``). Idealized
textbook fabrics declare nothing and keep the alpha-beta rule. See docs/link_model.md for each parameter,
its source and how ``ccviz calibrate`` fits it.

What it models, and from where:

* **sustained link rates**: a link carries ``efficiency[medium]`` of its signalling rate (NVLink,
  Infinity Fabric: the ``scaleup`` medium; InfiniBand/RoCE NICs: ``net``). NCCL's own topology code
  takes 20.0 GB/s per NVLink 3 and 20.6 GB/s per NVLink 4 link (``src/graph/topo.h``
  SM80_NVLINK_BW / SM90_NVLINK_BW) against 25 GB/s signalled: 0.80 and 0.824.
* **cut-through switches**: a hop out of a switch pays its alpha but no second serialization
  (``switch_hop="teccl"``), as NVSwitch and InfiniBand forward.
* **protocols**: NCCL's LL carries 8 B of payload per 16 B line (0.5), LL128 120 B per 128 B line
  (0.9375), Simple the whole buffer (1.0); the per-step overhead of each protocol on each medium is
  NCCL's ``hwLat`` table (``src/graph/tuning.cc``), charged as the alpha of every hop a GPU starts.
* **per-operation latency**: ``launch_us`` (kernel launch and enqueue as nccl-tests measures them;
  NCCL's tuner leaves it out) plus the algorithm's base latency (NCCL's ``baseLat``, NVLS's ``hwLat``).
* **reduction engines**: a switch's ``reduce_GBps`` (NVLS) is a node property the presets set.
* **chunk size**: a schedule that moves its data in NCCL's chunks of ``c`` bytes where NCCL's rates hold at
  chunks of ``C`` (``options['nccl_chunk']``, ``[c, C]``; NVLS: ``ccviz.synth.nccl.chunking``) runs at
  ``chunk_share(c, C)`` of them: each chunk costs ``chunk_overhead_bytes`` more than its payload.
"""

from __future__ import annotations

import dataclasses
import weakref
from dataclasses import dataclass, field
from typing import Any

from ccviz.errors import CcvizError
from ccviz.model.units import SECONDS_PER_US

PROTOCOLS = ("ll", "ll128", "simple")
MEDIA = ("scaleup", "net")
# Payload share of each protocol's line (NCCL: LL 8 B data + 8 B flags per 16 B, LL128 120 B per 128 B).
PROTOCOL_EFFICIENCY = {"ll": 0.5, "ll128": 120.0 / 128.0, "simple": 1.0}
# NCCL's per-step latency (us) of the ring's hwLat rows, NVLink and network (src/graph/tuning.cc, 2.19-2.21).
STEP_US = {"scaleup": {"ll": 0.6, "ll128": 1.9, "simple": 3.4}, "net": {"ll": 2.7, "ll128": 4.0, "simple": 14.0}}
# NCCL's base latency (us) per algorithm and protocol (baseLat; NVLS and NVLSTree: their hwLat on NVLink).
BASE_US = {"ring": {"ll": 6.6, "ll128": 14.0, "simple": 8.4}, "tree": {"ll": 6.8, "ll128": 14.0, "simple": 0.0},
           "nvls": {"simple": 23.0}, "nvlstree": {"simple": 23.0}, "collnet": {"simple": 3.7},
           "pat": {"simple": 8.4}}
LAUNCH_US = 12.0  # fitted: 8 KiB AllReduce on 8x H200 (about 27 us) minus NCCL's ring LL model (15 us)
# Fitted: what one NCCL chunk costs beyond its payload, in bytes of payload time. Fitted on the 8x H100 / H200
# AllReduce rows >= 1 MiB of ccviz/data/measured_nccl.csv (NCCL 2.18.5, 2.20.5, 2.27.7; NVLS): 14-20 KiB meet
# every tolerance there (8 KiB: 2 rows out, 24 KiB: 3), 16 KiB is the middle. The step it explains is visible in
# the data where NCCL's NVLS chunk doubles at 1 GiB (busbw 442.7 -> 467.6 GB/s, 450.3 -> 463.6 GB/s).
CHUNK_OVERHEAD_BYTES = 16.0 * 1024
NET_GROUPS = ("rails", "spine")  # switches of these groups are the scale-out network (builders' groups)
KEYS = ("name", "efficiency", "protocol_efficiency", "step_us", "base_us", "launch_us", "cut_through",
        "net_groups", "source", "chunk_overhead_bytes")


@dataclass(frozen=True)
class LinkModel:
    """The declared parameters of a fabric's hardware model (every one fit by ``ccviz calibrate``)."""

    efficiency: dict[str, float] = field(default_factory=lambda: {"scaleup": 0.824, "net": 0.96})
    protocol_efficiency: dict[str, float] = field(default_factory=lambda: dict(PROTOCOL_EFFICIENCY))
    step_us: dict[str, dict[str, float]] = field(default_factory=lambda: {m: dict(v) for m, v in STEP_US.items()})
    base_us: dict[str, dict[str, float]] = field(default_factory=lambda: {a: dict(v) for a, v in BASE_US.items()})
    launch_us: float = LAUNCH_US
    cut_through: bool = True
    net_groups: tuple[str, ...] = NET_GROUPS
    name: str = "hardware"
    source: str = ""
    chunk_overhead_bytes: float = CHUNK_OVERHEAD_BYTES

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["net_groups"] = list(self.net_groups)
        return data

    @classmethod
    def from_dict(cls, data: Any) -> LinkModel:
        """Read a declared model; every unknown key or value out of range is one clear error."""
        if not isinstance(data, dict):
            raise CcvizError("meta.link_model: expected an object of model parameters", "link_model")
        unknown = sorted(set(data) - set(KEYS))
        if unknown:
            raise CcvizError(f"meta.link_model: unknown key(s) {', '.join(unknown)}; known: {', '.join(KEYS)}",
                             "link_model")
        base = cls()
        eff = _shares(data.get("efficiency", base.efficiency), MEDIA, "efficiency")
        proto = _shares(data.get("protocol_efficiency", base.protocol_efficiency), PROTOCOLS, "protocol_efficiency")
        steps = _table(data.get("step_us", base.step_us), MEDIA, "step_us")
        bases = _table(data.get("base_us", base.base_us), tuple(BASE_US), "base_us")
        launch = _number(data.get("launch_us", base.launch_us), "launch_us", 0.0, 1e6)
        groups = data.get("net_groups", list(base.net_groups))
        if not isinstance(groups, (list, tuple)) or not all(isinstance(g, str) for g in groups):
            raise CcvizError("meta.link_model.net_groups: expected a list of node group names", "link_model")
        overhead = _number(data.get("chunk_overhead_bytes", base.chunk_overhead_bytes), "chunk_overhead_bytes",
                           0.0, 1e9)
        return cls(eff, proto, steps, bases, launch, bool(data.get("cut_through", True)), tuple(groups),
                   str(data.get("name", "hardware")), str(data.get("source", "")), overhead)

    # ------------------------------------------------------------------ what it charges
    def medium(self, topology: Any, src: int, dst: int) -> str:
        """'net' when either end is a scale-out switch (a NIC's hop), else 'scaleup' (NVLink, xGMI)."""
        for node in (topology.nodes[src], topology.nodes[dst]):
            if node.kind == "switch" and node.group in self.net_groups:
                return "net"
        return "scaleup"

    def operation_latency_s(self, algorithm: str, protocol: str) -> float:
        """Seconds one operation costs before and beyond its data's last hop: launch plus base latency."""
        return (self.launch_us + self.base_latency_us(algorithm, protocol)) * SECONDS_PER_US

    def base_latency_us(self, algorithm: str, protocol: str) -> float:
        """NCCL's base latency of the algorithm and protocol (an algorithm without a row takes the ring's)."""
        return self.base_us.get(algorithm, self.base_us["ring"]).get(protocol, 0.0)

    def chunk_share(self, chunk_bytes: float, full_chunk_bytes: float) -> float:
        """The share of its rates a schedule moving ``chunk_bytes`` at a time reaches where the rates hold at
        ``full_chunk_bytes``: every chunk costs ``chunk_overhead_bytes`` beyond its payload (1 at the full chunk)."""
        o = self.chunk_overhead_bytes
        if chunk_bytes <= 0 or full_chunk_bytes <= 0:
            return 1.0
        return min(1.0, (full_chunk_bytes + o) / full_chunk_bytes * chunk_bytes / (chunk_bytes + o))

    def describe(self) -> str:
        e = self.efficiency
        return (f"{self.name} link model: links at {e['scaleup']:.3g} (scale-up) / {e['net']:.3g} (network) of their rate, "
                f"cut-through switches, protocol LL/LL128/Simple, per-op latency {self.launch_us:g} us + base")


def _number(value: Any, key: str, lo: float, hi: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (lo <= float(value) <= hi):
        raise CcvizError(f"meta.link_model.{key}: expected a number in [{lo:g}, {hi:g}], got {value!r}",
                         "link_model")
    return float(value)


def _shares(value: Any, names: tuple[str, ...], key: str) -> dict[str, float]:
    if not isinstance(value, dict) or set(value) != set(names):
        raise CcvizError(f"meta.link_model.{key}: expected {{{', '.join(names)}}} with a share in (0, 1] each, "
                         f"got {value!r:.80}", "link_model")
    out = {n: _number(value[n], f"{key}.{n}", 0.0, 1.0) for n in names}
    if any(v <= 0 for v in out.values()):
        raise CcvizError(f"meta.link_model.{key}: every share must be above 0", "link_model")
    return out


def _table(value: Any, rows: tuple[str, ...], key: str) -> dict[str, dict[str, float]]:
    if not isinstance(value, dict) or not set(value) <= set(rows):
        raise CcvizError(f"meta.link_model.{key}: expected rows among {', '.join(rows)}, got {value!r:.80}",
                         "link_model")
    out: dict[str, dict[str, float]] = {}
    for row, cells in value.items():
        if not isinstance(cells, dict) or not set(cells) <= set(PROTOCOLS):
            raise CcvizError(f"meta.link_model.{key}.{row}: expected protocols among {', '.join(PROTOCOLS)}",
                             "link_model")
        out[row] = {p: _number(v, f"{key}.{row}.{p}", 0.0, 1e6) for p, v in cells.items()}
    return out


# ---------------------------------------------------------------------------- applying it
def declared(topology: Any) -> LinkModel | None:
    """The fabric's declared hardware model, or None (the textbook alpha-beta rule)."""
    data = getattr(topology, "meta", {}).get("link_model")
    return None if data is None else LinkModel.from_dict(data)


def model_name(topology: Any) -> str:
    """The name every result carries: which model judged it."""
    model = declared(topology)
    return "alpha-beta" if model is None else model.name


def protocol_of(schedule: Any) -> str:
    """The protocol a schedule runs with (``options['protocol']``; Simple for every non-NCCL schedule)."""
    proto = str((schedule.options or {}).get("protocol") or "simple").lower()
    if proto not in PROTOCOLS:
        raise CcvizError(f"protocol: {proto!r} is not one of {', '.join(PROTOCOLS)}", "protocol")
    return proto


CHUNK_KEYS = ("bytes", "full", "pipelines")


def declared_chunk(schedule: Any) -> dict[str, float] | None:
    """A schedule's NCCL chunk (``options['nccl_chunk']``: bytes, NCCL's full chunk, pipelines = channels x
    heads), or None."""
    value = (schedule.options or {}).get("nccl_chunk")
    if value is None:
        return None
    if (not isinstance(value, dict) or set(value) != set(CHUNK_KEYS)
            or not all(isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 for v in value.values())
            or value["bytes"] <= 0 or value["full"] <= 0 or value["pipelines"] < 1):
        raise CcvizError(f"options.nccl_chunk: expected {{{', '.join(CHUNK_KEYS)}}} with positive bytes, full "
                         f"and pipelines, got {value!r:.80}", "nccl_chunk")
    return value


def chunk_share_of(schedule: Any, model: LinkModel) -> float:
    """The rate share of a schedule that declares NCCL's chunk (1 for every other schedule)."""
    chunk = declared_chunk(schedule)
    return 1.0 if chunk is None else model.chunk_share(chunk["bytes"], chunk["full"])


_EFFECTIVE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def effective_topology(topology: Any, protocol: str = "simple", channels: int | None = None,
                       share: float = 1.0) -> Any:
    """The fabric as the model sees it for ``protocol``: sustained rates x protocol payload share, the
    protocol's per-step overhead as the alpha of every hop a GPU starts, cut-through switches. With
    ``channels`` (a schedule run as NCCL's channels, each a thread block moving its own share), a link that
    ``k`` of them share is ``k`` lanes of 1/k of its rate, so one channel's per-step wait is not filled by
    another's data (NCCL's latency + size / bandwidth). ``share`` (``LinkModel.chunk_share``) scales every
    link's rate and every reduction engine's. Cached per fabric, protocol, channels and share."""
    model = declared(topology)
    if model is None:
        return topology
    per_topology = _EFFECTIVE.setdefault(topology, {})
    share = round(float(share), 9)
    key = (protocol, channels, share)
    if key not in per_topology:
        lane_share = _channel_shares(topology, model) if channels else {}
        links = []
        for (src, dst), link in topology.links.items():
            medium = model.medium(topology, src, dst)
            bw = link.bandwidth_GBps * model.efficiency[medium] * model.protocol_efficiency[protocol] * share
            alpha = model.step_us[medium][protocol] if topology.nodes[src].kind == "gpu" else link.alpha_us
            lanes = max(1, round(channels * lane_share[(src, dst)])) if channels and (src, dst) in lane_share else 1
            links.append(dataclasses.replace(link, bandwidth_GBps=bw / lanes, alpha_us=alpha,
                                             lanes=link.lanes * lanes))
        hop = "teccl" if model.cut_through else topology.switch_hop
        meta = {k: v for k, v in topology.meta.items() if k != "link_model"}
        nodes = [dataclasses.replace(n, reduce_GBps=n.reduce_GBps * share) if share != 1.0 and n.reduce_GBps else n
                 for n in topology.nodes.values()]
        per_topology[key] = type(topology)(topology.name, nodes, links,
                                           description=topology.description, switch_hop=hop,
                                           layout=topology.layout, meta=meta, validate=False)
    return per_topology[key]


def _channel_shares(topology: Any, model: LinkModel) -> dict[tuple[int, int], float]:
    """Each GPU link's share of the channels at its GPU end: its part of the GPU's scale-up bandwidth (the
    channels are spread by bandwidth), or, for a NIC, 1 / the GPUs of its box (each NIC carries as many)."""
    box_size: dict[Any, int] = {}
    for node in topology.nodes.values():
        if node.kind == "gpu":
            box_size[node.group] = box_size.get(node.group, 0) + 1
    shares: dict[tuple[int, int], float] = {}
    for gpu in (n.id for n in topology.nodes.values() if n.kind == "gpu"):
        for links in (topology.out_links.get(gpu, []), topology.in_links.get(gpu, [])):
            up = [link for link in links if model.medium(topology, link.src, link.dst) == "scaleup"]
            total = sum(link.bandwidth_GBps for link in up)
            for link in links:
                key = (link.src, link.dst)
                if model.medium(topology, *key) == "net":
                    shares[key] = 1.0 / box_size[topology.nodes[gpu].group]
                elif total > 0:
                    shares[key] = link.bandwidth_GBps / total
    return shares


def untimed(transfers: list) -> list:
    """A timed schedule's transfers as an order: each one's start time becomes its step, so the judge retimes
    it on the effective fabric keeping the synthesizer's order (a timed plan made on spec rates would
    otherwise overlap itself on the slower sustained links)."""
    return [t._replace(start_s=None, end_s=None, step=float(t.start_s)) for t in transfers]
