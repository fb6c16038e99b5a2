"""AllToAllv: a traffic matrix (bytes from rank i to rank j) as a collective, and mixture-of-experts routing.

A matrix comes from a file (CSV, NPY or JSON) or from ``moe_matrix``: a router sends each token to its
top-k experts, expert popularity follows a Zipf law (the busiest expert gets several times the average,
3-10x in the published MoE traces the teaching reference cites), and the dispatch matrix counts the
(token, expert) copies each rank sends to the rank hosting the expert, times the bytes of one token. The
combine step sends the results back: the transpose. Every (token, expert) copy is sent (no de-duplication
of a token bound to two experts on one rank, which DeepEP does).

The judge works on chunks of one size, so a matrix becomes whole chunks per pair (``alltoallv_collective``):
exactly where every entry is a multiple of a common unit that keeps the chunk count under the budget (a
uniform matrix: one chunk per pair, the very chunks of ``alltoall``), otherwise each pair's bytes rounded UP
to whole chunks (a schedule then moves at least every byte; the overhead is recorded in ``meta`` and the
limit is the exact matrix's, so a ratio to it is never flattered).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from ccviz.errors import CcvizError
from ccviz.model import validate as v

MAX_MATRIX_RANKS = 4096  # a 4096 x 4096 matrix is 16.8 M cells (134 MB as float64)
MAX_MATRIX_FILE_BYTES = 400_000_000
CHUNKS_PER_PAIR = 16  # the chunk budget: about this many chunks per ordered pair on average...
MAX_CHUNKS = 40_000  # ...and never more than this many in all (the schedules book each hop in Python)
DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4, "fp8": 1, "int8": 1}
MOE_KEYS = ("experts", "topk", "tokens", "hidden", "dtype", "skew", "seed")


# ------------------------------------------------------------------------------ the matrix, checked
def check_matrix(matrix: object, n_ranks: int | None = None, field: str = "matrix") -> np.ndarray:
    """A square matrix of finite bytes >= 0, as float64; one line naming the first bad cell otherwise."""
    try:
        rows = matrix if isinstance(matrix, np.ndarray) else list(v.sequence(matrix, field, max_len=MAX_MATRIX_RANKS))
    except CcvizError:
        raise
    if isinstance(rows, np.ndarray):
        if rows.ndim != 2:
            raise CcvizError(f"{field}: needs 2 dimensions (rows x columns), got shape {rows.shape}", field)
        n = rows.shape[0]
    else:
        n = len(rows)
    if n > MAX_MATRIX_RANKS:
        raise CcvizError(f"{field}: {n:,} ranks; at most {MAX_MATRIX_RANKS:,} are accepted", field)
    if n < 2:
        raise CcvizError(f"{field}: needs at least 2 ranks, got {n}", field)
    if isinstance(rows, np.ndarray):
        if rows.shape[1] != n:
            raise CcvizError(f"{field}: must be square, got shape {rows.shape[0]}x{rows.shape[1]}", field)
        if rows.dtype.kind not in "iuf":
            raise CcvizError(f"{field}: cells must be numbers of bytes, got dtype {rows.dtype}", field)
        out = rows.astype(float)
    else:
        out = np.empty((n, n))
        for i, row in enumerate(rows):
            if not isinstance(row, (list, tuple)):
                raise CcvizError(f"{field}[{i}]: a row must be a list of {n} numbers, got {type(row).__name__}", field)
            if len(row) != n:
                raise CcvizError(f"{field}[{i}]: row {i} has {len(row)} cells; a {n}x{n} matrix needs {n}", field)
            for j, x in enumerate(row):
                if isinstance(x, bool) or not isinstance(x, (int, float)):
                    raise CcvizError(f"{field}[{i}][{j}]: {x!r} is not a number of bytes", field)
                out[i, j] = x
    bad = ~np.isfinite(out)
    if bad.any():
        i, j = np.argwhere(bad)[0]
        raise CcvizError(f"{field}[{i}][{j}]: {out[i, j]} is not a finite number of bytes", field)
    if (out < 0).any():
        i, j = np.argwhere(out < 0)[0]
        raise CcvizError(f"{field}[{i}][{j}]: {out[i, j]:g} bytes is negative; bytes sent are >= 0", field)
    if out.sum(axis=1).max() > v.MAX_SIZE_BYTES:
        i = int(out.sum(axis=1).argmax())
        raise CcvizError(f"{field}[{i}]: rank {i} sends {out[i].sum():.3g} B; at most {v.MAX_SIZE_BYTES:.0e} B per "
                         "rank", field)
    if n_ranks is not None and n != n_ranks:
        raise CcvizError(f"{field}: a {n}x{n} matrix for {n_ranks} ranks; give one row and column per rank", field)
    off = out.copy()
    np.fill_diagonal(off, 0.0)
    if not off.any():
        raise CcvizError(f"{field}: every cell off the diagonal is 0; nothing to send", field)
    return out


def read_matrix(path: str | Path, field: str = "matrix") -> np.ndarray:
    """A matrix file: ``.csv`` (one row per line, commas), ``.npy`` (a 2-D array), or ``.json`` (a list of rows,
    ``{"matrix": rows}``, or ``{"ranks": N, "bytes": [[i, j, b], ...]}`` for a sparse one)."""
    from ccviz.model.files import check_readable_file

    p = Path(path)
    check_readable_file(p, field)
    if p.stat().st_size > MAX_MATRIX_FILE_BYTES:
        raise CcvizError(f"{field}: {p} is {p.stat().st_size:,} bytes; at most {MAX_MATRIX_FILE_BYTES:,}", field)
    suffix = p.suffix.lower()
    if suffix == ".npy":
        try:
            array = np.load(p, mmap_mode="r", allow_pickle=False)
        except (ValueError, OSError) as e:
            raise CcvizError(f"{field}: {p} is not a NumPy .npy array ({e})", field) from None
        if array.ndim == 2 and max(array.shape) > MAX_MATRIX_RANKS:
            raise CcvizError(f"{field}: {max(array.shape):,} ranks; at most {MAX_MATRIX_RANKS:,} are accepted", field)
        return check_matrix(np.asarray(array), field=field)
    if suffix == ".csv":
        rows = []
        for k, line in enumerate(p.read_text(encoding="utf-8", errors="replace").splitlines()):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            cells = line.split(",")
            if len(cells) > MAX_MATRIX_RANKS:
                raise CcvizError(f"{field}: line {k + 1} has {len(cells):,} cells; at most {MAX_MATRIX_RANKS:,} ranks",
                                 field)
            row = []
            for j, cell in enumerate(cells):
                try:
                    row.append(float(cell))
                except ValueError:
                    raise CcvizError(f"{field}[{len(rows)}][{j}]: {cell.strip()!r} (line {k + 1}) is not a number of "
                                     "bytes", field) from None
            rows.append(row)
            if len(rows) > MAX_MATRIX_RANKS:
                raise CcvizError(f"{field}: more than {MAX_MATRIX_RANKS:,} rows", field)
        return check_matrix(rows, field=field)
    if suffix == ".json":
        from ccviz.model.files import read_structured

        data = read_structured(p, field)
        if isinstance(data, dict):
            unknown = set(data) - {"matrix", "ranks", "bytes"}
            if unknown:
                raise CcvizError(f"{field}: unknown key(s) {sorted(unknown)}; use 'matrix', or 'ranks' and 'bytes'",
                                 field)
            if "matrix" in data:
                return check_matrix(data["matrix"], field=field)
            return sparse_matrix(data.get("ranks"), data.get("bytes"), field)
        return check_matrix(data, field=field)
    raise CcvizError(f"{field}: {p.name} is not .csv, .npy or .json", field)


def sparse_matrix(ranks: object, entries: object, field: str = "matrix") -> np.ndarray:
    """``ranks`` N and ``[[i, j, bytes], ...]`` as a dense matrix (zeros elsewhere)."""
    n = v.integer(ranks, f"{field}.ranks", lo=2)
    if n > MAX_MATRIX_RANKS:
        raise CcvizError(f"{field}.ranks: {n:,} ranks; at most {MAX_MATRIX_RANKS:,} are accepted", f"{field}.ranks")
    out = np.zeros((n, n))
    for k, entry in enumerate(v.sequence(entries, f"{field}.bytes", max_len=n * n)):
        if not isinstance(entry, (list, tuple)) or len(entry) != 3:
            raise CcvizError(f"{field}.bytes[{k}]: expected [i, j, bytes], got {entry!r}", field)
        i = v.integer(entry[0], f"{field}.bytes[{k}][0]", lo=0, hi=n - 1)
        j = v.integer(entry[1], f"{field}.bytes[{k}][1]", lo=0, hi=n - 1)
        x = entry[2]
        if isinstance(x, bool) or not isinstance(x, (int, float)):
            raise CcvizError(f"{field}.bytes[{k}]: {x!r} is not a number of bytes", field)
        out[i, j] += x
    return check_matrix(out, field=field)


# ------------------------------------------------------------------------------ mixture of experts
def parse_moe(spec: str | dict) -> dict:
    """``experts=64,topk=8,tokens=4096,hidden=7168,dtype=bf16,skew=zipf:1.2,seed=0`` as keyword arguments of
    ``moe_matrix`` (unknown keys refused)."""
    if isinstance(spec, dict):
        items = dict(spec)
    else:
        items = {}
        for part in str(spec).split(","):
            if not part.strip():
                continue
            key, sep, value = part.partition("=")
            if not sep:
                raise CcvizError(f"moe: {part!r} is not KEY=VALUE (keys: {', '.join(MOE_KEYS)})", "moe")
            items[key.strip()] = value.strip()
    unknown = set(items) - set(MOE_KEYS)
    if unknown:
        raise CcvizError(f"moe: unknown key(s) {', '.join(sorted(unknown))}; use {', '.join(MOE_KEYS)}", "moe")
    out: dict = {}
    for key in ("experts", "topk", "tokens", "hidden", "seed"):
        if key in items:
            out[key] = v.integer(_int_text(items[key]), f"moe.{key}", lo=0 if key == "seed" else 1)
    for key in ("dtype", "skew"):
        if key in items:
            out[key] = str(items[key])
    return out


def _int_text(x: object) -> object:
    if isinstance(x, str):
        try:
            return int(x)
        except ValueError:
            return x
    return x


def expert_popularity(experts: int, skew: str, seed: int) -> np.ndarray:
    """Each expert's share of the routing: ``uniform``, or ``zipf:S`` (the k-th most popular gets weight
    1/k^S), the ranking shuffled by ``seed`` so the hot experts land on arbitrary ranks."""
    text = skew.strip().lower()
    if text in ("uniform", "none"):
        s = 0.0
    elif text.startswith("zipf:"):
        try:
            s = float(text[5:])
        except ValueError:
            raise CcvizError(f"moe.skew: {skew!r}; use uniform or zipf:S with S a number >= 0", "moe.skew") from None
        if not (math.isfinite(s) and 0 <= s <= 10):
            raise CcvizError(f"moe.skew: zipf exponent {s:g}; use 0 <= S <= 10", "moe.skew")
    else:
        raise CcvizError(f"moe.skew: {skew!r}; use uniform or zipf:S (e.g. zipf:1.2)", "moe.skew")
    weight = 1.0 / np.arange(1, experts + 1) ** s
    rng = np.random.default_rng(seed)
    return rng.permutation(weight / weight.sum())


def moe_routing(n_ranks: int, experts: int = 64, topk: int = 8, tokens: int = 4096, skew: str = "zipf:1.2",
                seed: int = 0) -> np.ndarray:
    """counts[i, e]: the tokens of rank i the router sends to expert e (each token to ``topk`` distinct experts
    drawn by popularity, Gumbel top-k: sampling without replacement)."""
    if topk > experts:
        raise CcvizError(f"moe.topk: {topk} experts per token but only {experts} experts", "moe.topk")
    if experts % n_ranks:
        raise CcvizError(f"moe.experts: {experts} experts do not split evenly over {n_ranks} ranks; use a multiple "
                         f"of {n_ranks}", "moe.experts")
    if n_ranks * tokens * experts > 2e9:
        raise CcvizError(f"moe.tokens: {n_ranks} ranks x {tokens} tokens x {experts} experts is too large to route "
                         "here (at most 2e9)", "moe.tokens")
    popularity = np.log(expert_popularity(experts, skew, seed))
    rng = np.random.default_rng(seed + 1)
    counts = np.zeros((n_ranks, experts), dtype=np.int64)
    for i in range(n_ranks):
        keys = popularity + rng.gumbel(size=(tokens, experts))
        chosen = np.argpartition(-keys, topk - 1, axis=1)[:, :topk]
        counts[i] = np.bincount(chosen.ravel(), minlength=experts)
    return counts


def moe_matrix(n_ranks: int, experts: int = 64, topk: int = 8, tokens: int = 4096, hidden: int = 7168,
               dtype: str = "bf16", skew: str = "zipf:1.2", seed: int = 0) -> np.ndarray:
    """The dispatch matrix in bytes: D[i, j] = (token copies rank i routes to the experts on rank j) x hidden x
    the dtype's bytes; experts e*n/E .. live on rank e // (E / n). Combine is ``D.T``."""
    if dtype not in DTYPE_BYTES:
        raise CcvizError(f"moe.dtype: {dtype!r}; choose one of {', '.join(DTYPE_BYTES)}", "moe.dtype")
    if n_ranks > MAX_MATRIX_RANKS:
        raise CcvizError(f"moe: {n_ranks:,} ranks; at most {MAX_MATRIX_RANKS:,}", "moe")
    counts = moe_routing(n_ranks, experts, topk, tokens, skew, seed)
    per_rank = experts // n_ranks
    to_rank = counts.reshape(n_ranks, n_ranks, per_rank).sum(axis=2)
    return to_rank.astype(float) * hidden * DTYPE_BYTES[dtype]


