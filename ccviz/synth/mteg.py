"""Multicast time-expanded graph (MTEG) synthesizer.

After "Multicast time-expanded graph-based collective communication scheduling
algorithm" (Journal on Communications, 2026). Time is cut into *slots* (by
default the chunk time on the fastest link). The time-expanded graph has a
copy ``v_t`` of every node per slot, storage edges ``v_t -> v_{t+1}`` (GPUs
only: switches hold nothing) and transmission edges ``u_t -> v_{t+L_uv}``.
Every multicast (one per chunk; AllGather = one per (source, chunk), sources
in decreasing data volume) is a Steiner tree grown by Takahashi–Matsuyama:
repeatedly a multi-source Dijkstra from the tree reaches the nearest uncovered
terminal and its path joins the tree. The slots a tree keeps a link busy are
then reserved, so later trees cannot collide.

Choices of this implementation (and why):

- *Trees grow together* (``--opt growth=interleaved``, the default). The paper builds one
  tree after another; then the first trees take every link's early slots and the last
  queue behind them (8x8 mesh AllGather: 56 slots, 1.75x the bound). Here the next
  attachment is always the earliest one of any tree, ties going to the tree that covers
  the fewest GPUs, so each slot's links serve the chunks furthest behind (32 slots: the
  bound). ``growth=sequential`` keeps the paper's order.

- *Implicit, unbounded graph.* Slot copies are never materialized: a GPU's
  storage chain is a jump to the first slot where the out-link is free (a
  per-link calendar of reserved slot intervals). Switches store nothing, so
  a move is a whole chain GPU -> switches -> GPU whose links are all free at
  fixed offsets from one departure (chains follow shortest switch routes,
  all of them). The horizon never runs out (the paper grows it and
  retries) and tiny slots (1KB buffers: alpha = 560 slots) cost nothing.
- *Cost = arrival slot.* Tree nodes seed the Dijkstra with their own slot, so
  the "nearest" terminal is the one the tree can reach earliest. The paper's
  incremental tree cost (seeds at 0) minimises copies; measuring from the
  root minimises the finish time, which is what every caller compares. One
  search attaches every terminal whose path still fits, in arrival order.
- *Slot rounding as TE-CCL.* A link needing ``kappa = ceil(chunk time / slot)``
  slots per chunk stays reserved for ``kappa`` slots and delivers after
  ``kappa + ceil(alpha / slot)`` slots (alpha below 0.1 slot is ignored); a
  link faster than one chunk per slot carries ``floor`` of that many per
  slot. A hop out of a switch follows ``Topology.delay_epochs``: under
  ``switch_hop="teccl"`` it delivers after ceil(alpha / slot) slots with no
  serialization slot, under ``"free"`` in the same slot (one slot if into
  another switch); it still reserves its link.
  So a slot count here is an epoch count in TE-CCL's model.
- *Untimed output.* Transfers carry ``step`` = departure slot (plus a
  fraction ordering zero-delay hops inside one slot), and the simulator
  replays them as soon as data and link allow. Real alpha/beta therefore
  decide the finish time and no rounding can make the schedule invalid.
- *Reductions* come from the shared frame (``ccviz.synth.common``): ReduceScatter/Reduce are the
  mirrored broadcast on ``topology.reversed()`` (switches may not multicast
  there: they cannot add partials) reversed in time; AllReduce = RS then AG.
- ``restarts``/``seed`` retry shuffled orders of equally loaded sources and
  keep the fewest slots (grown sequentially, the order matters on meshes: 4x4 mesh 12 -> 9 slots).

For TE-CCL: ``mteg_schedule(topology, collective, epoch_s)`` with slots of TE-CCL's epoch is a
second upper bound and warm start (``EpochSolver.mteg_plan``): ``int(transfer.step)`` is the epoch
in which each transfer departs, ``schedule.epochs`` the slot of the last arrival.
"""

from __future__ import annotations

import heapq
import math
import random
import time
from bisect import bisect_left, insort
from collections.abc import Callable, Container, Iterable, Iterator
from dataclasses import dataclass, field

