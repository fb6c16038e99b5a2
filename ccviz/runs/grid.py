"""A sweep's grid: topologies x collectives x algorithms x sizes x chunk counts, with solver options.

The grid is checked whole before any work starts (unknown algorithm, a size
range that runs backwards, a topology that does not load: one clear
``CcvizError``), and every point carries a ``key`` that identifies its row in
an output file, so a rerun of the same grid can skip the rows already there.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ccviz.bounds.cost import LowerBound, any_chunking_bound, lower_bound
from ccviz.builders.loading import load_topology
from ccviz.errors import CcvizError
from ccviz.model.collectives import make_collective, normalize_name
from ccviz.model.groups import group_ranks, parse_ranks
from ccviz.model.topology import Topology
from ccviz.model.units import parse_epoch, parse_size, size_sweep
from ccviz.synth.registry import get_algorithm

KEY_COLUMNS = ("topology_spec", "collective", "algorithm", "size_bytes", "chunks", "options")


def parse_sizes(text: str | float | Sequence[Any]) -> list[float]:
    """'1KB..1GB' (nccl-tests x4 steps), '1MB,64MB' or a list; sorted, without repeats.

    A range whose ends lie on the papers' ladder (1, 4, 16, 64, 256 x KB/MB/GB) walks that
    ladder, so 1KB..1GB ends at 1GB; any other range multiplies the low end by 4 while it
    stays within the high end.
    """
    if isinstance(text, (list, tuple)):
        items = [x for item in text for x in parse_sizes(item)]
        return sorted(set(items))
    if isinstance(text, (int, float)):
        return [parse_size(text, "size")]
    text = str(text).strip()
    if ".." in text:
        low_text, _, high_text = text.partition("..")
        low, high = parse_size(low_text, "size"), parse_size(high_text, "size")
        if high < low:
            raise CcvizError(f"--size: the range {text!r} runs backwards; write LOW..HIGH, e.g. 1KB..1GB", "size")
        ladder = size_sweep(low, high)
        if ladder and math.isclose(ladder[0], low) and math.isclose(ladder[-1], high):
            return ladder
        sizes, size = [], low
        while size <= high * (1 + 1e-12):
            sizes.append(size)
            size *= 4
        return sizes
    parts = [p for p in text.split(",") if p.strip()]
    if not parts:
        raise CcvizError("--size: give a size, a list (1MB,64MB) or a range (1KB..1GB)", "size")
    return sorted({parse_size(p, "size") for p in parts})


def split_list(values: str | Iterable[Any] | None) -> list[str]:
    """'a,b' or ['a', 'b,c'] -> ['a', 'b', 'c'] (repeatable flags and YAML lists read alike)."""
    if values is None:
        return []
    if isinstance(values, (str, int, float)):
        values = [values]
    return [part.strip() for value in values for part in str(value).split(",") if part.strip()]


@dataclass(frozen=True)
class Point:
    """One row of the sweep: what to run and the key that names its row in the output."""

    topology_spec: str
    collective: str
    algorithm: str
    size_bytes: float
    chunks: int
    options: tuple[tuple[str, Any], ...]  # solver options (time_limit, epoch, gap, ...), sorted

    @property
    def options_text(self) -> str:
        return json.dumps(dict(self.options), sort_keys=True)

    @property
    def bound_key(self) -> tuple:
        """What the lower bound depends on (the algorithms of one size share it)."""
        options = dict(self.options)
        return (self.topology_spec, self.collective, self.size_bytes, self.chunks, options.get("root"),
                options.get("ranks"))

    @property
    def key(self) -> tuple[str, ...]:
        return row_key(self.as_row())

    def as_row(self) -> dict[str, Any]:
        """The grid columns of this point's row."""
        return {"topology_spec": self.topology_spec, "collective": self.collective, "algorithm": self.algorithm,
                "size_bytes": self.size_bytes, "chunks": self.chunks, "options": self.options_text}


def row_key(row: dict[str, Any]) -> tuple[str, ...]:
    """The identity of a row (as written, or as read back from CSV/parquet)."""
    return (str(row["topology_spec"]), str(row["collective"]), str(row["algorithm"]),
            repr(float(row["size_bytes"])), str(int(float(row["chunks"]))), str(row["options"]))


