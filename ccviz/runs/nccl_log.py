"""Read the text that nccl-tests and rccl-tests print (all_reduce_perf, all_gather_perf, reduce_scatter_perf,
alltoall_perf) into rows a calibration can fit.

Why a parser of our own: a user's measurement arrives as the log those programs print, often pasted with
other text around it (the mpirun line, a markdown heading, NCCL_DEBUG lines). Every data row has the same
shape in every version since 2019::

    size  count  type  redop  [root]  time algbw busbw #wrong  time algbw busbw #wrong
    (B)   (elements)                  (us) (GB/s) (GB/s)       (us) (GB/s) (GB/s)
                                      ---- out-of-place ----   ----- in-place -----

(``root`` appeared in 2.x; older logs print ``error`` as a float where newer print ``#wrong``, and either
may read ``N/A``.) A new header line (``# nThread ...``) starts a new test, so a log of several tests
concatenated reads as several sections. Sizes follow nccl-tests, as ccviz does: the per-rank buffer
(AllGather's output, ReduceScatter's input).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from ccviz.errors import CcvizError
from ccviz.model.files import read_text_file

#: nccl-tests program name -> ccviz collective
PROGRAMS = {
    "all_reduce_perf": "allreduce",
    "all_gather_perf": "allgather",
    "reduce_scatter_perf": "reducescatter",
    "alltoall_perf": "alltoall",
}
EXPECTED = ("nccl-tests or rccl-tests output (all_reduce_perf, all_gather_perf, reduce_scatter_perf or "
            "alltoall_perf): data rows of 'size count type redop [root] time algbw busbw #wrong time algbw busbw "
            "#wrong'")
MAX_LOG_BYTES = 20_000_000

_NUM = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
_WRONG = r"(?:\S+)"
_ROW = re.compile(
    rf"^\s*(?P<size>\d+)\s+(?P<count>\d+)\s+(?P<type>[A-Za-z0-9_]+)\s+(?P<redop>[A-Za-z_]+)\s+"
    rf"(?:(?P<root>-?\d+)\s+)?"
    rf"(?P<t_oop>{_NUM})\s+(?P<algbw_oop>{_NUM})\s+(?P<busbw_oop>{_NUM})\s+{_WRONG}\s+"
    rf"(?P<t_ip>{_NUM})\s+(?P<algbw_ip>{_NUM})\s+(?P<busbw_ip>{_NUM})\s+{_WRONG}\s*$"
)
_HEADER = re.compile(r"nThread\s+(?P<threads>\d+)\s+nGpus\s+(?P<gpus>\d+)")
_DEVICE = re.compile(r"Rank\s+(?P<rank>\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(?P<host>\S+)\s+device\s+\d+\s+"
                     r"\[[^\]]*\]\s*(?P<model>.*)$")
_PROGRAM = re.compile(r"\b(all_reduce_perf|all_gather_perf|reduce_scatter_perf|alltoall_perf)\b")
_VERSION = re.compile(r"\b(?:NCCL|RCCL) version\s+(\S+)|nccl-library=(\d+)|rccl-tests: Version\s+(\S+)")


@dataclass(frozen=True)
class LogRow:
    """One size of one test: out-of-place and in-place time (us) and busbw (GB/s) as printed."""

    size_bytes: int
    dtype: str
    redop: str
    time_oop_us: float
    busbw_oop_GBps: float
    time_ip_us: float
    busbw_ip_GBps: float

    def time_us(self, in_place: bool) -> float:
        return self.time_ip_us if in_place else self.time_oop_us

    def busbw_GBps(self, in_place: bool) -> float:
        return self.busbw_ip_GBps if in_place else self.busbw_oop_GBps


@dataclass
class LogSection:
    """One test of a log: its collective (when the log names it), ranks, hosts and rows."""

    collective: str | None = None
    ranks: int | None = None
    hosts: tuple[str, ...] = ()
    device: str = ""
    rows: list[LogRow] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"collective": self.collective, "ranks": self.ranks, "nodes": len(self.hosts) or None,
                "device": self.device, "rows": len(self.rows)}


@dataclass
class NcclTestsLog:
    """Everything a log says: its sections (one per test) and the NCCL/RCCL version if printed."""

    sections: list[LogSection]
    version: str = ""
    name: str = ""

    @property
    def rows(self) -> list[tuple[str | None, LogRow]]:
        return [(s.collective, r) for s in self.sections for r in s.rows]


def parse_log(text: str, name: str = "log", collective: str | None = None) -> NcclTestsLog:
    """Parse nccl-tests/rccl-tests output; ``collective`` names it where the log does not.

    Raises CcvizError naming what was expected when the text holds no data row.
    """
    version = ""
    sections: list[LogSection] = []
    current = LogSection()
    devices: dict[int, tuple[str, str]] = {}
    program: str | None = None

    def close() -> None:
        nonlocal current, devices
        if current.rows or devices:
            if devices:  # an excerpt may show only the last rank's line: the ranks are its number + 1
                current.ranks = max(devices) + 1
                if len(devices) == current.ranks:
                    current.hosts = tuple(dict.fromkeys(h for h, _ in devices.values()))
                current.device = next(iter(devices.values()))[1].strip()
            current.collective = current.collective or program
            sections.append(current)
        current, devices = LogSection(), {}

    for line in text.splitlines():
        if (m := _VERSION.search(line)) and not version:
            version = next(g for g in m.groups() if g)
        if m := _PROGRAM.search(line):
            program = PROGRAMS[m.group(1)]
            if current.rows:
                close()
            current.collective = program
            continue
        body = line.lstrip("#").strip() if line.lstrip().startswith("#") else line
        if _HEADER.search(body):
            if current.rows:
                close()
            continue
        if m := _DEVICE.search(body):
            if current.rows:
                close()
            devices[int(m.group("rank"))] = (m.group("host"), m.group("model"))
            continue
        if line.lstrip().startswith("#"):
            continue
        if m := _ROW.match(line):
            current.rows.append(LogRow(
                int(m.group("size")), m.group("type"), m.group("redop"),
                float(m.group("t_oop")), float(m.group("busbw_oop")),
                float(m.group("t_ip")), float(m.group("busbw_ip"))))
    close()
    sections = [s for s in sections if s.rows]
    if not sections:
        raise CcvizError(f"{name}: no nccl-tests data row found; expected {EXPECTED}", "log")
    for s in sections:
        s.collective = s.collective or collective
        if collective and s.collective != collective:
            raise CcvizError(f"{name}: the log is {s.collective} output but --collective says {collective}",
                             "collective")
        if s.collective is None:
            raise CcvizError(f"{name}: the log does not say which test printed it (no all_reduce_perf, "
                             "all_gather_perf, reduce_scatter_perf or alltoall_perf line); name it with --collective",
                             "collective")
    return NcclTestsLog(sections, version, name)


def read_log(path: str | Path, collective: str | None = None) -> NcclTestsLog:
    """Read and parse a log file (refused up front when larger than MAX_LOG_BYTES)."""
    p = Path(path)
    if p.is_file() and p.stat().st_size > MAX_LOG_BYTES:
        raise CcvizError(f"{p.name}: {p.stat().st_size:,} bytes is more than an nccl-tests log "
                         f"({MAX_LOG_BYTES:,} at most); cut it to the tests to fit", "log")
    return parse_log(read_text_file(p, "log"), p.name, collective)
