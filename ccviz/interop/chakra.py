"""Chakra execution traces (MLCommons), the input of ASTRA-sim: a ccviz schedule out as one ``PREFIX.RANK.et``
per rank, and Chakra ETs (ccviz's own and other tools') back in as a schedule the simulator judges.

Export. ASTRA-sim's ranks are GPUs; its network carries a message between two ranks over whatever the
network configuration says, so a path through switches becomes one ``COMM_SEND_NODE`` on the sender and
one ``COMM_RECV_NODE`` on the receiver (attributes ``comm_src``, ``comm_dst``, ``comm_size`` in bytes and a
``comm_tag`` that pairs them). A send depends (``data_deps``) on the receive, or the sum, that brought its
chunk to the sender; a received contribution that is summed in is followed by a ``COMP_NODE`` (the sum)
whose duration is the fabric model's: ccviz charges a GPU nothing for adding a chunk, so 0 us. ASTRA-sim
cannot express a switch that sums (NVLS, SHARP): such schedules are refused. A switch that copies one
arrival to several ports becomes one send per receiver (ASTRA-sim has no multicast), and the export says
how many sends that added. Rank 0's GlobalMetadata carries the ccviz schedule (fabric, collective) and each
send the ccviz transfers it stands for, so that ``ccviz import`` rebuilds the schedule exactly.

On a fabric with a hardware link model (the system presets: ``ccviz.model.link_model``) the judge times the
schedule on the model's effective fabric and adds a fixed per-operation latency (kernel launch and the
algorithm's base latency) to the finish. The export carries the fabric as declared, the model's parameters
in every rank's GlobalMetadata (``ccviz_link_model``), and starts each rank with a ``COMP_NODE`` of that
latency, which the rank's first sends wait for (Chakra's ``duration_micros`` is whole microseconds; the
exact seconds are its ``ccviz_latency_s`` attribute). The import is exact; ASTRA-sim spends the latency
first, ccviz last, to the same total, and takes the link rates from its own network configuration (give it
the model's sustained rates).

Import of ETs written by other tools: sends and receives are paired by (src, dst, tag); a send that
depends on a receive forwards the chunk that receive brought, a send that depends on none sends the rank's
own data. That settles which chunk every message carries for AllGather, Broadcast, Gather, Scatter and
AllToAll; for reducing collectives a trace does not say which part of a rank's buffer a first message
carries, so those are read only from ccviz's own ETs.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

from ccviz.errors import CcvizError
from ccviz.interop.chakra_schema import (
    NODE_TYPES,
    attribute,
    attributes,
    decode_stream,
    encode_stream,
    messages,
)
from ccviz.judge.simulate import Timeline, on_declared_hardware
from ccviz.model import link_model
from ccviz.model.collectives import make_collective, normalize_name
from ccviz.model.schedule import Schedule, Transfer
from ccviz.model.topology import Topology

CHAKRA_VERSION = "0.0.4"  # the GlobalMetadata version string of Chakra's converters for this schema
SEND, RECV, COMP, COLL = (NODE_TYPES[k] for k in ("COMM_SEND_NODE", "COMM_RECV_NODE", "COMP_NODE", "COMM_COLL_NODE"))
FILE_NAME = re.compile(r"^(?P<prefix>.+)\.(?P<rank>\d+)\.et$")
MAX_RANKS = 4096
ONE_SOURCE = ("allgather", "broadcast", "gather", "scatter", "alltoall")  # collectives a foreign ET can state
GPU_SUM_US = 0  # the fabric model's time for a GPU to add a received chunk into its own (ccviz.model.physics)


# ------------------------------------------------------------------------------------------- export
def chakra_traces(timeline: Timeline) -> tuple[dict[int, bytes], list[str]]:
    """``{rank: file bytes}`` of the judged schedule, and notes on what was mapped."""
    from ccviz.interop.export import _collapse, exported_schedule

    schedule = timeline.schedule
    declared = exported_schedule(timeline)
    model = link_model.declared(declared.topology)
    latency_s = on_declared_hardware(declared)[1] if model is not None else 0.0
    shift = latency_s * 1e6  # every node after the operation's latency starts that much later
    topo = schedule.topology
    if schedule.sums_in_switches:
        raise CcvizError("chakra: this schedule sums chunks inside a switch (NVLS/SHARP), which a Chakra ET for "
                         "ASTRA-sim cannot express; synthesize one that sums at the GPUs (e.g. -a ring)", "chakra")
    hops, copies = _collapse(timeline)
    covered = {i for h in hops for i in h.path}
    stranded = [i for i in range(len(schedule.transfers)) if i not in covered]  # into a switch, forwarded by none
    rank_of = {g: r for r, g in enumerate(topo.gpus)}
    chunk_bytes = int(round(schedule.chunk_bytes))
    Node = messages()["Node"]
    events: dict[int, list[tuple[float, int, int, Any]]] = defaultdict(list)  # rank -> (time, kind, seq, node)
    deps: dict[int, list[Any]] = defaultdict(list)  # id(node) -> the nodes it depends on
    providers: dict[tuple[int, int], list[tuple[float, Any]]] = defaultdict(list)  # (gpu, chunk) -> (time, node)
    rows = _transfer_rows(timeline)
    by_arrival = sorted(range(len(hops)), key=lambda k: hops[k].arrival_s)
    for tag in by_arrival:
        h = hops[tag]
        dst, src = rank_of[h.dst], rank_of[h.src]
        recv = Node(name=f"recv chunk {h.chunk} from rank {src}", type=RECV,
                    start_time_micros=int(h.arrival_s * 1e6 + shift))
        recv.attr.extend(_comm_attrs(src, dst, chunk_bytes, tag))
        events[dst].append((h.arrival_s, 0, tag, recv))
        last = recv
        if h.op == "reduce":
            comp = Node(name=f"sum chunk {h.chunk}", type=COMP, start_time_micros=int(h.arrival_s * 1e6 + shift),
                        duration_micros=GPU_SUM_US)
            comp.attr.extend([attribute("is_cpu_op", False), attribute("num_ops", max(chunk_bytes // 4, 1)),
                              attribute("tensor_size", chunk_bytes, "uint64_val")])
            deps[id(comp)] = [recv] + [p[1] for p in providers[(h.dst, h.chunk)][-1:]]  # and the partial sum so far
            events[dst].append((h.arrival_s, 1, tag, comp))
            last = comp
        providers[(h.dst, h.chunk)].append((h.arrival_s, last))
    latency_nodes = _latency_nodes(declared, model, latency_s, events) if latency_s else {}
    for tag, h in enumerate(hops):
        src, dst = rank_of[h.src], rank_of[h.dst]
        send = Node(name=f"send chunk {h.chunk} to rank {dst}", type=SEND,
                    start_time_micros=int(h.start_s * 1e6 + shift))
        send.attr.extend(_comm_attrs(src, dst, chunk_bytes, tag))
        send.attr.extend([attribute("ccviz_chunk", h.chunk), attribute("ccviz_op", h.op),
                          attribute("ccviz_transfers", json.dumps([rows[i] for i in h.path]))])
        before = [p for p in providers[(h.src, h.chunk)] if p[0] <= h.start_s * (1 + 1e-12) + 1e-15]
        deps[id(send)] = [before[-1][1]] if before else [latency_nodes[src]] if latency_nodes else []
        events[src].append((h.start_s, 2, tag, send))
    files = {}
    meta = declared.to_dict()
    meta["transfers"] = []
    meta["n_transfers"] = len(schedule.transfers)
    meta["stranded_transfers"] = [rows[i] for i in stranded]
    for gpu, rank in rank_of.items():
        nodes = [e[3] for e in sorted(events[rank], key=lambda e: e[:3])]
        ids = {id(node): i for i, node in enumerate(nodes)}
        for i, node in enumerate(nodes):
            node.id = i
            node.data_deps.extend(ids[id(d)] for d in deps.get(id(node), []))
        header = messages()["GlobalMetadata"](version=CHAKRA_VERSION)
        header.attr.extend([attribute("ccviz_rank", rank), attribute("ccviz_gpu", gpu),
                            attribute("ccviz_ranks", len(rank_of))])
        if model is not None:
            header.attr.append(attribute("ccviz_link_model", json.dumps(model.to_dict())))
        if rank == 0:
            header.attr.append(attribute("ccviz_schedule", json.dumps(meta)))
        files[rank] = encode_stream([header, *nodes])
    sums = sum(h.op == "reduce" for h in hops)
    notes = [f"{len(hops)} messages over {len(rank_of)} ranks"
             + (f"; its {sums} sums at GPUs are COMP_NODEs of {GPU_SUM_US} us (the fabric model charges a GPU's "
                "sum nothing)" if sums else "")]
    if latency_s:
        notes.append(f"{model.name} link model: each rank starts with a COMP_NODE of the operation's fixed latency "
                     f"(launch and base, {latency_s * 1e6:.6g} us; Chakra's duration_micros is whole us: "
                     f"{round(latency_s * 1e6)}; the exact value is its ccviz_latency_s attribute); the messages' "
                     "sizes are the protocol's payload, the link rates ASTRA-sim's network configuration must give "
                     "are the model's sustained ones (GlobalMetadata ccviz_link_model)")
    if stranded:
        notes.append(f"{len(stranded)} transfer(s) into a switch that no GPU receives (a copying switch forwards "
                     "another arrival of the same chunk) have no ASTRA-sim message; they are kept for ccviz's import")
    extra = sum(c - 1 for _, _, c in copies)
    if extra:
        notes.append(f"switch copies mapped to one send per receiver (ASTRA-sim has no multicast): {extra} extra "
                     f"send(s) from {len({sw for sw, _, _ in copies})} copying switch(es)")
    return files, notes


def _latency_nodes(schedule: Schedule, model: link_model.LinkModel, latency_s: float, events: dict) -> dict[int, Any]:
    """Per rank, the COMP_NODE of the hardware model's fixed per-operation latency (kernel launch and the
    algorithm's base latency, ``ccviz.model.link_model``), which every send of the rank's own data waits for:
    ccviz adds it to the finish, ASTRA-sim then spends it before the first message, to the same total."""
    algorithm = str((schedule.options or {}).get("nccl_algo") or "ring")
    protocol = link_model.protocol_of(schedule)
    out = {}
    for rank in range(schedule.topology.n_gpus):
        node = messages()["Node"](name="operation latency (launch + base)", type=COMP, start_time_micros=0,
                                  duration_micros=round(latency_s * 1e6))
        node.attr.extend([attribute("is_cpu_op", False), attribute("ccviz_latency_s", float(latency_s)),
                          attribute("ccviz_launch_us", float(model.launch_us)),
                          attribute("ccviz_base_us", float(model.operation_latency_s(algorithm, protocol) * 1e6
                                                           - model.launch_us)),
                          attribute("ccviz_algorithm", algorithm), attribute("ccviz_protocol", protocol)])
        events[rank].append((-1.0, -1, -1, node))
        out[rank] = node
    return out


def _comm_attrs(src: int, dst: int, size: int, tag: int) -> list:
    return [attribute("is_cpu_op", False), attribute("comm_src", src, "int32_val"),
            attribute("comm_dst", dst, "int32_val"), attribute("comm_size", size),
            attribute("comm_tag", tag, "int32_val")]


def _transfer_rows(timeline: Timeline) -> list[list]:
    """Every judged transfer as ``[index, chunk, src, dst, start_s, end_s, op, step]`` (exact floats)."""
    out = []
    for i, t in enumerate(timeline.schedule.transfers):
        out.append([i, t.chunk, t.src, t.dst, t.start_s, t.end_s, t.op, t.step])
    return out


def write_chakra(timeline: Timeline, out_dir: str | Path, prefix: str = "ccviz") -> tuple[list[Path], list[str]]:
    """Write ``out_dir/PREFIX.RANK.et`` for every rank; returns the paths and the notes."""
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", prefix):
        raise CcvizError(f"prefix: {prefix!r} is not a file-name prefix (letters, digits, _ . -)", "prefix")
    files, notes = chakra_traces(timeline)
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise CcvizError(f"out: {out} is a file; --format chakra writes a directory of .et files", "out")
    out.mkdir(parents=True, exist_ok=True)
    stale = [p.name for p in out.glob(f"{prefix}.*.et")]
    if stale:
        for name in stale:
            (out / name).unlink()
    paths = []
    for rank, data in sorted(files.items()):
        path = out / f"{prefix}.{rank}.et"
        path.write_bytes(data)
        paths.append(path)
    return paths, notes


# ------------------------------------------------------------------------------------------- import
def find_traces(path: str | Path) -> tuple[str, list[Path]]:
    """The prefix and the rank files (rank order) of a directory of ETs, one ``.et`` file, or a prefix path."""
    p = Path(path)
    if p.is_dir():
        folder, wanted = p, None
    elif FILE_NAME.match(p.name) and p.is_file():
        folder, wanted = p.parent, FILE_NAME.match(p.name).group("prefix")
    else:
        folder, wanted = p.parent, p.name  # DIR/PREFIX, as ASTRA-sim's --workload-configuration takes it
    found: dict[str, dict[int, Path]] = defaultdict(dict)
    for f in folder.glob("*.et"):
        m = FILE_NAME.match(f.name)
        if m:
            found[m.group("prefix")][int(m.group("rank"))] = f
    if wanted is not None:
        found = {k: v for k, v in found.items() if k == wanted}
    if not found:
        raise CcvizError(f"chakra: the directory {folder} holds no Chakra traces (PREFIX.RANK.et files"
                         + (f" with prefix {wanted!r}" if wanted else "") + "); give a directory of them, or an "
                         "MSCCL XML / TE-CCL JSON file", "chakra")
    return _one_trace(found, str(folder), "give DIR/PREFIX")


def _one_trace(found: dict[str, dict[int, Any]], where: str, how: str) -> tuple[str, list]:
    """The one prefix among ``found`` ({prefix: {rank: file}}) and its files in rank order 0..N-1, checked."""
    if len(found) > 1:
        raise CcvizError(f"chakra: {where} holds traces of several prefixes ({', '.join(sorted(found))}); {how}",
                         "chakra")
    prefix, ranks = next(iter(found.items()))
    missing = sorted(set(range(max(ranks) + 1)) - set(ranks))
    if missing:
        raise CcvizError(f"chakra: rank file(s) {', '.join(f'{prefix}.{r}.et' for r in missing[:5])} missing; a trace "
                         "needs one file per rank 0..N-1", "chakra")
    if len(ranks) > MAX_RANKS:
        raise CcvizError(f"chakra: {len(ranks)} ranks; ccviz reads traces of up to {MAX_RANKS}", "chakra")
    return prefix, [ranks[r] for r in range(len(ranks))]


def import_chakra(path: str | Path, topology: Topology | str | None = None, size_bytes: float | None = None,
                  collective: str | None = None) -> Schedule:
    """Read a Chakra ET (a directory, one of its files, or DIR/PREFIX) as a schedule."""
    from ccviz.model.files import check_readable_file

    _, files = find_traces(path)
    blobs = []
    for f in files:
        check_readable_file(f, "chakra")
        blobs.append((f.name, f.read_bytes()))
    return _import_blobs(blobs, topology, size_bytes, collective)


MAX_ZIP_BYTES = 500_000_000  # unpacked: a zip of traces larger than this is not one a person meant to import


def import_chakra_zip(data: bytes, name: str, topology: Topology | str | None = None, size_bytes: float | None = None,
                      collective: str | None = None) -> Schedule:
    """Read a zip of one trace's ``PREFIX.RANK.et`` files (in any folder of it), as the app's download holds them."""
    import io
    import zipfile

    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        members = [m for m in archive.infolist() if not m.is_dir()]
    except (zipfile.BadZipFile, OSError) as exc:
        raise CcvizError(f"chakra: {name} is not a zip file ({exc})", "chakra") from None
    found: dict[str, dict[int, Any]] = defaultdict(dict)
    for member in members:
        m = FILE_NAME.match(member.filename.rsplit("/", 1)[-1])
        if m:
            found[m.group("prefix")][int(m.group("rank"))] = member
    if not found:
        raise CcvizError(f"chakra: {name} holds no Chakra traces (PREFIX.RANK.et files)", "chakra")
    _, chosen = _one_trace(found, name, "zip one trace")
    if sum(m.file_size for m in chosen) > MAX_ZIP_BYTES:
        raise CcvizError(f"chakra: {name} unpacks to more than {MAX_ZIP_BYTES / 1e6:.0f} MB of traces", "chakra")
    try:
        blobs = [(m.filename.rsplit("/", 1)[-1], archive.read(m)) for m in chosen]
    except (zipfile.BadZipFile, OSError, RuntimeError) as exc:  # a damaged member, an encrypted one
        raise CcvizError(f"chakra: {name}: a member cannot be read ({exc})", "chakra") from None
    return _import_blobs(blobs, topology, size_bytes, collective)


def _import_blobs(blobs: list[tuple[str, bytes]], topology: Topology | str | None, size_bytes: float | None,
                  collective: str | None) -> Schedule:
    """The schedule of one trace's rank files, given as (file name, bytes) in rank order."""
    traces = [decode_stream(data, file_name) for file_name, data in blobs]
    names = [file_name for file_name, _ in blobs]
    written_for = attributes(traces[0][0]).get("ccviz_ranks")
    if written_for is not None and written_for != len(blobs):
        raise CcvizError(f"chakra: the trace was written for {written_for} ranks but {len(blobs)} rank files are here "
                         f"({names[0]} ... {names[-1]})", "chakra")
    messages_ = _pair_messages(traces, names)
    own = attributes(traces[0][0]).get("ccviz_schedule")
    if own is not None and topology is None and collective is None and size_bytes is None:
        return _own_schedule(own, traces, names[0])
    return _foreign_schedule(traces, messages_, topology, size_bytes, collective)


