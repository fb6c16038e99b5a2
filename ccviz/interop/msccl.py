"""MSCCL XML programs: a parser and an independent executor that proves (or refutes) that they run.

An MSCCL algorithm (msccl-tools, SCCL, TE-CCL's exporter, ccviz's own export)
is ``<algo>`` with per ``<gpu>`` buffer sizes in chunks and thread blocks
``<tb send recv chan>`` holding ordered ``<step>``s. This module runs such a
program the way the MSCCL/RCCL interpreter kernels do, but on *symbolic*
data, so that a wrong program is caught without a GPU:

- a thread block executes its steps in order; ``depid``/``deps`` wait until a
  step of another thread block of the same GPU has completed *and signalled*
  (the runtime only publishes progress on steps marked ``hasdep="1"``); ``nop``
  steps only wait;
- a send on (peer, channel) pairs in FIFO order with the peer's thread block
  whose ``recv`` is this GPU on that channel; a connection holds at most
  ``fifo_depth`` unconsumed messages (NCCL_STEPS / chunk steps = 2), so a
  sender blocks when its receiver falls behind;
- buffers ``i``/``o``/``s`` are addressed in chunk units; in-place runs alias
  input and output as the runtime does (AllGather: ``i[k]`` is
  ``o[rank*C/n + k]``; ReduceScatter: ``o[k]`` is ``i[rank*C/n + k]``;
  otherwise ``i`` is ``o``);
- every slot holds the multiset of contributions ``(rank, input index)`` it
  carries; a reduction adds multisets, so a lost update or a double count is
  visible in the postcondition;
- vector clocks order every access: two accesses to one slot from different
  thread blocks, at least one a write, that no chain of program order,
  dependencies or messages orders, are a data race, even if this particular
  interleaving computed the right value;
- a stuck run reports every blocked step and the cycle of waits.

The runtime limits (at most 32 sending and 32 receiving thread blocks per
channel, steps per thread block: 64 as RCCL and msccl-executor-nccl are built by default) are checked too. Semantics were
read from the runtimes' sources (msccl-executor-nccl, RCCL, microsoft/msccl
and msccl-tools); the code is this project's own.
"""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from xml.parsers import expat

from ccviz.errors import CcvizError

STEP_TYPES = ("s", "r", "rcs", "rrc", "rrs", "rrcs", "re", "cpy", "nop")
RECEIVES = frozenset({"r", "rcs", "rrc", "rrs", "rrcs"})
SENDS = frozenset({"s", "rcs", "rrs", "rrcs"})
REDUCES = frozenset({"rrc", "rrs", "rrcs", "re"})
BUFFERS = ("i", "o", "s")
# Current runtimes spell it reducescatter; microsoft/msccl v0.x and old msccl-tools reduce_scatter.
COLL_NAMES = {"reduce_scatter": "reducescatter"}
MSCCL_COLLECTIVES = ("allreduce", "allgather", "reducescatter", "alltoall", "broadcast", "reduce", "gather",
                     "scatter", "custom")
# msccl-tools writes coll="custom" for collectives it has no name for (its Broadcast, Gather, Scatter, Reduce
# examples): no buffer aliasing, every declared input chunk holds data, and what the outputs must hold is
# whatever the program leaves there (``Execution.outputs``).
CUSTOM = "custom"

MAX_TBS_PER_CHANNEL = 32  # MSCCL_MAX_NUM_THREAD_BLOCKS_PER_CHANNEL: sending / receiving thread blocks
MAX_STEPS_RCCL = 64  # MSCCL_MAX_NUM_STEPS as built by default: RCCL, and msccl-executor-nccl (its Makefile's ?= 64)
MAX_COUNT = 72  # MSCCL_MAX_COUNT: cnt must stay below it
MAX_THREAD_BLOCKS = 216  # MSCCL_MAX_NUM_THREAD_BLOCKS per GPU
FIFO_DEPTH = 2  # NCCL_STEPS / MSCCL_CHUNKSTEPS messages in flight per connection


# ------------------------------------------------------------------------ program
@dataclass(frozen=True)
class Step:
    """One ``<step>`` as written; ``line`` points back into the file for error messages."""

    s: int
    type: str
    srcbuf: str
    srcoff: int
    dstbuf: str
    dstoff: int
    cnt: int
    depid: int
    deps: int
    hasdep: bool
    line: int


@dataclass(frozen=True)
class ThreadBlock:
    """One thread block: sends to ``send``, receives from ``recv`` (-1: none) on channel ``chan``."""

    id: int
    send: int
    recv: int
    chan: int
    steps: tuple[Step, ...]
    line: int


@dataclass(frozen=True)
class Gpu:
    """One rank: its declared buffer sizes in chunks and its thread blocks (ids 0..n-1)."""

    id: int
    i_chunks: int
    o_chunks: int
    s_chunks: int
    tbs: tuple[ThreadBlock, ...]
    line: int


