"""Routes through bufferless switches booked on a slot grid, every slot's senders matched together.

A bufferless switch forwards a chunk the instant it has arrived, so a route GPU -> switch ... -> GPU
holds its links back to back. Where every GPU's up-link into a switch costs the same (one delay
``d``), a route started at ``t0 + k d`` holds its i-th link at a fixed offset into slot ``k + s_i``;
no booking leaves a sliver of a link that no other chunk fits in, a fast link further on (a 100 GB/s
spine behind 50 GB/s up-links) may carry two hops in one slot if their parts do not overlap, and a hop
on a slower one (a dragonfly's 25 GB/s global cable) spans two slots.
What is left is, per slot, which waiting tree edges go: a matching between the free up-links and
the slots of the links further on. Choosing one sender at a time (first come, first served) leaves
10-20 % of a saturated crossbar's links idle; here every sender free in the slot is matched at
once, Kuhn's way (``SlotMatching``): a sender whose candidates are all blocked may take a slot
another sender holds if that sender can move to another of its candidates, and an edge may go along
another switch path as long as its own (a fat-tree's other aggregation and core switches).

The grid costs ``alpha`` per slot (a link is busy for the bytes' time, a slot lasts that plus
alpha), so it pays where pieces are large next to alpha; forestcoll tries it where first-come
booking ends well above the limit and keeps the faster schedule. Where no switch is cabled to another
(``one_switch_routes``: every route is GPU -> switch -> GPU) a slot may last the bytes' time alone
(``tight``): every route's second hop then starts one up-link delay after its first, so routes a whole
number of slots apart stay that far apart on the down-links too, and an up-link sends back to back.
Direct GPU -> GPU links need no grid: a free one sends its most urgent waiting chunk at once.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import math
from collections import defaultdict
from collections.abc import Callable, Iterable

import numpy as np

from ccviz.model.collectives import Collective
from ccviz.model.physics import link_costs
from ccviz.model.schedule import Transfer
from ccviz.model.topology import Topology

STOP_EVERY = 8  # slots between two questions whether to stop
CANDIDATES = 48  # waiting edges of one up-link a slot considers: the most urgent to each receiver
WAVE_CANDIDATES = 56  # ... in piece waves (a measured choice, 2026-11-27: 64-GPU dragonfly ReduceScatters,
# groups=8,routers=4,gpus=2 / groups=4,routers=4,gpus=4: 48 1.092 / 1.055 x the limit, 56 1.083 / 1.040,
# 64 1.082 / 1.063; an up-link has one head per link into a receiver: with one link per GPU, only beyond 49 GPUs)
AUGMENT_DEPTH = 4  # senders one augmenting path may move
DETOURS = 8  # other switch paths of the same length a slot may send an edge along
_EPS = 1e-12  # s: parts of a slot that only touch do not overlap
SCRAMBLE_MULTIPLIER = 2654435761  # Knuth's multiplicative hash (``_scrambled``)


def _uplinks(topology: Topology) -> list[tuple[int, int]]:
    return [key for key in topology.links if not topology.is_switch(key[0]) and topology.is_switch(key[1])]


def slot_eligible(topology: Topology) -> bool:
    """Every GPU -> switch link has one bandwidth and alpha (then one slot fits every up-link hop; a
    hop on a slower link further on spans more than one)."""
    uplinks = _uplinks(topology)
    if not uplinks:
        return False
    first = topology.links[uplinks[0]]
    return all((topology.links[key].bandwidth_GBps, topology.links[key].alpha_us)
               == (first.bandwidth_GBps, first.alpha_us) for key in uplinks)


def slot_capacities(topology: Topology, links: list[tuple[int, int]]) -> np.ndarray:
    """GB/s each link can give slotted routes: a link touching a switch carries one hop per slot and
    lane, as much as an up-link (a slower one its bandwidth); direct links their bandwidth (the packing
    aims at these)."""
    up = topology.links[_uplinks(topology)[0]].bandwidth_GBps
    out = []
    for key in links:
        link = topology.links[key]
        switched = topology.is_switch(key[0]) or topology.is_switch(key[1])
        out.append((min(link.bandwidth_GBps, up) if switched else link.bandwidth_GBps) * link.lanes)
    return np.array(out)


def one_switch_routes(topology: Topology) -> bool:
    """No switch -> switch link: every route through switches is GPU -> switch -> GPU (rfs3d, DGX-2, switch2d).

    Then every route's second hop starts one up-link delay after its first, so routes started a whole
    number of up-link busy times apart keep their down-link hops that far apart too: tight slots
    (``slot_length(tight=True)``) lose nothing to misaligned hops.
    """
    return bool(topology.switches) and not any(
        topology.is_switch(u) and topology.is_switch(v) for u, v in topology.links)


def slot_length(topology: Topology, chunk_bytes: float, tight: bool = False) -> float:
    """The slot: the delay of a GPU's up-link for one chunk (alpha + the bytes' time), or with ``tight``
    the bytes' time alone, so that an up-link sends back to back and pays no alpha per slot (a route's
    later hops then start part way into a slot; ``SlotBooking._timing`` books those parts)."""
    cost = link_costs(topology, chunk_bytes)[_uplinks(topology)[0]]
    return cost.busy if tight else cost.delay


def slot_overhead(topology: Topology, chunk_bytes: float) -> float:
    """What a slot adds to a chunk's bytes on an up-link (its alpha), as a fraction of them."""
    cost = link_costs(topology, chunk_bytes)[_uplinks(topology)[0]]
    return (cost.delay - cost.busy) / cost.busy


