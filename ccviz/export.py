"""Exports that other systems read: ccviz JSON (with simulated times) and MSCCL XML.

Both read a ``Timeline`` so that what is exported is what the simulator
judged, never a synthesizer's own estimate.

MSCCL XML (the msccl-tools / NCCL-MSCCL runtime format) knows only GPUs: a
path through a switch becomes one GPU-to-GPU send/recv (NVSwitch is
transparent to it). Every GPU gets one threadblock per (peer, direction);
steps follow simulated time; a send waits on the receive that brought its
chunk (``depid``/``deps``).
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

from ccviz.collectives import Collective
from ccviz.errors import CcvizError
from ccviz.simulate import Timeline


def schedule_dict(timeline: Timeline) -> dict[str, Any]:
    """The schedule with simulator times filled in, plus the simulator's verdict."""
    data = timeline.schedule.to_dict()
    data["simulation"] = timeline.summary()
    return data


def schedule_json(timeline: Timeline) -> str:
    return json.dumps(schedule_dict(timeline))


def write_schedule(timeline: Timeline, path: str | Path) -> None:
    Path(path).write_text(schedule_json(timeline))


# ------------------------------------------------------------------------ MSCCL
@dataclass(frozen=True)
class GpuHop:
    """A GPU-to-GPU move of one chunk (switch paths collapsed), with its simulated times."""

    chunk: int
    src: int
    dst: int
    start_s: float
    arrival_s: float
    op: str


def gpu_hops(timeline: Timeline) -> list[GpuHop]:
    """Collapse paths through switches into direct GPU->GPU hops (MSCCL has no switch nodes)."""
    topo = timeline.topology
    transfers = timeline.schedule.transfers
    order = sorted(range(len(transfers)), key=lambda i: timeline.start_s[i])
    # For each (switch, chunk), the GPU that fed the most recent arrival: where a forwarded chunk came from.
    fed_by: dict[tuple[int, int], list[tuple[float, int, float]]] = defaultdict(list)
    for i in sorted(range(len(transfers)), key=lambda i: timeline.arrival_s[i]):
        t = transfers[i]
        if topo.is_switch(t.dst):
            origin = t.src
            if topo.is_switch(t.src):
                origin = _origin(fed_by, t.src, t.chunk, timeline.start_s[i])[0]
            fed_by[(t.dst, t.chunk)].append((float(timeline.arrival_s[i]), origin, float(timeline.start_s[i])))
    hops = []
    for i in order:
        t = transfers[i]
        if topo.is_switch(t.dst):
            continue
        src, start = t.src, float(timeline.start_s[i])
        if topo.is_switch(t.src):
            src, start = _origin(fed_by, t.src, t.chunk, start)
        hops.append(GpuHop(t.chunk, src, t.dst, start, float(timeline.arrival_s[i]), t.op))
    return hops


def _origin(fed_by, switch: int, chunk: int, time_s: float) -> tuple[int, float]:
    """The GPU (and its send time) whose copy of ``chunk`` a switch forwards at ``time_s``."""
    feeds = [f for f in fed_by.get((switch, chunk), []) if f[0] <= time_s * (1 + 1e-9) + 1e-15]
    arrival, origin, start = (feeds or fed_by[(switch, chunk)])[-1]
    return origin, start


def _buffer_layout(coll: Collective) -> tuple[dict[tuple[int, int], tuple[str, int]], dict[int, int], dict[int, int]]:
    """Where each chunk lives on each rank: input buffer at its owner, output buffer where it is wanted.

    Returns ``(place[(rank, chunk)] -> (buffer, offset), i_chunks per rank, o_chunks per rank)``.
    In-place collectives (allgather, allreduce, reducescatter) address chunks in the output buffer.
    """
    index = {r: k for k, r in enumerate(coll.ranks)}
    cpr = coll.chunks_per_rank
    place: dict[tuple[int, int], tuple[str, int]] = {}
    i_chunks: dict[int, int] = defaultdict(int)
    o_chunks: dict[int, int] = defaultdict(int)
    for c in coll.chunks:
        src = c.source if c.source is not None else min(c.pre)
        if coll.name in ("allgather", "reducescatter", "allreduce"):
            offset = index[src] * cpr + c.index
            for r in coll.ranks:
                place[(r, c.id)] = ("o", offset)
        elif coll.name in ("broadcast", "reduce"):
            for r in coll.ranks:
                place[(r, c.id)] = ("o", c.index)
        else:  # alltoall, gather, scatter, custom: sender's input slot, receiver's output slot
            (dst,) = tuple(c.post)
            place[(src, c.id)] = ("i", index[dst] * cpr + c.index)
            place[(dst, c.id)] = ("o", index[src] * cpr + c.index)
    for (r, _c), (buf, off) in place.items():
        counter = i_chunks if buf == "i" else o_chunks
        counter[r] = max(counter[r], off + 1)
    return place, i_chunks, o_chunks