def _pair_messages(traces: list, names: list[str]) -> list[dict]:
    """Every (send, recv) pair of the trace, checked: each send has one receive with the same src/dst/tag."""
    sends, recvs = {}, {}
    for rank, (_, nodes) in enumerate(traces):
        ids = set()
        for node in nodes:
            if node.id in ids:
                raise CcvizError(f"chakra: {names[rank]}: node id {node.id} appears twice", "chakra")
            ids.add(node.id)
            if node.type == COLL:
                raise CcvizError(f"chakra: {names[rank]}: node {node.id} is a COMM_COLL_NODE (ASTRA-sim runs its own "
                                 "algorithm for it); ccviz reads traces of point-to-point sends and receives",
                                 "chakra")
            if node.type not in (SEND, RECV):
                continue
            a = attributes(node)
            for key in ("comm_src", "comm_dst", "comm_size"):
                if key not in a:
                    raise CcvizError(f"chakra: {names[rank]}: node {node.id} ({node.name or 'unnamed'}) has no "
                                     f"{key} attribute", "chakra")
            src, dst, tag = int(a["comm_src"]), int(a["comm_dst"]), int(a.get("comm_tag", 0))
            if not (0 <= src < len(traces) and 0 <= dst < len(traces)) or src == dst:
                raise CcvizError(f"chakra: {names[rank]}: node {node.id} sends {src} -> {dst}, but the trace has files for "
                                 f"ranks 0..{len(traces) - 1} (a rank file missing?)", "chakra")
            if (src if node.type == SEND else dst) != rank:
                raise CcvizError(f"chakra: {names[rank]}: node {node.id} is a {'send' if node.type == SEND else 'recv'} "
                                 f"of rank {src if node.type == SEND else dst} in rank {rank}'s file", "chakra")
            book = sends if node.type == SEND else recvs
            key = (src, dst, tag)
            book.setdefault(key, []).append((rank, node, int(a["comm_size"])))
    out = []
    for key, ss in sends.items():
        rs = recvs.get(key, [])
        if len(rs) != len(ss):
            raise CcvizError(f"chakra: rank {key[0]} sends {len(ss)} message(s) to rank {key[1]} with tag {key[2]} but "
                             f"rank {key[1]} receives {len(rs)}; every send needs its receive", "chakra")
        for (_, send, size), (_, recv, rsize) in zip(ss, rs, strict=True):
            if size != rsize:
                raise CcvizError(f"chakra: rank {key[0]} -> {key[1]} tag {key[2]}: send of {size} B, receive of {rsize} B",
                                 "chakra")
            out.append({"src": key[0], "dst": key[1], "tag": key[2], "size": size, "send": send, "recv": recv})
    unmatched = sum(len(v) for k, v in recvs.items() if k not in sends)
    if unmatched:
        k = next(k for k in recvs if k not in sends)
        raise CcvizError(f"chakra: rank {k[1]} waits for {unmatched} message(s) nobody sends (first: from rank {k[0]} "
                         f"tag {k[2]})", "chakra")
    return out