def _hop_distances(switches, out: dict[int, list[tuple[int, int]]]) -> dict[tuple[int, int], int]:
    """Switch -> switch distances in links (breadth first from each switch)."""
    distance: dict[tuple[int, int], int] = {}
    for source in switches:
        distance[(source, source)] = 0
        frontier = [source]
        while frontier:
            following = []
            for u in frontier:
                for v, _ in out.get(u, ()):
                    if (source, v) not in distance:
                        distance[(source, v)] = distance[(source, u)] + 1
                        following.append(v)
            frontier = following
    return distance


def _overlapping(parts, a: float, b: float) -> int:
    """How many of ``parts`` ((start, end) pairs) overlap [a, b)."""
    return sum(1 for x, y in parts if x < b - _EPS and y > a + _EPS)


def _common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


class Fitting:
    """One up-link's candidates in a slot, worked out only as far as the matching reads them: most
    senders take their first, and testing every waiting edge's route (and detours) up front was most of
    the grid's time. Bookings do not change while a slot is matched, so the order and the answers are
    those of the whole list."""

    def __init__(self, entries: Iterable[tuple]) -> None:
        self.known: list[tuple] = []
        self.rest = iter(entries)

    def get(self, n: int) -> tuple | None:
        """Entry ``n`` (edge, resources), or None past the last."""
        while len(self.known) <= n:
            entry = next(self.rest, None)
            if entry is None:
                return None
            self.known.append(entry)
        return self.known[n]

    def __setitem__(self, n: int, entry: tuple) -> None:
        self.known[n] = entry