from ccviz.errors import CcvizError
from ccviz.model.collectives import Chunk, Collective
from ccviz.model.physics import epoch_cost, epoch_length
from ccviz.model.routing import earliest_arrivals
from ccviz.model.schedule import Schedule, Transfer
from ccviz.model.topology import Link, Topology
from ccviz.model.units import us_text
from ccviz.synth.budget import Budget
from ccviz.synth.catalog import MtegOptions
from ccviz.synth.common import Check, Forward, ReversalSynthesizer, best_of_restarts, check_restarts
from ccviz.synth.registry import SynthOptions
from ccviz.synth.switch_reach import OnePass

Key = tuple[int, int]  # a time-expanded state: (node, slot); GPUs use slot -1 (they store)
Edge = tuple[int, int, int]  # a transmission: (src, dst, departure slot)


# ----------------------------------------------------------------------------- slots
def slot_length(topology: Topology, chunk_bytes: float, epoch: str | float | None) -> float:
    """Seconds per slot: the time grid of ``ccviz.model.physics.epoch_length`` (never lengthened for alpha:
    tiny slots cost MTEG nothing)."""
    return epoch_length(topology, chunk_bytes, epoch, lengthen=False)[0]


@dataclass(frozen=True, slots=True)
class SlotTiming:
    """A link in slots: reserved ``busy`` slots per chunk, delivering after ``delay`` slots.

    A link that moves several whole chunks per slot (slots longer than its
    chunk time) takes ``per_slot`` chunks in one slot, as TE-CCL's capacity.
    """

    busy: int
    delay: int
    per_slot: int = 1

    @classmethod
    def of(cls, topology: Topology, link: Link, chunk_bytes: float, slot_s: float) -> SlotTiming:
        """TE-CCL's epoch rounding of the link rule (``physics.epoch_cost``), slot = epoch."""
        cost = epoch_cost(topology, (link.src, link.dst), chunk_bytes, slot_s)
        return cls(cost.busy, cost.delay, cost.whole_per_epoch)


class LinkCalendar:
    """Reserved slot intervals ``[start, end)`` of one link, at most ``lanes`` at a time."""

    def __init__(self, lanes: int) -> None:
        self.lanes = lanes
        self.intervals: list[tuple[int, int]] = []  # sorted by start

    def is_free(self, start: int, length: int) -> bool:
        return self._overlaps(start, start + length) < self.lanes

    def earliest_free(self, start: int, length: int) -> int:
        """First slot >= start from which the link is free for ``length`` slots."""
        if self.lanes == 1:  # disjoint intervals: walk the gaps after ``start``
            k = bisect_left(self.intervals, (start, -1))
            candidate = max(start, self.intervals[k - 1][1]) if k else start
            while k < len(self.intervals) and self.intervals[k][0] < candidate + length:
                candidate = max(candidate, self.intervals[k][1])
                k += 1
            return candidate
        candidate = start
        while not self.is_free(candidate, length):
            # The next chance is when one of the reservations overlapping the window ends.
            candidate = min(e for s, e in self.intervals if s < candidate + length and e > candidate)
        return candidate

    def reserve(self, start: int, length: int) -> None:
        """Add ``[start, start + length)``; with one lane, joined to the reservations it touches.

        Busy links are booked slot after slot, so without joining ``earliest_free`` would walk every
        reservation since ``start`` (a search seeds a GPU at the old slot it got the chunk in).
        """
        end = start + length
        intervals = self.intervals
        if self.lanes == 1:
            k = bisect_left(intervals, (start, -1))
            if k < len(intervals) and intervals[k][0] == end:
                end = intervals.pop(k)[1]
            if k and intervals[k - 1][1] == start:
                intervals[k - 1] = (intervals[k - 1][0], end)
                return
            intervals.insert(k, (start, end))
            return
        insort(intervals, (start, end))

    def _overlaps(self, start: int, end: int) -> int:
        hi = bisect_left(self.intervals, (end, -1))
        if self.lanes == 1:
            return 1 if hi and self.intervals[hi - 1][1] > start else 0
        return sum(1 for s, e in self.intervals[:hi] if e > start)