def _own_schedule(text: str, traces: list, name: str) -> Schedule:
    """ccviz's own ET: the schedule in rank 0's metadata, its transfers in the sends' attributes."""
    try:
        d = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CcvizError(f"chakra: {name}: its ccviz_schedule attribute is not JSON ({exc.msg})", "chakra") from None
    if not isinstance(d, dict):
        raise CcvizError(f"chakra: {name}: its ccviz_schedule attribute is not a schedule object", "chakra")
    rows: dict[int, list] = {int(row[0]): row[1:] for row in d.pop("stranded_transfers", [])}
    for _, nodes in traces:
        for node in nodes:
            if node.type == SEND:
                for row in json.loads(attributes(node).get("ccviz_transfers", "[]")):
                    rows[int(row[0])] = row[1:]
    n = d.get("n_transfers")
    if not isinstance(n, int) or sorted(rows) != list(range(n)):
        raise CcvizError(f"chakra: the sends carry {len(rows)} of the schedule's {n} transfers; the trace was edited "
                         "or cut (import it with --topology/--collective/--size to read it as a foreign trace)",
                         "chakra")
    d["transfers"] = [rows[i] for i in range(n)]
    schedule = Schedule.from_dict(d)
    schedule.options = {**schedule.options, "format": "chakra"}
    return schedule


