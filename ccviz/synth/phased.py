"""Collectives composed of per-dimension phases over a grid of ranks (the engine of dimdecomp and hierarchical).

A ``RankGrid`` sees the ranks as a product of dimensions: each dimension cuts the ranks into lines (a torus row, a
chassis, the GPUs of equal local index across chassis). A collective is then a sequence of phases, each one a
textbook algorithm run inside every line of one dimension at once:

* reduce-scatter phases shrink the data: after the phase along dimension a, chunk c's partial sum sits only at the
  rank of each line whose position in that line is the owner's (Chan et al.'s dimension-ordered reduce-scatter);
* all-gather phases grow it back, in the opposite order for AllReduce (RS -> ... -> AG);
* AllToAll moves every block one dimension at a time to the destination's coordinate.

Per dimension the in-line algorithm is ``ring`` (neighbour to neighbour around the line; on a line without a
wrap-around link it becomes the two-way chain, which has the same (d-1) rounds of M/d), ``rhd`` (recursive halving /
doubling, d a power of two) or ``direct`` (each rank straight to each other, one partner per round). Each pattern
moves one chunk group per link per round, so a phase costs (rounds) x (alpha + group bytes / BW) when every line
hop is one link; the simulator judges what the fabric really gives.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ccviz.bounds.explained import ring_exchange_share  # noqa: F401  (the formula the exchange meets)
from ccviz.errors import CcvizError
from ccviz.model.collectives import Chunk, Collective
from ccviz.model.placement import Layout
from ccviz.model.schedule import Schedule, Transfer
from ccviz.model.topology import Topology

METHODS = ("ring", "rhd", "direct")
Send = tuple[int, int, int]  # (round within the phase, from position, to position)


@dataclass(frozen=True)
class Dimension:
    """One way of cutting the ranks into lines; every rank lies on exactly one line of each dimension."""

    name: str
    lines: tuple[tuple[int, ...], ...]
    method: str  # ring | chain | rhd | direct (``ring`` on a line without wrap-around is laid as ``chain``)

    @property
    def size(self) -> int:
        return len(self.lines[0])

    def rounds(self) -> int:
        d = self.size
        if self.method == "ring2":
            return d // 2
        return (d.bit_length() - 1) if self.method == "rhd" else d - 1

    def line_of(self) -> dict[int, tuple[int, ...]]:
        return {r: line for line in self.lines for r in line}

    def position(self) -> dict[int, int]:
        return {r: i for line in self.lines for i, r in enumerate(line)}


def reduce_pattern(method: str, d: int, target: int) -> list[Send]:
    """Sends that leave the sum of a line's partials at position ``target`` (one group per link per round)."""
    if method == "ring":  # around once, ending at the target
        return [(k, (target + 1 + k) % d, (target + 2 + k) % d) for k in range(d - 1)]
    if method == "ring2":  # both ways round the ring: the far half's partials meet at the target
        right, left = d // 2, (d - 1) // 2
        return ([(right - j, (target + j) % d, (target + j - 1) % d) for j in range(1, right + 1)]
                + [(right - j, (target - j) % d, (target - j + 1) % d) for j in range(1, left + 1)])
    if method == "chain":  # from both ends towards the target, farthest target first on each link
        left = [(i + d - 1 - target, i, i + 1) for i in range(target)]
        right = [(d - 1 - i + target, i, i - 1) for i in range(target + 1, d)]
        return left + right
    if method == "rhd":  # recursive halving: the partner across the highest undone bit
        out, done, stages = [], 0, d.bit_length() - 1
        for s in range(stages):
            bit = 1 << (stages - 1 - s)
            out += [(s, i, i ^ bit) for i in range(d) if (i ^ target) & done == 0 and (i ^ target) & bit]
            done |= bit
        return out
    return [((target - i) % d - 1, i, target) for i in range(d) if i != target]  # direct