class SlotMatching:
    """One slot's choice: per free up-link lane (a unit) one waiting edge whose later hops are free.

    ``candidates[link]`` lists (edge, resources) whose resources no earlier booking fills; a resource
    is (key, start, end): a link's slot and the part of it a hop is busy, or a copy switch's slot for
    one chunk. ``left(key, start, end)`` is how many more bookings fit there. Resources given as None
    are asked of ``resources_of(edge)`` when the search first looks at the edge (most senders take
    their first candidate: working out the others' resources was a fifth of the grid's time).
    """

    def __init__(self, units: list[int], candidates: dict[int, list[tuple]], left,
                 resources_of: Callable[[tuple], list[tuple]] | None = None) -> None:
        self.units = units
        self.candidates = {unit: c if isinstance(c, Fitting) else Fitting(c) for unit, c in candidates.items()}
        self.left = left
        self.resources_of = resources_of
        self.tentative: dict[tuple, list[tuple[int, float, float]]] = defaultdict(list)
        self.choice: dict[int, tuple] = {}  # unit -> (edge, resources)
        self.chosen: set[int] = set()  # seq of the chosen edges

    def solve(self) -> list[tuple]:
        """The chosen edges, most urgent sender first."""
        for unit in range(len(self.units)):
            self._assign(unit, {unit}, 0)
        return [item for _, (item, _) in sorted(self.choice.items())]

    def _hold(self, unit: int, item: tuple, resources: list[tuple]) -> None:
        self.choice[unit] = (item, resources)
        self.chosen.add(item[2])
        for key, a, b in resources:
            self.tentative[key].append((unit, a, b))

    def _drop(self, unit: int) -> tuple:
        item, resources = self.choice.pop(unit)
        self.chosen.discard(item[2])
        for key, a, b in resources:
            self.tentative[key].remove((unit, a, b))
        return item, resources

    def _blockers(self, resources: list[tuple]) -> set[int]:
        """Units whose tentative choices fill a part of these resources."""
        blockers: set[int] = set()
        for key, a, b in resources:
            held = self.tentative.get(key)
            if held:
                holders = [u for u, x, y in held if x < b - _EPS and y > a + _EPS]
                if holders and len(holders) >= self.left(key, a, b):
                    blockers.update(holders)
        return blockers

    def _assign(self, unit: int, visited: set[int], depth: int) -> bool:
        """Kuhn's augmenting search: an edge for ``unit``, moving one other unit per step if need be."""
        candidates = self.candidates[self.units[unit]]
        for n in itertools.count():
            entry = candidates.get(n)
            if entry is None:
                break
            item, resources = entry
            if item[2] in self.chosen:
                continue
            if resources is None:
                resources = self.resources_of(item)
                candidates[n] = (item, resources)
            blockers = self._blockers(resources)
            if not blockers:
                self._hold(unit, item, resources)
                return True
            if depth >= AUGMENT_DEPTH or len(blockers) != 1:
                continue
            other = next(iter(blockers))
            if other in visited:
                continue
            visited.add(other)
            saved = self._drop(other)
            self._hold(unit, item, resources)
            if self._assign(other, visited, depth + 1):
                return True
            self._drop(unit)
            self._hold(other, *saved)
        return False


