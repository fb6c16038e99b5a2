"""Bring your own schedule: MSCCL XML programs and TE-CCL output files as ccviz Schedules.

Once imported, a schedule is judged by the simulator like any synthesized one
(``ccviz verify``, every figure, the app's Playback and Compare).

- **MSCCL XML** (msccl-tools, SCCL, TE-CCL's exporter, ccviz's own export):
  the program is first *executed* by ``ccviz.interop.msccl`` (FIFO matching,
  dependencies, symbolic buffers); each executed send/receive pair becomes
  one transfer per chunk, ordered by its causal depth, so the simulator
  times it ASAP on the chosen fabric; a value received into scratch and only
  sent on is a relay (the relaying GPU keeps its own partial sum). Without a topology the program runs on
  a fully connected fabric of its GPUs; with one, MSCCL GPU ``i`` is the
  topology's ``i``-th GPU and every send must map to a link or a path
  through switches.
- **TE-CCL output JSON** (``7-Flows``/``6-Flows``, ``8-Chunk paths``/``7-chunk
  paths``, ``1-Epoch_Duration``): every flow ``Chunk c from s traveled over
  a->b in epoch e`` becomes a timed transfer starting at ``e * epoch`` on the
  named fabric, the fabric the solver ran on.
"""

from __future__ import annotations

import heapq
import json
import math
import re
from collections import defaultdict
from dataclasses import replace
from itertools import accumulate
from pathlib import Path
from typing import Any

import networkx as nx

from ccviz.errors import CcvizError
from ccviz.interop.msccl import (
    CUSTOM,
    MSCCL_COLLECTIVES,
    Execution,
    Program,
    execute,
    load_program,
    parse_program,
)
from ccviz.model.collectives import Collective, make_collective, with_article
from ccviz.model.physics import LaneBook, link_costs
from ccviz.model.schedule import Schedule, Transfer
from ccviz.model.topology import Topology

DEFAULT_SIZE_BYTES = 1e6
FULLY_CONNECTED_NOTE = ("no topology given: the MSCCL program runs on a fully connected fabric of its {n} GPUs "
                        "(50 GB/s, 0.5 us links); choose a topology (--topology) to run it on a real fabric")


def import_schedule(path: str | Path, topology: Topology | str | None = None,
                    size_bytes: float | None = None, collective: str | None = None) -> Schedule:
    """An MSCCL XML or TE-CCL output JSON file as a Schedule (the format is told by the content).

    ``collective`` names what an MSCCL program with ``coll="custom"`` computes (broadcast, reduce, ...);
    without it the program's own outputs define the collective."""
    from ccviz.model.files import check_readable_file, read_text_file

    p = Path(path)
    check_readable_file(p, "import")
    return import_text(read_text_file(p, "import"), p.name, topology, size_bytes, collective)


def import_text(text: str, name: str, topology: Topology | str | None = None,
                size_bytes: float | None = None, collective: str | None = None) -> Schedule:
    """Same as ``import_schedule`` for file contents already read (the app's uploads)."""
    if text.lstrip().startswith("<"):
        return import_msccl(parse_program(text, name), topology, size_bytes, collective)
    if collective is not None:
        raise CcvizError(f"collective: --collective names what an MSCCL program with coll=\"custom\" computes; "
                         f"{name} is not MSCCL XML", "collective")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CcvizError(f"import: {name} is neither MSCCL XML nor valid JSON ({exc.msg} at line {exc.lineno})",
                         "import") from None
    if isinstance(data, dict) and "transfers" in data and "collective" in data:
        return Schedule.from_dict(data)
    if isinstance(data, dict) and _flows_key(data):
        if topology is None:
            raise CcvizError(f"import: {name} is a TE-CCL output; pass --topology with the fabric it was solved on "
                             "(e.g. the reference topology file)", "topology")
        if size_bytes is None:
            raise CcvizError(f"import: {name} is a TE-CCL output, which does not record the buffer size; pass "
                             "--size (the per-GPU buffer, e.g. 1MB)", "size")
        return import_teccl(data, topology, size_bytes, name)
    raise CcvizError(f"import: {name} is not an MSCCL XML, a TE-CCL output (with '7-Flows') or a ccviz schedule",
                     "import")


