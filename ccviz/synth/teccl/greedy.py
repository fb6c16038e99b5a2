"""A fast feasible schedule in the same epoch model: the horizon's upper bound and a MIP start.

A heuristic from another algorithm runs in continuous time; rounded to
epochs (alpha rounded up, kappa windows) it may not fit the epoch model. This
greedy obeys exactly the model's rules (capacity windows, store-and-forward,
switches forwarding only in the epoch a chunk reaches them, no-copy switches
forwarding an arrival once), so its makespan is a horizon at which the MILP
is feasible and its sends are a valid MIP start.

Chunks take turns; on its turn a chunk reaches the one missing destination it
can reach earliest (Dijkstra over (node, epoch) with the links' remaining
capacity), so copies grow as Takahashi-Matsuyama Steiner trees.
"""

from __future__ import annotations

import heapq
import itertools
import time
from collections import defaultdict
from collections.abc import Sequence

from ccviz.errors import CcvizError
from ccviz.model.topology import Topology
from ccviz.synth.switch_reach import OnePass
from ccviz.synth.teccl.epochs import EpochGrid, LinkEpochs
from ccviz.synth.teccl.time_expanded import Send

SWITCH_ENTRY_CHOICES = 8  # send epochs first tried on a link into a switch (the next hop may be busy at the first)
MAX_SWITCH_ENTRY_CHOICES = 4096
SEARCH_CHECK_EVERY = 2048  # states settled by one search between two looks at the time limit