class SlotBooking:
    """Chunks flow along a tree plan; routes through switches start on the slot grid, direct links
    whenever they are free.

    ``plan.starts(collective)`` gives (chunk, GPU) pairs to start from; ``plan.arrive(chunk, gpu,
    initial)`` the tree edges an arrival releases as (urgency, destination, route of link ids); the
    smaller (chunk index, urgency) goes first.
    """

    def __init__(self, topology: Topology, collective: Collective, plan, start_s: float,
                 stop: Callable[[], bool] | None = None, deep_first: bool = False, tight: bool = False,
                 piece_waves: bool = False) -> None:
        self.stop = stop  # asked between slots: True ends the booking (slotted_pipeline returns None)
        self.deep_first = deep_first  # urgency: chunk index less the tree levels still below the edge
        # with ``piece_waves``: piece index (every tree's piece p alike) less the levels below, and a sender's
        # equally urgent edges in a fixed scrambled order, not release order
        self.piece_waves = piece_waves
        self.candidates = WAVE_CANDIDATES if piece_waves else CANDIDATES  # waiting edges per up-link considered
        self.trees_per_root = plan.packing.k if piece_waves else 1  # chunk index // this = the piece's index
        self.topology = topology
        self.collective = collective
        self.plan = plan
        self.slot = slot_length(topology, collective.chunk_bytes, tight)
        self.t0 = start_s
        self.links = sorted(topology.links)
        costs = link_costs(topology, collective.chunk_bytes)
        self.delay = [costs[key].delay for key in self.links]
        self.hold = [costs[key].busy for key in self.links]
        self.lanes = [topology.links[key].lanes for key in self.links]
        self.switched = [topology.is_switch(u) or topology.is_switch(v) for u, v in self.links]
        copying = any(topology.nodes[x].copy for x in topology.switches)
        self.multicast = copying and not collective.is_reducing  # copy switches branch a chunk
        self.copy_pass = copying and collective.is_reducing  # two partials of a chunk never pass together
        self.op = "reduce" if collective.is_reducing else "copy"
        # (link, slot) -> busy parts, (start, end) s into the slot; ("pass", switch, chunk, slot) likewise
        self.used: dict[tuple, list[tuple[float, float]]] = defaultdict(list)
        self.waiting: dict[int, list[tuple]] = defaultdict(list)  # direct link -> heap of waiting edges
        # up-link -> receiver's in-link -> heap: a slot sees the most urgent edge to every receiver
        self.by_end: dict[int, dict[int, list[tuple]]] = defaultdict(lambda: defaultdict(list))
        # up-link -> the tops of its receivers' heaps (none of them sent yet), sorted: kept as edges come and go,
        # so that a slot reads an up-link's most urgent edges without walking every receiver's heap
        self.heads: dict[int, list[tuple]] = defaultdict(list)
        self.same_chunk: dict[tuple[int, int], list[tuple]] = defaultdict(list)  # (up-link, chunk) -> edges
        self.taken: set[int] = set()  # seq of edges sent (booked or rode along)
        self.lane_free = [[start_s] * n for n in self.lanes]  # direct links: when each lane is free
        self.events: list[tuple] = []
        self.ticks: set[int] = set()
        self.slotted_waiting = 0
        self.seq = 0
        self.timings: dict[int, tuple[list[int], list]] = {}  # id(route) -> (route, its timing)
        self.later_hops: dict[int, tuple[list[int], list]] = {}  # id(route) -> (route, what _fits tests)
        self.hop_parts: dict[tuple[int, int], tuple[list[int], list]] = {}  # (id(route), first hop) -> (route, parts)
        # switch -> [(next switch, link id)] and hop distances between switches (for detours)
        self.switch_out: dict[int, list[tuple[int, int]]] = defaultdict(list)
        for lid, (u, v) in enumerate(self.links):
            if topology.is_switch(u) and topology.is_switch(v):
                self.switch_out[u].append((v, lid))
        self.switch_distance = _hop_distances(topology.switches, self.switch_out)
        self.detours: dict[tuple[int, ...], list[list[int]]] = {}  # route -> it, then its detours
        self.transfers: list[Transfer] = []
        self.finish = start_s

    # ------------------------------------------------------------------ events
    def run(self) -> tuple[list[Transfer], float]:
        """Replay arrivals, free direct links and slot ticks in time order until every chunk is home."""
        for cid, node in self.plan.starts(self.collective):
            self._push(self.t0, 2, cid, node)
        while self.events:
            now, kind, _, a, b = heapq.heappop(self.events)
            if kind in (0, 2):
                self._release(a, b, now, kind == 2)
            elif kind == 1:
                self._send_direct(a, now)
            else:
                self._tick(a)
        return self.transfers, self.finish

    def _push(self, t: float, kind: int, a: int, b: int) -> None:
        heapq.heappush(self.events, (t, kind, self.seq, a, b))
        self.seq += 1

    def _schedule_tick(self, k: int) -> None:
        if k not in self.ticks:
            self.ticks.add(k)
            self._push(self.t0 + k * self.slot, 3, k, 0)

    def _release(self, cid: int, node: int, now: float, initial: bool) -> None:
        """A chunk reached a GPU (or starts there): the tree edges it releases start waiting."""
        c = self.collective.chunks[cid]
        for urgency, dst, route in self.plan.arrive(c, node, initial):
            first = route[0]
            order = c.index // self.trees_per_root
            item = (order + urgency if self.deep_first else order, urgency, self.seq, cid, dst, route)
            self.seq += 1
            if self.multicast:
                self.same_chunk[(first, cid)].append(item)
            if self.switched[first]:
                self._wait_slotted(item)
                self.slotted_waiting += 1
                self._schedule_tick(max(0, math.ceil((now - self.t0) / self.slot - 1e-6)))  # next slot
            else:
                heapq.heappush(self.waiting[first], item)
                self._push(max(now, min(self.lane_free[first])), 1, first, 0)

    def _wait_slotted(self, item: tuple) -> None:
        """Put a tree edge through a switch in its up-link's heap for its receiver, its top among ``heads``."""
        route = item[5]
        heap = self.by_end[route[0]][route[-1]]
        top = heap[0] if heap else None
        heapq.heappush(heap, item)
        if heap[0] is item:
            heads = self.heads[route[0]]
            if top is not None:
                del heads[bisect.bisect_left(heads, top)]
            bisect.insort(heads, item)

    def _take(self, item: tuple) -> None:
        """Mark a tree edge through a switch sent; where it was the top of its heap, the next one not yet
        sent (a rider may have gone already) takes its place among ``heads``."""
        seq, route = item[2], item[5]  # a detour keeps the edge's up-link and receiver's in-link
        self.taken.add(seq)
        heap = self.by_end[route[0]][route[-1]]
        if heap and heap[0][2] == seq:
            heads = self.heads[route[0]]
            del heads[bisect.bisect_left(heads, heap[0])]
            while heap and heap[0][2] in self.taken:
                heapq.heappop(heap)
            if heap:
                bisect.insort(heads, heap[0])

    def _record(self, cid: int, lid: int, start: float) -> None:
        u, v = self.links[lid]
        self.transfers.append(Transfer(cid, u, v, start, start + self.delay[lid], self.op))

    def _arrive(self, cid: int, dst: int, t: float) -> None:
        self.finish = max(self.finish, t)
        self._push(t, 0, cid, dst)

    # ------------------------------------------------------------------ direct links
    def _send_direct(self, lid: int, now: float) -> None:
        """A free direct GPU -> GPU link sends its most urgent waiting chunk (no switch, no grid)."""
        heap = self.waiting[lid]
        lanes = self.lane_free[lid]
        lane = lanes.index(min(lanes))
        if not heap or lanes[lane] > now + 1e-15:
            return
        _, _, seq, cid, dst, _ = heapq.heappop(heap)
        self.taken.add(seq)
        lanes[lane] = now + self.hold[lid]
        self._record(cid, lid, now)
        self._arrive(cid, dst, now + self.delay[lid])
        self._push(min(lanes), 1, lid, 0)

    # ------------------------------------------------------------------ slots
    def _timing(self, route: list[int]) -> list[tuple[float, list[tuple[int, float, float]]]]:
        """Per hop: its start, seconds after the route's, and the parts of slots it keeps its link busy,
        (slot after the route's first, start, end in seconds into that slot); a hop on a link slower
        than the up-links spans two slots or more."""
        def work_out() -> list:
            timing, t = [], 0.0
            for lid in route:
                parts, a, end = [], t, t + self.hold[lid]
                while a < end - _EPS:
                    slot = math.floor(a / self.slot + 1e-9)
                    b = min(end, (slot + 1) * self.slot)
                    parts.append((slot, a - slot * self.slot, b - slot * self.slot))
                    a = b
                timing.append((t, parts))
                t += self.delay[lid]
            return timing

        return _per_route(self.timings, id(route), route, work_out)

    def _resources(self, item: tuple, k: int, first_hop: int = 1) -> list[tuple]:
        """What a route started in slot ``k`` holds from hop ``first_hop`` on (beyond its up-link): the
        parts of its links' slots each hop is busy, and for reductions each copy switch's slot for the
        chunk (two partials of one chunk must not pass a copy switch together)."""
        route, cid = item[5], item[3]
        if not self.copy_pass:  # the parts of slots per hop, worked out once per route and hop
            parts = _per_route(self.hop_parts, (id(route), first_hop), route, lambda: [
                (route[i], slot, a, b) for i in range(first_hop, len(route)) for slot, a, b in self._timing(route)[i][1]])
            return [((lid, k + slot), a, b) for lid, slot, a, b in parts]
        timing = self._timing(route)
        out: list[tuple] = []
        for i in range(first_hop, len(route)):
            lid, parts = route[i], timing[i][1]
            out += [((lid, k + slot), a, b) for slot, a, b in parts]
            out.append((("pass", self.links[lid][0], cid, k + parts[0][0]), 0.0, math.inf))
        return out

    def _fits(self, route: list[int], cid: int, k: int, free: dict[tuple[int, float], bool]) -> bool:
        """No earlier booking fills a part of the route's later hops (the quick test before matching).

        ``free`` remembers, for this slot, whether a link has room for a hop starting at a given offset:
        bookings do not change while a slot's candidates are gathered, and most routes fail on a
        receiver's in-link, which every sender to that receiver asks about. The last hop goes first."""
        later = _per_route(self.later_hops, id(route), route, lambda: [
            (route[i], *self._timing(route)[i], self.links[route[i]][0]) for i in range(len(route) - 1, 0, -1)])
        for lid, offset, parts, switch in later:
            room = free.get((lid, offset))
            if room is None:
                room = self._room(lid, offset, parts, k, free)
            if not room:
                return False
            if self.copy_pass and ("pass", switch, cid, k + parts[0][0]) in self.used:
                return False
        return True

    def _room(self, lid: int, offset: float, parts: list[tuple[int, float, float]], k: int,
              free: dict[tuple[int, float], bool]) -> bool:
        """Whether link ``lid`` has a free lane in every part of a hop ``offset`` s into a route started in
        slot ``k`` (``parts``: the hop's parts of slots); remembered in ``free`` for the slot."""
        key = (lid, offset)
        room = free.get(key)
        if room is None:
            room = True
            for slot, a, b in parts:
                booked = self.used.get((lid, k + slot))
                if booked and _overlapping(booked, a, b) >= self.lanes[lid]:
                    room = False
                    break
            free[key] = room
        return room

    def _capacity(self, key: tuple) -> int:
        return 1 if key[0] == "pass" else self.lanes[key[0]]

    def _left(self, key: tuple, a: float, b: float) -> int:
        """Bookings that still fit in part [a, b) of ``key`` beside the earlier ones."""
        used = self.used.get(key)
        return self._capacity(key) - (_overlapping(used, a, b) if used else 0)

    def _detours(self, route: list[int]) -> list[list[int]]:
        """``route`` and the other routes from its up-link to its receiver's in-link through as many
        switches (a fat-tree's other aggregation and core switches): a slot may take any of them, as a
        rearrangeable Clos network routes each permutation around its busy links."""
        key = tuple(route)
        routes = self.detours.get(key)
        if routes is None:
            first_switch, last_switch = self.links[route[0]][1], self.links[route[-1]][0]
            others = ([route[0], *middle, route[-1]]
                      for middle in self._switch_paths(first_switch, last_switch, len(route) - 2))
            routes = [route, *(other for other in others if other != route)]
            self.detours[key] = routes
        return routes

    def _switch_paths(self, a: int, b: int, hops: int) -> list[list[int]]:
        """Up to ``DETOURS`` link-id paths of exactly ``hops`` switch -> switch links from a to b."""
        out: list[list[int]] = []

        def walk(node: int, left: int, path: list[int]) -> None:
            if len(out) >= DETOURS:
                return
            if left == 0:
                if node == b:
                    out.append(list(path))
                return
            for nxt, lid in self.switch_out.get(node, ()):
                if self.switch_distance.get((nxt, b), math.inf) <= left - 1 and nxt not in self._on_path(path):
                    path.append(lid)
                    walk(nxt, left - 1, path)
                    path.pop()

        walk(a, hops, [])
        return out

    def _on_path(self, path: list[int]) -> set[int]:
        return {self.links[lid][1] for lid in path}

    def _candidates(self, k: int) -> dict[int, Fitting]:
        """Per up-link with a free lane and waiting edges: the most urgent edge to each receiver whose
        route is not filled by an earlier booking, most urgent first, then the detours (``Fitting``:
        worked out as the matching reads them; resources left for the matching to ask)."""
        out = {}
        free: dict[tuple[int, float], bool] = {}
        for lid in self.by_end:
            if len(self.used.get((lid, k), ())) >= self.lanes[lid]:
                continue  # no lane of this up-link is free in the slot: nothing to match
            heads = self.heads[lid]  # each receiver's most urgent edge; in piece waves, ties scrambled
            fits = Fitting(self._fitting((sorted(heads, key=_scrambled) if self.piece_waves else heads)[:self.candidates],
                                         k, free))
            if fits.get(0) is not None:
                out[lid] = fits
        return out

    def _fitting(self, items: list[tuple], k: int, free: dict[tuple[int, float], bool]) -> Iterable[tuple]:
        """The edges whose own routes fit, most urgent first, then those whose detours fit."""
        for item in items:
            if self._fits(item[5], item[3], k, free):
                yield item, None
        for item in items:
            for route in self._detours(item[5])[1:]:
                if self._fits(route, item[3], k, free):
                    yield (*item[:5], route), None

    def _tick(self, k: int) -> None:
        """Slot ``k``: match every free up-link with a waiting edge whose later hops are free, book the
        matched routes, then let riders branch off them at copy switches."""
        self.ticks.discard(k)
        if self.stop is not None and k % STOP_EVERY == 0 and self.stop():
            raise _Stopped
        candidates = self._candidates(k)
        units = [lid for lid in candidates for _ in range(self.lanes[lid] - len(self.used.get((lid, k), ())))]
        units.sort(key=lambda lid: candidates[lid].get(0)[0][:3])  # the most urgent sender first
        chosen = SlotMatching(units, candidates, self._left, lambda item: self._resources(item, k)).solve()
        for item in chosen:
            self._book(item, k)
        if self.multicast:  # after every matched route holds its slots, riders take what is left
            for item in chosen:
                self._ride(item, k)
        if self.slotted_waiting:
            self._schedule_tick(k + 1)

    def _book(self, item: tuple, k: int) -> None:
        _, _, seq, cid, dst, route = item
        self._take(item)
        self.slotted_waiting -= 1
        self._hold(cid, route, range(len(route)), k)
        self._arrive(cid, dst, self.t0 + k * self.slot + self._timing(route)[-1][0] + self.delay[route[-1]])

    def _hold(self, cid: int, route: list[int], hops, k: int) -> None:
        timing = self._timing(route)
        for i in hops:
            lid = route[i]
            offset, parts = timing[i]
            for slot, a, b in parts:
                self.used[(lid, k + slot)].append((a, b))
            if self.copy_pass and i:
                self.used[("pass", self.links[lid][0], cid, k + parts[0][0])].append((0.0, math.inf))
            self._record(cid, lid, self.t0 + k * self.slot + offset)

    def _ride(self, main: tuple, k: int) -> None:
        """Waiting edges of the booked chunk ride along where they branch off its route (or an earlier
        rider's) at a copy switch whose next hops are free: the up-link carries the chunk once. A rider
        started with the main route, so its hops fall where its own timing puts them."""
        route, cid = main[5], main[3]
        booked = [route]
        for item in self.same_chunk.get((route[0], cid), ()):
            if item[2] in self.taken:
                continue
            other = item[5]
            h = max(_common_prefix(other, r) for r in booked)
            branch = self.links[other[h - 1]][1] if 0 < h < len(other) else None
            if branch is None or not self.topology.nodes[branch].copy:
                continue
            if any(self._left(*r) <= 0 for r in self._resources(item, k, first_hop=h)):
                continue
            self._hold(cid, other, range(h, len(other)), k)
            booked.append(other)
            self._take(item)
            self.slotted_waiting -= 1
            self._arrive(cid, item[4], self.t0 + k * self.slot + self._timing(other)[-1][0] + self.delay[other[-1]])