# ------------------------------------------------------------------------ MSCCL
def import_msccl(program: Program | str | Path, topology: Topology | str | None = None,
                 size_bytes: float | None = None, collective: str | None = None) -> Schedule:
    """Execute an MSCCL program and turn its messages into transfers (see module docstring)."""
    from ccviz.builders import fully_connected
    from ccviz.builders.loading import load_topology

    if not isinstance(program, Program):
        text = str(program)
        program = parse_program(text) if text.lstrip().startswith("<") else load_program(program)
    program = _named_collective(program, collective)
    run = execute(program, max_steps=10**9)  # the step limit is RCCL's; the import reports it below
    fatal = [p for p in run.problems if p.kind in ("deadlock", "bounds", "mismatch", "dependency", "unmatched")]
    if fatal:
        raise CcvizError(f"import: {program.source} does not execute: {fatal[0].message}", "import")
    notes = []
    if topology is None:
        topo = fully_connected(n=program.ngpus)
        notes.append(FULLY_CONNECTED_NOTE.format(n=program.ngpus))
    else:
        topo = load_topology(topology)
    if topo.n_gpus != program.ngpus:
        raise CcvizError(f"topology: {program.source} is written for {program.ngpus} GPUs but {topo.name!r} has "
                         f"{topo.n_gpus}; choose a topology with {program.ngpus} GPUs", "topology")
    gpus = topo.gpus
    size = DEFAULT_SIZE_BYTES if size_bytes is None else size_bytes
    if program.coll == CUSTOM:
        coll, chunk_of = _custom_collective(program, run, topo, size)
        notes.append(f"coll=\"custom\": the collective is what the program leaves in its outputs ({len(coll.chunks)} "
                     "chunks; name it with --collective to check it against a standard one)")
    else:
        coll = _msccl_collective(program, topo, size)
        chunk_of = _chunk_lookup(program, coll)
    routes = _SwitchRoutes(topo)
    paths = {id(m): routes.path(gpus[m.src], gpus[m.dst], m) for m in run.messages}
    dead: list = []
    try:
        transfers = _timed_transfers(program, run, topo, coll.chunk_bytes, paths, chunk_of, dead)
    except CcvizError as exc:
        races = [p for p in run.problems if p.kind == "race"]
        if not races:
            raise
        raise CcvizError(f"import: {program.source} races, so what it sends is not defined: {races[0].message} "
                         f"(so {str(exc).removeprefix('import: ')}); order the two steps with a dependency",
                         "import") from None
    notes.extend(program.warnings)
    if dead:
        notes.append(dead_send_note(list(dict.fromkeys(dead))))
    if _pieces_per_chunk(program) > 1:
        notes.append(f"nchunksperloop={program.nchunksperloop} does not split into whole chunks per rank over "
                     f"{program.ngpus} GPUs: each MSCCL chunk moves as {_pieces_per_chunk(program)} ccviz chunks "
                     "(one transfer each, so each pays the link latency)")
    for p in run.problems:
        notes.append(f"MSCCL executor: {p.message}")
    notes.append(f"imported from MSCCL XML {program.source!r} ({program.name}, {program.coll}, "
                 f"{program.nchannels} channel(s), {len(run.messages)} messages, executed {run.mode})")
    return Schedule(topo, coll, transfers, f"msccl:{program.name}", {"source": program.source, "format": "msccl"},
                    "heuristic", notes=notes)