def _foreign_schedule(traces: list, pairs: list[dict], topology: Topology | str | None, size_bytes: float | None,
                      collective: str | None) -> Schedule:
    """A trace another tool wrote: which chunk each message carries, read off its dependencies."""
    from ccviz.builders import fully_connected
    from ccviz.builders.loading import load_topology

    n = len(traces)
    notes = []
    if topology is None:
        topo = fully_connected(n=n)
        notes.append(f"no topology given: the trace runs on a fully connected fabric of its {n} GPUs")
    else:
        topo = load_topology(topology)
        if topo.n_gpus != n:
            raise CcvizError(f"topology: {topo.name} has {topo.n_gpus} GPUs, the trace {n} ranks", "topology")
    if collective is None:
        raise CcvizError("collective: a Chakra ET does not say which collective its messages compute; pass "
                         f"--collective ({', '.join(ONE_SOURCE)})", "collective")
    name = normalize_name(collective)
    if name not in ONE_SOURCE:
        raise CcvizError(f"collective: a trace from another tool is read for {', '.join(ONE_SOURCE)}; for {name} it "
                         "does not say which part of a rank's buffer its first messages carry", "collective")
    if not pairs:
        raise CcvizError("chakra: the trace has no send/receive pairs", "chakra")
    sizes = {p["size"] for p in pairs}
    if len(sizes) != 1:
        raise CcvizError(f"chakra: messages of {len(sizes)} different sizes ({', '.join(map(str, sorted(sizes)[:4]))} B)"
                         "; ccviz reads traces whose messages each carry one chunk", "chakra")
    message = sizes.pop()
    gpus = topo.gpus
    coll = _collective_for(name, gpus, message, size_bytes)
    by_node = {(p["dst"], p["recv"].id): p for p in pairs}
    nodes_of = [{node.id: node for node in nodes} for _, nodes in traces]
    own = _own_chunks(coll, gpus)
    chunk_of: dict[int, int] = {}
    depth: dict[int, int] = {}
    order = sorted(range(len(pairs)), key=lambda k: pairs[k]["send"].start_time_micros)
    pending = list(order)
    index = {id(p["send"]): k for k, p in enumerate(pairs)}
    for _ in range(len(pairs) + 1):
        if not pending:
            break
        left = []
        for k in pending:
            p = pairs[k]
            source = _feeding_recv(p["send"], nodes_of[p["src"]], by_node, p["src"])
            if source is None:
                chunk = own.get((p["src"], p["dst"])) or own.get((p["src"], None))
                if chunk is None:
                    raise CcvizError(f"chakra: rank {p['src']} sends to rank {p['dst']} (tag {p['tag']}) before it "
                                     f"received anything, but holds no {name} data of its own for it", "chakra")
                chunk_of[k], depth[k] = chunk, 0
            else:
                feeder = index[id(source["send"])]
                if feeder not in chunk_of:
                    left.append(k)
                    continue
                chunk_of[k], depth[k] = chunk_of[feeder], depth[feeder] + 1
        if len(left) == len(pending):
            raise CcvizError("chakra: the trace's dependencies form a cycle; ASTRA-sim would hang on it", "chakra")
        pending = left
    for p in pairs:
        if (gpus[p["src"]], gpus[p["dst"]]) not in topo.links:
            raise CcvizError(f"chakra: rank {p['src']} sends to rank {p['dst']} but {topo.name} has no link GPU "
                             f"{gpus[p['src']]} -> GPU {gpus[p['dst']]}; give the fabric the trace was written for",
                             "topology")
    transfers = [Transfer(chunk_of[k], gpus[p["src"]], gpus[p["dst"]], step=float(depth[k]))
                 for k, p in enumerate(pairs)]
    notes.append(f"{len(pairs)} messages read from a Chakra ET written by another tool; chunks follow its "
                 "dependencies, times are ccviz's (as soon as possible in dependency order)")
    return Schedule(topo, coll, transfers, "chakra", {"format": "chakra"}, notes=notes)