# ---------------------------------------------------------------------- one multicast
@dataclass
class MulticastTree:
    """The part of the time-expanded graph one chunk uses: who holds it when, over which edges."""

    chunk: int
    gpu_slot: dict[int, int]  # GPU -> slot from which it holds the chunk
    switch_slots: set[Key] = field(default_factory=set)  # (copy switch, slot) where the chunk passes
    edges: dict[Edge, Edge | None] = field(default_factory=dict)  # edge -> the edge that fed its source
    consumed: set[Edge] = field(default_factory=set)  # arrivals at no-copy switches already forwarded
    into: dict[int, list[Edge]] = field(default_factory=dict)  # node -> its edges in ``edges``, in the same order

    def finish_slot(self) -> int:
        return max(self.gpu_slot.values())


@dataclass(frozen=True, slots=True)
class Hop:
    """A move between two holding states: GPU to GPU through zero or more switches, in one go.

    Switches store nothing, so every link of the chain is reserved at a fixed
    offset from the departure; ``edges`` are its transmissions in order.
    """

    dst: int
    arrival: int
    edges: tuple[Edge, ...]


@dataclass(frozen=True, slots=True)
class _Label:
    """A settled Dijkstra state: reached at ``slot`` by ``hop`` from state ``parent``."""

    slot: int
    parent: Key | None
    hop: Hop | None