def _timed_transfers(program: Program, run: Execution, topo: Topology, chunk_bytes: float,
                     paths: dict[int, list[int]], chunk_of, dead: list) -> list[Transfer]:
    """Time the executed program under the link model, earliest-ready step first (list scheduling).

    A step is ready when its thread block's previous step, its dependency (the first signalling step
    at or after it) and, for a receive, its message's send are done; a send crosses its path's links
    store-and-forward, each link serving one chunk at a time. Steps end when their data is in place
    (a receive at arrival, a send once posted), which is when dependants may go.
    """
    sends = {(m.send.gpu, m.send.tb, m.send.s): m for m in run.messages}
    recvs = {(m.recv.gpu, m.recv.tb, m.recv.s): m for m in run.messages}
    tbs = [(g.id, tb) for g in program.gpus for tb in g.tbs]
    pos = {(g, tb.id): {st.s: k for k, st in enumerate(tb.steps)} for g, tb in tbs}
    signal = {}
    for g, tb in tbs:  # the step whose completion a dependency on position k really waits for
        nxt = None
        for k in range(len(tb.steps) - 1, -1, -1):
            nxt = k if tb.steps[k].hasdep else nxt
            signal[(g, tb.id, k)] = nxt
    end: dict[tuple[int, int, int], float] = {}  # (gpu, tb, position) -> time
    arrival_of: dict[int, float] = {}
    ends: dict[tuple[int, int, int], tuple[int, int]] = {}  # (message, position, piece) -> first, last transfer
    costs = link_costs(topo, chunk_bytes)
    lanes = LaneBook()
    pc = [0] * len(tbs)
    transfers: list[Transfer] = []

    def ready_time(i: int) -> float | None:
        g, tb = tbs[i]
        k = pc[i]
        st = tb.steps[k]
        ready = end[(g, tb.id, k - 1)] if k else 0.0
        if st.depid >= 0:
            target = signal[(g, st.depid, pos[(g, st.depid)][st.deps])]
            if target is None or (g, st.depid, target) not in end:
                return None
            ready = max(ready, end[(g, st.depid, target)])
        m = recvs.get((g, tb.id, st.s))
        if m is not None:
            if id(m) not in arrival_of:
                return None
            ready = max(ready, arrival_of[id(m)])
        return ready

    index = {(g, tb.id): i for i, (g, tb) in enumerate(tbs)}
    by_gpu: dict[int, list[int]] = defaultdict(list)
    for i, (g, _) in enumerate(tbs):
        by_gpu[g].append(i)
    heap: list[tuple[float, int, int]] = []
    queued: set[tuple[int, int]] = set()

    def offer(i: int) -> None:
        """Queue a thread block's next step once everything it waits for is done."""
        if pc[i] < len(tbs[i][1].steps) and (i, pc[i]) not in queued:
            r = ready_time(i)
            if r is not None:
                queued.add((i, pc[i]))
                heapq.heappush(heap, (r, i, pc[i]))

    for i in range(len(tbs)):
        offer(i)
    while heap:
        ready, i, k = heapq.heappop(heap)
        g, tb = tbs[i]
        st = tb.steps[pc[i]]
        m = sends.get((g, tb.id, st.s))
        posted = ready
        if m is not None:
            path = paths[id(m)]
            hops = list(zip(path, path[1:], strict=False))
            offsets = accumulate((costs[h].delay for h in hops), initial=0.0)
            booking = [(h, costs[h].lanes, offset) for h, offset in zip(hops, offsets, strict=False)]
            last_arrival = ready
            relayed = {position for position, _, _ in m.relayed}
            for j, value in enumerate(m.values):
                try:
                    chunks = chunk_of(value, m)
                except _DeadSend:
                    dead.append(m)
                    continue
                for piece, chunk in enumerate(chunks):
                    t = lanes.earliest_start(ready, booking)  # switches on the path forward on arrival
                    ends[(id(m), j, piece)] = (len(transfers), len(transfers) + len(hops) - 1)
                    for hop, (a, b) in enumerate(hops):
                        start = t
                        lanes.occupy((a, b), costs[(a, b)].lanes, start, costs[(a, b)].busy)
                        t = start + costs[(a, b)].delay
                        op = "copy"
                        if hop == len(hops) - 1:
                            op = "relay" if j in relayed else "reduce" if (m.reduce or j in m.folded) else "copy"
                        transfers.append(Transfer(chunk, a, b, start, t, op, float(m.level)))
                        if hop == 0 and j == 0 and piece == 0:
                            posted = start
                    last_arrival = max(last_arrival, t)
            arrival_of[id(m)] = last_arrival
        end[(g, tb.id, pc[i])] = posted
        pc[i] += 1
        for j in by_gpu[g]:  # dependencies stay within a GPU
            offer(j)
        if m is not None:
            offer(index[(m.recv.gpu, m.recv.tb)])
    return _relays_then_continuations(transfers, run, ends)