def _collective_for(name: str, gpus: list[int], message: int, size_bytes: float | None):
    """The collective whose chunk is one message: the given size, or the one that makes it so."""
    candidates = [size_bytes] if size_bytes else [message * len(gpus), message]
    for size in candidates:
        coll = make_collective(name, gpus, float(size))
        if abs(coll.chunk_bytes - message) <= 1e-9 * message:
            return coll
    raise CcvizError(f"size: the trace's messages carry {message} B, not one chunk of a {name} of "
                     f"{candidates[0]:.0f} B; pass the --size whose chunk is one message", "size")


def _own_chunks(coll, gpus: list[int]) -> dict[tuple[int, int | None], int]:
    """``(rank, destination rank or None) -> chunk`` for data a rank holds before anything arrives."""
    rank_of = {g: r for r, g in enumerate(gpus)}
    out: dict[tuple[int, int | None], int] = {}
    for chunk in coll.chunks:
        for holder in chunk.pre:
            posts = [rank_of[p] for p in chunk.post if p != holder]
            if len(posts) == 1:
                out.setdefault((rank_of[holder], posts[0]), chunk.id)
            out.setdefault((rank_of[holder], None), chunk.id)
    return out


def _feeding_recv(send, nodes: dict[int, Any], by_node: dict, rank: int) -> dict | None:
    """The receive a send depends on (through its rank's dependency chain), as its message pair."""
    seen, stack = set(), list(send.data_deps) + list(send.ctrl_deps)
    while stack:
        node_id = stack.pop()
        if node_id in seen:
            continue
        seen.add(node_id)
        node = nodes.get(node_id)
        if node is None:
            raise CcvizError(f"chakra: rank {rank}: node {send.id} depends on node {node_id}, which the file lacks",
                             "chakra")
        if node.type == RECV:
            return by_node[(rank, node.id)]
        stack.extend(list(node.data_deps) + list(node.ctrl_deps))
    return None


def is_chakra_path(path: str | Path) -> bool:
    """A directory, a ``PREFIX.RANK.et`` file, or ``DIR/PREFIX`` of such files: what ``ccviz import`` reads as
    Chakra."""
    p = Path(path)
    if p.is_dir() or p.suffix == ".et":
        return True
    return not p.exists() and p.parent.is_dir() and any(p.parent.glob(f"{p.name}.*.et"))


def trace_prefix(schedule_path: str | Path) -> str:
    """The file-name prefix of a schedule's traces: its file name without extension, made file-name safe."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", Path(schedule_path).stem) or "ccviz"


def chakra_zip(timeline: Timeline, prefix: str = "ccviz") -> tuple[bytes, list[str]]:
    """The traces as one zip (``PREFIX/PREFIX.RANK.et``) for a download button, and the export's notes."""
    import io
    import zipfile

    files, notes = chakra_traces(timeline)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for rank, data in sorted(files.items()):
            archive.writestr(f"{prefix}/{prefix}.{rank}.et", data)
    return buffer.getvalue(), notes