def spread_pattern(method: str, d: int, source: int) -> list[Send]:
    """Sends that copy a value from position ``source`` to every position of the line (the reduce, reversed)."""
    if method == "ring":
        return [(k, (source + k) % d, (source + k + 1) % d) for k in range(d - 1)]
    if method == "ring2":
        right, left = d // 2, (d - 1) // 2
        return ([(j, (source + j) % d, (source + j + 1) % d) for j in range(right)]
                + [(j, (source - j) % d, (source - j - 1) % d) for j in range(left)])
    if method == "chain":
        right = [(i - source, i, i + 1) for i in range(source, d - 1)]
        left = [(source - i, i, i - 1) for i in range(source, 0, -1)]
        return right + left
    if method == "rhd":  # recursive doubling: everything held so far goes to the partner across bit s
        stages = d.bit_length() - 1
        return [(s, i, i ^ (1 << s)) for s in range(stages) for i in range(d)
                if (i ^ source) & ~((1 << s) - 1) == 0]
    return [((i - source) % d - 1, source, i) for i in range(d) if i != source]  # direct


def resolve_method(method: str, line: Sequence[int], layout: Layout) -> str:
    """``ring`` stays a ring when the line closes with a hop as short as its others, else it is the two-way chain."""
    if method != "ring" or len(line) <= 2:
        return method
    route = layout.router.route
    closing = route(line[-1], line[0])
    step = route(line[0], line[1])
    return "ring" if closing is not None and step is not None and len(closing) <= len(step) else "chain"


class PhasedPlan:
    """Lays a collective as phases over ``dims`` on a ``Layout`` (steps numbered globally, one label per round)."""

    def __init__(self, layout: Layout, dims: Sequence[Dimension], offsets: dict[int, int] | None = None) -> None:
        self.layout = layout
        self.offsets = offsets or {}  # chunk -> rounds it trails the first chunk by (a pipelined rooted collective)
        self.dims = list(dims)
        self.step = 0
        self._positions = [d.position() for d in self.dims]
        self._lines = [d.line_of() for d in self.dims]

    def _label(self, dim: Dimension, what: str) -> None:
        for k in range(dim.rounds()):
            self.layout.label(self.step + k, f"{what} along {dim.name} ({dim.method}, round {k + 1} of "
                                             f"{dim.rounds()}): every line of {dim.size} ranks at once")

    def reduce_phase(self, a: int, holders: dict[int, set[int]], owners: dict[int, int]) -> None:
        """Along dimension a, the partials of chunk c held at ``holders[c]`` meet at the owner's position."""
        dim, pos, line_of = self.dims[a], self._positions[a], self._lines[a]
        self._label(dim, "reduce-scatter")
        for cid, ranks in holders.items():
            target_pos = pos[owners[cid]]
            lines = {line_of[r] for r in ranks}
            kept: set[int] = set()
            for line in lines:
                for k, i, j in reduce_pattern(dim.method, len(line), target_pos):
                    self.layout.send(cid, line[i], line[j], self.step + self.offsets.get(cid, 0) + k, op="reduce")
                kept.add(line[target_pos])
            holders[cid] = kept
        self.step += dim.rounds()

    def spread_phase(self, a: int, holders: dict[int, set[int]]) -> None:
        """Along dimension a, every holder of chunk c copies it to its whole line."""
        dim, pos, line_of = self.dims[a], self._positions[a], self._lines[a]
        self._label(dim, "all-gather")
        for cid, ranks in holders.items():
            grown: set[int] = set()
            for r in ranks:
                line = line_of[r]
                for k, i, j in spread_pattern(dim.method, len(line), pos[r]):
                    self.layout.send(cid, line[i], line[j], self.step + self.offsets.get(cid, 0) + k)
                grown.update(line)
            holders[cid] = grown
        self.step += dim.rounds()

    def exchange_phase(self, a: int, at: dict[int, int], dest: dict[int, int]) -> None:
        """AllToAll along dimension a: a block moves to the rank of its line at the destination's position,
        partners taken one offset per round (pairwise), so each link carries one group per round.

        On a closed ring the blocks travel the shorter arc hop by hop instead (both directions, the half-way
        blocks split between them), so each directed link carries d/8 M (d even) as the Collectives Explainer
        decomposes it (02 section 3): see ``ring_exchange``."""
        dim, pos, line_of = self.dims[a], self._positions[a], self._lines[a]
        if dim.method == "ring" and dim.size > 2:
            self._ring_exchange(dim, pos, line_of, at, dest)
            return
        self.layout.label(self.step, f"all-to-all along {dim.name}: each rank sends every block to the rank of its "
                                     f"line at the block's destination coordinate, one partner per round")
        for cid, here in at.items():
            line = line_of[here]
            there = line[pos[dest[cid]]]
            if there != here:
                self.layout.send(cid, here, there, self.step + (pos[there] - pos[here]) % len(line) - 1)
                at[cid] = there
        self.step += dim.size - 1


    def _ring_exchange(self, dim: Dimension, pos: dict[int, int], line_of: dict[int, tuple[int, ...]],
                       at: dict[int, int], dest: dict[int, int]) -> None:
        d = dim.size
        far = d // 2
        self.layout.label(self.step, f"all-to-all along {dim.name}: every block takes the shorter way round its "
                                     f"ring of {d}, farthest first, half-way blocks split between both directions")
        for k in range(1, far):
            self.layout.label(self.step + k, f"all-to-all along {dim.name}, hop {k + 1} of {far}: relays move on, "
                                             f"blocks {far - k} hop(s) from home start")
        halfway: dict[tuple[int, int], int] = {}  # (rank, destination position) -> half-way blocks sent so far
        for cid, here in sorted(at.items()):
            line = line_of[here]
            i, j = pos[here], pos[line[pos[dest[cid]]]]
            offset = (j - i) % d
            if offset == 0:
                continue
            hops = min(offset, d - offset)
            way = 1 if offset < d - offset else -1
            if 2 * offset == d:  # half-way: alternate the two directions (by block, and by rank for one block)
                n = halfway.get((here, j), 0)
                halfway[(here, j)] = n + 1
                way = 1 if (n + i) % 2 == 0 else -1
            for h in range(hops):  # farthest blocks start first so relays do not trail the others
                self.layout.send(cid, line[(i + way * h) % d], line[(i + way * (h + 1)) % d],
                                 self.step + far - hops + h)
            at[cid] = line[j]
        self.step += far