def _relays_then_continuations(transfers: list[Transfer], run: Execution,
                               ends: dict[tuple[int, int, int], tuple[int, int]]) -> list[Transfer]:
    """The transfers with each relay's continuation moved right after it (the judge's relay rule,
    ``ccviz.judge.simulate.relay_continuations``): a value received into scratch and only sent on
    (``Message.relayed``) lands as ``relay`` at the relaying GPU, which keeps its own partial sum."""
    after: dict[int, int] = {}  # relay's last transfer -> its continuation's first transfer
    for m in run.messages:
        for position, onward, onward_position in m.relayed:
            nxt = run.messages[onward]
            piece = 0
            while (id(m), position, piece) in ends:
                after[ends[(id(m), position, piece)][1]] = ends[(id(nxt), onward_position, piece)][0]
                piece += 1
    if not after:
        return transfers
    moved = set(after.values())
    ordered: list[Transfer] = []
    for i in range(len(transfers)):
        k: int | None = i if i not in moved else None
        while k is not None:  # a relay, its continuation, and on if that relays again
            ordered.append(transfers[k])
            k = after.get(k)
    return ordered


def _named_collective(program: Program, collective: str | None) -> Program:
    """A ``coll="custom"`` program read as the standard collective the user names (msccl-tools writes custom
    for its Broadcast, Reduce, Gather and Scatter); naming one for a program that says what it is, is an error."""
    if collective is None:
        return program
    from ccviz.model.collectives import normalize_name

    name = normalize_name(collective)
    if program.coll != CUSTOM:
        if name != program.coll:
            raise CcvizError(f"collective: {program.source} says coll={program.coll!r}; --collective {collective} "
                             "applies to coll=\"custom\" programs only", "collective")
        return program
    if name not in MSCCL_COLLECTIVES or name == CUSTOM:
        raise CcvizError(f"collective: {collective!r} is not one of {', '.join(MSCCL_COLLECTIVES[:-1])}",
                         "collective")
    return replace(program, coll=name)