def moe_summary(matrix: np.ndarray) -> dict:
    """What the skew does to the traffic: the busiest receiver's bytes over the mean (the hot expert's rank)."""
    off = matrix.copy()
    np.fill_diagonal(off, 0.0)
    into = off.sum(axis=0)
    return {"max_over_mean_in": float(into.max() / into.mean()) if into.mean() > 0 else None,
            "bytes_moved": float(off.sum())}


# ------------------------------------------------------------------------------ the collective
def chunk_size(matrix: np.ndarray, budget: int) -> tuple[float, bool]:
    """The chunk size for ``matrix``'s off-diagonal cells and whether it splits every cell exactly."""
    off = matrix[~np.eye(len(matrix), dtype=bool)]
    positive = off[off > 0]
    total = float(positive.sum())
    if np.all(positive == positive[0]) and len(positive) <= budget:  # uniform: one chunk per pair
        return float(positive[0]), True
    if np.all(positive == np.round(positive)) and positive.max() < 2 ** 53:
        unit = int(np.gcd.reduce(positive.astype(np.int64)))
        per = max(1, math.ceil(total / unit / budget))
        return float(unit * per), per == 1 or bool(np.all(positive.astype(np.int64) % (unit * per) == 0))
    return max(v.MIN_CHUNK_BYTES, total / budget), False


