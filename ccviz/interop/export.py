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
runtime's limits. ``ccviz.interop.msccl`` executes the result independently.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

from ccviz.errors import CcvizError
from ccviz.judge.simulate import Timeline
from ccviz.model.collectives import Collective, with_article
from ccviz.model.schedule import Schedule


def exported_schedule(timeline: Timeline) -> Schedule:
    """The judged schedule as a file carries it. On a fabric with a hardware link model the judge timed it on
    the model's effective fabric; the file keeps the fabric as declared (the model's parameters in its
    ``meta.link_model``, so the per-operation latency and the protocol's rates come back on import) with the
    judge's times, marked ``planned_on='hardware'`` so that the judge keeps those times instead of retiming."""
    schedule = timeline.schedule
    if timeline.declared_topology is None:
        return schedule
    return replace(schedule, topology=timeline.declared_topology,
                               options={**schedule.options, "planned_on": "hardware"})


def schedule_dict(timeline: Timeline) -> dict[str, Any]:
    """The schedule with simulator times filled in, plus the simulator's verdict."""
    data = exported_schedule(timeline).to_dict()
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
    first: int = -1  # the transfer the hop starts with (a switch path's first transfer)
    last: int = -1  # the transfer that delivers it
    path: tuple[int, ...] = ()  # every transfer along the way, first to last (one when GPU to GPU)


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
    feeds: dict[tuple[int, int], list[list]] = defaultdict(list)  # [arrival, origin, origin start, uses, first, path]
    hops: list[GpuHop] = []
    for i in order:
        t = transfers[i]
        src, begin, first, path = t.src, float(start[i]), i, (i,)
        if topo.is_switch(t.src):
            feed = _feed(feeds[(t.src, t.chunk)], begin, topo.nodes[t.src].copy)
            if feed is None:
                continue  # the simulator already calls this transfer invalid
            feed[3] += 1
            src, begin, first, path = feed[1], feed[2], feed[4], feed[5] + (i,)
        if topo.is_switch(t.dst):
            feeds[(t.dst, t.chunk)].append([float(arrival[i]), src, begin, 0, first, path])
        else:
            hops.append(GpuHop(t.chunk, src, t.dst, begin, float(arrival[i]), t.op, first, i, path))
    hops.sort(key=lambda h: h.start_s)
    copies = [(sw, chunk, f[3]) for (sw, chunk), fs in sorted(feeds.items()) for f in fs if f[3] > 1]
    return hops, copies