def _custom_collective(program: Program, run: Execution, topo: Topology, size_bytes: float):
    """The collective a coll="custom" program computes, read off its outputs: a slot holding one rank's
    input chunk is that chunk delivered (a copy), a slot holding several ranks' chunk i is their sum
    (a reduction); the chunk is 1/max(i_chunks) of the per-rank buffer."""
    from ccviz.model import validate as v
    from ccviz.model.collectives import Chunk

    gpus = topo.gpus
    copies: dict[tuple[int, int], set[int]] = defaultdict(set)
    sums: dict[int, tuple[frozenset[int], set[int]]] = {}
    for g, slots in sorted(run.outputs.items()):
        for k, value in sorted(slots.items()):
            if not value:
                continue
            ranks = [r for r, _ in value]
            indices = {i for _, i in value}
            if len(indices) != 1 or len(set(ranks)) != len(ranks):
                raise CcvizError(f"import: {program.source}: GPU {g} o[{k}] ends with "
                                 f"{len(value)} contributions of chunks {sorted(indices)}; ccviz reads a custom "
                                 "program's outputs as copies or sums of one chunk index (name the collective "
                                 "with --collective)", "import")
            (i,) = indices
            if len(value) == 1:
                if ranks[0] != g:
                    copies[value[0]].add(g)
                continue
            contributors = frozenset(ranks)
            if i in sums and sums[i][0] != contributors:
                raise CcvizError(f"import: {program.source}: chunk {i} is summed over ranks {sorted(sums[i][0])} "
                                 f"at one GPU and {sorted(contributors)} at GPU {g}", "import")
            sums.setdefault(i, (contributors, set()))[1].add(g)
    chunks: list[Chunk] = []
    copy_id: dict[tuple[int, int], int] = {}
    sum_id: dict[int, int] = {}
    for (r, i), dsts in sorted(copies.items()):
        copy_id[(r, i)] = len(chunks)
        chunks.append(Chunk(len(chunks), frozenset([gpus[r]]), frozenset(gpus[d] for d in dsts), False, gpus[r], i))
    for i, (contributors, dsts) in sorted(sums.items()):
        sum_id[i] = len(chunks)
        chunks.append(Chunk(len(chunks), frozenset(gpus[r] for r in contributors),
                            frozenset(gpus[d] for d in dsts), True, gpus[min(dsts)], i))
    if not chunks:
        raise CcvizError(f"import: {program.source}: a coll=\"custom\" program whose outputs receive nothing from "
                         "another GPU moves no data; name its collective with --collective", "import")
    per_rank = max(g.i_chunks for g in program.gpus) or 1
    chunk_bytes = v.number(size_bytes, "size", positive=True, hi=v.MAX_SIZE_BYTES) / per_rank
    coll = Collective("custom", tuple(gpus), tuple(chunks), chunk_bytes, float(size_bytes), 1, None)

    def lookup(value: tuple | None, m) -> list[int]:
        if not value:
            raise CcvizError(f"import: {m.send} sends data that was never defined", "import")
        indices = {i for _, i in value}
        if len(value) == 1 and value[0] in copy_id:
            return [copy_id[value[0]]]
        if len(indices) == 1 and next(iter(indices)) in sum_id:
            return [sum_id[next(iter(indices))]]
        raise _DeadSend(m)

    return coll, lookup


class _DeadSend(Exception):
    """A message whose data no output of the program keeps: dead, not wrong (an SMT-synthesized program, such as
    msccl-tools' ``msccl solve`` Gather on DGX-1, may send the root's own chunk to a GPU that never reads it)."""

    def __init__(self, message) -> None:
        super().__init__(str(message.send))
        self.message = message


def dead_send_note(dead: list) -> str:
    """One note for all dead sends: how many, the first few by step, and what that means for the timing."""
    shown = "; ".join(str(m.send) for m in dead[:3]) + (f"; ... ({len(dead) - 3} more)" if len(dead) > 3 else "")
    return (f"{len(dead)} dead send{'s' if len(dead) != 1 else ''}: data no output of the program keeps ({shown}); "
            f"imported without transfers, so {'their' if len(dead) != 1 else 'its'} link time is not counted")


def _pieces_per_chunk(program: Program) -> int:
    """ccviz chunks per MSCCL chunk: an AllReduce whose nchunksperloop does not split into whole chunks per
    rank (msccl-tools' ncv4 programs: 2 chunks on 4 GPUs) is cut finer, into lcm(nchunksperloop, ngpus)
    pieces, so that every rank owns whole pieces; each MSCCL chunk then moves as that many pieces."""
    if program.coll == "allreduce" and program.nchunksperloop % program.ngpus:
        return math.lcm(program.nchunksperloop, program.ngpus) // program.nchunksperloop
    return 1


def _msccl_collective(program: Program, topo: Topology, size_bytes: float) -> Collective:
    cpr = program.chunks_per_rank
    if program.coll in ("broadcast", "reduce"):
        cpr = program.nchunksperloop
    elif _pieces_per_chunk(program) > 1:
        cpr = program.nchunksperloop * _pieces_per_chunk(program) // program.ngpus
    elif program.nchunksperloop % program.ngpus:
        raise CcvizError(f"import: {program.coll} with nchunksperloop={program.nchunksperloop} over "
                         f"{program.ngpus} GPUs does not split into whole chunks per rank, which a "
                         f"{program.coll} needs (each rank's share is nchunksperloop/ngpus chunks)", "import")
    root = topo.gpus[0] if program.coll in ("broadcast", "reduce", "gather", "scatter") else None
    return make_collective(program.coll, topo, size_bytes, chunks_per_rank=cpr, root=root)