def plan_collective(layout: Layout, collective: Collective, dims: Sequence[Dimension],
                    reduce_order: Sequence[int], gather_order: Sequence[int]) -> None:
    """The collective as phases: reductions along ``reduce_order``, copies along ``gather_order``."""
    name = collective.name
    offsets = None
    if name in ("broadcast", "reduce"):  # pipelined: chunk k trails chunk 0 by k rounds, both ways round rings
        offsets = {c.id: c.index for c in collective.chunks}
        dims = [Dimension(d.name, d.lines, "ring2" if d.method == "ring" else d.method) for d in dims]
    plan = PhasedPlan(layout, dims, offsets)
    chunks = collective.chunks
    if name == "alltoall":
        at = {c.id: min(c.pre) for c in chunks}
        dest = {c.id: min(c.post) for c in chunks}
        for a in reduce_order:
            plan.exchange_phase(a, at, dest)
        _arrived(at, dest, "alltoall")
        return
    if name in ("reducescatter", "allreduce", "reduce"):
        owners = {c.id: _owner(c) for c in chunks}
        holders = {c.id: set(c.pre) for c in chunks}
        for a in reduce_order:
            plan.reduce_phase(a, holders, owners)
        _arrived({cid: next(iter(h)) if len(h) == 1 else -1 for cid, h in holders.items()}, owners, name)
        if name != "allreduce":
            return
    else:  # allgather, broadcast
        holders = {c.id: set(c.pre) for c in chunks}
    for a in gather_order:
        plan.spread_phase(a, holders)
    missing = [c.id for c in chunks if not c.post <= holders[c.id]]
    if missing:
        raise CcvizError(f"topology: the grid's lines do not cover every rank (chunk {missing[0]} misses some); "
                         "use ring or direct", "topology")


def _owner(c: Chunk) -> int:
    return c.source if c.source in c.post else min(c.post)


def _arrived(at: dict[int, int], want: dict[int, int], name: str) -> None:
    wrong = [cid for cid in at if at[cid] != want[cid]]
    if wrong:
        raise CcvizError(f"topology: the grid's dimensions do not lead every {name} block to its rank (chunk "
                         f"{wrong[0]}); the lines must form a full grid", "topology")


