"""What a limit is: the bottleneck ``Cut`` and the ``BandwidthLimit`` behind it, shared by every limit
(the max-flow limits in ``limit`` and AllToAll's concurrent flow in ``alltoall_limit``), with the
per-topology cache of their dear computations."""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Any

from ccviz.model.topology import Topology
from ccviz.model.units import format_size, format_time


@dataclass(frozen=True)
class Cut:
    """A bottleneck: the node set S, the links that leave it and what must cross them.

    ``ratio`` is seconds per byte of the collective's buffer: time = ratio * size.
    """

    nodes: frozenset[int]
    links: tuple[tuple[int, int], ...]
    bandwidth_GBps: float
    ratio: float
    words: str


@dataclass(frozen=True)
class BandwidthLimit:
    """The limit of one collective at one size, with the cut (or cuts, for AllReduce) behind it."""

    collective: str
    size_bytes: float
    limit_s: float
    cut: Cut
    parts: dict[str, float] = field(default_factory=dict)  # AllReduce: reducescatter / allgather seconds
    part_cuts: dict[str, Cut] = field(default_factory=dict)
    # AllToAll: the links the concurrent-flow LP's duals price (they bind), and how the LP was solved
    binding_links: tuple[tuple[int, int], ...] = ()
    method: str = ""
    # AllReduce on a fabric whose switches reduce: the limit with their adders off (ReduceScatter's plus
    # AllGather's), which bounds every ReduceScatter-then-AllGather schedule summing at GPUs (forestcoll, ring)
    without_switch_sums_s: float | None = None

    @property
    def algbw_GBps(self) -> float:
        return self.size_bytes / self.limit_s / 1e9

    def explanation(self) -> str:
        """One paragraph: the limit, why, and that alpha plays no part."""
        head = (f"{self.collective} of {format_size(self.size_bytes)} cannot finish before "
                f"{format_time(self.limit_s)} (algbw {self.algbw_GBps:.4g} GB/s)")
        tail = "Alpha (per-hop latency) is not part of the limit."
        if self.without_switch_sums_s is not None:
            tail += (f" Without sums made in the switches, ReduceScatter then AllGather summing at GPUs cannot finish "
                     f"before {format_time(self.without_switch_sums_s)}.")
        if self.parts:
            parts = " + ".join(f"{name} {format_time(t)}" for name, t in self.parts.items())
            return f"{head} = {parts}: {self.cut.words}. {tail}"
        if self.collective == "alltoall":  # how it was found: an LP, not a cut (a cut may explain only part)
            head += (", as the maximum concurrent flow LP finds (every ordered GPU pair a flow of M/N bytes, all "
                     f"pairs served at one rate; solved as {self.method})")
        return f"{head}: {self.cut.words}. {tail}"

    def to_dict(self) -> dict[str, Any]:
        """The ``ccviz limit --json`` object."""
        out: dict[str, Any] = {
            "limit_s": self.limit_s,
            "algbw_GBps": self.algbw_GBps,
            "collective": self.collective,
            "size_bytes": self.size_bytes,
            "cut_nodes": sorted(self.cut.nodes),
            "cut_links": [list(link) for link in self.cut.links],
            "cut_bandwidth_GBps": self.cut.bandwidth_GBps,
            "cut_words": self.cut.words,
            "explanation": self.explanation(),
            "alpha_ignored": True,
        }
        if self.parts:
            out["parts_s"] = dict(self.parts)
        if self.without_switch_sums_s is not None:
            out["limit_without_switch_sums_s"] = self.without_switch_sums_s
        if self.collective in ("alltoall", "alltoallv"):
            out["binding_links"] = [list(link) for link in self.binding_links]
            out["method"] = f"maximum concurrent flow LP (HiGHS), {self.method}"
        return out


def leaving(topology: Topology, inside: frozenset[int]) -> list[tuple[int, int]]:
    """The links from ``inside`` to the rest, in order."""
    return sorted(key for key in topology.links if key[0] in inside and key[1] not in inside)


CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def cached(topology: Topology, key: tuple, compute):
    """``compute()`` once per topology and key (max flows and LPs are dear; a topology is immutable)."""
    per_topology = CACHE.setdefault(topology, {})
    if key not in per_topology:
        per_topology[key] = compute()
    return per_topology[key]


def gpu_list(gpus: list[int]) -> str:
    """A few GPUs by number, many by count (for the cut's words)."""
    if len(gpus) == 1:
        return f"GPU {gpus[0]}"
    if len(gpus) <= 6:
        return "GPUs " + ", ".join(map(str, gpus))
    ordered = sorted(gpus)
    if ordered[-1] - ordered[0] == len(ordered) - 1:  # one run of numbers: say which (a box, a group)
        return f"the {len(gpus)} GPUs {ordered[0]}-{ordered[-1]}"
    return f"{len(gpus)} GPUs"