def _chunk_lookup(program: Program, coll: Collective):
    """Map a message's symbolic value (contributions (rank, input index)) to a ccviz chunk id."""
    n_idx = {r: k for k, r in enumerate(coll.ranks)}
    cpr = coll.chunks_per_rank
    by_key: dict[tuple, int] = {}
    for c in coll.chunks:
        src = n_idx[c.source]
        if coll.name in ("allreduce", "reducescatter"):
            by_key[(src * cpr + c.index,)] = c.id
        elif coll.name == "reduce":
            by_key[(c.index,)] = c.id
        elif coll.name == "broadcast":
            by_key[(0, c.index)] = c.id
        elif coll.name == "allgather" or coll.name == "gather":
            by_key[(src, c.index)] = c.id
        elif coll.name == "alltoall":
            (dst,) = tuple(c.post)
            by_key[(src, n_idx[dst] * cpr + c.index)] = c.id
        elif coll.name == "scatter":
            by_key[(0, src * cpr + c.index)] = c.id

    pieces = _pieces_per_chunk(program)

    def lookup(value: tuple | None, m) -> list[int]:
        if not value:
            raise CcvizError(f"import: {m.send} sends data that was never defined", "import")
        if coll.is_reducing:
            indices = {k for _, k in value}
            key: tuple = tuple(indices)
            if len(indices) != 1:
                raise CcvizError(f"import: {m.send} mixes partial sums of chunks {sorted(indices)}", "import")
        else:
            if len(value) != 1:
                raise CcvizError(f"import: {m.send} sends a combination of chunks in {with_article(coll.name)}", "import")
            key = value[0]
        if pieces > 1:
            return [by_key[(key[0] * pieces + p,)] for p in range(pieces)]
        if key not in by_key:
            raise _DeadSend(m)
        return [by_key[key]]

    return lookup


class _SwitchRoutes:
    """GPU->GPU sends as a link, or a shortest path whose relays are all switches: where there are several
    (a leaf-spine's spines, a fat tree's cores) each message takes the one whose links have carried the
    fewest messages so far, busiest first (load-aware ECMP, in the order the program sends)."""

    MAX_PATHS = 32

    def __init__(self, topo: Topology) -> None:
        self.topo = topo
        self.cache: dict[tuple[int, int], list[list[int]]] = {}
        self.load: dict[tuple[int, int], int] = {}

    def path(self, src: int, dst: int, message) -> list[int]:
        key = (src, dst)
        if key not in self.cache:
            if key in self.topo.links:
                self.cache[key] = [[src, dst]]
            else:
                keep = set(self.topo.switches) | {src, dst}
                graph = self.topo.graph.subgraph(keep)
                try:
                    paths = nx.all_shortest_paths(graph, src, dst)
                    self.cache[key] = [p for _, p in zip(range(self.MAX_PATHS), paths, strict=False)]
                except nx.NetworkXNoPath:
                    raise CcvizError(
                        f"topology: {message.send} sends from GPU {src} to GPU {dst}, but {self.topo.name!r} has no "
                        "link between them and no path through switches only; choose the fabric the program was "
                        "written for, or omit --topology to run it fully connected", "topology") from None
        choices = self.cache[key]
        best = min(choices, key=lambda p: sorted((self.load.get(h, 0) for h in zip(p, p[1:], strict=False)), reverse=True))
        for h in zip(best, best[1:], strict=False):
            self.load[h] = self.load.get(h, 0) + 1
        return best


def execution_report(path_or_text: str | Path) -> list[Execution]:
    """Run an MSCCL file in each mode it declares (for `ccviz import --json` and the app)."""
    from ccviz.interop.msccl import check

    return check(path_or_text)


