"""Schedules: what every synthesizer returns and what the simulator judges.

A schedule is a list of transfers ``(chunk, src, dst, start_s, end_s, op, step)``.
Timed transfers carry ``start_s``/``end_s``; an *untimed* schedule leaves them
``None`` and gives a logical ``step`` instead (ring step, tree level, epoch):
a transfer of chunk c out of node i at step s waits for every transfer of c
into i with a smaller step, and transfers on one link go in step order. The
simulator turns such a schedule into real times (``ccviz.simulate``).
"""

from __future__ import annotations

import gc
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from operator import itemgetter
from pathlib import Path
from typing import Any, Literal, NamedTuple

from ccviz.collectives import Collective
from ccviz.errors import CcvizError
from ccviz.topology import Topology

Op = Literal["copy", "reduce"]
Status = Literal["optimal", "feasible", "time_limit", "heuristic", "infeasible"]
Release = Literal["asap", "epoch"]
STATUSES = ("optimal", "feasible", "time_limit", "heuristic", "infeasible")
FORMAT_TAG = "ccviz-schedule/1"


class Transfer(NamedTuple):
    """One chunk crossing one link. ``op='reduce'`` adds the sender's partial to the receiver's."""

    chunk: int
    src: int
    dst: int
    start_s: float | None = None
    end_s: float | None = None
    op: Op = "copy"
    step: float = 0.0


@dataclass
class Schedule:
    """Transfers plus the metadata every front end shows beside the simulated result."""

    topology: Topology
    collective: Collective
    transfers: list[Transfer]
    algorithm: str
    options: dict[str, Any] = field(default_factory=dict)
    status: Status = "heuristic"
    mip_gap: float | None = None
    synth_time_s: float | None = None
    epoch_s: float | None = None
    epochs: int | None = None
    estimated_finish_s: float | None = None  # the synthesizer's own estimate, never the verdict
    notes: list[str] = field(default_factory=list)
    # How the simulator times an untimed schedule: "asap", or "epoch" (no transfer starts before its
    # epoch, floor(step) * epoch_s: the epoch-synchronous execution TE-CCL prescribes).
    release: Release = "asap"

    @property
    def is_timed(self) -> bool:
        return None not in map(itemgetter(3), self.transfers)  # start_s; C-speed on a million transfers

    @property
    def chunk_bytes(self) -> float:
        return self.collective.chunk_bytes

    def with_transfers(self, transfers: list[Transfer]) -> Schedule:
        """Same metadata, other transfers (used when the simulator fills in times)."""
        return Schedule(
            self.topology, self.collective, transfers, self.algorithm, dict(self.options), self.status,
            self.mip_gap, self.synth_time_s, self.epoch_s, self.epochs, self.estimated_finish_s, list(self.notes),
            self.release,
        )

    # ------------------------------------------------------------ serialization
    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT_TAG,
            "algorithm": self.algorithm,
            "options": _jsonable(self.options),
            "status": self.status,
            "mip_gap": self.mip_gap,
            "synth_time_s": self.synth_time_s,
            "epoch_s": self.epoch_s,
            "epochs": self.epochs,
            "estimated_finish_s": self.estimated_finish_s,
            "notes": self.notes,
            "release": self.release,
            "topology": self.topology.to_dict(),
            "collective": self.collective.to_dict(),
            "transfer_fields": list(Transfer._fields),
            "transfers": [list(t) for t in self.transfers],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Schedule:
        if not isinstance(d, dict) or "transfers" not in d or "topology" not in d or "collective" not in d:
            raise CcvizError(
                "schedule: not a ccviz schedule file (needs 'topology', 'collective' and 'transfers'); "
                "write one with `ccviz synth ... --out FILE`",
                "schedule",
            )
        fields = d.get("transfer_fields") or list(Transfer._fields)
        transfers = []
        for i, row in enumerate(d["transfers"]):
            try:
                rec = dict(zip(fields, row, strict=False)) if isinstance(row, list) else dict(row)
                transfers.append(Transfer(
                    int(rec["chunk"]), int(rec["src"]), int(rec["dst"]),
                    None if rec.get("start_s") is None else float(rec["start_s"]),
                    None if rec.get("end_s") is None else float(rec["end_s"]),
                    rec.get("op", "copy"), float(rec.get("step", 0.0)),
                ))
            except (KeyError, TypeError, ValueError) as exc:
                raise CcvizError(f"transfers[{i}]: malformed transfer ({exc})", "transfers") from None
        release = d.get("release", "asap")
        if release not in ("asap", "epoch"):
            raise CcvizError(f"release: {release!r} is not 'asap' or 'epoch'", "release")
        status = d.get("status", "heuristic")
        if status not in STATUSES:
            raise CcvizError(f"status: {status!r} is not one of {', '.join(STATUSES)}", "status")
        return cls(
            Topology.from_dict(d["topology"]),
            Collective.from_dict(d["collective"]),
            transfers,
            str(d.get("algorithm", "unknown")),
            dict(d.get("options") or {}),
            status,
            d.get("mip_gap"),
            d.get("synth_time_s"),
            d.get("epoch_s"),
            d.get("epochs"),
            d.get("estimated_finish_s"),
            list(d.get("notes") or []),
            release,
        )

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    def save(self, path: str | Path) -> None:
        Path(path).write_text(self.to_json())

    @classmethod
    def load(cls, path: str | Path) -> Schedule:
        p = Path(path)
        if not p.is_file():
            raise CcvizError(f"schedule: file {str(path)!r} does not exist", "schedule")
        try:
            data = json.loads(p.read_text())
        except json.JSONDecodeError as exc:
            raise CcvizError(f"schedule: {path} is not valid JSON ({exc.msg} at line {exc.lineno})", "schedule") from None
        return cls.from_dict(data)


def _jsonable(value: Any) -> Any:
    """Options may hold callables or events (progress, stop); keep only what JSON can carry."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items() if _is_plain(v)}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value if _is_plain(v)]
    return value


def _is_plain(v: Any) -> bool:
    return v is None or isinstance(v, (str, int, float, bool, list, tuple, dict))


@contextmanager
def gc_paused() -> Iterator[None]:
    """Building or reading a million transfers allocates a million small tuples that never form
    cycles; the cyclic collector rescanning them again and again costs more than the work itself."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
