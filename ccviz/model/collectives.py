"""Collectives as chunks with pre- and postconditions (the SCCL/MSCCL/TACOS model).

Every collective, including a custom demand matrix, is a list of chunks of
equal size. A chunk names the ranks that hold it at the start (``pre``) and
the ranks that must hold it at the end (``post``). For a reducing chunk each
``pre`` rank holds one partial and ``post`` ranks need the sum of all of them,
each contribution counted exactly once.

Sizes follow nccl-tests: ``size`` is the per-rank buffer of the collective
(AllGather = output, ReduceScatter = input, AllReduce/Broadcast/Reduce = the
buffer, AllToAll = send buffer; Gather = the root's output, Scatter = the
root's input).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ccviz.errors import CcvizError
from ccviz.model import footprint
from ccviz.model import validate as v
from ccviz.model.topology import Topology

COLLECTIVES = (
    "allgather", "reducescatter", "allreduce", "alltoall", "broadcast", "reduce", "gather", "scatter", "sendrecv",
)
VARIABLE = ("alltoallv",)  # collectives defined by a traffic matrix (ccviz.model.traffic), not a size
ROOTED = frozenset({"broadcast", "reduce", "gather", "scatter", "sendrecv"})
_ALIASES = {
    "all-gather": "allgather", "all_gather": "allgather", "ag": "allgather",
    "reduce-scatter": "reducescatter", "reduce_scatter": "reducescatter", "rs": "reducescatter",
    "all-reduce": "allreduce", "all_reduce": "allreduce", "ar": "allreduce",
    "all-to-all": "alltoall", "all_to_all": "alltoall", "a2a": "alltoall", "bcast": "broadcast",
    "p2p": "sendrecv", "send-recv": "sendrecv", "point-to-point": "sendrecv",
}


@dataclass(frozen=True, slots=True)
class Chunk:
    """One unit of data. ``source`` is the rank it comes from (the result owner for reductions)."""

    id: int
    pre: frozenset[int]
    post: frozenset[int]
    reduce: bool = False
    source: int | None = None
    index: int = 0  # position within its source's buffer (for labels and exports)


@dataclass(frozen=True)
class Collective:
    """A concrete demand: which chunks, of how many bytes, must go where."""

    name: str
    ranks: tuple[int, ...]
    chunks: tuple[Chunk, ...]
    chunk_bytes: float
    size_bytes: float
    chunks_per_rank: int = 1
    root: int | None = None
    meta: dict[str, Any] = field(default_factory=dict, compare=False)
    dest: int | None = None  # sendrecv: the rank the root sends to

    @property
    def n_ranks(self) -> int:
        return len(self.ranks)

    @property
    def is_reducing(self) -> bool:
        return any(c.reduce for c in self.chunks)

    @property
    def busbw_factor(self) -> float:
        """nccl-tests bus-bandwidth factor: busbw = algbw * factor."""
        n = self.n_ranks
        if self.name == "allreduce":
            return 2 * (n - 1) / n
        if self.name in ("broadcast", "reduce", "custom", "sendrecv"):
            return 1.0
        return (n - 1) / n

    def demands(self) -> Iterable[tuple[int, int]]:
        """Every (chunk id, rank) that must be delivered (post ranks not already holding it)."""
        for c in self.chunks:
            for r in sorted(c.post):
                if c.reduce or r not in c.pre:
                    yield c.id, r

    def describe(self) -> str:
        root = f", root {self.root}" if self.root is not None else ""
        return (
            f"{self.name} over {self.n_ranks} ranks{root}: {len(self.chunks)} chunks of "
            f"{self.chunk_bytes:g} B (buffer {self.size_bytes:g} B)"
        )

    # ------------------------------------------------------------ serialization
    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "ranks": list(self.ranks),
            "chunk_bytes": self.chunk_bytes,
            "size_bytes": self.size_bytes,
            "chunks_per_rank": self.chunks_per_rank,
            "root": self.root,
            **({"dest": self.dest} if self.dest is not None else {}),
            **({"matrix": self.meta["matrix"].tolist()} if "matrix" in self.meta else {}),
            "chunks": [
                {"id": c.id, "pre": sorted(c.pre), "post": sorted(c.post), "reduce": c.reduce,
                 "source": c.source, "index": c.index}
                for c in self.chunks
            ],
            **({"meta": {k: self.meta[k] for k in ("workload", "part_chunks")}}
               if "part_chunks" in self.meta else {}),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], topology: Topology | None = None) -> Collective:
        """Rebuild a collective from its *definition* (name, ranks, size, chunks per rank, root).

        The chunk list and chunk size written in a file are never trusted: a schedule file could carry
        an emptied postcondition or a chunk of -1 bytes. They are recomputed, and a file whose copy
        disagrees with the definition is refused, naming the field. A ``custom`` collective is defined
        by its demand (who sends how many chunks to whom), read from its chunks.
        """
        d = v.mapping(d, "collective")
        for key in ("name", "ranks", "size_bytes"):
            if key not in d:
                raise CcvizError(f"collective.{key}: missing from the schedule file", "collective")
        name = v.text(d["name"], "collective.name")
        ranks = [v.integer(r, f"collective.ranks[{i}]", lo=0) for i, r in
                 enumerate(v.sequence(d["ranks"], "collective.ranks", max_len=v.MAX_NODES))]
        if topology is not None:
            _check_group(ranks, topology)
        size = v.number(d["size_bytes"], "collective.size_bytes", positive=True, hi=v.MAX_SIZE_BYTES)
        if "chunk_bytes" in d:
            v.number(d["chunk_bytes"], "collective.chunk_bytes", positive=True)
        if name == "custom":
            rebuilt = _custom_from_chunks(d, ranks)
            meta = _union_meta(d.get("meta"), len(rebuilt.chunks))
            if meta:
                rebuilt = Collective(rebuilt.name, rebuilt.ranks, rebuilt.chunks, rebuilt.chunk_bytes,
                                     rebuilt.size_bytes, rebuilt.chunks_per_rank, rebuilt.root, meta)
        elif name in VARIABLE:
            rebuilt = alltoallv_collective(ranks, d.get("matrix"), v.number(d.get("chunk_bytes"),
                                                                           "collective.chunk_bytes", positive=True))
        else:
            cpr = v.integer(d.get("chunks_per_rank", 1), "collective.chunks_per_rank", lo=1)
            root = d.get("root")
            root = None if root is None else v.integer(root, "collective.root")
            whole = topology is not None and list(ranks) == topology.gpus
            over = topology if whole else ranks  # a process group's buffer is split over its own ranks
            dest = d.get("dest")
            dest = None if dest is None else v.integer(dest, "collective.dest")
            rebuilt = make_collective(name, over, size, cpr, root if name in ROOTED else None, dest)
        _same_as_file(rebuilt, d)
        return rebuilt


def _check_group(ranks: Sequence[int], topology: Topology) -> None:
    """A file's ranks are the fabric's GPUs or a process group of them (each once, at least two)."""
    gpus = set(topology.gpus)
    stray = [r for r in ranks if r not in gpus]
    if stray or len(set(ranks)) != len(ranks) or len(ranks) < 2:
        why = (f"{stray[0]} is not one of the topology's GPUs" if stray else
               "a rank is listed twice" if len(set(ranks)) != len(ranks) else "a collective needs two ranks")
        raise CcvizError(f"collective.ranks: {why}; give the fabric's GPUs or a group of them "
                         f"(GPUs {topology.gpus[:16]}{' ...' if len(gpus) > 16 else ''})", "collective.ranks")


def _union_meta(raw: Any, n_chunks: int) -> dict[str, Any]:
    """A workload union's labels (``ccviz.model.workload_demand``): part names and chunks per part, checked."""
    if raw is None:
        return {}
    raw = v.mapping(raw, "collective.meta")
    unknown = set(raw) - {"workload", "part_chunks"}
    if unknown:
        raise CcvizError(f"collective.meta: unknown key {sorted(unknown)[0]!r} (known: workload, part_chunks)",
                         "collective.meta")
    if not raw:
        return {}
    names = [v.text(x, f"collective.meta.workload[{i}]") for i, x in
             enumerate(v.sequence(raw.get("workload"), "collective.meta.workload", max_len=n_chunks))]
    counts = [v.integer(x, f"collective.meta.part_chunks[{i}]", lo=0) for i, x in
              enumerate(v.sequence(raw.get("part_chunks"), "collective.meta.part_chunks", max_len=n_chunks))]
    if len(names) != len(counts) or sum(counts) != n_chunks:
        raise CcvizError(f"collective.meta.part_chunks: {len(counts)} parts of {sum(counts)} chunks in all do not "
                         f"match {len(names)} part names and {n_chunks} chunks", "collective.meta")
    return {"workload": names, "part_chunks": counts}