class EpochGreedy:
    """Greedy per-chunk routing on the epoch grid."""

    def __init__(self, topology: Topology, grid: EpochGrid, holders: Sequence[frozenset[int]],
                 destinations: Sequence[frozenset[int]], search_limit: int = 100_000,
                 deadline: float | None = None) -> None:
        self.topology = topology
        self.deadline = deadline  # perf_counter time past which the greedy gives up (the time limit)
        self.grid = grid
        self.holders = list(holders)
        self.destinations = list(destinations)
        self.search_limit = search_limit
        self.usage: dict[tuple[int, int], dict[int, int]] = defaultdict(lambda: defaultdict(int))
        self.switch_entry_choices = SWITCH_ENTRY_CHOICES
        self._missing: list[set[int]] = []
        self.slots = {key: link.window_slots for key, link in grid.links.items()}  # read in the inner loop
        self.switches = frozenset(topology.switches)
        self._to_switches: dict[int, list] = {}  # node -> its out-links into switches (``_onward``)
        self._to_gpus: dict[int, dict] = {}  # node -> GPU -> its out-link there
        # GPUs linked only to switches: a chunk reaches any GPU by a pass through switches, so the search need
        # not relay it through GPUs that neither hold nor want it (on NVL72 an AllToAll chunk's search settled
        # up to 71 such GPUs, each fanning out over 18 switches x 8 epochs x 72 links: 3,181 of 5,112 chunks
        # still unrouted at 30 s)
        self.switched = all(link.dst in self.switches for g in topology.gpus for link in topology.out_links[g])
        self.one_pass = OnePass(topology)  # where the switches alone do not join a pair: the relays tried first

    def run(self) -> tuple[list[Send], int]:
        """Sends (chunk index, src, dst, epoch) and the makespan in epochs."""
        return self.run_from([dict.fromkeys(h, 0) for h in self.holders])

    def run_from(self, held: list[dict[int, int]], usage: dict[tuple[int, int], dict[int, int]] | None = None
                 ) -> tuple[list[Send], int]:
        """The greedy continued from a state: per chunk, GPU -> epoch it holds the chunk from, and link usage.

        A* continues its rounds this way, so a partial schedule always has a complete ending.
        """
        for key, per_epoch in (usage or {}).items():
            self.usage[key].update(per_epoch)
        held = [dict(h) for h in held]
        switch_copies: list[set[tuple[int, int]]] = [set() for _ in held]  # (switch, epoch) to copy from
        missing = [set(d) - set(h) for d, h in zip(self.destinations, held, strict=True)]
        sends: list[Send] = []
        makespan = max((t for h in held for t in h.values()), default=0)
        self._missing = missing  # what is left, for the one line at the time limit (``_check_time``)
        while any(missing):
            for c in range(len(missing)):
                if not missing[c]:
                    continue
                self._check_time(missing)
                dest, path = self._nearest_destination(held[c], switch_copies[c], missing[c])
                for i, j, k in path:
                    link = self.grid.links[(i, j)]
                    self.usage[(i, j)][k] += 1
                    sends.append((c, i, j, k))
                    land = k + link.offset
                    if self.topology.is_switch(j):
                        if self.topology.nodes[j].copy:
                            switch_copies[c].add((j, land))
                    elif j not in held[c]:
                        held[c][j] = land
                        missing[c].discard(j)
                makespan = max(makespan, held[c][dest])
        return sends, makespan

    def _check_time(self, missing: list[set[int]]) -> None:
        """Give up in one line at the time limit: without a complete greedy there is no schedule to hand back,
        and on NVL72 (5,112 AllToAll chunks) the greedy alone took 40 s of CPU past a 10 s limit. (A Stop lets
        it finish: Stop's contract is the best schedule so far, and a stuck worker is ended from outside.)"""
        if self.deadline is not None and time.perf_counter() >= self.deadline:
            left = sum(1 for m in missing if m)
            raise CcvizError(f"time_limit: TE-CCL's first schedule (the epoch greedy) still had {left} of "
                             f"{len(missing)} chunks to route when the time limit ran out, so there is no schedule "
                             "to hand back; give it more time (--time-limit) or use a heuristic (mteg, direct; mcf for "
                             "AllToAll): teccl-astar starts from this same greedy", "time_limit")

    def _nearest_destination(self, held: dict[int, int], switch_copies: set[tuple[int, int]], missing: set[int]):
        """Widen the choice of epochs to enter a switch until its busy out-links let the chunk through."""
        while True:
            found = self._search(held, switch_copies, missing, relays=not self.switched)
            if found is None and self.switched:  # the switches alone do not reach it: through the GPUs next to it
                found = self._search(held, switch_copies, missing, relays=False,
                                     allowed=missing | self.one_pass.to(missing) - held.keys())
            if found is None and self.switched:  # nor those: through any GPU then
                found = self._search(held, switch_copies, missing, relays=True)
            if found is not None:
                return found
            if self.switch_entry_choices >= MAX_SWITCH_ENTRY_CHOICES:
                raise CcvizError("topology: the greedy epoch schedule found no route to a destination; "
                                 "check that every GPU can reach every other GPU", "topology")
            self.switch_entry_choices *= 4

    def _search(self, held: dict[int, int], switch_copies: set[tuple[int, int]], missing: set[int],
                relays: bool = True, allowed: set[int] | None = None):
        """Dijkstra over (node, epoch): GPUs keep what they hold, switches only pass it on in the arrival epoch;
        without ``relays`` a chunk enters no GPU outside ``allowed`` (default: ``missing``)."""
        allowed = missing if allowed is None else allowed
        topo = self.topology
        tie = itertools.count()
        heap = [(t, next(tie), n, None) for n, t in held.items()]
        heap += [(t, next(tie), s, None) for s, t in switch_copies]
        heapq.heapify(heap)
        parent: dict[tuple[int, int], tuple[tuple[int, int] | None, tuple[int, int, int] | None]] = {}
        done_gpus: set[int] = set()
        switches = self.switches
        for t, _, n, _ in heap:
            parent.setdefault((n, t), (None, None))
        pops = 0
        while heap:
            t, _, n, _ = heapq.heappop(heap)
            if t > self.search_limit:
                break
            pops += 1
            if pops % SEARCH_CHECK_EVERY == 0:  # one search through many relay GPUs is long
                self._check_time(self._missing)
            if n not in switches:
                if n in done_gpus:
                    continue
                done_gpus.add(n)
                if n in missing:
                    return n, self._path(parent, (n, t))
            chain = self._switch_chain(parent, (n, t)) if n in switches else ()
            for link in (topo.out_links[n] if relays else self._onward(n, allowed)):
                if link.dst in chain:
                    continue  # a loop through switches: the chunk would cross a link it is still on
                timing = self.grid.links[(link.src, link.dst)]
                for k in self._send_epochs(timing, t, switch_source=n in switches):
                    state = (link.dst, k + timing.offset)
                    if state in parent or (link.dst not in switches and link.dst in done_gpus):
                        continue
                    parent[state] = ((n, t), (n, link.dst, k))
                    heapq.heappush(heap, (state[1], next(tie), link.dst, None))
        return None

    def _onward(self, node: int, missing: set[int]) -> list:
        """``node``'s out-links into switches and into GPUs of ``missing`` (a search without relays)."""
        if node not in self._to_switches:
            self._to_switches[node] = [link for link in self.topology.out_links[node] if link.dst in self.switches]
            self._to_gpus[node] = {link.dst: link for link in self.topology.out_links[node]
                                   if link.dst not in self.switches}
        to_gpus = self._to_gpus[node]
        if len(missing) < len(to_gpus):
            return self._to_switches[node] + [to_gpus[g] for g in missing if g in to_gpus]
        return self._to_switches[node] + [link for g, link in to_gpus.items() if g in missing]

    def _send_epochs(self, link: LinkEpochs, t: int, switch_source: bool) -> list[int]:
        """Epochs at which the link can still take a chunk that is ready at t."""
        if switch_source:
            return [t] if self._free(link, t) else []
        wanted = self.switch_entry_choices if link.dst in self.switches else 1
        found = []
        k = t
        while len(found) < wanted and k <= t + self.search_limit:
            if self._free(link, k):
                found.append(k)
            k += 1
        return found

    def _free(self, link: LinkEpochs, k: int) -> bool:
        """True when one more send at k keeps every kappa-window of the link within capacity."""
        used = self.usage.get((link.src, link.dst))
        if not used:
            return True
        room = self.slots[(link.src, link.dst)] - 1
        kappa = link.kappa
        if kappa == 1:
            return used.get(k, 0) <= room
        counts = [used.get(e, 0) for e in range(k - kappa + 1, k + kappa)]  # the windows holding epoch k
        window = sum(counts[:kappa])
        if window > room:
            return False
        for i in range(kappa, len(counts)):
            window += counts[i] - counts[i - kappa]
            if window > room:
                return False
        return True

    def _switch_chain(self, parent, state: tuple[int, int]) -> set[int]:
        """The nodes of the pass through switches that reaches ``state`` (back to the GPU it left).

        A chunk in a switch only moves on; re-entering a node of its own pass (9 -> 8 -> 9 -> 8, which the
        epoch model would take as a way to wait) crosses a link it may still be serializing on, which no
        fabric does. The pass is short, so walking it back is cheap."""
        nodes = set()
        while state is not None:
            nodes.add(state[0])
            if state[0] not in self.switches:
                break
            state = parent[state][0]
        return nodes

    @staticmethod
    def _path(parent, state) -> list[tuple[int, int, int]]:
        hops = []
        while True:
            prev, hop = parent[state]
            if hop is None:
                return hops[::-1]
            hops.append(hop)
            state = prev
