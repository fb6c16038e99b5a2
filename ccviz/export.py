"""Exports that other systems read: ccviz JSON (with simulated times) and MSCCL XML.

Both read a ``Timeline`` so that what is exported is what the simulator
judged, never a synthesizer's own estimate.

MSCCL XML (the msccl-tools / NCCL-MSCCL runtime format) knows only GPUs: a
path through a switch becomes one GPU-to-GPU send/recv (NVSwitch is
transparent to it). Each connection (GPU pair) gets a sending and a receiving
thread block per channel; steps follow simulated time; every access to a
buffer slot waits (``depid``/``deps``, extra ones as ``nop`` steps) for the
slot's previous write and, if it writes, for the reads since, so no two
thread blocks touch a slot unordered. Buffers follow the runtime's layout per
collective, and long connections are split over channels to respect the
runtime's limits. ``ccviz.msccl`` executes the result independently.
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
    return _collapse(timeline)[0]


def _collapse(timeline: Timeline) -> tuple[list[GpuHop], list[tuple[int, int, int]]]:
    """GPU->GPU hops, plus every (switch, chunk, copies) where a switch forwarded one arrival twice.

    A switch forwards what reached it: a copying switch the latest arrival, a non-copying one each
    arrival once, in arrival order (as the simulator replays it).
    """
    topo = timeline.topology
    transfers = timeline.schedule.transfers
    start, arrival = timeline.start_s, timeline.arrival_s
    order = sorted(range(len(transfers)), key=lambda i: (float(start[i]), not topo.is_switch(transfers[i].src), i))
    feeds: dict[tuple[int, int], list[list]] = defaultdict(list)  # [arrival, origin, origin start, uses]
    hops: list[GpuHop] = []
    for i in order:
        t = transfers[i]
        src, begin = t.src, float(start[i])
        if topo.is_switch(t.src):
            feed = _feed(feeds[(t.src, t.chunk)], begin, topo.nodes[t.src].copy)
            if feed is None:
                continue  # the simulator already calls this transfer invalid
            feed[3] += 1
            src, begin = feed[1], feed[2]
        if topo.is_switch(t.dst):
            feeds[(t.dst, t.chunk)].append([float(arrival[i]), src, begin, 0])
        else:
            hops.append(GpuHop(t.chunk, src, t.dst, begin, float(arrival[i]), t.op))
    hops.sort(key=lambda h: h.start_s)
    copies = [(sw, chunk, f[3]) for (sw, chunk), fs in sorted(feeds.items()) for f in fs if f[3] > 1]
    return hops, copies


def _feed(feeds: list[list], time_s: float, copies: bool) -> list | None:
    """The arrival at a switch that a departure at ``time_s`` forwards."""
    ready = [f for f in feeds if f[0] <= time_s * (1 + 1e-9) + 1e-15] or feeds
    if not ready:
        return None
    if copies:
        return max(ready, key=lambda f: f[0])
    unused = [f for f in sorted(ready, key=lambda f: f[0]) if f[3] == 0]
    return unused[0] if unused else ready[-1]


# Runtime limits the export respects (see ccviz.msccl for where they come from).
MAX_TBS_PER_CHANNEL = 32
MAX_STEPS = 64
MAX_CHANNELS = 32
OUT_OF_PLACE = frozenset({"alltoall", "gather", "scatter"})


class _Layout:
    """Where each chunk lives on each rank, in the runtime's buffers for this collective."""

    def __init__(self, coll: Collective) -> None:
        if coll.name not in ("allgather", "reducescatter", "allreduce", "alltoall", "broadcast", "reduce",
                             "gather", "scatter"):
            raise CcvizError(f"msccl: MSCCL has no collective for a {coll.name!r} demand; export a standard "
                             "collective", "msccl")
        self.coll = coll
        self.index = {r: k for k, r in enumerate(coll.ranks)}
        if coll.root is not None and self.index[coll.root] != 0:
            raise CcvizError(f"msccl: MSCCL programs of {coll.name} are rooted at GPU 0, but this schedule's root is "
                             f"rank {coll.root}; synthesize with the first GPU as root", "msccl")
        n, cpr = coll.n_ranks, coll.chunks_per_rank
        self.cpr = cpr
        self.nchunks = cpr if coll.name in ("broadcast", "reduce") else n * cpr
        sizes = {"allgather": (cpr, n * cpr), "reducescatter": (n * cpr, cpr), "gather": (cpr, n * cpr),
                 "scatter": (n * cpr, cpr), "broadcast": (cpr, cpr), "reduce": (cpr, cpr)}
        self.i_chunks, self.o_chunks = sizes.get(coll.name, (n * cpr, n * cpr))
        self.place: dict[tuple[int, int], tuple[str, int]] = {}
        self.scratch: dict[int, int] = defaultdict(int)
        self.local_copies: list[tuple[int, int, int]] = []  # (rank, input offset, output offset)
        for c in coll.chunks:
            src = self.index[c.source if c.source is not None else min(c.pre)]
            if coll.name == "allgather":  # in place: the output buffer, own chunk already there
                for r in coll.ranks:
                    self.place[(r, c.id)] = ("o", src * cpr + c.index)
            elif coll.name in ("allreduce", "reducescatter"):  # in place: the input buffer holds every chunk
                for r in coll.ranks:
                    self.place[(r, c.id)] = ("i", src * cpr + c.index)
            elif coll.name in ("broadcast", "reduce"):
                for r in coll.ranks:
                    self.place[(r, c.id)] = ("i", c.index)
            else:  # out of place: the sender's input slot, the receiver's output slot
                (dst,) = tuple(c.post)
                sender, receiver = coll.ranks[src], dst
                if coll.name == "scatter":
                    sender, receiver = coll.root, c.source
                    self.place[(sender, c.id)] = ("i", self.index[receiver] * cpr + c.index)
                    self.place[(receiver, c.id)] = ("o", c.index)
                elif coll.name == "gather":
                    self.place[(sender, c.id)] = ("i", c.index)
                    self.place[(receiver, c.id)] = ("o", src * cpr + c.index)
                else:
                    self.place[(sender, c.id)] = ("i", self.index[dst] * cpr + c.index)
                    self.place[(receiver, c.id)] = ("o", src * cpr + c.index)
        # Out of place, a rank's own share never travels: copy it from input to output (as msccl-tools does).
        for r in coll.ranks:
            k = self.index[r]
            if coll.name == "alltoall":
                self.local_copies += [(r, k * cpr + j, k * cpr + j) for j in range(cpr)]
            elif coll.name == "gather" and r == coll.root:
                self.local_copies += [(r, j, k * cpr + j) for j in range(cpr)]
            elif coll.name == "scatter" and r == coll.root:
                self.local_copies += [(r, k * cpr + j, j) for j in range(cpr)]

    def where(self, rank: int, chunk: int) -> tuple[str, int]:
        """The chunk's slot on a rank; relays keep it in scratch."""
        key = (rank, chunk)
        if key not in self.place:
            self.place[key] = ("s", self.scratch[rank])
            self.scratch[rank] += 1
        return self.place[key]