def _per_route(cache: dict, key, route: list[int], work_out: Callable[[], list]) -> list:
    """``work_out()`` for ``route``, once: keyed by the route's id (routes are lists, shared by the edges that
    take them), with the route kept beside the answer, so it stays alive and no other list takes its id."""
    kept = cache.get(key)
    if kept is None or kept[0] is not route:
        kept = cache[key] = (route, work_out())
    return kept[1]


def _scrambled(item: tuple) -> tuple:
    """Sort key of a waiting edge: its urgency, then a fixed pseudo-random rank of its release number
    (Knuth's multiplicative hash) instead of the release number itself: release order sends, at every
    sender alike, the equally urgent edge whose chunk arrived first; scrambled, the order is unrelated to
    arrival. A measured choice, not a derived one: in piece waves on the 64-GPU dragonflies' ReduceScatter
    mirrors, scrambled ties ended at 1.092 and 1.055 x the limit, release order at 1.109 and 1.085."""
    return item[0], item[1], (item[2] * SCRAMBLE_MULTIPLIER) % 2 ** 32


class _Stopped(Exception):
    pass


def slotted_pipeline(topology: Topology, collective: Collective, plan, start_s: float,
                     stop: Callable[[], bool] | None = None, deep_first: bool = False, tight: bool = False,
                     piece_waves: bool = False) -> tuple[list[Transfer], float] | None:
    """Transfers and finish time of ``plan`` booked on the slot grid (see the module docstring), or
    None when ``stop()`` said to end first (the time limit, or Stop). ``deep_first``: a waiting edge's
    urgency is its chunk's index less the tree levels still below it (``forestcoll.pipeline``'s
    ``deep_first``), so that deep trees' last pieces do not trail behind at the grid's end. ``tight``:
    slots of an up-link's busy time, not its delay (``slot_length``; for ``one_switch_routes`` fabrics).
    ``piece_waves``: a chunk's order is its piece's index (``plan.packing.k`` trees per root share each piece
    index), so that every wave of equally urgent edges holds all the trees' shares, and a sender's equally
    urgent edges to different receivers are tried in a fixed scrambled order (``_scrambled``) instead of
    the order they were released in."""
    try:
        return SlotBooking(topology, collective, plan, start_s, stop, deep_first, tight, piece_waves).run()
    except _Stopped:
        return None