class SteinerSearch:
    """Takahashi–Matsuyama on the implicit time-expanded graph for one multicast.

    Shared link calendars carry the reservations of earlier trees (and of this
    tree as it grows), so every transmission found here is collision free.
    """

    def __init__(self, planner: MtegPlanner, chunk: int, holders: Iterable[int], terminals: Iterable[int]) -> None:
        self.planner = planner
        self.tree = MulticastTree(chunk, dict.fromkeys(holders, 0))
        self.uncovered = set(terminals) - set(self.tree.gpu_slot)
        self.frontier = dict.fromkeys(self.tree.gpu_slot)  # tree GPUs that may still have a move, in tree order
        # one terminal on a fabric whose GPUs link only to switches: chains go to it, not through other GPUs; where
        # the switches alone do not reach it, through the GPUs one switch pass from it first (``reach``)
        self.relays: bool | str = not (planner.switched and len(self.uncovered) == 1)

    def grow(self) -> MulticastTree:
        """Add paths until every terminal holds the chunk."""
        while self.uncovered:
            settled, order = self.reach()
            if not self._attach_in_arrival_order(settled, order):  # never loop without progress
                raise CcvizError(f"mteg: no path of chunk {self.tree.chunk} fits its own search; please report "
                                 "this topology", "mteg")
        return self.tree

    def reach(self, until: float = math.inf) -> tuple[dict[Key, _Label], list[Key]]:
        """The search from the current tree, and the uncovered terminals it reaches in arrival order: the nearest
        and all others reached by slot ``until``."""
        settled, order = self._dijkstra_from_tree(until)
        if not order and self.relays is False:  # the switches alone do not reach it: through the GPUs next to it
            # (two NVL72 racks: a GPU's pair on another rail in the other rack goes through one GPU of its own
            # rack or the other's; relaying through every GPU settled all 144, 0.3 s a search, 0 of 20,592
            # chunks planned in 60 s)
            self.relays = "near"
            settled, order = self._dijkstra_from_tree(until)
        if not order and self.relays == "near":  # nor those: through any GPU then
            self.relays = True
            settled, order = self._dijkstra_from_tree(until)
        if not order:
            raise CcvizError(
                f"topology: chunk {self.tree.chunk} cannot reach GPU(s) {sorted(self.uncovered)} through the "
                "links and switches; connect them (no-copy switches forward each arrival only once)",
                "topology",
            )
        return settled, order

    def _dijkstra_from_tree(self, until: float = math.inf) -> tuple[dict[Key, _Label], list[Key]]:
        """Purpose: arrival slots from the whole current tree (every holder seeds at the slot it holds from, copy
        switches at the slots the chunk passes them)."""
        planner, tree = self.planner, self.tree
        heap: list[tuple[int, int, Key, Key | None, Hop | None]] = []
        covered, direct = tree.gpu_slot, planner.direct_neighbour_set
        if self.relays is True:
            done = covered
        elif self.relays == "near":
            done = _AllGpusBut(self.uncovered | planner.one_pass.to(self.uncovered) - covered.keys(),
                               planner.is_switch)
        else:
            done = _AllGpusBut(self.uncovered, planner.is_switch)
        holders = covered.keys()
        spent = []
        for gpu in self.frontier:
            near = direct[gpu]
            if near is not None and holders >= near:
                spent.append(gpu)  # every neighbour holds the chunk: no move from here, now or later
                continue
            heap.append((covered[gpu], len(heap), (gpu, -1), None, None))
        for gpu in spent:
            del self.frontier[gpu]
        for state in tree.switch_slots:
            heap.append((state[1], len(heap), state, None, None))
        counter = len(heap)
        heapq.heapify(heap)
        settled: dict[Key, _Label] = {}
        best: dict[int, int] = {}
        order: list[Key] = []
        remaining = len(self.uncovered)
        uncovered, consumed, hops, direct_links = self.uncovered, tree.consumed, planner.hops, planner.direct_links
        pop, push, no_best = heapq.heappop, heapq.heappush, math.inf
        while heap and remaining:
            slot, _, key, parent, hop = pop(heap)
            if key in settled:
                continue
            if order and slot > until:
                break
            settled[key] = _Label(slot, parent, hop)
            node, waits = key
            waits = waits < 0
            if waits and node in uncovered:
                order.append(key)
                remaining -= 1
            links = direct_links[node]
            if links is not None:  # what ``hops`` yields for one-link moves; a Hop only for a move pushed
                for nxt, calendar, busy, delay in links:
                    if nxt in covered or nxt == node:
                        continue
                    aligned = calendar.earliest_free(slot, busy)
                    if not waits and aligned != slot:
                        continue
                    arrival, state = aligned + delay, (nxt, -1)
                    if best.get(nxt, no_best) <= arrival or state in settled:
                        continue
                    best[nxt] = arrival
                    push(heap, (arrival, counter, state, key, Hop(nxt, arrival, ((node, nxt, aligned),))))
                    counter += 1
                continue
            for move in hops(node, slot, waits, done, consumed):
                arrival, state = move.arrival, (move.dst, -1)
                if best.get(move.dst, no_best) <= arrival or state in settled:
                    continue
                best[move.dst] = arrival
                push(heap, (arrival, counter, state, key, move))
                counter += 1
        return settled, order

    def _attach_in_arrival_order(self, settled: dict[Key, _Label], order: list[Key], until: float = math.inf) -> int:
        """Purpose: one search serves many terminals (those reached by slot ``until``, and always the nearest). A
        path that now collides with what this round already added waits for the next search; the nearest
        terminal's path always fits."""
        attached = 0
        for terminal in order:
            if attached and settled[terminal].slot > until:
                break
            path = self._path_to(terminal, settled)
            if self._fits(path):
                self._commit(path)
                self.uncovered.discard(terminal[0])
                attached += 1
        return attached

    @staticmethod
    def _path_to(key: Key, settled: dict[Key, _Label]) -> list[Hop]:
        """The hops from the tree to ``key``, in time order."""
        path = []
        label = settled[key]
        while label.hop is not None:
            path.append(label.hop)
            label = settled[label.parent]
        path.reverse()
        return path

    def _fits(self, path: list[Hop]) -> bool:
        """A path fits if its new edges are still free and no no-copy switch arrival is reused."""
        planner, tree = self.planner, self.tree
        for hop in path:
            previous: Edge | None = None
            for edge in hop.edges:
                if edge not in tree.edges:
                    if not planner.calendars[edge[:2]].is_free(edge[2], planner.timing[edge[:2]].busy):
                        return False
                    if previous is not None and not planner.copies(edge[0]) and previous in tree.consumed:
                        return False
                previous = edge
        return True

    def _commit(self, path: list[Hop]) -> None:
        planner, tree = self.planner, self.tree
        for hop in path:
            previous: Edge | None = None
            for edge in hop.edges:
                src, dst, depart = edge
                if edge not in tree.edges:
                    tree.edges[edge] = previous if previous is not None else self._feeder_of(src, depart)
                    tree.into.setdefault(dst, []).append(edge)
                    planner.calendars[(src, dst)].reserve(depart, planner.timing[(src, dst)].busy)
                    if previous is not None and not planner.copies(src):
                        tree.consumed.add(previous)
                if planner.is_switch[dst] and planner.copies(dst):
                    tree.switch_slots.add((dst, depart + planner.delay(edge)))
                previous = edge
            if hop.arrival < tree.gpu_slot.get(hop.dst, math.inf):
                if hop.dst not in tree.gpu_slot:
                    self.frontier[hop.dst] = None
                tree.gpu_slot[hop.dst] = hop.arrival

    def _feeder_of(self, src: int, depart: int) -> Edge | None:
        """The tree edge that brought the chunk to ``src`` (None at an original holder)."""
        planner = self.planner
        for edge in self.tree.into.get(src, ()):
            if (not planner.is_switch[src] or edge[2] + planner.delay(edge) == depart):
                return edge
        return None


