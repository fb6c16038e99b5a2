"""A workload's demand as one collective: the union of every process group's chunks.

To synthesize all groups of a job together (one run books every group's chunks on one set of link
calendars, or one multi-commodity TE-CCL problem), the groups' collectives become one: each group's
chunks keep their own pre- and postconditions over the group's ranks (a reducing group's chunks stay
``reduce=True``), so the simulator checks every group's demand in one timeline. The model has one chunk
size, so every group's buffer is first cut into chunks of one common size (``common_chunk_bytes``: the
largest size that divides every group's chunk, refused in one line past ``MAX_UNION_CHUNKS``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from fractions import Fraction

from ccviz.errors import CcvizError
from ccviz.model.collectives import Chunk, Collective

MAX_UNION_CHUNKS = 20_000  # chunks in one union: past this a single synthesis of the job would not finish
FLOAT_DENOMINATOR = 1 << 16  # a chunk size read as a fraction with at most this denominator (64 MB / 3 exactly)


def common_chunk_bytes(chunk_bytes: Mapping[str, float], field: str = "run") -> tuple[float, dict[str, int]]:
    """The largest chunk size that divides every group's chunk, and how many pieces each group's chunk is.

    ``chunk_bytes`` maps a label (a kind) to its chunk size at one chunk per rank. Sizes are exact
    fractions (64 MB / 8 and 256 MB / 4 share 8 MB, 8 pieces for the second; 64 MB / 3 and 64 MB share
    64 MB / 3, 3 pieces). Refused in one line when a chunk would be cut into more than
    ``MAX_UNION_CHUNKS`` pieces.
    """
    if not chunk_bytes:
        raise CcvizError(f"{field}: no group to cut into chunks", field)
    exact = {label: Fraction(size).limit_denominator(FLOAT_DENOMINATOR) for label, size in chunk_bytes.items()}
    unit = Fraction(0)
    for size in exact.values():
        unit = Fraction(math.gcd(unit.numerator * size.denominator, size.numerator * unit.denominator),
                        unit.denominator * size.denominator)
    pieces = {label: int(size / unit) for label, size in exact.items()}
    most = max(pieces, key=pieces.__getitem__)
    if pieces[most] > MAX_UNION_CHUNKS:
        raise CcvizError(f"{field}: the groups' chunks share no size above {float(unit):.4g} B, which would cut "
                         f"{most}'s {chunk_bytes[most]:.10g} B chunks into {pieces[most]:,} pieces (at most "
                         f"{MAX_UNION_CHUNKS:,}); choose sizes whose per-rank chunks divide each other", field)
    return float(unit), pieces


def union_collective(parts: Sequence[Collective], labels: Sequence[str] | None = None) -> Collective:
    """Every part's chunks as one ``custom`` collective (all parts must have one chunk size).

    Chunk ids run part after part, in each part's own order, so part ``i`` owns a contiguous id range
    (``part_of_chunk``). Each chunk keeps its pre/post sets, ``reduce`` flag and source; its ``index`` is
    renumbered per source rank so that (source, index) names one chunk of the union (the reversal
    machinery matches chunks by it).
    """
    if not parts:
        raise CcvizError("run: a workload needs at least one group to synthesize", "run")
    size = parts[0].chunk_bytes
    for p in parts:
        if not math.isclose(p.chunk_bytes, size, rel_tol=1e-12):
            raise CcvizError(f"run: the groups' chunks differ in size ({p.chunk_bytes:g} B vs {size:g} B); cut every "
                             "group into one chunk size first (common_chunk_bytes)", "run")
    total = sum(len(p.chunks) for p in parts)
    if total > MAX_UNION_CHUNKS:
        raise CcvizError(f"run: synthesizing every group together needs {total:,} chunks of {size:g} B, over the "
                         f"{MAX_UNION_CHUNKS:,} one synthesis takes; choose sizes with a larger common chunk or use "
                         "--synthesis composed", "run")
    next_index: dict[int | None, int] = {}
    chunks: list[Chunk] = []
    for p in parts:
        for c in p.chunks:
            index = next_index.get(c.source, 0)
            next_index[c.source] = index + 1
            chunks.append(Chunk(len(chunks), c.pre, c.post, c.reduce, c.source, index))
    ranks = tuple(sorted({r for p in parts for r in p.ranks}))
    names = list(labels) if labels is not None else [p.name for p in parts]
    return Collective("custom", ranks, tuple(chunks), size, max(p.size_bytes for p in parts), 1, None,
                      {"workload": names, "part_chunks": [len(p.chunks) for p in parts]})


def part_of_chunk(union: Collective) -> list[int]:
    """Chunk id of a ``union_collective`` -> the index of the part it came from."""
    counts = union.meta.get("part_chunks")
    if counts is None:
        raise CcvizError("collective: not a workload union (no part_chunks in its meta)", "collective")
    return [i for i, n in enumerate(counts) for _ in range(n)]