@dataclass
class _Step:
    type: str
    srcbuf: str
    srcoff: int
    dstbuf: str
    dstoff: int
    deps: dict[tuple, int]  # thread block key -> step index it waits for
    hasdep: bool = False


def _receive_times(hops: list[GpuHop]) -> tuple[dict[int, int], dict[int, float]]:
    """Per hop: its position on its connection (send order) and a FIFO arrival (never before an earlier one)."""
    seq: dict[int, int] = {}
    when: dict[int, float] = {}
    by_conn: dict[tuple[int, int], list[int]] = defaultdict(list)
    for i in sorted(range(len(hops)), key=lambda i: (hops[i].start_s, i)):
        by_conn[(hops[i].src, hops[i].dst)].append(i)
    for idx in by_conn.values():
        latest = -1.0
        for k, i in enumerate(idx):
            seq[i] = k
            latest = max(latest, hops[i].arrival_s)
            when[i] = latest
    return seq, when


def _program_steps(timeline: Timeline, hops: list[GpuHop], layout: _Layout, per_tb: int
                   ) -> dict[tuple, list[_Step]]:
    """Thread-block step lists in simulated-time order, with every slot access ordered by dependencies.

    A thread block key is (gpu, peer, 'send'|'recv', segment) or (gpu, -1, 'copy', 0); a connection's
    ``per_tb`` messages form one segment (one channel).
    """
    coll = timeline.collective
    seq, recv_time = _receive_times(hops)
    eps = 1e-9
    events = [(0.0, -1, i) for i in range(len(layout.local_copies))]
    events += [(h.start_s * (1 + eps) + 1e-13, 1, i) for i, h in enumerate(hops)]
    events += [(recv_time[i], 0, i) for i in range(len(hops))]
    events.sort(key=lambda e: (e[0], e[1], e[2]))
    held = {(r, c.id) for c in coll.chunks for r in c.pre}
    steps: dict[tuple, list[_Step]] = defaultdict(list)
    last_write: dict[tuple, tuple[tuple, int]] = {}
    reads: dict[tuple, dict[tuple, int]] = defaultdict(dict)
    known: dict[tuple, dict[tuple, int]] = defaultdict(dict)  # per tb: what its earlier deps already cover

    def access(tb: tuple, idx: int, slot: tuple, write: bool, deps: dict[tuple, int]) -> None:
        targets = [last_write[slot]] if slot in last_write else []
        if write:
            targets += list(reads[slot].items())
        for other, j in targets:
            if other != tb and known[tb].get(other, -1) < j and deps.get(other, -1) < j:
                deps[other] = j
        if write:
            last_write[slot] = (tb, idx)
            reads[slot] = {}
        else:
            reads[slot][tb] = max(reads[slot].get(tb, -1), idx)

    for _, kind, i in events:
        deps: dict[tuple, int] = {}
        if kind == -1:
            rank, src_off, dst_off = layout.local_copies[i]
            tb = (rank, -1, "copy", 0)
            idx = len(steps[tb])
            access(tb, idx, (rank, "i", src_off), False, deps)
            access(tb, idx, (rank, "o", dst_off), True, deps)
            step = _Step("cpy", "i", src_off, "o", dst_off, deps)
        elif kind == 1:
            h = hops[i]
            tb = (h.src, h.dst, "send", seq[i] // per_tb)
            idx = len(steps[tb])
            buf, off = layout.where(h.src, h.chunk)
            access(tb, idx, (h.src, buf, off), False, deps)
            dbuf, doff = layout.where(h.dst, h.chunk)
            step = _Step("s", buf, off, dbuf, doff, deps)
        else:
            h = hops[i]
            tb = (h.dst, h.src, "recv", seq[i] // per_tb)
            idx = len(steps[tb])
            buf, off = layout.where(h.dst, h.chunk)
            combine = h.op == "reduce" and (h.dst, h.chunk) in held
            if combine:
                access(tb, idx, (h.dst, buf, off), False, deps)
            access(tb, idx, (h.dst, buf, off), True, deps)
            held.add((h.dst, h.chunk))
            step = _Step("rrc" if combine else "r", buf, off, buf, off, deps)
        for other, j in deps.items():
            known[tb][other] = max(known[tb].get(other, -1), j)
            steps[other][j].hasdep = True
        steps[tb].append(step)
    return steps


def _assign_channels(keys: list[tuple]) -> dict[tuple, int]:
    """A channel per connection segment: <= 32 sending and <= 32 receiving thread blocks per GPU per channel."""
    sends: dict[tuple[int, int], int] = defaultdict(int)
    recvs: dict[tuple[int, int], int] = defaultdict(int)
    used: set[tuple[int, int, int]] = set()
    chan: dict[tuple, int] = {}
    for gpu, peer, _, seg in sorted(k for k in keys if k[2] == "send"):
        c = 0
        while sends[(gpu, c)] >= MAX_TBS_PER_CHANNEL or recvs[(peer, c)] >= MAX_TBS_PER_CHANNEL or (gpu, peer, c) in used:
            c += 1
        sends[(gpu, c)] += 1
        recvs[(peer, c)] += 1
        used.add((gpu, peer, c))
        chan[(gpu, peer, "send", seg)] = chan[(peer, gpu, "recv", seg)] = c
    for key in keys:
        chan.setdefault(key, 0)  # local copies need no connection
    return chan


def _with_nops(steps: list[_Step]) -> list[tuple[str, _Step | None, tuple | None]]:
    """Each step keeps one dependency; the others become nop steps just before it (the runtime's rule)."""
    out: list[tuple[str, _Step | None, tuple | None]] = []
    for st in steps:
        deps = sorted(st.deps.items())
        for dep in deps[1:]:
            out.append(("nop", None, dep))
        out.append((st.type, st, deps[0] if deps else None))
    return out


def msccl_xml(timeline: Timeline, name: str | None = None) -> str:
    """The schedule as an MSCCL algorithm XML that the runtime executes race- and deadlock-free.

    Refuses (CcvizError) what MSCCL cannot express: switch multicast, custom demands, a root other
    than GPU 0, or more channels than the runtime has.
    """
    coll = timeline.collective
    hops, copies = _collapse(timeline)
    if copies:
        switch, chunk, n = copies[0]
        raise CcvizError(
            f"msccl: switch {switch} copies chunk {chunk} to {n} GPUs from one arrival; MSCCL has no switch "
            "multicast, so this schedule cannot be written as MSCCL XML (synthesize on switches that cannot "
            "copy, e.g. star:copy=false)", "msccl")
    per_tb = MAX_STEPS
    while True:
        layout = _Layout(coll)
        steps = _program_steps(timeline, hops, layout, per_tb)
        longest = max((len(_with_nops(s)) for s in steps.values()), default=0)
        if longest <= MAX_STEPS:
            break
        if per_tb == 1:
            raise CcvizError(f"msccl: a thread block needs {longest} steps even with one message per channel; the "
                             f"runtime accepts {MAX_STEPS}", "msccl")
        per_tb = max(1, per_tb * MAX_STEPS // longest - 1)
    chan = _assign_channels(list(steps))
    nchannels = max(chan.values(), default=0) + 1
    if nchannels > MAX_CHANNELS:
        raise CcvizError(f"msccl: this schedule needs {nchannels} channels to stay within the runtime's limits "
                         f"(32 thread blocks per channel, {MAX_STEPS} steps per thread block); MSCCL has "
                         f"{MAX_CHANNELS}", "msccl")
    out_of_place = coll.name in OUT_OF_PLACE
    algo = ET.Element("algo", {
        "name": name or f"ccviz_{timeline.schedule.algorithm}_{coll.name}_{timeline.topology.name}",
        "proto": "Simple", "nchannels": str(nchannels), "nchunksperloop": str(layout.nchunks),
        "ngpus": str(coll.n_ranks), "coll": coll.name, "inplace": "0" if out_of_place else "1",
        "outofplace": "1" if out_of_place else "0",
        # maxBytes=0 means "no limit" to current runtimes but "never chosen" to microsoft/msccl v0.x
        "minBytes": "0", "maxBytes": str(2**63 - 1),
    })
    for gpu in coll.ranks:
        keys = sorted((k for k in steps if k[0] == gpu), key=lambda k: (chan[k], k[2], k[1], k[3]))
        ids = {k: n for n, k in enumerate(keys)}
        g = ET.SubElement(algo, "gpu", {"id": str(layout.index[gpu]), "i_chunks": str(layout.i_chunks),
                                        "o_chunks": str(layout.o_chunks), "s_chunks": str(layout.scratch[gpu])})
        positions = {k: _positions(steps[k]) for k in keys}
        for key in keys:
            _, peer, direction, _ = key
            peer_id = str(layout.index[peer]) if peer >= 0 else "-1"
            t = ET.SubElement(g, "tb", {"id": str(ids[key]), "send": peer_id if direction == "send" else "-1",
                                        "recv": peer_id if direction == "recv" else "-1", "chan": str(chan[key])})
            for s_index, (kind, st, dep) in enumerate(_with_nops(steps[key])):
                ET.SubElement(t, "step", {
                    "s": str(s_index), "type": kind,
                    "srcbuf": st.srcbuf if st else "i", "srcoff": str(st.srcoff) if st else "-1",
                    "dstbuf": st.dstbuf if st else "o", "dstoff": str(st.dstoff) if st else "-1",
                    "cnt": "1" if st else "0",
                    "depid": str(ids[dep[0]]) if dep else "-1",
                    "deps": str(positions[dep[0]][dep[1]]) if dep else "-1",
                    "hasdep": "1" if st and st.hasdep else "0",
                })
    ET.indent(algo)
    return ET.tostring(algo, encoding="unicode")


def _positions(steps: list[_Step]) -> list[int]:
    """The XML step index of each real step once nops are inserted before it."""
    pos, s = [], 0
    for st in steps:
        s += max(len(st.deps) - 1, 0)
        pos.append(s)
        s += 1
    return pos


def write_msccl_xml(timeline: Timeline, path: str | Path) -> None:
    Path(path).write_text(msccl_xml(timeline))