def _custom_from_chunks(d: Mapping[str, Any], ranks: Sequence[int]) -> Collective:
    """A custom collective's demand, read from its chunks (each: one source rank, one destination), or, when
    some chunk has several pre or post ranks or reduces (an imported coll="custom" MSCCL program), the chunks
    themselves, each checked."""
    raw = v.sequence(d.get("chunks"), "collective.chunks", max_len=v.MAX_TRANSFERS)
    if any(not (isinstance(c, dict) and isinstance(c.get("pre"), list) and isinstance(c.get("post"), list)
                and len(c["pre"]) == 1 and len(c["post"]) == 1 and not c.get("reduce", False)) for c in raw):
        return _custom_general(d, raw, ranks)
    pairs = [(c["pre"][0], c["post"][0]) for c in raw]
    if d.get("meta") is not None or any(not isinstance(x, int) for pair in pairs for x in pair) or pairs != sorted(pairs):
        return _custom_general(d, raw, ranks)  # a workload union keeps each group's own chunk order
    demand: dict[tuple[int, int], int] = {}
    for i, c in enumerate(raw):
        c = v.mapping(c, f"collective.chunks[{i}]")
        pre, post = c.get("pre"), c.get("post")
        if not (isinstance(pre, list) and isinstance(post, list) and len(pre) == 1 and len(post) == 1):
            raise CcvizError(f"collective.chunks[{i}]: a custom chunk has one pre and one post rank", "collective")
        key = (v.integer(pre[0], f"collective.chunks[{i}].pre"), v.integer(post[0], f"collective.chunks[{i}].post"))
        demand[key] = demand.get(key, 0) + 1
    chunk_bytes = v.number(d.get("chunk_bytes"), "collective.chunk_bytes", positive=True)
    return custom_collective(ranks, demand, chunk_bytes)