class _AllGpusBut:
    """The GPUs a unicast search may not move to: every GPU but its uncovered terminal (switches stay open)."""

    def __init__(self, allowed: set[int], is_switch: dict[int, bool]) -> None:
        self.allowed, self.is_switch = allowed, is_switch

    def __contains__(self, node: int) -> bool:
        return not self.is_switch[node] and node not in self.allowed


# --------------------------------------------------------------------------- planner
class MtegPlanner:
    """All multicasts of one collective on one topology, sharing link calendars.

    A switch multicasts only where its node may copy (a reduction's mirror fabric,
    ``reversal.mirror_fabric``, forbids it everywhere: a switch cannot add partials).
    """

    def __init__(self, topology: Topology, collective: Collective, slot_s: float, interleave: bool = True) -> None:
        self.topology = topology
        self.interleave = interleave
        self.collective = collective
        self.slot_s = slot_s
        self.is_switch = {n: node.is_switch for n, node in topology.nodes.items()}
        self.copy = {n: node.copy for n, node in topology.nodes.items()}
        self.timing = {
            key: SlotTiming.of(topology, link, collective.chunk_bytes, slot_s) for key, link in topology.links.items()
        }
        self.calendars = {
            key: LinkCalendar(link.lanes * self.timing[key].per_slot) for key, link in topology.links.items()
        }
        self.out_links = {n: [link.dst for link in links] for n, links in topology.out_links.items()}
        # A node's out-neighbours when all are GPUs (then its moves reach only them), else None.
        self.direct_neighbours = {n: None if any(self.is_switch[d] for d in out) else out
                                  for n, out in self.out_links.items()}
        self.direct_neighbour_set = {n: None if out is None else frozenset(out)
                                     for n, out in self.direct_neighbours.items()}
        self.delays = {key: timing.delay for key, timing in self.timing.items()}
        # Out-links of a node whose out-neighbours are all GPUs, as (GPU, calendar, busy, delay), else None:
        # the search then takes its moves without ``hops``' chain search: one link each, aligned by its
        # calendar alone (no spent arrival can be among them: those enter switches).
        self.direct_links = {
            n: None if near is None else [(d, self.calendars[(n, d)], self.timing[(n, d)].busy,
                                           self.timing[(n, d)].delay) for d in near]
            for n, near in self.direct_neighbours.items()}
        self._distances: dict[int, dict[int, float]] = {}
        self._out_index: dict[int, dict[int, int]] = {}  # node -> out-neighbour -> its place (``_onward``)
        self._out_switches: dict[int, list[int]] = {}  # node -> its out-neighbours that are switches
        # GPUs linked only to switches (NVL72, leaf-spines, fat trees): a unicast's search need not relay through
        # GPUs, every GPU being a switch chain away (72-GPU AllToAll: 5,112 searches of 18 chains each instead
        # of 71 x 18 per GPU reached on the way, about 2 h at 24 GPUs' pace)
        self.switched = all(self.is_switch[d] for g in topology.gpus for d in self.out_links.get(g, ()))
        self.one_pass = OnePass(topology)  # the relays next to a destination (``SteinerSearch.reach``)

    def copies(self, node: int) -> bool:
        """True when ``node`` may forward one arrival on several links (GPUs always may)."""
        return not self.is_switch[node] or self.copy[node]

    def delay(self, edge: Edge) -> int:
        return self.timing[edge[:2]].delay

    def hops(self, node: int, slot: int, can_wait: bool, done: Container[int] = (),
             spent: Container[Edge] = ()) -> Iterator[Hop]:
        """Moves out of state (node, slot) to GPUs not in ``done``, through chains of switches.

        A GPU may wait (storage edges) for the first slot from which a whole
        chain is free; a switch stores nothing, so a chain leaving a switch
        state must depart in that very slot. Chains cross switches only along
        shortest routes (all of them, as ECMP): longer detours multiply
        without bound on fat trees and dragonflies.
        """
        nearest = self._switch_distances(node)
        stack: list[tuple[int, tuple[tuple[int, int, int], ...], int]] = [(node, (), slot)]
        while stack:
            at, chain, depart = stack.pop()
            offset = chain[-1][2] + self.timing[chain[-1][:2]].delay if chain else 0
            for nxt in (self._onward(at, done.allowed) if isinstance(done, _AllGpusBut) else self.out_links[at]):
                reach = offset + self.timing[(at, nxt)].delay
                if nxt in done or nxt == node or (self.is_switch[nxt] and reach != nearest[nxt]):
                    continue
                longer = (*chain, (at, nxt, offset))
                aligned = self._align(longer, depart, spent)
                if aligned is None or (not can_wait and aligned != slot):
                    continue
                if self.is_switch[nxt]:
                    stack.append((nxt, longer, aligned))
                else:
                    yield Hop(nxt, aligned + reach, tuple((u, v, aligned + off) for u, v, off in longer))

    def _onward(self, node: int, allowed: set[int]) -> list[int]:
        """``node``'s out-neighbours that a unicast search may enter (switches and its terminal), in
        ``out_links`` order: testing all 72 of an NVSwitch's GPUs per move took a fifth of mteg's time."""
        if node not in self._out_index:
            out = self.out_links[node]
            self._out_index[node] = {d: i for i, d in enumerate(out)}
            self._out_switches[node] = [d for d in out if self.is_switch[d]]
        index = self._out_index[node]
        extra = [g for g in allowed if g in index and not self.is_switch[g]]
        return sorted(self._out_switches[node] + extra, key=index.__getitem__) if extra else self._out_switches[node]

    def _switch_distances(self, start: int) -> dict[int, float]:
        """Fewest slots from ``start`` to every switch, crossing only switches (memoized)."""
        if start not in self._distances:
            self._distances[start] = earliest_arrivals(self.topology, {start: 0}, self.delays,
                                                       through=self.is_switch.__getitem__)
        return self._distances[start]

    def _align(self, chain: tuple[tuple[int, int, int], ...], earliest: int, spent: Container[Edge]) -> int | None:
        """First departure >= earliest at which every link of the chain is free at its offset.

        ``spent`` arrivals at no-copy switches were forwarded already; a chain
        needs a fresh arrival (a link carrying several chunks per slot could
        otherwise offer the spent one again and again).
        """
        depart = earliest
        for _ in range(10_000):
            later = depart
            for u, v, offset in chain:
                timing = self.timing[(u, v)]
                later = max(later, self.calendars[(u, v)].earliest_free(depart + offset, timing.busy) - offset)
            if later == depart and any((u, v, depart + offset) in spent for u, v, offset in chain):
                later = depart + 1
            if later == depart:
                return depart
            depart = later
        return None

    def plan(self, chunk_order: list[Chunk], check: Callable[[float, int, int], bool] | None = None
             ) -> list[MulticastTree] | None:
        """One Steiner tree per chunk, in the given order (which breaks ties between trees).

        ``interleave`` (the default, ``growth='interleaved'``) grows all trees together, in time order:
        the next attachment is the earliest one of any tree, ties to the tree that covers the fewest
        GPUs, so every slot's free links go to the chunks furthest behind. Grown one after another
        (``growth='sequential'``, the paper's order) the first trees take every link's early slots
        and the last ones queue behind them (8x8 mesh AllGather: 56 slots against 32 interleaved,
        which is the bound). A tree's next attachment only gets later as other trees reserve links,
        so a tree whose search lands later than another tree's due slot goes back in the queue.

        ``check(fraction planned, trees done, trees)`` may end the plan early (True on a stop or an
        expired time limit): it then returns None, since a partial plan is no schedule.
        """
        todo = [chunk for chunk in chunk_order if chunk.post - chunk.pre]
        searches = [SteinerSearch(self, chunk.id, sorted(chunk.pre), sorted(chunk.post - chunk.pre)) for chunk in todo]
        if not self.interleave:
            for k, search in enumerate(searches):
                if check is not None and check(k / len(todo), k, len(todo)):
                    return None
                search.grow()
            return [search.tree for search in searches]
        # (no attachment of tree k lands before this slot, how many GPUs it covers, k): the tree furthest behind first
        heap = [(0, len(search.tree.gpu_slot), k) for k, search in enumerate(searches)]
        heapq.heapify(heap)
        total = sum(len(search.uncovered) for search in searches)
        left, done = total, 0
        while heap:
            if check is not None and check(1.0 - left / total, done, len(todo)):
                return None
            earliest, _, k = heapq.heappop(heap)
            search = searches[k]
            rival = heap[0][0] if heap else math.inf
            settled, order = search.reach(until=rival)
            first = settled[order[0]].slot
            if first > earliest and first > rival:  # reservations since made it later: another tree may go first
                heapq.heappush(heap, (first, len(search.tree.gpu_slot), k))
                continue
            attached = search._attach_in_arrival_order(settled, order, until=rival)
            if not attached:
                raise CcvizError(f"mteg: no path of chunk {search.tree.chunk} fits its own search; please report "
                                 "this topology", "mteg")
            left -= attached
            if search.uncovered:
                heapq.heappush(heap, (first, len(search.tree.gpu_slot), k))
            else:
                done += 1
        return [search.tree for search in searches]


