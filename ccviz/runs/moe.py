"""AllToAllv and mixture-of-experts runs: a traffic matrix from a file or the MoE generator, one judged run
per step (``-c alltoallv``: the matrix; ``-c moe``: dispatch, then combine, its transpose, after it).

The CLI, the app and the bench call these, so a matrix means the same everywhere.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ccviz.errors import CcvizError
from ccviz.model.collectives import Collective
from ccviz.model.topology import Topology
from ccviz.runs.pipeline import RunResult, run
from ccviz.synth.registry import SynthOptions

MATRIX_COLLECTIVES = ("alltoallv", "moe")


def traffic_matrix(n_ranks: int, matrix: str | np.ndarray | None = None, moe: str | dict | None = None
                   ) -> np.ndarray:
    """The bytes matrix from ``--matrix`` (a file, inline JSON rows or an array) or ``--moe`` (generator)."""
    from ccviz.model.traffic import check_matrix, load_matrix_arg, moe_matrix, parse_moe

    if (matrix is None) == (moe is None):
        raise CcvizError("matrix: give a traffic matrix (--matrix FILE) or the MoE generator (--moe experts=...,"
                         "topk=...), one of the two", "matrix")
    if moe is not None:
        return moe_matrix(n_ranks, **parse_moe(moe))
    m = load_matrix_arg(matrix) if isinstance(matrix, str) else check_matrix(matrix)
    return check_matrix(m, n_ranks)


def matrix_collective(topology: Topology, matrix: np.ndarray, ranks: Sequence[int] | str | None = None,
                      name: str = "alltoallv") -> Collective:
    """An AllToAllv over the fabric's GPUs, or a process group (``--ranks``: the other GPUs relay)."""
    from ccviz.model.collectives import alltoallv_collective
    from ccviz.model.groups import group_ranks

    over = topology if ranks is None else group_ranks(topology, ranks)
    return alltoallv_collective(over, matrix, name=name)


@dataclass
class MoeResult:
    """Dispatch, then combine (its transpose) once the experts are done: one judged run each."""

    dispatch: RunResult
    combine: RunResult

    @property
    def finish_time_s(self) -> float:
        return self.dispatch.finish_time_s + self.combine.finish_time_s

    @property
    def limit_s(self) -> float | None:
        a, b = self.dispatch.limit_s, self.combine.limit_s
        return None if a is None or b is None else a + b

    def summary(self) -> dict[str, Any]:
        """``synth --json`` for ``-c moe``: the usual keys over both steps, and each step's own summary."""
        d, c = self.dispatch.summary(), self.combine.summary()
        out = dict(d)
        out.update({
            "collective": "moe",
            "finish_time_s": self.finish_time_s,
            "limit_s": self.limit_s,
            "limit_fraction": None if self.limit_s is None else self.limit_s / self.finish_time_s,
            "lower_bound_s": d["lower_bound_s"] + c["lower_bound_s"],
            "synth_time_s": (d["synth_time_s"] or 0) + (c["synth_time_s"] or 0),
            "transfers": d["transfers"] + c["transfers"],
            "verified": d["verified"] and c["verified"],
            "violations": d["violations"] + c["violations"],
            "algbw_GBps": None, "busbw_GBps": None,
            "notes": [f"dispatch: {n}" for n in d["notes"]] + [f"combine: {n}" for n in c["notes"]],
            "steps": {"dispatch": d, "combine": c},
        })
        return out


def run_matrix(topology: Topology, collective: str, algorithm: str, matrix: np.ndarray,
               options: SynthOptions | None = None, ranks: Sequence[int] | str | None = None
               ) -> RunResult | MoeResult:
    """``alltoallv``: one judged run of the matrix; ``moe``: dispatch (the matrix) then combine (its transpose)."""
    if collective == "alltoallv":
        return run(topology, matrix_collective(topology, matrix, ranks), algorithm, options=options)
    if collective != "moe":
        raise CcvizError(f"collective: {collective!r} takes no matrix; use {' or '.join(MATRIX_COLLECTIVES)}",
                         "collective")
    dispatch = run(topology, matrix_collective(topology, matrix, ranks), algorithm, options=options)
    combine = run(topology, matrix_collective(topology, matrix.T.copy(), ranks), algorithm, options=options)
    return MoeResult(dispatch, combine)


# ------------------------------------------------------------------------------ in a workload
def split_run_entries(text: str) -> list[str]:
    """``ep:moe:experts=64,topk=8,dp:allreduce:1GB`` -> the entries: a piece without ``:`` before its ``=`` (an
    MoE key) belongs to the entry before it."""
    entries: list[str] = []
    for piece in (p.strip() for p in str(text).split(",")):
        if not piece:
            continue
        key = piece.partition("=")[0]
        if entries and "=" in piece and ":" not in key:
            entries[-1] += "," + piece
        else:
            entries.append(piece)
    return entries


def group_matrix(spec: str, n_ranks: int, group: int) -> np.ndarray:
    """An expert-parallel group's dispatch matrix: the generator's, each group routed with its own seed."""
    from ccviz.model.traffic import moe_matrix, parse_moe

    params = parse_moe(spec)
    params["seed"] = params.get("seed", 0) + group
    return moe_matrix(n_ranks, **params)


def workload_chunk(spec: str, n_ranks: int, others: list[float]) -> float:
    """The MoE groups' chunk size in a workload: near the matrix's own (``traffic.chunk_size``), and a whole
    divisor or multiple of the smallest chunk of the other kinds, so every group's chunks cut into one unit
    (the judge has one chunk size)."""
    import math

    from ccviz.model.traffic import chunk_budget, chunk_size

    own, _ = chunk_size(group_matrix(spec, n_ranks, 0), chunk_budget(n_ranks))
    if not others:
        return own
    base = min(others)
    return base / math.ceil(base / own) if own <= base else base * math.floor(own / base)


def matrix_limit(topology: Topology, matrix: np.ndarray, ranks: Sequence[int] | None = None):
    """The exact limit of a matrix (``ccviz limit -c alltoallv``), without cutting it into chunks: a limit needs
    only the bytes (512 ranks make over 260,000 pairs, more chunks than a schedule is allowed)."""
    from ccviz.bounds.demand_flow import alltoallv_limit
    from ccviz.model.collectives import _ranks_of
    from ccviz.model.traffic import check_matrix

    members = _ranks_of(topology if ranks is None else list(ranks))
    m = check_matrix(matrix, len(members))
    demand = Collective("alltoallv", members, (), float(m.max()), float(m.sum(axis=1).max()), meta={"matrix": m})
    return alltoallv_limit(topology, demand)