@dataclass(frozen=True)
class Program:
    """A parsed MSCCL algorithm; ``coll`` is normalized (reduce_scatter -> reducescatter)."""

    name: str
    proto: str
    nchannels: int
    nchunksperloop: int
    ngpus: int
    coll: str
    inplace: bool
    outofplace: bool | None  # None: the attribute is absent (msccl-tools omits it)
    min_bytes: int | None
    max_bytes: int | None
    gpus: tuple[Gpu, ...]
    source: str = "<xml>"
    warnings: tuple[str, ...] = ()  # unknown elements skipped, as the runtimes skip them

    @property
    def chunks_per_rank(self) -> int:
        return max(self.nchunksperloop // self.ngpus, 1)

    @property
    def modes(self) -> tuple[str, ...]:
        """The buffer arrangements the runtime may run this program in."""
        modes = ["inplace"] if self.inplace else []
        if self.outofplace or (self.outofplace is None and not self.inplace):
            modes.append("outofplace")
        return tuple(modes)

    def gpu(self, gid: int) -> Gpu:
        return self.gpus[gid]


class _Element:
    __slots__ = ("tag", "attrs", "line", "children")

    def __init__(self, tag: str, attrs: dict[str, str], line: int) -> None:
        self.tag, self.attrs, self.line, self.children = tag, attrs, line, []


def _parse_tree(text: str, source: str) -> _Element:
    root: list[_Element] = []
    stack: list[_Element] = []
    parser = expat.ParserCreate()

    def start(tag: str, attrs: dict[str, str]) -> None:
        el = _Element(tag, attrs, parser.CurrentLineNumber)
        (stack[-1].children if stack else root).append(el)
        stack.append(el)

    parser.StartElementHandler = start
    parser.EndElementHandler = lambda tag: stack.pop()
    try:
        parser.Parse(text, True)
    except expat.ExpatError as exc:
        raise CcvizError(f"{source}:{exc.lineno}: not well-formed XML ({expat.ErrorString(exc.code)})", "msccl") from None
    if not root or root[0].tag != "algo":
        line = root[0].line if root else 1
        raise CcvizError(f"{source}:{line}: the root element must be <algo>, the MSCCL algorithm", "msccl")
    return root[0]


def _attr(el: _Element, name: str, source: str, kind: type = int, default: Any = ..., choices=None) -> Any:
    raw = el.attrs.get(name)
    if raw is None:
        if default is not ...:
            return default
        raise CcvizError(f"{source}:{el.line}: <{el.tag}> is missing attribute '{name}'", "msccl")
    try:
        value = kind(raw)
    except ValueError:
        raise CcvizError(f"{source}:{el.line}: <{el.tag}> attribute '{name}'={raw!r} is not a "
                         f"{'whole number' if kind is int else kind.__name__}", "msccl") from None
    if choices is not None and value not in choices:
        raise CcvizError(f"{source}:{el.line}: <{el.tag}> attribute '{name}'={raw!r} is not one of "
                         f"{', '.join(choices)}", "msccl")
    return value


def parse_program(text: str, source: str = "<xml>") -> Program:
    """Parse MSCCL XML text; a malformed file is a CcvizError naming line, element and attribute."""
    algo = _parse_tree(text, source)
    coll_raw = _attr(algo, "coll", source, str).strip().lower()
    coll = COLL_NAMES.get(coll_raw, coll_raw)
    if coll not in MSCCL_COLLECTIVES:
        raise CcvizError(f"{source}:{algo.line}: <algo> attribute 'coll'={coll_raw!r} is not one of "
                         f"{', '.join(MSCCL_COLLECTIVES)}", "msccl")
    ngpus = _attr(algo, "ngpus", source)
    nchunks = _attr(algo, "nchunksperloop", source)
    nchannels = _attr(algo, "nchannels", source)
    for name, value in (("ngpus", ngpus), ("nchunksperloop", nchunks), ("nchannels", nchannels)):
        if value < 1:
            raise CcvizError(f"{source}:{algo.line}: <algo> attribute '{name}' must be >= 1, got {value}", "msccl")
    outofplace = _attr(algo, "outofplace", source, default=None)
    footprint = ngpus + nchunks * ngpus
    if footprint > MAX_PROGRAM_SLOTS:
        raise CcvizError(f"{source}:{algo.line}: <algo ngpus={ngpus} nchunksperloop={nchunks}> would need about "
                         f"{_memory_text(footprint)} to execute (ngpus x nchunksperloop buffer slots); ccviz runs "
                         f"programs up to {MAX_PROGRAM_SLOTS:,} slots", "msccl")
    program_gpus = []
    skipped: list[tuple[str, str, str, int]] = []
    for g_el in algo.children:
        if g_el.tag != "gpu":
            _skip(g_el, "algo", "gpu", skipped)
            continue
        program_gpus.append(_parse_gpu(g_el, source, ngpus, skipped))
    ids = sorted(g.id for g in program_gpus)
    if ids != list(range(ngpus)):
        missing = sorted(set(range(ngpus)) - set(ids))
        raise CcvizError(f"{source}:{algo.line}: <algo ngpus={ngpus}> needs <gpu id> 0..{ngpus - 1} once each"
                         + (f"; missing {missing}" if missing else f"; got {ids}"), "msccl")
    return Program(
        _attr(algo, "name", source, str, default="msccl"), _attr(algo, "proto", source, str, default="Simple"),
        nchannels, nchunks, ngpus, coll, bool(_attr(algo, "inplace", source, default=1)),
        None if outofplace is None else bool(outofplace),
        _attr(algo, "minBytes", source, default=None), _attr(algo, "maxBytes", source, default=None),
        tuple(sorted(program_gpus, key=lambda g: g.id)), source, skip_warnings(skipped, source),
    )


MAX_PROGRAM_SLOTS = 2_000_000  # buffer slots (ngpus x nchunksperloop) the symbolic executor may hold
_BYTES_PER_SLOT = 200  # a slot's dict entry, its tuple and its race-detection records, measured roughly


def _memory_text(slots: int) -> str:
    return f"{slots * _BYTES_PER_SLOT / 1e9:.3g} GB" if slots * _BYTES_PER_SLOT >= 1e9 else \
        f"{slots * _BYTES_PER_SLOT / 1e6:.3g} MB"


def _skip(el: _Element, parent: str, expected: str, skipped: list[tuple[str, str, str, int]]) -> None:
    """Unknown elements are skipped with a warning, as the MSCCL/RCCL loaders skip them (TE-CCL's amd_32.xml
    has <copy> inside <gpu>); an element the runtime would run is never dropped silently."""
    skipped.append((el.tag, parent, expected, el.line))


def skip_warnings(skipped: list[tuple[str, str, str, int]], source: str) -> tuple[str, ...]:
    """One warning per kind of skipped element, counted, with the lines where it was (TE-CCL's amd_32.xml has
    64 <copy> elements: one line saying so reads better than 64 that differ only in their line number)."""
    lines: dict[tuple[str, str, str], list[int]] = {}
    for tag, parent, expected, line in skipped:
        lines.setdefault((tag, parent, expected), []).append(line)
    out = []
    for (tag, parent, expected), at in lines.items():
        shown = ", ".join(str(x) for x in at[:5]) + (f", ... ({len(at) - 5} more)" if len(at) > 5 else "")
        what = f"unknown <{tag}>" if len(at) == 1 else f"{len(at)} unknown <{tag}> elements"
        out.append(f"{source}: skipped {what} inside <{parent}> (line{'s' if len(at) > 1 else ''} {shown}; "
                   f"expected <{expected}>; the MSCCL runtimes ignore {'it' if len(at) == 1 else 'them'} too)")
    return tuple(out)


def _parse_gpu(el: _Element, source: str, ngpus: int,
               skipped: list[tuple[str, str, str, int]] | None = None) -> Gpu:
    gid = _attr(el, "id", source)
    if not 0 <= gid < ngpus:
        raise CcvizError(f"{source}:{el.line}: <gpu> attribute 'id'={gid} is outside 0..{ngpus - 1}", "msccl")
    tbs = []
    skipped = [] if skipped is None else skipped
    for tb_el in el.children:
        if tb_el.tag != "tb":
            _skip(tb_el, "gpu", "tb", skipped)
            continue
        step_els = [s for s in tb_el.children if s.tag == "step" or _skip(s, "tb", "step", skipped)]
        tb = ThreadBlock(_attr(tb_el, "id", source), _attr(tb_el, "send", source), _attr(tb_el, "recv", source),
                         _attr(tb_el, "chan", source), tuple(_parse_step(s, source) for s in step_els), tb_el.line)
        for peer, what in ((tb.send, "send"), (tb.recv, "recv")):
            if peer == gid or not -1 <= peer < ngpus:
                raise CcvizError(f"{source}:{tb_el.line}: <tb> attribute '{what}'={peer} must be -1 or another "
                                 f"GPU 0..{ngpus - 1}", "msccl")
        if tb.chan < 0:
            raise CcvizError(f"{source}:{tb_el.line}: <tb> attribute 'chan'={tb.chan} must be >= 0", "msccl")
        tbs.append(tb)
    ids = sorted(t.id for t in tbs)
    if ids != list(range(len(tbs))):  # the runtime rejects gaps ("thread block %d is missing") and duplicates
        raise CcvizError(f"{source}:{el.line}: <gpu id={gid}> thread block ids must be 0..{len(tbs) - 1} once each, "
                         f"got {ids}", "msccl")
    tbs.sort(key=lambda t: t.id)
    for tb in tbs:
        for st in tb.steps:
            if st.depid >= 0:
                if st.depid >= len(tbs):
                    raise CcvizError(f"{source}:{st.line}: <step> attribute 'depid'={st.depid} names no thread "
                                     f"block of GPU {gid}", "msccl")
                if not any(t.s == st.deps for t in tbs[st.depid].steps):
                    raise CcvizError(f"{source}:{st.line}: <step> attribute 'deps'={st.deps}: thread block "
                                     f"{st.depid} of GPU {gid} has no step s={st.deps}", "msccl")
    sizes = {name: _attr(el, name, source, default=0 if name == "s_chunks" else ...)
             for name in ("i_chunks", "o_chunks", "s_chunks")}
    for name, value in sizes.items():
        if not 0 <= value <= MAX_PROGRAM_SLOTS // ngpus:
            raise CcvizError(f"{source}:{el.line}: <gpu id={gid}> attribute '{name}'={value} must be between 0 and "
                             f"{MAX_PROGRAM_SLOTS // ngpus:,} ({ngpus} GPUs x {name} buffer slots would need about "
                             f"{_memory_text(max(value, 0) * ngpus)} to execute)", "msccl")
    return Gpu(gid, sizes["i_chunks"], sizes["o_chunks"], sizes["s_chunks"], tuple(tbs), el.line)


def _parse_step(el: _Element, source: str) -> Step:
    if el.tag != "step":
        raise CcvizError(f"{source}:{el.line}: unexpected <{el.tag}> inside <tb>; expected <step>", "msccl")
    kind = _attr(el, "type", source, str, choices=STEP_TYPES)
    needs_src = kind in ("s", "rrs", "rrc", "rrcs", "re", "cpy")
    needs_dst = kind in ("r", "rcs", "rrc", "rrcs", "re", "cpy")
    srcbuf = _attr(el, "srcbuf", source, str, default="i")
    dstbuf = _attr(el, "dstbuf", source, str, default="o")
    for name, buf in (("srcbuf", srcbuf), ("dstbuf", dstbuf)):  # the runtime checks both on every step
        if buf not in BUFFERS:
            raise CcvizError(f"{source}:{el.line}: <step> attribute '{name}'={buf!r} is not one of i, o, s", "msccl")
    step = Step(_attr(el, "s", source), kind, srcbuf, _attr(el, "srcoff", source, default=-1), dstbuf,
                _attr(el, "dstoff", source, default=-1), _attr(el, "cnt", source, default=1),
                _attr(el, "depid", source, default=-1), _attr(el, "deps", source, default=-1),
                bool(_attr(el, "hasdep", source, default=0)), el.line)
    if kind != "nop" and step.cnt < 1:
        raise CcvizError(f"{source}:{el.line}: <step> attribute 'cnt'={step.cnt} must be >= 1", "msccl")
    for name, off, needed in (("srcoff", step.srcoff, needs_src), ("dstoff", step.dstoff, needs_dst)):
        if needed and off < 0:
            raise CcvizError(f"{source}:{el.line}: <step> attribute '{name}'={off} must be >= 0", "msccl")
    return step


def load_program(path: str | Path) -> Program:
    from ccviz.model.files import check_readable_file, read_text_file

    p = Path(path)
    check_readable_file(p, "msccl")
    return parse_program(read_text_file(p, "msccl"), p.name)


# ------------------------------------------------------------------------ results
@dataclass(frozen=True)
class StepRef:
    """One step of one thread block, as a reader finds it in the XML."""

    gpu: int
    tb: int
    s: int
    type: str
    line: int

    def __str__(self) -> str:
        return f"GPU {self.gpu} tb {self.tb} step {self.s} ({self.type}, line {self.line})"


@dataclass(frozen=True)
class Problem:
    """One reason the program would not run correctly. ``kind``: deadlock, race, postcondition, limit,
    bounds, uninitialised, mismatch, unmatched, dependency, pairing (a send says it lands elsewhere than
    where its FIFO-matched receive writes)."""

    kind: str
    message: str
    steps: tuple[StepRef, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "message": self.message, "steps": [str(s) for s in self.steps]}


@dataclass(frozen=True)
class Message:
    """One executed send matched with its receive: ``values`` is the symbolic content of each chunk."""

    src: int
    dst: int
    chan: int
    send: StepRef
    recv: StepRef
    values: tuple[tuple | None, ...]
    level: int  # causal depth of the send: a receive and everything after it come later
    reduce: bool  # the receiver combines it with its own data (rrc, rrs, rrcs)
    # Positions of ``values`` that land in a slot a later local ``re`` step reduces (msccl-tools' allpairs:
    # receive into scratch, then reduce scratch into the input): the data is combined, not copied.
    folded: frozenset[int] = frozenset()
    # (position, onward message index, onward position) for each value that landed in scratch and was only
    # sent on, by exactly one send (a partial sum relayed through this GPU): the receiver never holds it.
    relayed: tuple[tuple[int, int, int], ...] = ()


@dataclass
class Execution:
    """What running a program produced: the problems found and the messages exchanged."""

    program: Program
    mode: str
    problems: list[Problem] = field(default_factory=list)
    messages: list[Message] = field(default_factory=list)
    completed: bool = False
    n_races: int = 0
    outputs: dict[int, dict[int, tuple | None]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.problems

    def kinds(self) -> set[str]:
        return {p.kind for p in self.problems}

    def summary(self) -> str:
        if self.ok:
            return (f"{self.program.name} ({self.program.coll}, {self.program.ngpus} GPUs, {self.mode}): runs to "
                    f"completion, no race, postcondition met ({len(self.messages)} messages)")
        head = "; ".join(p.message for p in self.problems[:3])
        more = f" (+{len(self.problems) - 3} more)" if len(self.problems) > 3 else ""
        return f"{self.program.name} ({self.mode}): {head}{more}"

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.program.name, "collective": self.program.coll, "ngpus": self.program.ngpus,
                "mode": self.mode, "ok": self.ok, "completed": self.completed, "messages": len(self.messages),
                "races": self.n_races, "problems": [p.to_dict() for p in self.problems]}


# ------------------------------------------------------------------------ memory
def _layout(program: Program, mode: str) -> dict[str, int]:
    """Real buffer sizes in chunks (input, output) for this collective, as the runtime allocates them."""
    c, cpr = program.nchunksperloop, program.chunks_per_rank
    if program.coll == CUSTOM:  # no collective to size them: each GPU's declared buffers
        return {"i": max(g.i_chunks for g in program.gpus), "o": max(g.o_chunks for g in program.gpus)}
    inputs = {"allgather": cpr, "gather": cpr}.get(program.coll, c)
    outputs = {"reducescatter": cpr, "scatter": cpr}.get(program.coll, c)
    return {"i": inputs, "o": outputs}


class _Memory:
    """Symbolic buffers of every GPU with the runtime's in-place aliasing."""

    def __init__(self, program: Program, mode: str) -> None:
        self.program, self.mode = program, mode
        self.size = _layout(program, mode)
        self.slots: dict[tuple[int, str, int], tuple | None] = {}
        for g in range(program.ngpus):
            for k in range(program.gpu(g).i_chunks if program.coll == CUSTOM else self.size["i"]):
                self.slots[self.where(g, "i", k)] = ((g, k),)

    def where(self, gpu: int, buf: str, off: int) -> tuple[int, str, int]:
        """The physical slot behind (gpu, buffer, offset)."""
        if buf == "s" or self.mode != "inplace" or self.program.coll == CUSTOM:  # custom: msccl-tools aliases nothing
            return gpu, buf, off
        cpr = self.program.chunks_per_rank
        if self.program.coll in ("allgather", "gather"):
            return (gpu, "o", gpu * cpr + off) if buf == "i" else (gpu, "o", off)
        if self.program.coll in ("reducescatter", "scatter"):
            return (gpu, "i", gpu * cpr + off) if buf == "o" else (gpu, "i", off)
        return gpu, "io", off

    def in_bounds(self, gpu: int, buf: str, off: int, cnt: int) -> str | None:
        declared = {"i": self.program.gpu(gpu).i_chunks, "o": self.program.gpu(gpu).o_chunks,
                    "s": self.program.gpu(gpu).s_chunks}[buf]
        if off + cnt > declared:
            return f"{buf}[{off}..{off + cnt - 1}] is outside the declared {buf}_chunks={declared}"
        if buf != "s" and off + cnt > self.size[buf]:
            return (f"{buf}[{off}..{off + cnt - 1}] is outside the {self.mode} {self.program.coll} "
                    f"{'input' if buf == 'i' else 'output'} buffer of {self.size[buf]} chunks")
        return None


def _add(a: tuple | None, b: tuple | None) -> tuple | None:
    return None if a is None or b is None else tuple(sorted(a + b))


def expected_outputs(program: Program) -> dict[int, dict[int, tuple]]:
    """Per GPU, output slot -> the contributions it must hold at the end (root 0 for rooted collectives)."""
    n, c, cpr = program.ngpus, program.nchunksperloop, program.chunks_per_rank
    ranks = range(n)
    coll = program.coll
    want: dict[int, dict[int, tuple]] = {g: {} for g in ranks}
    for g in ranks:
        if coll == "allreduce" or (coll == "reduce" and g == 0):
            want[g] = {k: tuple((r, k) for r in ranks) for k in range(c)}
        elif coll == "allgather" or (coll == "gather" and g == 0):
            want[g] = {r * cpr + k: ((r, k),) for r in ranks for k in range(cpr)}
        elif coll == "reducescatter":
            want[g] = {k: tuple((r, g * cpr + k) for r in ranks) for k in range(cpr)}
        elif coll == "alltoall":
            want[g] = {r * cpr + k: ((r, g * cpr + k),) for r in ranks for k in range(cpr)}
        elif coll == "broadcast":
            want[g] = {k: ((0, k),) for k in range(c)}
        elif coll == "scatter":
            want[g] = {k: ((0, g * cpr + k),) for k in range(cpr)}
    return want


def describe_value(value: tuple | None) -> str:
    if value is None:
        return "nothing defined"
    counts = Counter(value)
    return "{" + ", ".join(f"r{r}:{k}" + (f" x{m}" if m > 1 else "") for (r, k), m in sorted(counts.items())) + "}"


# ------------------------------------------------------------------------ executor
@dataclass
class _Conn:
    queue: deque = field(default_factory=deque)  # (values, vc, level, send ref)
    sent: int = 0
    received: int = 0
    recv_vcs: list = field(default_factory=list)  # vc of the k-th receive (back-pressure to the sender)


class _Runner:
    def __init__(self, program: Program, mode: str, fifo_depth: int, max_steps: int, max_races: int) -> None:
        self.p, self.mode, self.depth, self.max_steps, self.max_races = program, mode, fifo_depth, max_steps, max_races
        self.result = Execution(program, mode)
        self.mem = _Memory(program, mode)
        self.tbs = [(g.id, tb) for g in program.gpus for tb in g.tbs]
        self.index = {(g, tb.id): i for i, (g, tb) in enumerate(self.tbs)}
        n = len(self.tbs)
        self.pc = [0] * n
        self.vc = [[0] * n for _ in range(n)]
        self.level = [0] * n
        self.flag = [(-1, None, 0)] * n  # last signalled step position, its vc and level
        self.conns: dict[tuple[int, int, int], _Conn] = {}
        self.sender: dict[tuple[int, int, int], int] = {}
        self.receiver: dict[tuple[int, int, int], int] = {}
        self.pos = [{st.s: k for k, st in enumerate(tb.steps)} for _, tb in self.tbs]
        self.last_write: dict[tuple, tuple[int, int, StepRef]] = {}
        self.reads: dict[tuple, list[tuple[int, int, StepRef]]] = {}
        self.race_pairs: set[tuple] = set()
        self.landed: dict[tuple, tuple[int, int]] = {}  # slot -> (message index, position) it still holds
        self.folded: dict[int, set[int]] = {}  # message index -> positions a local reduce consumed
        # (message index, position) landed in scratch -> every use of it there: the sending step and the
        # position it sends it at, or None for a local use (reduce, copy)
        self.uses: dict[tuple[int, int], list[tuple[StepRef, int] | None]] = {}

    def ref(self, t: int, k: int) -> StepRef:
        g, tb = self.tbs[t]
        st = tb.steps[k]
        return StepRef(g, tb.id, st.s, st.type, st.line)

    def problem(self, kind: str, message: str, *steps: StepRef) -> None:
        self.result.problems.append(Problem(kind, message, tuple(steps)))

    # ---------------------------------------------------------------- static checks
    def check_structure(self) -> None:
        """Static checks of the program before running it: channels, step order, buffer indices."""
        p = self.p
        for g in p.gpus:
            per_chan_send: Counter = Counter()
            per_chan_recv: Counter = Counter()
            if len(g.tbs) > MAX_THREAD_BLOCKS:
                self.problem("limit", f"GPU {g.id} has {len(g.tbs)} thread blocks; the runtime allows "
                                      f"{MAX_THREAD_BLOCKS}")
            for tb in g.tbs:
                t = self.index[(g.id, tb.id)]
                first = [self.ref(t, 0)] if tb.steps else []
                if tb.chan >= p.nchannels:
                    self.problem("limit", f"GPU {g.id} tb {tb.id} uses channel {tb.chan}, but the algorithm "
                                          f"declares nchannels={p.nchannels}", *first)
                if len(tb.steps) > self.max_steps:
                    self.problem("limit", f"GPU {g.id} tb {tb.id} has {len(tb.steps)} steps; RCCL accepts at most "
                                          f"{self.max_steps} per thread block", *first)
                if tb.send >= 0:
                    per_chan_send[tb.chan] += 1
                    key = (g.id, tb.send, tb.chan)
                    if key in self.sender:
                        self.problem("mismatch", f"GPU {g.id} tb {self.tbs[self.sender[key]][1].id} and tb {tb.id} "
                                                 f"both send to GPU {tb.send} on channel {tb.chan}; a connection has "
                                                 "one sending thread block", *first)
                    self.sender[key] = t
                if tb.recv >= 0:
                    per_chan_recv[tb.chan] += 1
                    key = (tb.recv, g.id, tb.chan)
                    if key in self.receiver:
                        self.problem("mismatch", f"GPU {g.id} tb {self.tbs[self.receiver[key]][1].id} and tb "
                                                 f"{tb.id} both receive from GPU {tb.recv} on channel {tb.chan}; a "
                                                 "connection has one receiving thread block", *first)
                    self.receiver[key] = t
                prev = None
                for k, st in enumerate(tb.steps):
                    ref = self.ref(t, k)
                    if prev is not None and st.s <= prev:
                        self.problem("dependency", f"{ref}: step numbers must increase within a thread block "
                                                   f"(after s={prev})", ref)
                    prev = st.s
                    if st.type in SENDS and tb.send < 0:
                        self.problem("unmatched", f"{ref} sends, but its thread block has send=-1", ref)
                    if st.type in RECEIVES and tb.recv < 0:
                        self.problem("unmatched", f"{ref} receives, but its thread block has recv=-1", ref)
                    if st.cnt >= MAX_COUNT:
                        self.problem("limit", f"{ref}: cnt={st.cnt}; the runtime needs cnt < {MAX_COUNT}", ref)
                    reads, writes = self.accesses(st)
                    for buf, off in reads + writes:
                        why = self.mem.in_bounds(g.id, buf, off, st.cnt)
                        if why:
                            self.problem("bounds", f"{ref}: {why}", ref)
            for chan, count in per_chan_send.items():
                if count > MAX_TBS_PER_CHANNEL:
                    self.problem("limit", f"GPU {g.id} has {count} sending thread blocks on channel {chan}; the "
                                          f"runtime allows {MAX_TBS_PER_CHANNEL} per channel")
            for chan, count in per_chan_recv.items():
                if count > MAX_TBS_PER_CHANNEL:
                    self.problem("limit", f"GPU {g.id} has {count} receiving thread blocks on channel {chan}; the "
                                          f"runtime allows {MAX_TBS_PER_CHANNEL} per channel")
        for key, t in self.sender.items():
            if key in self.receiver:
                self.check_counts(key, t, self.receiver[key])
            else:
                sends = [k for k, st in enumerate(self.tbs[t][1].steps) if st.type in SENDS]
                if sends:
                    src, dst, chan = key
                    ref = self.ref(t, sends[0])
                    self.problem("unmatched", f"{ref} sends to GPU {dst} on channel {chan}, but no thread block of "
                                              f"GPU {dst} receives from GPU {src} on channel {chan}", ref)
        for key, t in self.receiver.items():
            if key not in self.sender:
                recvs = [k for k, st in enumerate(self.tbs[t][1].steps) if st.type in RECEIVES]
                if recvs:
                    src, dst, chan = key
                    ref = self.ref(t, recvs[0])
                    self.problem("unmatched", f"{ref} receives from GPU {src} on channel {chan}, but no thread block "
                                              f"of GPU {src} sends to GPU {dst} on channel {chan}", ref)

    def check_counts(self, key: tuple[int, int, int], sender: int, receiver: int) -> None:
        """A connection needs as many receives as sends: report the first step left without a partner."""
        sends = [k for k, st in enumerate(self.tbs[sender][1].steps) if st.type in SENDS]
        recvs = [k for k, st in enumerate(self.tbs[receiver][1].steps) if st.type in RECEIVES]
        if len(sends) == len(recvs):
            return
        src, dst, chan = key
        extra = self.ref(sender, sends[len(recvs)]) if len(sends) > len(recvs) else self.ref(receiver, recvs[len(sends)])
        self.problem("unmatched", f"GPU {src} -> GPU {dst} on channel {chan} has {len(sends)} sends but "
                                  f"{len(recvs)} receives; {extra} has no partner", extra)

    @staticmethod
    def accesses(st: Step) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
        """(reads, writes) of a step as (buffer, first offset); each covers ``cnt`` chunks."""
        reads = [(st.srcbuf, st.srcoff)] if st.type in ("s", "rrs", "rrc", "rrcs", "re", "cpy") else []
        if st.type == "re":
            reads.append((st.dstbuf, st.dstoff))
        writes = [(st.dstbuf, st.dstoff)] if st.type in ("r", "rcs", "rrc", "rrcs", "re", "cpy") else []
        return reads, writes

    # ---------------------------------------------------------------- run
    def run(self) -> Execution:
        self.check_structure()
        if any(p.kind in ("bounds", "mismatch", "dependency") for p in self.result.problems):
            return self.result  # the runtime would refuse to load it
        n = len(self.tbs)
        progress = True
        while progress:
            progress = False
            for t in range(n):
                while self.pc[t] < len(self.tbs[t][1].steps) and self.try_step(t):
                    progress = True
        stuck = [t for t in range(n) if self.pc[t] < len(self.tbs[t][1].steps)]
        if stuck:
            self.report_deadlock(stuck)
        else:
            self.result.completed = True
            self.check_postcondition()
        for k, positions in self.folded.items():
            self.result.messages[k] = replace(self.result.messages[k], folded=frozenset(positions))
        self.mark_relays()
        return self.result

    def use(self, gpu: int, buf: str, off: int, sender: tuple[StepRef, int] | None) -> None:
        """Note a use of the value in a slot, if it is a message's value landed in scratch."""
        landed = self.landed.get(self.mem.where(gpu, buf, off))
        if landed is not None and landed in self.uses:
            self.uses[landed].append(sender)

    def mark_relays(self) -> None:
        """Values received into scratch whose only use is one send: relays (``Message.relayed``)."""
        sent_by = {(m.send.gpu, m.send.tb, m.send.s): k for k, m in enumerate(self.result.messages)}
        relayed: dict[int, list[tuple[int, int, int]]] = {}
        for (k, j), uses in self.uses.items():
            if len(uses) == 1 and uses[0] is not None:
                ref, position = uses[0]
                onward = sent_by.get((ref.gpu, ref.tb, ref.s))
                if onward is not None:
                    relayed.setdefault(k, []).append((j, onward, position))
        for k, triples in relayed.items():
            self.result.messages[k] = replace(self.result.messages[k], relayed=tuple(sorted(triples)))

    def conn_in(self, t: int) -> tuple[int, int, int]:
        g, tb = self.tbs[t]
        return tb.recv, g, tb.chan

    def conn_out(self, t: int) -> tuple[int, int, int]:
        g, tb = self.tbs[t]
        return g, tb.send, tb.chan

    def blocker(self, t: int) -> tuple[str, int | None]:
        """Why tb ``t`` cannot run its next step now: (reason, thread block it waits for) or ('', None)."""
        g, tb = self.tbs[t]
        st = tb.steps[self.pc[t]]
        if st.depid >= 0:
            d = self.index[(g, st.depid)]
            need = self.pos[d][st.deps]
            if self.flag[d][0] < need:
                target = self.ref(d, need)
                signal = "" if target_signals(self.tbs[d][1].steps, need) else \
                    " (which never signals: no step from it on has hasdep=1)"
                return f"waits for {target}{signal}", d
        if st.type in RECEIVES:
            key = self.conn_in(t)
            conn = self.conns.get(key)
            if not conn or not conn.queue:
                sender = self.sender.get(key)
                got = conn.received if conn else 0
                if sender is None:
                    return f"waits for a message from GPU {tb.recv} on channel {tb.chan}, which nobody sends", None
                return (f"waits for message #{got + 1} from GPU {tb.recv} on channel {tb.chan} "
                        f"(GPU {tb.recv} tb {self.tbs[sender][1].id} sends "
                        f"{sum(1 for s in self.tbs[sender][1].steps if s.type in SENDS)} in all)"), sender
        if st.type in SENDS:
            key = self.conn_out(t)
            conn = self.conns.get(key)
            if conn and len(conn.queue) >= self.depth:
                return (f"waits for GPU {tb.send} to receive on channel {tb.chan} "
                        f"({len(conn.queue)} messages unreceived)"), self.receiver.get(key)
        return "", None

    def try_step(self, t: int) -> bool:
        if self.blocker(t)[0]:
            return False
        g, tb = self.tbs[t]
        k = self.pc[t]
        st = tb.steps[k]
        ref = self.ref(t, k)
        vc = self.vc[t]
        level = self.level[t]
        if st.depid >= 0:
            d = self.index[(g, st.depid)]
            _, dvc, dlevel = self.flag[d]
            _join(vc, dvc)
            level = max(level, dlevel)
        incoming = None
        if st.type in RECEIVES:
            conn = self.conns[self.conn_in(t)]
            values, mvc, mlevel, sref = conn.queue.popleft()
            _join(vc, mvc)
            level = max(level, mlevel + 1)
            incoming = (values, sref, mlevel)
            sent_to = self.declared_target(sref)
            if sent_to is not None and sent_to != (st.dstbuf, st.dstoff) and ("pairing", sref) not in self.race_pairs:
                self.race_pairs.add(("pairing", sref))
                self.problem("pairing", f"{ref} is paired (FIFO on channel {tb.chan}) with {sref}, which says it "
                                        f"lands in {sent_to[0]}[{sent_to[1]}], but the receive uses "
                                        f"{st.dstbuf}[{st.dstoff}]", ref, sref)
            if len(values) != st.cnt:
                self.problem("mismatch", f"{ref} receives {st.cnt} chunk(s) but its matching send {sref} sent "
                                         f"{len(values)}", ref, sref)
        if st.type in SENDS:
            out = self.conns.setdefault(self.conn_out(t), _Conn())
            if out.sent >= self.depth:
                _join(vc, out.recv_vcs[out.sent - self.depth])
        vc[t] += 1
        clock = vc[t]
        received = list(incoming[0]) if incoming else []
        received += [None] * (st.cnt - len(received))
        sent: list = []
        for j in range(st.cnt if st.type != "nop" else 0):
            src = self.read(t, clock, ref, g, st.srcbuf, st.srcoff + j) if st.type in (
                "s", "rrs", "rrc", "rrcs", "cpy", "re") else None
            if st.type in ("s", "rrs", "rrc", "rrcs", "cpy"):  # a plain send passes it on; the rest use it here
                self.use(g, st.srcbuf, st.srcoff + j, (ref, j) if st.type == "s" else None)
            if st.type == "s":
                sent.append(src)
            elif st.type == "r":
                self.write(t, clock, ref, g, st.dstbuf, st.dstoff + j, received[j])
            elif st.type == "rcs":
                self.write(t, clock, ref, g, st.dstbuf, st.dstoff + j, received[j])
                sent.append(received[j])
            elif st.type == "rrs":
                sent.append(_add(received[j], src))
            elif st.type in ("rrc", "rrcs"):
                value = _add(received[j], src)
                self.write(t, clock, ref, g, st.dstbuf, st.dstoff + j, value)
                if st.type == "rrcs":
                    sent.append(value)
            elif st.type == "cpy":
                self.write(t, clock, ref, g, st.dstbuf, st.dstoff + j, src)
            elif st.type == "re":
                for buf, off in ((st.srcbuf, st.srcoff + j), (st.dstbuf, st.dstoff + j)):
                    landed = self.landed.get(self.mem.where(g, buf, off))
                    if landed is not None:
                        self.folded.setdefault(landed[0], set()).add(landed[1])
                    self.use(g, buf, off, None)
                old = self.read(t, clock, ref, g, st.dstbuf, st.dstoff + j)
                self.write(t, clock, ref, g, st.dstbuf, st.dstoff + j, _add(old, src))
        if incoming:
            conn = self.conns[self.conn_in(t)]
            conn.received += 1
            conn.recv_vcs.append(list(vc))
            self.result.messages.append(Message(
                tb.recv, g, tb.chan, incoming[1], ref, incoming[0], incoming[2], st.type in REDUCES))
            if st.type in ("r", "rcs"):
                k_msg = len(self.result.messages) - 1
                for j in range(st.cnt):
                    self.landed[self.mem.where(g, st.dstbuf, st.dstoff + j)] = (k_msg, j)
                    if st.dstbuf == "s":  # a value in scratch may be in transit: watch what becomes of it
                        self.uses[(k_msg, j)] = [(ref, j)] if st.type == "rcs" else []
        if st.type in SENDS:
            out = self.conns[self.conn_out(t)]
            out.queue.append((tuple(sent), list(vc), level, ref))
            out.sent += 1
        self.level[t] = level + (1 if st.type != "nop" else 0)
        if st.hasdep:
            self.flag[t] = (k, list(vc), self.level[t])
        self.pc[t] = k + 1
        return True

    def declared_target(self, sref: StepRef) -> tuple[str, int] | None:
        """Where a plain send says its data lands on the peer (dstbuf/dstoff); fused steps' dst is local."""
        t = self.index[(sref.gpu, sref.tb)]
        st = self.tbs[t][1].steps[self.pos[t][sref.s]]
        return (st.dstbuf, st.dstoff) if st.type == "s" and st.dstoff >= 0 else None

    # ---------------------------------------------------------------- memory with race detection
    def read(self, t: int, clock: int, ref: StepRef, gpu: int, buf: str, off: int) -> tuple | None:
        slot = self.mem.where(gpu, buf, off)
        last = self.last_write.get(slot)
        if last and last[0] != t and self.vc[t][last[0]] < last[1]:
            self.race(slot, last[2], ref, "written", "read")
        self.reads.setdefault(slot, []).append((t, clock, ref))
        value = self.mem.slots.get(slot)
        if value is None and ("uninitialised", slot) not in self.race_pairs:
            self.race_pairs.add(("uninitialised", slot))
            self.problem("uninitialised", f"{ref} reads {_slot_name(slot)}, which holds no data yet", ref)
        return value

    def write(self, t: int, clock: int, ref: StepRef, gpu: int, buf: str, off: int, value: tuple | None) -> None:
        slot = self.mem.where(gpu, buf, off)
        vc = self.vc[t]
        last = self.last_write.get(slot)
        if last and last[0] != t and vc[last[0]] < last[1]:
            self.race(slot, last[2], ref, "written", "written")
        for rt, rclock, rref in self.reads.get(slot, ()):
            if rt != t and vc[rt] < rclock:
                self.race(slot, rref, ref, "read", "written")
        self.reads[slot] = []
        self.landed.pop(slot, None)
        self.last_write[slot] = (t, clock, ref)
        self.mem.slots[slot] = value

    def race(self, slot: tuple, first: StepRef, second: StepRef, how1: str, how2: str) -> None:
        key = (slot, first, second)
        if key in self.race_pairs:
            return
        self.race_pairs.add(key)
        self.result.n_races += 1
        if self.result.n_races <= self.max_races:
            self.problem("race", f"data race on {_slot_name(slot)}: {how1} by {first} and {how2} by {second} "
                                 "with nothing ordering them", first, second)

    # ---------------------------------------------------------------- verdicts
    def report_deadlock(self, stuck: list[int]) -> None:
        waits: dict[int, int | None] = {}
        lines = []
        refs = []
        for t in stuck:
            why, on = self.blocker(t)
            waits[t] = on
            ref = self.ref(t, self.pc[t])
            refs.append(ref)
            lines.append(f"{ref} {why or 'cannot proceed'}")
        cycle = _find_cycle(waits)
        if cycle:
            text = " -> ".join(str(self.ref(t, self.pc[t])) for t in cycle)
            head = f"deadlock: waiting cycle {text} -> back to the first"
            refs = [self.ref(t, self.pc[t]) for t in cycle] + [r for r in refs if r not in
                                                               {self.ref(t, self.pc[t]) for t in cycle}]
        else:
            head = "deadlock: steps wait for data that never comes"
        self.problem("deadlock", f"{head}; blocked: " + "; ".join(lines[:8])
                     + (f"; and {len(lines) - 8} more" if len(lines) > 8 else ""), *refs)

    def check_postcondition(self) -> None:
        if self.p.coll == CUSTOM:  # what the outputs hold *is* the collective (read by the importer)
            for g in self.p.gpus:
                self.result.outputs[g.id] = {k: self.mem.slots.get(self.mem.where(g.id, "o", k))
                                             for k in range(g.o_chunks)}
            return
        want = expected_outputs(self.p)
        wrong = []
        for g, slots in want.items():
            self.result.outputs[g] = {}
            for k, expected in slots.items():
                have = self.mem.slots.get(self.mem.where(g, "o", k))
                self.result.outputs[g][k] = have
                if have != expected:
                    wrong.append((g, k, have, expected))
        if wrong:
            g, k, have, expected = wrong[0]
            total = sum(len(s) for s in want.values())
            rule = ("every rank's chunk exactly once" if self.p.coll in ("allreduce", "reducescatter", "reduce")
                    else "exactly its source's chunk")
            self.problem("postcondition", f"{len(wrong)} of {total} output chunks wrong ({self.p.coll} needs "
                                          f"{rule}); first: GPU {g} o[{k}] holds {describe_value(have)}, expected "
                                          f"{describe_value(expected)}")


def target_signals(steps: tuple[Step, ...], position: int) -> bool:
    return any(st.hasdep for st in steps[position:])


def _join(vc: list[int], other: list[int] | None) -> None:
    if other is None:
        return
    for i, v in enumerate(other):
        if v > vc[i]:
            vc[i] = v


def _slot_name(slot: tuple) -> str:
    gpu, region, off = slot
    name = {"io": "i/o"}.get(region, region)
    return f"GPU {gpu} {name}[{off}]"


def _find_cycle(waits: dict[int, int | None]) -> list[int]:
    """A cycle in the wait-for graph (each blocked thread block waits for at most one other)."""
    for start in waits:
        seen: dict[int, int] = {}
        path: list[int] = []
        t: int | None = start
        while t is not None and t in waits and t not in seen:
            seen[t] = len(path)
            path.append(t)
            t = waits[t]
        if t is not None and t in seen:
            return path[seen[t]:]
    return []


def execute(program: Program | str | Path, mode: str | None = None, fifo_depth: int = FIFO_DEPTH,
            max_steps: int = MAX_STEPS_RCCL, max_races: int = 20) -> Execution:
    """Run an MSCCL program symbolically and judge it (deadlock, races, limits, postcondition).

    ``mode`` is 'inplace' or 'outofplace'; by default the first mode the program declares. ``program``
    may be a parsed Program, XML text, or a path to an .xml file.
    """
    if not isinstance(program, Program):
        text = str(program)
        program = parse_program(text) if text.lstrip().startswith("<") else load_program(program)
    mode = mode or (program.modes[0] if program.modes else "inplace")
    if mode not in ("inplace", "outofplace"):
        raise CcvizError(f"mode: {mode!r} is not 'inplace' or 'outofplace'", "mode")
    if fifo_depth < 1:
        raise CcvizError(f"fifo_depth: must be >= 1, got {fifo_depth}", "fifo_depth")
    return _Runner(program, mode, fifo_depth, max_steps, max_races).run()


def check(program: Program | str | Path, **kwargs: Any) -> list[Execution]:
    """Execute a program in every buffer arrangement it declares (in place and/or out of place)."""
    if not isinstance(program, Program):
        text = str(program)
        program = parse_program(text) if text.lstrip().startswith("<") else load_program(program)
    return [execute(program, mode, **kwargs) for mode in program.modes or ("inplace",)]