# ----------------------------------------------------------------------- ordering
def multicast_order(collective: Collective, rng: random.Random | None = None) -> list[Chunk]:
    """Chunks by source data volume (largest first), sources taking turns chunk by chunk.

    Ties between equally loaded sources keep rank order, or a seeded shuffle for restarts.
    """
    by_source: dict[int, list[Chunk]] = {}
    for chunk in collective.chunks:
        source = chunk.source if chunk.source is not None else min(chunk.pre)
        by_source.setdefault(source, []).append(chunk)
    sources = sorted(by_source)
    if rng is not None:
        rng.shuffle(sources)
    sources.sort(key=lambda s: -len(by_source[s]) * len(by_source[s][0].post))
    order = []
    for k in range(max(len(v) for v in by_source.values())):
        order.extend(by_source[s][k] for s in sources if k < len(by_source[s]))
    return order


# ------------------------------------------------------------------------ schedule
def tree_transfers(tree: MulticastTree, n_nodes: int) -> list[Transfer]:
    """Read a tree off as untimed transfers, step = departure slot.

    A hop with zero delay (out of a switch under switch_hop 'free' or a small alpha) lands in
    the slot it left; a transfer forwarding it in that same slot gets a
    slightly larger step, so the simulator's step rule sees it wait.
    """
    depth: dict[Edge, int] = {}

    def depth_of(edge: Edge) -> int:
        if edge not in depth:
            feeder = tree.edges[edge]
            depth[edge] = depth_of(feeder) + 1 if feeder is not None and feeder[2] == edge[2] else 0
        return depth[edge]

    return [
        Transfer(tree.chunk, src, dst, step=depart + depth_of((src, dst, depart)) / (n_nodes + 1))
        for (src, dst, depart) in tree.edges
    ]