# ------------------------------------------------------------------------ TE-CCL
_FLOW = re.compile(r"Chunk (\d+) from (\d+) traveled over (\d+)->(\d+)(?: with volume ([0-9.eE+-]+))? in epoch (\d+)"
                   r"(?: via switches? ([\d ,]+))?")
_DEMAND = re.compile(r"Demand at (\d+) for chunk (\d+) from (\d+)")


def _flows_key(data: dict[str, Any]) -> str | None:
    return next((k for k in data if k.split("-", 1)[-1].strip().lower() == "flows"), None)


def _paths_key(data: dict[str, Any]) -> str | None:
    return next((k for k in data if k.split("-", 1)[-1].strip().lower() == "chunk paths"), None)


def import_teccl(data: dict[str, Any], topology: Topology | str, size_bytes: float, name: str = "teccl") -> Schedule:
    """A TE-CCL output (flows per epoch) as timed transfers on the fabric it was solved on."""
    from ccviz.builders.loading import load_topology

    topo = _switches_buffer(load_topology(topology))
    epoch = data.get("1-Epoch_Duration")
    if not isinstance(epoch, (int, float)) or epoch <= 0:
        raise CcvizError(f"import: {name} has no positive '1-Epoch_Duration'", "import")
    flows = []
    raw_flows = data[_flows_key(data)]
    if not isinstance(raw_flows, list):
        raise CcvizError(f"import: {name} '{_flows_key(data)}' must be a list of flow lines ('Chunk C from S traveled "
                         f"over A->B in epoch E'), got {type(raw_flows).__name__}", "import")
    for k, line in enumerate(raw_flows):
        m = _FLOW.fullmatch(str(line).strip())
        if not m:
            raise CcvizError(f"import: {name} flow #{k} {line!r} is not 'Chunk C from S traveled over A->B in epoch E'",
                             "import")
        chunk, src, a, b, volume, ep, via = m.groups()
        if volume is not None and abs(float(volume) - 1.0) > 1e-9:
            raise CcvizError(f"import: {name} flow #{k} carries volume {volume} of a chunk; ccviz moves whole chunks "
                             "(split fractional LP flows into chunk paths first)", "import")
        relays = [int(x) for x in re.split(r"[ ,]+", via.strip())] if via else []
        path = [int(a), *relays, int(b)]
        for node in path:
            if node not in topo.nodes:
                raise CcvizError(f"topology: {name} flow #{k} uses node {node}, which {topo.name!r} does not have; "
                                 "pass the fabric the solver ran on", "topology")
        for u, v in zip(path, path[1:], strict=False):
            if (u, v) not in topo.links:
                raise CcvizError(f"topology: {name} flow #{k} crosses {u}->{v}, which is not a link of "
                                 f"{topo.name!r}; pass the fabric the solver ran on", "topology")
        flows.append((int(chunk), int(src), path, int(ep)))
    demands = [tuple(int(x) for x in _DEMAND.match(key).groups())
               for key in (data.get(_paths_key(data)) or {}) if _DEMAND.match(key)]
    coll, chunk_of = _teccl_collective(topo, flows, demands, size_bytes, name)
    transfers = []
    sent: dict[tuple, float] = {}  # (chunk, u, v, epoch) -> arrival: a copy switch fans out one arrival
    costs = link_costs(topo, coll.chunk_bytes)
    lanes = LaneBook()
    for chunk, src, path, ep in sorted(flows, key=lambda f: f[3]):
        cid = chunk_of[(src, chunk)]
        start = ep * epoch
        for u, v in zip(path, path[1:], strict=False):
            key = (cid, u, v, ep)
            if key not in sent:
                # Several chunks in one epoch share a link one after another (TE-CCL's capacity per epoch).
                cost = costs[(u, v)]
                begin = max(start, lanes.free_at((u, v), cost.lanes))
                lanes.occupy((u, v), cost.lanes, begin, cost.busy)
                sent[key] = begin + cost.delay
                transfers.append(Transfer(cid, u, v, begin, sent[key], "copy", float(ep)))
            start = sent[key]  # a hop out of a switch leaves as the chunk arrives there
    finish = data.get("4-Collective_Finish_Time")
    notes = [f"imported from TE-CCL output {name!r}: {len(flows)} flows over {data.get('3-Epochs_Required')} epochs "
             f"of {epoch * 1e6:g} us; TE-CCL's own finish time {finish}"]
    if topo.switches:
        notes.append("switches may queue a chunk for a busy out-link (TE-CCL's epochs share a link between "
                     "several chunks), so they are imported as buffering switches")
    return Schedule(topo, coll, transfers, "teccl-import", {"source": name, "format": "teccl"}, "feasible",
                    synth_time_s=data.get("Solver_Time"), epoch_s=float(epoch), epochs=data.get("3-Epochs_Required"),
                    estimated_finish_s=finish if isinstance(finish, (int, float)) else None, notes=notes)