def _feed(feeds: list[list], time_s: float, copies: bool) -> list | None:
    """The arrival at a switch that a departure at ``time_s`` forwards: the latest not yet forwarded."""
    ready = [f for f in feeds if f[0] <= time_s * (1 + 1e-9) + 1e-15] or feeds
    if not ready:
        return None
    if copies:  # a copy only where no arrival is left unforwarded (two unicasts through it are not a copy)
        return max([f for f in ready if f[3] == 0] or ready, key=lambda f: f[0])
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
            raise CcvizError(f"msccl: MSCCL has no collective for {with_article(repr(coll.name))} demand; export a standard "
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
    deps: dict  # thread block (key, later block index) -> step index it waits for
    hasdep: bool = False
    order: int = 0  # position in simulated-time order (a merged block keeps it)
    after_write: tuple | None = None  # for a send: the (thread block, step) whose write it reads


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
    carries = _relayed(timeline, hops)
    # a relayed partial sum waits in a scratch slot of its own on the relaying GPU (never in the slot of that
    # GPU's own partial sum of the chunk), and the hop that carries it on sends from there
    parked: dict[int, tuple[str, int]] = {}
    for i, h in enumerate(hops):
        if h.op == "relay":
            parked[i] = ("s", layout.scratch[h.dst])
            layout.scratch[h.dst] += 1
    eps = 1e-9
    events = [(0.0, -1, i) for i in range(len(layout.local_copies))]
    events += [(max(h.start_s * (1 + eps) + 1e-13, recv_time[carries[i]] if i in carries else 0.0), 1, i)
               for i, h in enumerate(hops)]
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

    for order, (_, kind, i) in enumerate(events):
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
            buf, off = parked[carries[i]] if i in carries else layout.where(h.src, h.chunk)
            source = last_write.get((h.src, buf, off))
            access(tb, idx, (h.src, buf, off), False, deps)
            segment = seq[i] // per_tb
            if segment and seq[i] % per_tb == 0:
                # A link's later segment runs on another channel: without this the runtime (and ccviz's
                # import) interleaves it with the earlier one, reordering the link and losing the time
                # (forestcoll's pieces came back 1.07-1.47 x slower). Its first send waits for the last
                # send of the previous segment, as in the simulated schedule.
                prev = (h.src, h.dst, "send", segment - 1)
                last = len(steps[prev]) - 1
                if last >= 0 and known[tb].get(prev, -1) < last and deps.get(prev, -1) < last:
                    deps[prev] = last
            dbuf, doff = parked[i] if i in parked else layout.where(h.dst, h.chunk)
            step = _Step("s", buf, off, dbuf, doff, deps, after_write=source)
        else:
            h = hops[i]
            tb = (h.dst, h.src, "recv", seq[i] // per_tb)
            idx = len(steps[tb])
            buf, off = parked[i] if i in parked else layout.where(h.dst, h.chunk)
            combine = h.op == "reduce" and (h.dst, h.chunk) in held
            if combine:
                access(tb, idx, (h.dst, buf, off), False, deps)
            access(tb, idx, (h.dst, buf, off), True, deps)
            if i not in parked:  # a parked value is in transit: the GPU's own holding is unchanged
                held.add((h.dst, h.chunk))
            step = _Step("rrc" if combine else "r", buf, off, buf, off, deps)
        for other, j in deps.items():
            known[tb][other] = max(known[tb].get(other, -1), j)
        step.order = order
        steps[tb].append(step)
    return steps


def _relayed(timeline: Timeline, hops: list[GpuHop]) -> dict[int, int]:
    """Hop index -> index of the relay hop whose value it carries on (``op="relay"``, the simulator's rule)."""
    from ccviz.judge.simulate import relay_continuations

    continuations = relay_continuations(timeline.schedule.transfers)
    delivered_by = {h.last: k for k, h in enumerate(hops)}
    carries = {}
    for k, h in enumerate(hops):
        relay = continuations.get(h.first)
        if relay is None:
            continue
        if relay not in delivered_by:  # a relay parked in a switch: MSCCL has no switch buffers
            raise CcvizError("msccl: this schedule relays a partial sum through a switch, which MSCCL cannot "
                             "express (it has no switch buffers); export the JSON schedule instead", "msccl")
        carries[k] = delivered_by[relay]
    return carries


@dataclass
class _Block:
    """One thread block: the connection segments it receives and sends on, and its steps."""

    gpu: int
    recv: tuple[int, int, int] | None  # (src, dst, segment)
    send: tuple[int, int, int] | None
    steps: list[_Step]


def _blocks(steps: dict[tuple, list[_Step]], fuse: bool) -> list[_Block]:
    """Thread blocks from per-connection step lists; with ``fuse``, a GPU's receiving block and the sending
    block that forwards what it receives become one, and each receive followed by the send of what it
    wrote becomes one step (r+s -> rcs, rrc+s -> rrcs), as msccl-tools writes rings."""
    def conn(key: tuple) -> tuple[int, int, int]:
        gpu, peer, direction, seg = key
        return (peer, gpu, seg) if direction == "recv" else (gpu, peer, seg)

    groups: list[list[tuple]] = []
    paired: set[tuple] = set()
    if fuse:
        score: dict[tuple[tuple, tuple], int] = defaultdict(int)
        for key, lst in steps.items():
            if key[2] == "send":
                for st in lst:
                    if st.after_write and st.after_write[0][2] == "recv":
                        other, j = st.after_write
                        if _forwards(steps[other][j], st):
                            score[(other, key)] += 1
        for (r, snd), _ in sorted(score.items(), key=lambda kv: (-kv[1], kv[0])):
            if r not in paired and snd not in paired and _chain_like(_merged([r, snd], steps)[0]):
                paired |= {r, snd}
                groups.append([r, snd])
    groups += [[k] for k in sorted(steps) if k not in paired]
    blocks: list[_Block] = []
    where: dict[tuple[tuple, int], tuple[int, int]] = {}  # (old key, index) -> (block, position)
    for keys in groups:
        out, local = _merged(keys, steps)
        where.update({old: (len(blocks), pos) for old, pos in local.items()})
        recv = next((conn(k) for k in keys if k[2] == "recv"), None)
        send = next((conn(k) for k in keys if k[2] == "send"), None)
        blocks.append(_Block(keys[0][0], recv, send, out))
    for b, block in enumerate(blocks):  # dependencies now name blocks; program order covers its own block
        for st in block.steps:
            deps: dict[int, int] = {}
            for old in st.deps.items():
                tb, pos = where[old]
                if tb != b:
                    deps[tb] = max(deps.get(tb, -1), pos)
            st.deps = deps
    for block in blocks:
        for st in block.steps:
            for tb, pos in st.deps.items():
                blocks[tb].steps[pos].hasdep = True
    return blocks


def _merged(keys: list[tuple], steps: dict[tuple, list[_Step]]) -> tuple[list[_Step], dict[tuple[tuple, int], int]]:
    """The steps of one or two connection blocks in time order, a receive and the send of what it wrote
    fused into one step; plus where each old step went."""
    merged = sorted(((st.order, k, i, st) for k in keys for i, st in enumerate(steps[k])), key=lambda x: x[0])
    out: list[_Step] = []
    local: dict[tuple[tuple, int], int] = {}
    n = 0
    while n < len(merged):
        _, k, i, st = merged[n]
        if n + 1 < len(merged):
            _, k2, i2, nxt = merged[n + 1]
            if k2 != k and nxt.after_write == (k, i) and _forwards(st, nxt):
                deps = dict(st.deps)
                for other, j in nxt.deps.items():
                    deps[other] = max(deps.get(other, -1), j)
                local[(k, i)] = local[(k2, i2)] = len(out)
                out.append(_Step("rcs" if st.type == "r" else "rrcs", st.srcbuf, st.srcoff, st.dstbuf, st.dstoff,
                                 deps, order=st.order))
                n += 2
                continue
        local[(k, i)] = len(out)
        out.append(_Step(st.type, st.srcbuf, st.srcoff, st.dstbuf, st.dstoff, dict(st.deps), order=st.order))
        n += 1
    return out, local


def _chain_like(steps: list[_Step]) -> bool:
    """Fuse two blocks only into a ring-like chain: one own send first, then every send forwards a receive.

    A plain send after that would wait in the same thread block behind receives that, in the simulated
    schedule, ran beside it: with the connection's small FIFO that can deadlock, and it slows the schedule.
    """
    plain = [n for n, st in enumerate(steps) if st.type == "s"]
    return plain in ([], [0])


def _forwards(recv: _Step, send: _Step) -> bool:
    """A send of exactly what a receive wrote (fusable into rcs/rrcs)."""
    return (recv.type in ("r", "rrc") and send.type == "s"
            and (send.srcbuf, send.srcoff) == (recv.dstbuf, recv.dstoff))


def _assign_channels(blocks: list[_Block]) -> list[int] | None:
    """A channel per block: a fused block's two connections share it; <= 32 sending and <= 32 receiving
    thread blocks per GPU per channel; a connection segment once per channel. None if fusion made that
    impossible (a chain of fused blocks using one connection twice)."""
    parent: dict[tuple, tuple] = {}

    def find(x: tuple) -> tuple:
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x

    for block in blocks:
        for c in (block.recv, block.send):
            if c is not None:
                find(c)
        if block.recv is not None and block.send is not None:
            parent[find(block.recv)] = find(block.send)
    members: dict[tuple, list[tuple]] = defaultdict(list)
    for c in parent:
        members[find(c)].append(c)
    sends: dict[tuple[int, int], int] = defaultdict(int)
    recvs: dict[tuple[int, int], int] = defaultdict(int)
    used: set[tuple[int, int, int]] = set()
    chan_of: dict[tuple, int] = {}
    for root in sorted(members):
        conns = sorted(members[root])
        pairs = [(a, b) for a, b, _ in conns]
        if len(set(pairs)) < len(pairs):
            return None
        out_n = Counter(a for a, _ in pairs)
        in_n = Counter(b for _, b in pairs)
        c = 0
        while any((a, b, c) in used for a, b in pairs) or any(sends[(a, c)] + k > MAX_TBS_PER_CHANNEL
                                                             for a, k in out_n.items()) or \
                any(recvs[(b, c)] + k > MAX_TBS_PER_CHANNEL for b, k in in_n.items()):
            c += 1
        for a, b, seg in conns:
            used.add((a, b, c))
            sends[(a, c)] += 1
            recvs[(b, c)] += 1
            chan_of[(a, b, seg)] = c
    return [chan_of[block.recv or block.send] if (block.recv or block.send) else 0 for block in blocks]


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
    summed = next((t for t in timeline.schedule.transfers if t.op == "combine"), None)
    if summed is not None:
        raise CcvizError(f"msccl: this schedule adds chunk {summed.chunk} inside switch {summed.dst} (in-network "
                         "reduction, op 'combine'); MSCCL has no switch nodes, so it cannot be written as MSCCL XML; "
                         "export the JSON schedule instead", "msccl")
    hops, copies = _collapse(timeline)
    members = set(coll.ranks)
    relay = next((h for h in hops if h.src not in members or h.dst not in members), None)
    if relay is not None:
        outside = relay.src if relay.src not in members else relay.dst
        raise CcvizError(f"msccl: this process group's schedule relays chunk {relay.chunk} through GPU {outside}, "
                         f"which is not one of its {coll.n_ranks} ranks; an MSCCL program runs on its group's GPUs "
                         "only, so it cannot be written as MSCCL XML (export the JSON schedule, or choose a group "
                         "whose members connect directly)", "msccl")
    if copies:
        switch, chunk, n = copies[0]
        raise CcvizError(
            f"msccl: switch {switch} copies chunk {chunk} to {n} GPUs from one arrival; MSCCL has no switch "
            "multicast, so this schedule cannot be written as MSCCL XML (synthesize on switches that cannot "
            "copy, e.g. star:copy=false)", "msccl")
    for fuse in (True, False):  # fusion first; plain blocks if fused chains cannot share channels
        per_tb = MAX_STEPS
        while True:
            layout = _Layout(coll)
            blocks = _blocks(_program_steps(timeline, hops, layout, per_tb), fuse)
            longest = max((len(_with_nops(b.steps)) for b in blocks), default=0)
            if longest <= MAX_STEPS:
                break
            if per_tb == 1:
                raise CcvizError(f"msccl: a thread block needs {longest} steps even with one message per channel; "
                                 f"the runtime accepts {MAX_STEPS}", "msccl")
            per_tb = max(1, per_tb * MAX_STEPS // longest - 1)
        chan = _assign_channels(blocks)
        if chan is not None:
            break
    nchannels = max(chan, default=0) + 1
    if nchannels > MAX_CHANNELS:
        raise CcvizError(f"msccl: this schedule needs {nchannels} channels to stay within the runtime's limits "
                         f"(32 thread blocks per channel, {MAX_STEPS} steps per thread block); MSCCL has "
                         f"{MAX_CHANNELS}: synthesize with fewer chunks per rank (--chunks, or forestcoll's "
                         "--opt pieces=1)", "msccl")
    out_of_place = coll.name in OUT_OF_PLACE
    algo = ET.Element("algo", {
        "name": name or f"ccviz_{timeline.schedule.algorithm}_{coll.name}_{timeline.topology.name}",
        "proto": "Simple", "nchannels": str(nchannels), "nchunksperloop": str(layout.nchunks),
        "ngpus": str(coll.n_ranks), "coll": coll.name, "inplace": "0" if out_of_place else "1",
        "outofplace": "1" if out_of_place else "0",
        # maxBytes=0 means "no limit" to current runtimes but "never chosen" to microsoft/msccl v0.x
        "minBytes": "0", "maxBytes": str(2**63 - 1),
    })
    positions = [_positions(b.steps) for b in blocks]
    for gpu in coll.ranks:
        mine = sorted((n for n, b in enumerate(blocks) if b.gpu == gpu),
                      key=lambda n: (chan[n], blocks[n].send or (-1,), blocks[n].recv or (-1,)))
        ids = {n: k for k, n in enumerate(mine)}
        g = ET.SubElement(algo, "gpu", {"id": str(layout.index[gpu]), "i_chunks": str(layout.i_chunks),
                                        "o_chunks": str(layout.o_chunks), "s_chunks": str(layout.scratch[gpu])})
        for n in mine:
            block = blocks[n]
            send = str(layout.index[block.send[1]]) if block.send else "-1"
            recv = str(layout.index[block.recv[0]]) if block.recv else "-1"
            t = ET.SubElement(g, "tb", {"id": str(ids[n]), "send": send, "recv": recv, "chan": str(chan[n])})
            for s_index, (kind, st, dep) in enumerate(_with_nops(block.steps)):
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
