"""Schedules: what every synthesizer returns and what the simulator judges.

A schedule is a list of transfers ``(chunk, src, dst, start_s, end_s, op, step)``.
Timed transfers carry ``start_s``/``end_s``; an *untimed* schedule leaves them
``None`` and gives a logical ``step`` instead (ring step, tree level, epoch):
a transfer of chunk c out of node i at step s waits for every transfer of c
into i with a smaller step, and transfers on one link go in step order. The
simulator turns such a schedule into real times (``ccviz.judge.simulate``).
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

from ccviz.errors import CcvizError
from ccviz.model import validate as v
from ccviz.model.collectives import Collective
from ccviz.model.files import read_structured
from ccviz.model.topology import MAX_NODE_ID, Topology

Op = Literal["copy", "reduce", "relay", "combine"]  # relay: in transit, see ccviz.judge.simulate.relay_continuations
Status = Literal["optimal", "feasible", "time_limit", "heuristic", "infeasible"]
Release = Literal["asap", "epoch"]
# Why a synthesizer handed back its best complete schedule before its search was over (a closer one may
# exist within a longer time limit): its time limit ran out, or Stop was pressed.
CutShort = Literal["time_limit", "stopped"]
CUT_SHORT = ("time_limit", "stopped")
STATUSES = ("optimal", "feasible", "time_limit", "heuristic", "infeasible")
FORMAT_TAG = "ccviz-schedule/1"


RELAY = "relay"  # a hop carrying a value in transit (see ccviz.judge.simulate.relay_continuations)
COMBINE = "combine"  # a contribution added into a reducing switch's in-network sum (see ccviz.judge.in_network)
OPS = ("copy", "reduce", RELAY, COMBINE)

class Transfer(NamedTuple):
    """One chunk crossing one link. ``op='reduce'`` adds the sender's partial to the receiver's;
    ``op='relay'`` leaves the receiver's own value alone and the next transfer carries the value on;
    ``op='combine'`` adds the sender's partial into a reducing switch's running sum of the chunk."""

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
    # Epoch-model synthesizers: the proven lower bound on epochs (epochs == bound_epochs is the certificate
    # of optimality in that model; it says nothing about continuous time, where replays can be faster).
    bound_epochs: int | None = None
    # Textbook algorithms: per transfer, the 1-based logical round it belongs to (a relayed send's hops
    # share one round), and one label per round ("reduce-scatter, distance 2"). None for other schedules.
    rounds: list[int] | None = None
    round_labels: list[str] = field(default_factory=list)
    cut_short: CutShort | None = None  # see ``CutShort``; None: the search ran to its end

    @property
    def n_rounds(self) -> int:
        return max(self.rounds, default=0) if self.rounds else 0

    @property
    def is_timed(self) -> bool:
        columns = getattr(self.transfers, "columns", None)  # the simulator's timed transfers say so
        if columns is not None:
            return columns.start is not None
        return None not in map(itemgetter(3), self.transfers)  # start_s; C-speed on a million transfers

    @property
    def sums_in_switches(self) -> bool:
        """Whether a reducing switch adds any of its data (a ``combine`` transfer): the pages and the CLI say so
        beside the limit without switch sums."""
        return any(t.op == COMBINE for t in self.transfers)

    @property
    def chunk_bytes(self) -> float:
        return self.collective.chunk_bytes

    def with_transfers(self, transfers: list[Transfer]) -> Schedule:
        """Same metadata, other transfers (used when the simulator fills in times)."""
        return Schedule(
            self.topology, self.collective, transfers, self.algorithm, dict(self.options), self.status,
            self.mip_gap, self.synth_time_s, self.epoch_s, self.epochs, self.estimated_finish_s, list(self.notes),
            self.release, self.bound_epochs,
            list(self.rounds) if self.rounds and len(self.rounds) == len(transfers) else None,
            list(self.round_labels), self.cut_short,
        )

    # ------------------------------------------------------------ serialization
    def to_dict(self) -> dict[str, Any]:
        rounds = {"rounds": self.rounds, "round_labels": self.round_labels} if self.rounds else {}
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
            "bound_epochs": self.bound_epochs,
            "cut_short": self.cut_short,
            "topology": self.topology.to_dict(),
            "collective": self.collective.to_dict(),
            "transfer_fields": list(Transfer._fields),
            "transfers": [list(t) for t in self.transfers],
            **rounds,
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
        if fields != list(Transfer._fields):
            raise CcvizError(f"transfer_fields: expected {list(Transfer._fields)}, got {fields!r}", "transfer_fields")
        rows = v.sequence(d["transfers"], "transfers", max_len=v.MAX_TRANSFERS)
        transfers = [_transfer_from_row(row, i) for i, row in enumerate(rows)]
        timed = [t.start_s is not None for t in transfers]
        if any(timed) and not all(timed):
            raise CcvizError("transfers: either every transfer has a start time or none has; mixing is ambiguous",
                             "transfers")
        release = d.get("release", "asap")
        if release not in ("asap", "epoch"):
            raise CcvizError(f"release: {release!r} is not 'asap' or 'epoch'", "release")
        rounds = d.get("rounds")
        if not isinstance(rounds, list) or len(rounds) != len(transfers):
            rounds = None  # labels for other transfers (a hand-edited file): show it without rounds
        else:
            rounds = [v.integer(r, f"rounds[{i}]", lo=1) for i, r in enumerate(rounds)]
        bound_epochs = d.get("bound_epochs")
        status = d.get("status", "heuristic")
        if status not in STATUSES:
            raise CcvizError(f"status: {status!r} is not one of {', '.join(STATUSES)}", "status")
        epoch_s = v.optional_number(d.get("epoch_s"), "epoch_s", positive=True)
        if release == "epoch" and epoch_s is None:
            raise CcvizError("epoch_s: an epoch-released schedule needs a positive epoch_s", "epoch_s")
        epochs = d.get("epochs")
        cut_short = d.get("cut_short")
        if cut_short is not None and cut_short not in CUT_SHORT:
            raise CcvizError(f"cut_short: {cut_short!r} is not one of {', '.join(CUT_SHORT)} (or null: the search "
                             "ran to its end)", "cut_short")
        topology = Topology.from_dict(v.mapping(d["topology"], "topology"))
        return cls(
            topology,
            Collective.from_dict(d["collective"], topology),
            transfers,
            str(d.get("algorithm", "unknown")),
            dict(v.mapping(d.get("options") or {}, "options")),
            status,
            v.optional_number(d.get("mip_gap"), "mip_gap", nonnegative=True),
            v.optional_number(d.get("synth_time_s"), "synth_time_s", nonnegative=True),
            epoch_s,
            None if epochs is None else v.integer(epochs, "epochs", lo=0),
            v.optional_number(d.get("estimated_finish_s"), "estimated_finish_s"),
            [str(n) for n in v.sequence(d.get("notes") or [], "notes")],
            release,
            None if bound_epochs is None else v.integer(bound_epochs, "bound_epochs", lo=0),
            rounds,
            [str(label) for label in v.sequence(d.get("round_labels") or [], "round_labels")],
            cut_short,
        )

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    def save(self, path: str | Path) -> None:
        Path(path).write_text(self.to_json())

    @classmethod
    def load(cls, path: str | Path) -> Schedule:
        return cls.from_dict(read_structured(path, "schedule"))


def _transfer_from_row(row: Any, i: int) -> Transfer:
    """One transfer, typed strictly: ids are whole numbers, times finite, op one of ``OPS``."""
    where = f"transfers[{i}]"
    if isinstance(row, list):
        if len(row) != len(Transfer._fields):
            raise CcvizError(f"{where}: expected {len(Transfer._fields)} values {list(Transfer._fields)}, "
                             f"got {len(row)}", "transfers")
        rec = dict(zip(Transfer._fields, row, strict=True))
    elif isinstance(row, dict):
        rec = row
        missing = [k for k in ("chunk", "src", "dst") if k not in rec]
        if missing:
            raise CcvizError(f"{where}: missing {', '.join(missing)}", "transfers")
    else:
        raise CcvizError(f"{where}: expected a list or an object, got {type(row).__name__}", "transfers")
    op = rec.get("op", "copy")
    if op not in OPS:
        raise CcvizError(f"{where}.op: {op!r} is not one of {', '.join(map(repr, OPS))}", "transfers")
    start, end = rec.get("start_s"), rec.get("end_s")
    return Transfer(
        v.integer(rec["chunk"], f"{where}.chunk", lo=0, hi=MAX_NODE_ID),  # ids index arrays: bounded like nodes'
        v.integer(rec["src"], f"{where}.src", lo=0, hi=MAX_NODE_ID),
        v.integer(rec["dst"], f"{where}.dst", lo=0, hi=MAX_NODE_ID),
        v.optional_number(start, f"{where}.start_s"),
        v.optional_number(end, f"{where}.end_s"),
        op,
        v.number(rec.get("step", 0.0), f"{where}.step"),
    )


def _jsonable(value: Any) -> Any:
    """Options may hold callables or events (progress, stop); keep only what JSON can carry."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items() if _is_plain(v)}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value if _is_plain(v)]
    return value