def _switches_buffer(topo: Topology) -> Topology:
    """The fabric with buffering switches: TE-CCL's epochs let a link carry several chunks per epoch, so two
    chunks reaching a switch in one epoch for the same out-link leave one after the other (a port queue),
    which a bufferless switch (``Node.buffer``) may not do."""
    if not any(not topo.nodes[s].buffer for s in topo.switches):
        return topo
    return topo.with_changes(nodes=[replace(n, buffer=True) if n.kind == "switch" else n for n in topo.nodes.values()])


def _teccl_collective(topo: Topology, flows: list, demands: list, size_bytes: float, name: str):
    """AllGather when each source chunk is wanted by every other GPU, AllToAll when by one; plus the chunk map.

    The map is keyed (source, TE-CCL chunk); an AllToAll chunk's destination comes from its demand.
    """
    wanted: dict[tuple[int, int], set[int]] = defaultdict(set)
    for dst, chunk, src in demands:
        wanted[(src, chunk)].add(dst)
    if not wanted:
        for chunk, src, path, _ in flows:
            if not topo.is_switch(path[-1]):
                wanted[(src, chunk)].add(path[-1])
    gpus = set(topo.gpus)
    sizes = {len(v) for v in wanted.values()}
    chunk_of: dict[tuple[int, int], int] = {}
    if sizes == {1}:
        per_pair: dict[tuple[int, int], list[int]] = defaultdict(list)
        for (src, chunk), dsts in sorted(wanted.items()):
            per_pair[(src, next(iter(dsts)))].append(chunk)
        cpr = max(len(v) for v in per_pair.values())
        coll = make_collective("alltoall", topo, size_bytes, chunks_per_rank=cpr)
        ids = {(c.source, next(iter(c.post)), c.index): c.id for c in coll.chunks}
        owner = {}
        for (src, dst), chunks in per_pair.items():
            for k, chunk in enumerate(sorted(chunks)):
                owner[(src, chunk)] = ids[(src, dst, k)]
        for chunk, src, *_ in flows:
            if (src, chunk) not in owner:
                raise CcvizError(f"import: {name} moves chunk {chunk} of {src}, which no demand asks for", "import")
            chunk_of[(src, chunk)] = owner[(src, chunk)]
        return coll, chunk_of
    if all(v | {s} >= gpus for (s, _), v in wanted.items()):
        cpr = max(c for _, c in wanted) + 1
        coll = make_collective("allgather", topo, size_bytes, chunks_per_rank=cpr)
        for c in coll.chunks:
            chunk_of[(c.source, c.index)] = c.id
        for chunk, src, *_ in flows:
            if (src, chunk) not in chunk_of:
                raise CcvizError(f"import: {name} moves chunk {chunk} of node {src}, which is not a GPU of "
                                 f"{topo.name!r} (or not one of its chunks)", "import")
        return coll, chunk_of
    raise CcvizError(f"import: {name}: its demands are neither an AllGather nor an AllToAll; ccviz imports those two "
                     "from TE-CCL outputs", "import")