def _custom_general(d: Mapping[str, Any], raw: list, ranks: Sequence[int]) -> Collective:
    """Chunks with any pre/post sets: every rank named is a rank of the collective, every set non-empty."""
    members = set(ranks)
    chunks = []
    for i, c in enumerate(raw):
        c = v.mapping(c, f"collective.chunks[{i}]")
        sides = {}
        for side in ("pre", "post"):
            values = [v.integer(r, f"collective.chunks[{i}].{side}") for r in
                      v.sequence(c.get(side), f"collective.chunks[{i}].{side}", max_len=len(members))]
            if not values or not set(values) <= members:
                raise CcvizError(f"collective.chunks[{i}].{side}: needs one or more of the ranks {sorted(members)}, "
                                 f"got {values}", "collective")
            sides[side] = frozenset(values)
        reduce = v.boolean(c.get("reduce", False), f"collective.chunks[{i}].reduce")
        source = c.get("source")
        chunks.append(Chunk(i, sides["pre"], sides["post"], reduce,
                            None if source is None else v.integer(source, f"collective.chunks[{i}].source"),
                            v.integer(c.get("index", 0), f"collective.chunks[{i}].index", lo=0)))
    chunk_bytes = v.number(d.get("chunk_bytes"), "collective.chunk_bytes", positive=True, hi=v.MAX_SIZE_BYTES)
    if chunk_bytes < v.MIN_CHUNK_BYTES:
        raise CcvizError(f"collective.chunk_bytes: {chunk_bytes:.3g} B; a chunk must be at least "
                         f"{v.MIN_CHUNK_BYTES:g} byte", "collective.chunk_bytes")
    size = v.number(d.get("size_bytes"), "collective.size_bytes", positive=True, hi=v.MAX_SIZE_BYTES)
    return Collective("custom", tuple(ranks), tuple(chunks), chunk_bytes, size, 1, None)