def mteg_schedule(
    topology: Topology,
    collective: Collective,
    epoch_s: float | str = "fastest",
    restarts: int = 1,
    seed: int | None = None,
    budget: Budget | None = None,
    growth: str = "interleaved",
) -> Schedule:
    """The MTEG schedule of a copy collective with slots of ``epoch_s`` (best of ``restarts`` orders).

    ``budget`` (optional) carries the stop event, time limit and progress of a synthesis: it is looked
    at before every search. ``growth``: 'interleaved' or 'sequential' trees (``MtegPlanner.plan``). A stop or an expired limit ends the current attempt; the best complete
    attempt is returned with a note, and with none complete a ``CcvizError`` says so.
    """
    if collective.is_reducing:
        raise CcvizError(
            f"collective: mteg builds {collective.name} by reversal; call synthesize(..., 'mteg') for it",
            "collective",
        )
    check_restarts(restarts)
    slot_s = slot_length(topology, collective.chunk_bytes, epoch_s)
    budget = budget or Budget(SynthOptions())
    rng = random.Random(seed)
    growth = MtegOptions.parse({"growth": growth}, "mteg").growth  # the --opt check, for library callers too

    def attempt(k: int, check: Check) -> list[MulticastTree] | None:
        order = multicast_order(collective, rng if k else None)
        return MtegPlanner(topology, collective, slot_s, growth == "interleaved").plan(
            order, lambda fraction, done, n: check(fraction, f"tree {done}/{n}", f"{done} of {n} multicast trees built"))

    best, done = best_of_restarts(budget, "MTEG", "attempt", restarts, attempt,
                                  lambda trees: _finish_slot(trees) * slot_s,
                                  f"0 of {sum(1 for c in collective.chunks if c.post - c.pre)} multicast trees built")
    transfers = sorted(
        (t for tree in best for t in tree_transfers(tree, len(topology.nodes))), key=lambda t: t.step
    )
    slots = _finish_slot(best)
    notes = [f"{len(best)} multicast trees; last arrival in slot {slots} of {us_text(slot_s)}"]
    cut = budget.note("MTEG", done, restarts)
    if cut:
        notes.append(cut)
    return Schedule(
        topology, collective, transfers, "mteg", status="heuristic", epoch_s=slot_s, epochs=slots,
        estimated_finish_s=slots * slot_s, notes=notes, cut_short=budget.reason() if cut else None,
    )