def msccl_xml(timeline: Timeline, name: str | None = None) -> str:
    """The schedule as an MSCCL algorithm XML (one channel, Simple protocol)."""
    coll = timeline.collective
    if any(t.op == "relay" for t in timeline.schedule.transfers):
        raise CcvizError("schedule: it relays partial sums through GPUs (op 'relay'), which this one-buffer MSCCL "
                         "export cannot express; export the JSON schedule instead", "schedule")
    hops = gpu_hops(timeline)
    place, i_chunks, o_chunks = _buffer_layout(coll)
    scratch: dict[tuple[int, int], int] = {}

    def where(rank: int, chunk: int) -> tuple[str, int]:
        if (rank, chunk) in place:
            return place[(rank, chunk)]
        key = (rank, chunk)
        if key not in scratch:
            scratch[key] = sum(1 for k in scratch if k[0] == rank)
        return "s", scratch[key]

    # Threadblocks: one per (gpu, peer, direction); steps in simulated-time order.
    tb_ids: dict[tuple[int, int, str], int] = {}
    steps: dict[tuple[int, int, str], list[dict[str, Any]]] = defaultdict(list)
    last_recv: dict[tuple[int, int], tuple[int, int]] = {}  # (gpu, chunk) -> (tb id, step index)

    def tb(gpu: int, peer: int, direction: str) -> tuple[int, int, str]:
        key = (gpu, peer, direction)
        if key not in tb_ids:
            tb_ids[key] = sum(1 for k in tb_ids if k[0] == gpu)
        return key

    # At equal times (within the simulator's tolerance) receives go first: a chunk forwarded the instant
    # it lands depends on that receive.
    receive, send = 0, 1
    events = sorted(
        [(h.start_s * (1 + 1e-9) + 1e-13, send, h) for h in hops] + [(h.arrival_s, receive, h) for h in hops],
        key=lambda e: (e[0], e[1]),
    )
    for _, kind, h in events:
        if kind == send:  # waits on the receive that brought the chunk, if any
            key = tb(h.src, h.dst, "send")
            buf, off = where(h.src, h.chunk)
            dep = last_recv.get((h.src, h.chunk))
            steps[key].append({"type": "s", "srcbuf": buf, "srcoff": off, "dstbuf": where(h.dst, h.chunk)[0],
                               "dstoff": where(h.dst, h.chunk)[1], "dep": dep})
        else:
            key = tb(h.dst, h.src, "recv")
            buf, off = where(h.dst, h.chunk)
            steps[key].append({"type": "rrc" if h.op == "reduce" else "r", "srcbuf": where(h.src, h.chunk)[0],
                               "srcoff": where(h.src, h.chunk)[1], "dstbuf": buf, "dstoff": off, "dep": None})
            last_recv[(h.dst, h.chunk)] = (tb_ids[key], len(steps[key]) - 1)

    algo = ET.Element("algo", {
        "name": name or f"ccviz_{timeline.schedule.algorithm}_{coll.name}_{timeline.topology.name}",
        "proto": "Simple", "nchannels": "1", "nchunksperloop": str(max(o_chunks.values(), default=1)),
        "ngpus": str(coll.n_ranks), "coll": coll.name, "inplace": "1", "outofplace": "0",
        "minBytes": "0", "maxBytes": "0",
    })
    rank_index = {r: k for k, r in enumerate(coll.ranks)}
    for gpu in coll.ranks:
        n_scratch = sum(1 for k in scratch if k[0] == gpu)
        g = ET.SubElement(algo, "gpu", {"id": str(rank_index[gpu]), "i_chunks": str(i_chunks.get(gpu, 0)),
                                        "o_chunks": str(o_chunks.get(gpu, 0)), "s_chunks": str(n_scratch)})
        for key, tid in sorted(((k, v) for k, v in tb_ids.items() if k[0] == gpu), key=lambda kv: kv[1]):
            _, peer, direction = key
            peer_rank = str(rank_index[peer])
            t = ET.SubElement(g, "tb", {"id": str(tid), "send": peer_rank if direction == "send" else "-1",
                                        "recv": peer_rank if direction == "recv" else "-1", "chan": "0"})
            for s_index, st in enumerate(steps[key]):
                dep = st["dep"]
                ET.SubElement(t, "step", {
                    "s": str(s_index), "type": st["type"], "srcbuf": st["srcbuf"], "srcoff": str(st["srcoff"]),
                    "dstbuf": st["dstbuf"], "dstoff": str(st["dstoff"]), "cnt": "1",
                    "depid": str(dep[0]) if dep else "-1", "deps": str(dep[1]) if dep else "-1",
                    "hasdep": "0",
                })
    _mark_hasdep(algo)
    ET.indent(algo)
    return ET.tostring(algo, encoding="unicode")


def _mark_hasdep(algo: ET.Element) -> None:
    """MSCCL wants hasdep=1 on every step another step depends on."""
    for gpu in algo.findall("gpu"):
        tbs = {tb.get("id"): tb for tb in gpu.findall("tb")}
        for tb in gpu.findall("tb"):
            for step in tb.findall("step"):
                if step.get("depid") != "-1":
                    target = tbs[step.get("depid")].findall("step")[int(step.get("deps"))]
                    target.set("hasdep", "1")


def write_msccl_xml(timeline: Timeline, path: str | Path) -> None:
    Path(path).write_text(msccl_xml(timeline))