def _same_as_file(rebuilt: Collective, d: Mapping[str, Any]) -> None:
    """Refuse a file whose copied chunk list or chunk size disagrees with the collective's definition."""
    if "chunk_bytes" in d and not math.isclose(float(d["chunk_bytes"]), rebuilt.chunk_bytes, rel_tol=1e-9):
        raise CcvizError(
            f"collective.chunk_bytes: the file says {d['chunk_bytes']!r} but {rebuilt.name} of "
            f"{rebuilt.size_bytes:g} B gives {rebuilt.chunk_bytes:g}", "collective.chunk_bytes")
    if "chunks" not in d:
        return
    chunks = v.sequence(d["chunks"], "collective.chunks", max_len=v.MAX_TRANSFERS)
    if len(chunks) != len(rebuilt.chunks):
        raise CcvizError(f"collective.chunks: the file lists {len(chunks)} chunks but {rebuilt.name} over "
                         f"{rebuilt.n_ranks} ranks has {len(rebuilt.chunks)}", "collective.chunks")
    for i, (c, want) in enumerate(zip(chunks, rebuilt.chunks, strict=True)):
        try:
            same = (set(c["pre"]) == want.pre and set(c["post"]) == want.post
                    and bool(c.get("reduce", False)) == want.reduce)
        except (KeyError, TypeError):
            same = False
        if not same:
            raise CcvizError(f"collective.chunks[{i}]: differs from {rebuilt.name}'s definition "
                             f"(pre {sorted(want.pre)}, post {sorted(want.post)})", "collective.chunks")


def normalize_name(name: str) -> str:
    """Canonical collective name ('All-Gather' -> 'allgather'), or a clear error."""
    key = str(name).strip().lower()
    key = _ALIASES.get(key, key)
    if key not in COLLECTIVES:
        raise CcvizError(
            f"collective: unknown collective {name!r}; choose one of {', '.join(COLLECTIVES)}", "collective"
        )
    return key


def with_article(name: str) -> str:
    """'an alltoall', 'a gather': messages name a collective in running text ("in a alltoall" read badly)."""
    word = str(name).strip("'\"")
    return f"{'an' if word[:1].lower() in 'aeiou' else 'a'} {name}"


def _ranks_of(ranks: Topology | Sequence[int]) -> tuple[int, ...]:
    if not isinstance(ranks, (Topology, Sequence)) or isinstance(ranks, str):
        raise CcvizError(f"ranks: expected a Topology or a list of GPU ids, got {type(ranks).__name__}", "ranks")
    out = tuple(ranks.gpus) if isinstance(ranks, Topology) else tuple(int(r) for r in ranks)
    if len(out) < 2:
        raise CcvizError("ranks: a collective needs at least two ranks", "ranks")
    if len(set(out)) != len(out):
        raise CcvizError("ranks: each rank may appear only once", "ranks")
    return out