def _finish_slot(trees: list[MulticastTree]) -> int:
    """The slot of the last arrival over all trees."""
    return max((tree.finish_slot() for tree in trees), default=0)


class Mteg(ReversalSynthesizer):
    """MTEG's copy core (Steiner trees in the slotted graph) in the shared frame.

    In a reduction's mirror no switch may multicast (the mirror fabric's switches do not copy):
    reversed, it would have to add partials.
    """

    name = "mteg"

    def copy(self, topology: Topology, collective: Collective, *, mirrored_from: Topology | None = None,
             start_s: float = 0.0) -> Forward:
        """The best MTEG plan of ``options.restarts`` source orders, untimed (the simulator times it)."""
        options = self.options
        growth = options.settings(MtegOptions).growth
        return Forward(mteg_schedule(topology, collective, options.epoch, options.restarts, options.seed,
                                     budget=self.budget, growth=growth))

    def mirror_solves_gather(self, topology: Topology) -> bool:
        """The mirror differs only in forbidding multicast at switches: the same problem when none can copy."""
        return not any(node.copy for node in topology.nodes.values() if node.is_switch)


def synthesize_mteg(topology: Topology, collective: Collective, options: SynthOptions) -> Schedule:
    """Registry entry: copies directly, reductions by reversal, AllReduce as RS then AG."""
    t0 = time.perf_counter()
    schedule = Mteg(topology, collective, options).synthesize()
    schedule.synth_time_s = time.perf_counter() - t0
    return schedule