def _is_plain(v: Any) -> bool:
    return v is None or isinstance(v, (str, int, float, bool, list, tuple, dict))


PROMOTE_AT = 100_000  # objects allocated in a pause beyond which they go straight to the oldest generation


@contextmanager
def gc_paused() -> Iterator[None]:
    """Building or reading a million transfers allocates a million small tuples that never form
    cycles; the cyclic collector rescanning them again and again costs more than the work itself.

    Transfers are tuple subclasses, which the collector never stops tracking, so after the pause a
    big batch would still be scanned once in each young generation before it settles in the oldest.
    It skips that: ``gc.freeze()`` then ``gc.unfreeze()`` moves every tracked object into the oldest
    generation at once (documented behaviour, a list splice), where it is scanned only at the next
    full collection, as any long-lived object. Not done when the program froze objects itself."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            if gc.get_count()[0] > PROMOTE_AT and not gc.get_freeze_count():
                gc.freeze()
                gc.unfreeze()
            gc.enable()


class JudgedTransfers(list):
    """The simulator's timed transfers: a read-only list that carries the arrays they were built from.

    ``columns`` (or None) holds each field as an array, so judging the timed schedule does not read a
    million tuples back into arrays. Read-only is what makes that safe: the list cannot drift from its
    arrays (every mutating method refuses). It pickles and copies as a plain list (the arrays stay behind).
    """

    columns: Any = None

    def __reduce__(self):  # noqa: ANN204 - pickle and copy give a plain list
        return list, (list(self),)


def _refuse(name: str):  # noqa: ANN202 - a method that refuses
    def refuse(self, *args, **kwargs):  # noqa: ANN001, ANN202
        raise TypeError(f"JudgedTransfers.{name}: the simulator's timed transfers are read-only "
                        "(the arrays they were computed from travel with them); copy them with list(...)")
    return refuse


for _name in ("__setitem__", "__delitem__", "__iadd__", "__imul__", "append", "extend", "insert", "pop", "remove",
              "clear", "sort", "reverse"):
    setattr(JudgedTransfers, _name, _refuse(_name))