def chunk_budget(n_ranks: int) -> int:
    return min(MAX_CHUNKS, CHUNKS_PER_PAIR * n_ranks * (n_ranks - 1))


def matrix_of(collective: Any) -> np.ndarray:
    """The bytes matrix of an AllToAllv, or of a uniform AllToAll (M/N per pair)."""
    if "matrix" in collective.meta:
        return collective.meta["matrix"]
    if collective.name == "alltoall":
        n = collective.n_ranks
        return np.full((n, n), collective.chunk_bytes * collective.chunks_per_rank)
    raise CcvizError(f"collective: {collective.name} has no traffic matrix", "collective")


def is_alltoallv(collective: Any) -> bool:
    return "matrix" in collective.meta and collective.name in ("alltoallv", "moe-dispatch", "moe-combine")


def rounding_note(collective: Any) -> str | None:
    """Where the chunks round the matrix up, by how much (the judged bytes exceed the matrix's)."""
    over = collective.meta.get("rounding_overhead", 0.0)
    if collective.meta.get("exact") or over <= 0:
        return None
    return (f"each pair's bytes rounded up to whole chunks of {collective.chunk_bytes:,.0f} B: the schedule moves "
            f"{over:.2%} more than the matrix (the limit is the matrix's own)")


def matrix_json(matrix: np.ndarray) -> list[list[float]]:
    return [[float(x) for x in row] for row in matrix]


def load_matrix_arg(text: str) -> np.ndarray:
    """A ``--matrix`` argument: a file path, or inline JSON rows (``[[0,1],[1,0]]``)."""
    if text.lstrip().startswith("["):
        try:
            return check_matrix(json.loads(text))
        except json.JSONDecodeError as e:
            raise CcvizError(f"matrix: inline JSON does not parse ({e.msg} at column {e.colno})", "matrix") from None
    return read_matrix(text)