def make_collective(
    name: str,
    ranks: Topology | Sequence[int],
    size_bytes: float | None = None,
    chunks_per_rank: int = 1,
    root: int | None = None,
    dest: int | None = None,
    matrix: Any = None,
) -> Collective:
    """Build any standard collective over the GPUs of a topology (or an explicit rank list).

    ``sendrecv`` is the point-to-point primitive: ``root`` sends its buffer to ``dest`` (defaults: the first
    rank, and the rank after the root). ``alltoallv`` takes ``matrix`` (bytes from rank i to rank j) instead
    of a size: see ``ccviz.model.traffic``."""
    if str(name).strip().lower() in VARIABLE:
        if matrix is None and size_bytes is None:
            raise CcvizError("matrix: alltoallv needs a traffic matrix (--matrix FILE or --moe ...)", "matrix")
        if matrix is None:  # a size and no matrix: the uniform matrix, AllToAll's demand
            n = len(_ranks_of(ranks))
            size = v.number(size_bytes, "size", positive=True, hi=v.MAX_SIZE_BYTES)
            matrix = [[size / n] * n for _ in range(n)]
        return alltoallv_collective(ranks, matrix)
    if matrix is not None:
        raise CcvizError(f"matrix: only alltoallv takes a traffic matrix, not {name}", "matrix")
    if size_bytes is None:
        raise CcvizError(f"size: {name} needs a size", "size")
    name = normalize_name(name)
    rank_tuple = _ranks_of(ranks)
    n = len(rank_tuple)
    # Buffers are split over the ranks, except on topologies that say otherwise (TE-CCL's as-run NDv2
    # divides by all 16 nodes although one is marked a switch).
    n_slots = int(ranks.meta.get("buffer_ranks", n)) if isinstance(ranks, Topology) else n
    if isinstance(chunks_per_rank, bool) or not isinstance(chunks_per_rank, int) or chunks_per_rank < 1:
        raise CcvizError(f"chunks: chunks per rank must be a whole number >= 1, got {chunks_per_rank!r}", "chunks")
    size_bytes = v.number(size_bytes, "size", positive=True, hi=v.MAX_SIZE_BYTES)
    cpr = chunks_per_rank
    footprint.check_transfers(footprint.standard_min_transfers(name, n, cpr),
                              f"{name} on {n} GPUs with {cpr} chunk(s) per rank", "chunks")
    if root is not None and (isinstance(root, bool) or not isinstance(root, int)):
        raise CcvizError(f"root: expected a rank number, got {root!r}", "root")
    if root is not None and name not in ROOTED:
        raise CcvizError(f"root: {name} has no root; --root applies to {', '.join(sorted(ROOTED))}", "root")
    if name in ROOTED:
        root = rank_tuple[0] if root is None else root
        if root not in rank_tuple:
            raise CcvizError(f"root: root {root} is not a GPU rank; choose one of {list(rank_tuple)}", "root")
    else:
        root = None
    if dest is not None and name != "sendrecv":
        raise CcvizError(f"dest: only sendrecv has a destination; {name} does not take --dest", "dest")
    if name == "sendrecv":
        dest = rank_tuple[(rank_tuple.index(root) + 1) % n] if dest is None else dest
        if isinstance(dest, bool) or not isinstance(dest, int) or dest not in rank_tuple:
            raise CcvizError(f"dest: {dest!r} is not a GPU rank; choose one of {list(rank_tuple)}", "dest")
        if dest == root:
            raise CcvizError(f"dest: the destination must differ from the root ({root})", "dest")
    everyone = frozenset(rank_tuple)
    chunks: list[Chunk] = []

    def add(pre: Iterable[int], post: Iterable[int], reduce: bool, source: int | None, index: int) -> None:
        chunks.append(Chunk(len(chunks), frozenset(pre), frozenset(post), reduce, source, index))

    if name == "allgather":
        for r in rank_tuple:
            for k in range(cpr):
                add([r], everyone, False, r, k)
        chunk_bytes = size_bytes / (n_slots * cpr)
    elif name in ("reducescatter", "allreduce"):
        for r in rank_tuple:
            for k in range(cpr):
                add(everyone, [r] if name == "reducescatter" else everyone, True, r, k)
        chunk_bytes = size_bytes / (n_slots * cpr)
    elif name == "alltoall":
        for s in rank_tuple:
            for d in rank_tuple:
                if s != d:
                    for k in range(cpr):
                        add([s], [d], False, s, k)
        chunk_bytes = size_bytes / (n_slots * cpr)
    elif name == "sendrecv":
        for k in range(cpr):
            add([root], [dest], False, root, k)
        chunk_bytes = size_bytes / cpr
    elif name == "broadcast":
        for k in range(cpr):
            add([root], everyone, False, root, k)
        chunk_bytes = size_bytes / cpr
    elif name == "reduce":
        for k in range(cpr):
            add(everyone, [root], True, root, k)
        chunk_bytes = size_bytes / cpr
    elif name == "gather":
        for r in rank_tuple:
            if r != root:
                for k in range(cpr):
                    add([r], [root], False, r, k)
        chunk_bytes = size_bytes / (n_slots * cpr)
    else:  # scatter
        for r in rank_tuple:
            if r != root:
                for k in range(cpr):
                    add([root], [r], False, r, k)
        chunk_bytes = size_bytes / (n_slots * cpr)
    if chunk_bytes < v.MIN_CHUNK_BYTES:
        raise CcvizError(
            f"size: {size_bytes:g} B split into {len(chunks) if name in ('broadcast', 'reduce') else n_slots * cpr} "
            f"chunks is {chunk_bytes:.3g} B per chunk; a chunk must be at least {v.MIN_CHUNK_BYTES:g} byte",
            "size",
        )
    return Collective(name, rank_tuple, tuple(chunks), chunk_bytes, float(size_bytes), cpr, root, dest=dest)