def check_grid(topology: Topology, dims: Sequence[Dimension], ranks: Iterable[int], who: str) -> None:
    """Every dimension's lines partition the ranks into lines of one length; the sizes multiply to the rank count."""
    ranks = sorted(ranks)
    total = 1
    for dim in dims:
        members = sorted(r for line in dim.lines for r in line)
        if members != ranks or len({len(line) for line in dim.lines}) != 1:
            raise CcvizError(f"topology: {who} needs lines of equal length covering every GPU along {dim.name} of "
                             f"{topology.name!r}", "topology")
        total *= dim.size
    if total != len(ranks):
        raise CcvizError(f"topology: {who}: the dimensions {' x '.join(str(d.size) for d in dims)} do not multiply "
                         f"to the {len(ranks)} GPUs of {topology.name!r}", "topology")
    for dim in dims:
        if dim.method == "rhd" and dim.size & (dim.size - 1):
            raise CcvizError(f"per_dim: rhd needs a power-of-two line, {dim.name} has {dim.size}; use ring",
                             "per_dim")


def synchronized_rounds(schedule: Schedule) -> Schedule:
    """The schedule timed round by round: round r starts when every send of round r-1 has landed.

    That is the textbook model (one message per chunk group per round, rounds in lockstep), which the formula
    counts; each round is timed on its own by the simulator's ASAP rule (relays, shared links and switches
    included) and shifted to the end of the previous one. Without it the judge lets each chunk run ahead as
    soon as it lands, which pipelines a group's chunks across rounds (faster than the formula).
    """
    from ccviz.judge.simulate import assign_times

    rounds = schedule.rounds or [1] * len(schedule.transfers)
    by_round: dict[int, list[int]] = {}
    for i, r in enumerate(rounds):
        by_round.setdefault(r, []).append(i)
    timed: list[Transfer | None] = [None] * len(schedule.transfers)
    clock = 0.0
    for r in sorted(by_round):
        members = by_round[r]
        part = assign_times(schedule.with_transfers([schedule.transfers[i] for i in members]))
        end = clock
        for i, t in zip(members, part.transfers, strict=True):
            timed[i] = t._replace(start_s=clock + t.start_s, end_s=clock + t.end_s)
            end = max(end, clock + t.end_s)
        clock = end
    out = schedule.with_transfers([t for t in timed if t is not None])
    out.rounds = list(rounds)
    return out


def phased_schedule(topology: Topology, collective: Collective, dims: Sequence[Dimension], name: str,
                    notes: list[str], reduce_order: Sequence[int] | None = None,
                    gather_order: Sequence[int] | None = None, synchronous: bool = True) -> Schedule:
    """Lay the collective over ``dims`` and return the untimed schedule (rounds and labels for Learn)."""
    layout = Layout(topology, collective)
    resolved = []
    for dim in dims:
        method = resolve_method(dim.method, dim.lines[0], layout)
        resolved.append(Dimension(dim.name, dim.lines, method))
    check_grid(topology, resolved, collective.ranks, name)
    order = list(range(len(resolved))) if reduce_order is None else list(reduce_order)
    back = list(reversed(order)) if gather_order is None else list(gather_order)
    if collective.name in ("allgather", "broadcast") and gather_order is None:
        back = order
    plan_collective(layout, collective, resolved, order, back)
    transfers = layout.transfers()
    rounds, labels = layout.numbered_rounds()
    chains = [d.name for d in resolved if d.method == "chain"]
    if chains:
        notes = [*notes, f"no wrap-around link along {', '.join(chains)}: the ring there is the two-way chain "
                         "(same rounds, both directions of each link)"]
    if synchronous:
        notes = [*notes, "rounds in lockstep: each starts when the previous one has landed (sync=false lets "
                         "chunks run ahead)"]
    schedule = Schedule(topology, collective, transfers, name, status="heuristic", notes=notes, rounds=rounds,
                        round_labels=labels)
    return synchronized_rounds(schedule) if synchronous else schedule