@dataclass
class Grid:
    """Everything a sweep runs; ``points()`` lists its rows, topologies outermost, algorithms innermost."""

    topologies: list[str]
    collectives: list[str]
    algorithms: list[str]
    sizes: list[float]
    chunks: list[int] = field(default_factory=lambda: [1])
    time_limit: float | None = None  # per row, seconds
    epoch: str | float | None = None
    gap: float | None = None
    root: int | None = None  # rank of broadcast/reduce/gather/scatter (default: the first GPU)
    ranks: str | None = None  # a process group ("0-7,16"): the collective covers it, the other GPUs relay
    loaded: dict[str, Topology] = field(default_factory=dict, repr=False)
    unsupported: list[tuple[str, str]] = field(default_factory=list, repr=False)  # (algorithm, collective) pairs

    @classmethod
    def make(cls, topology: Iterable[str | Topology] | str | Topology, collective: Any, algorithm: Any, size: Any,
             chunks: Any = 1, time_limit: float | None = None, epoch: Any = None, gap: float | None = None,
             root: int | None = None, ranks: str | Sequence[int] | None = None) -> Grid:
        """Parse and check a grid from flag values (strings, comma lists or lists).

        A topology may also be a ``Topology`` already built (the app's): its row key is its name.
        """
        given = [topology] if isinstance(topology, (str, Topology)) else list(topology or [])
        built = {t.name: t for t in given if isinstance(t, Topology)}
        topologies = list(built) + split_list([t for t in given if not isinstance(t, Topology)])
        if not topologies:
            raise CcvizError("--topology: give at least one topology, e.g. --topology ring:n=8", "topology")
        collectives = [normalize_name(c) for c in dict.fromkeys(split_list(collective))]
        if not collectives:
            raise CcvizError("--collective: give at least one collective, e.g. --collective allgather", "collective")
        algorithms = [get_algorithm(a).name for a in dict.fromkeys(split_list(algorithm))]
        if not algorithms:
            raise CcvizError("--algorithm: give at least one algorithm, e.g. --algorithm ring,tacos", "algorithm")
        if size is None or size == "":
            raise CcvizError("--size: give sizes, e.g. --size 1KB..1GB or --size 1MB,64MB", "size")
        counts = []
        for c in split_list(chunks) or ["1"]:
            try:
                counts.append(int(c))
            except ValueError:
                raise CcvizError(f"--chunks: {c!r} is not a whole number; write e.g. --chunks 1,2", "chunks") from None
        if any(c < 1 for c in counts):
            raise CcvizError(f"--chunks: chunk counts must be >= 1, got {counts}", "chunks")
        if time_limit is not None and not (time_limit > 0 and math.isfinite(time_limit)):
            raise CcvizError(f"--time-limit: must be a positive number of seconds, got {time_limit}", "time-limit")
        if gap is not None and not (0 <= gap < 1):
            raise CcvizError(f"--gap: a relative MIP gap between 0 and 1 (e.g. 0.3), got {gap}", "gap")
        group = None
        if ranks is not None and ranks != "":
            group = ",".join(map(str, parse_ranks(ranks) if isinstance(ranks, str) else [int(r) for r in ranks]))
        grid = cls(list(dict.fromkeys(topologies)), collectives, algorithms, parse_sizes(size),
                   sorted(set(counts)), time_limit, None if epoch is None else parse_epoch(epoch), gap, root,
                   group, dict(built))
        grid._check()
        return grid

    @classmethod
    def from_yaml(cls, path: str | Path, **overrides: Any) -> Grid:
        """A grid file (keys as the flags: topology, collective, algorithm, size, chunks, time_limit,
        epoch, gap, root); flags given on the command line (``overrides`` not None) win."""
        import yaml

        from ccviz.model.files import safe_yaml

        p = Path(path)
        if not p.is_file():
            raise CcvizError(f"--grid: file {str(path)!r} does not exist", "grid")
        try:
            data = safe_yaml(p.read_text(), p.name, "grid") or {}
        except yaml.YAMLError as exc:
            raise CcvizError(f"--grid: {p.name} is not valid YAML ({exc})", "grid") from None
        if not isinstance(data, dict):
            raise CcvizError(f"--grid: {p.name} should be a mapping of topology, collective, algorithm, size, ...",
                             "grid")
        data = {str(k).replace("-", "_"): v for k, v in data.items()}
        allowed = {"topology", "collective", "algorithm", "size", "chunks", "time_limit", "epoch", "gap", "root",
                   "ranks"}
        unknown = sorted(set(data) - allowed)
        if unknown:
            raise CcvizError(f"--grid: unknown key(s) {', '.join(unknown)} in {p.name}; use {', '.join(sorted(allowed))}",
                             "grid")
        data.update({k: v for k, v in overrides.items() if v is not None and v != []})
        if "topology" not in data:
            raise CcvizError(f"--topology: {p.name} names no topology and none was given on the command line",
                             "topology")
        return cls.make(**{k: data.get(k) for k in allowed if k in data})

    def _check(self) -> None:
        for spec in self.topologies:
            if spec not in self.loaded:
                self.loaded[spec] = load_topology(spec)
            if self.ranks is not None:
                group_ranks(self.loaded[spec], self.ranks)  # every topology must hold the group
        pairs = [(a, c) for a in self.algorithms for c in self.collectives]
        self.unsupported = [(a, c) for a, c in pairs if not get_algorithm(a).supports(c)]
        if len(self.unsupported) == len(pairs):
            raise CcvizError(f"--algorithm: none of {', '.join(self.algorithms)} implements "
                             f"{', '.join(self.collectives)}; see `ccviz list`", "algorithm")

    def solver_options(self) -> tuple[tuple[str, Any], ...]:
        options = {"time_limit": self.time_limit, "epoch": self.epoch, "gap": self.gap, "root": self.root,
                   "ranks": self.ranks}
        return tuple(sorted((k, v) for k, v in options.items() if v is not None))

    def points(self) -> list[Point]:
        """Every combination, one row each; an (algorithm, collective) pair in ``unsupported`` still gets its
        rows, which say that the algorithm does not implement the collective."""
        options = self.solver_options()
        return [Point(t, c, a, s, k, options)  # the algorithms of one size side by side: they share its bound
                for t in self.topologies for c in self.collectives for s in self.sizes for k in self.chunks
                for a in self.algorithms]


def size_bound(topology: Topology, collective: str, size: float, chunks: int = 1,
               root: int | None = None, ranks: Sequence[int] | str | None = None) -> LowerBound | None:
    """The topology's lower bound for this collective and size (computed once, shared by its rows): one that
    holds at any chunking where there is one (``any_chunking_bound``), so every algorithm of the size is
    measured against the same bound; else the bound at ``chunks`` per rank."""
    try:
        over = topology if ranks is None else group_ranks(topology, ranks)
        coll = make_collective(collective, over, size, chunks, root)
        return any_chunking_bound(topology, coll) or lower_bound(topology, coll)
    except CcvizError:
        return None