def custom_collective(
    ranks: Topology | Sequence[int],
    demand: Mapping[tuple[int, int], int] | Sequence[Sequence[int]],
    chunk_bytes: float,
) -> Collective:
    """A demand matrix: ``demand[(s, d)]`` (or ``demand[i][j]`` by rank index) chunks from s to d."""
    rank_tuple = _ranks_of(ranks)
    chunk_bytes = v.number(chunk_bytes, "chunk_bytes", positive=True, hi=v.MAX_SIZE_BYTES)
    if chunk_bytes < v.MIN_CHUNK_BYTES:
        raise CcvizError(f"chunk_bytes: {chunk_bytes:.3g} B per chunk; a chunk must be at least "
                         f"{v.MIN_CHUNK_BYTES:g} byte", "chunk_bytes")
    if isinstance(demand, Mapping):
        pairs = dict(demand)
    else:
        if len(demand) != len(rank_tuple) or any(len(row) != len(rank_tuple) for row in demand):
            raise CcvizError(f"demand: the matrix must be {len(rank_tuple)}x{len(rank_tuple)}", "demand")
        pairs = {(rank_tuple[i], rank_tuple[j]): demand[i][j]
                 for i in range(len(rank_tuple)) for j in range(len(rank_tuple))}
    chunks: list[Chunk] = []
    for (s, d), count in sorted(pairs.items()):
        if s not in rank_tuple or d not in rank_tuple:
            raise CcvizError(f"demand: ({s}, {d}) names a node that is not a GPU rank", "demand")
        if not isinstance(count, int) or count < 0:
            raise CcvizError(f"demand: entry ({s}, {d}) must be a whole number of chunks >= 0", "demand")
        if s == d:
            continue
        for k in range(count):
            chunks.append(Chunk(len(chunks), frozenset([s]), frozenset([d]), False, s, k))
    if not chunks:
        raise CcvizError("demand: the matrix asks for no transfer; put a positive count off the diagonal", "demand")
    total_sent = max(sum(1 for c in chunks if c.source == r) for r in rank_tuple)
    return Collective("custom", rank_tuple, tuple(chunks), float(chunk_bytes), chunk_bytes * total_sent, 1, None)


def alltoallv_collective(ranks: Topology | Sequence[int], matrix: object, chunk_bytes: float | None = None,
                         name: str = "alltoallv") -> Collective:
    """The matrix as whole chunks per pair (see the module's docstring); ``meta['matrix']`` keeps the bytes.

    ``size_bytes`` is the largest row sum (the biggest send buffer, the diagonal included, as AllToAll's
    buffer M includes the rank's own M/N): a uniform matrix of M/N gives AllToAll's chunks and size."""
    import numpy as np

    from ccviz.model.traffic import MAX_CHUNKS, check_matrix, chunk_budget, chunk_size

    rank_tuple = _ranks_of(ranks)
    n = len(rank_tuple)
    m = check_matrix(matrix, n)
    exact = None
    if chunk_bytes is None:
        chunk_bytes, exact = chunk_size(m, chunk_budget(n))
    chunk_bytes = v.number(chunk_bytes, "chunk_bytes", positive=True, hi=v.MAX_SIZE_BYTES)
    counts = np.ceil(m / chunk_bytes - 1e-9).astype(np.int64)
    np.fill_diagonal(counts, 0)
    if counts.sum() > 4 * MAX_CHUNKS:
        raise CcvizError(f"matrix: {int(counts.sum()):,} chunks of {chunk_bytes:g} B; at most {4 * MAX_CHUNKS:,}",
                         "matrix")
    chunks: list[Chunk] = []
    for i, s in enumerate(rank_tuple):
        for j, d in enumerate(rank_tuple):
            for k in range(int(counts[i, j])):
                chunks.append(Chunk(len(chunks), frozenset([s]), frozenset([d]), False, s, k))
    off = m.copy()
    np.fill_diagonal(off, 0.0)
    moved = float(counts.sum() * chunk_bytes)
    meta = {"matrix": m, "counts": counts, "exact": bool(exact) if exact is not None else
            bool(np.allclose(counts * chunk_bytes, off, rtol=1e-12)),
            "rounding_overhead": moved / float(off.sum()) - 1.0}
    return Collective(name, rank_tuple, tuple(chunks), float(chunk_bytes), float(m.sum(axis=1).max()), 1, None,
                      meta=meta)


def min_transfers(collective: Collective) -> int:
    """Transfers any schedule needs: each (chunk, rank) demand is met by at least one arrival;
    a reduction additionally needs every contribution but one to travel."""
    total = 0
    for c in collective.chunks:
        if c.reduce:
            total += len(c.pre | c.post) - 1
        else:
            total += len(c.post - c.pre)
    return total


def check_fits(collective: Collective, n_gpus: int) -> None:
    """Refuse a run whose fewest possible transfers already exceed the memory budget."""
    footprint.check_transfers(min_transfers(collective), f"{collective.name} on {n_gpus} GPUs", "size")
