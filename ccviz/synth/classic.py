"""Textbook collective algorithms laid onto a real topology.

Each algorithm speaks in logical sends between ranks ("at step s, rank a
sends chunk c to rank b"); ``ccviz.model.routing.Layout`` lays them along shortest
routes and returns an *untimed* schedule, so the simulator times it with the
topology's real links and contention. Algorithms:

* ``ring`` / ``ring-bidir``: neighbour-to-neighbour around a cycle of GPUs
  (a physical cycle when one exists, else rank order); the bidirectional
  variant sends alternate chunks the other way round.
* ``direct``: every holder sends straight to every destination.
* ``dbt``: NCCL's double binary tree (two complementary trees, half the
  chunks each) for allreduce, broadcast and reduce.
* ``rhd``: recursive halving (reduce-scatter) and doubling (allgather);
  Rabenseifner allreduce = both. Power-of-two rank counts only.
* ``tree``: binomial tree for rooted collectives (and reduce+broadcast,
  gather+broadcast for allreduce/allgather).
* ``bruck``: log-step allgather and alltoall, any rank count.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from ccviz.errors import CcvizError
from ccviz.model.collectives import Chunk, Collective
from ccviz.model.placement import Layout
from ccviz.model.routing import neighbour_gpus, reverse_ring_order, ring_order
from ccviz.model.schedule import Schedule
from ccviz.model.topology import Topology
from ccviz.synth.budget import Budget
from ccviz.synth.registry import Algorithm, SynthOptions, register


class ClassicAlgorithm:
    """Common frame: plan logical sends, lay them on the topology, return an untimed schedule."""

    name = ""
    collectives: frozenset[str] = frozenset()
    description = ""

    def __call__(self, topology: Topology, collective: Collective, options: SynthOptions) -> Schedule:
        layout = Layout(topology, collective)
        layout.give_up = Budget(options).reason  # only planned layouts (direct AllToAll) run long enough to ask
        notes = self.plan(layout, topology, collective) or []
        transfers = layout.transfers()
        if layout.cut_short:
            notes.append(f"{'time limit reached' if layout.cut_short == 'time_limit' else 'stopped'} after "
                         f"planning the sends in the '{layout.order}' order: other orders were not tried")
        rounds, labels = layout.numbered_rounds()
        return Schedule(topology, collective, transfers, self.name, status="heuristic", notes=notes, rounds=rounds,
                        round_labels=labels, cut_short=layout.cut_short)

    def plan(self, layout: Layout, topology: Topology, collective: Collective) -> list[str] | None:
        """Add the algorithm's logical sends to ``layout``; may return notes for the user."""
        raise NotImplementedError

    def register(self) -> Algorithm:
        return register(Algorithm(self.name, self, self.collectives, self.description, kind="classic",
                                  options_used=()))


def _holder(chunk: Chunk) -> int:
    """The rank a non-reducing chunk starts from (its only precondition rank)."""
    return min(chunk.pre)


def _result_owner(chunk: Chunk) -> int:
    """Where a reducing chunk's sum is formed first (its owner when that rank needs it)."""
    return chunk.source if chunk.source in chunk.post else min(chunk.post)


def _split(chunks: Iterable[Chunk], ranks: tuple[int, ...]) -> tuple[list[Chunk], list[Chunk]]:
    """Alternate chunks between two halves (by source position and index) for two-way algorithms."""
    position = {r: i for i, r in enumerate(ranks)}
    first: list[Chunk] = []
    second: list[Chunk] = []
    for c in chunks:
        key = position.get(c.source, 0) + c.index
        (first if key % 2 == 0 else second).append(c)
    return first, second


# ============================================================================ ring
class Ring(ClassicAlgorithm):
    """Neighbour-to-neighbour around a cycle; reductions travel as one chain per chunk."""

    name = "ring"
    collectives = frozenset({"allgather", "reducescatter", "allreduce", "alltoall", "broadcast", "reduce",
                             "gather", "scatter"})
    description = "ring over physical neighbours (Hamiltonian cycle when found, else rank order)"
    bidirectional = False

    def plan(self, layout: Layout, topology: Topology, collective: Collective) -> list[str]:
        group = None if tuple(collective.ranks) == tuple(topology.gpus) else collective.ranks
        order, physical = ring_order(topology, collective.chunk_bytes, group=group)
        notes = [] if physical else ["no cycle of neighbouring GPUs found: ring in rank order, some hops relay"]
        if self.bidirectional:
            forward, backward = _split(collective.chunks, tuple(order))
            self.lay_direction(layout, order, forward)
            reverse, reverse_physical = reverse_ring_order(topology, order, collective.chunk_bytes)
            if physical and not reverse_physical:
                notes.append("no second cycle of neighbouring GPUs: the reverse ring relays some hops")
            self.lay_direction(layout, reverse, backward)
        else:
            self.lay_direction(layout, order, collective.chunks)
        return notes

    def lay_direction(self, layout: Layout, order: list[int], chunks: Iterable[Chunk]) -> None:
        """Each chunk moves forward along one ring direction."""
        position = {r: i for i, r in enumerate(order)}
        n = len(order)
        for c in chunks:
            if c.reduce:
                self.reduce_around(layout, order, position, n, c)
            else:
                self.carry_forward(layout, order, position, n, c, _holder(c), c.post - c.pre, 0)

    @staticmethod
    def carry_forward(layout: Layout, order: list[int], position: dict[int, int], n: int, c: Chunk, start: int,
                      targets: Iterable[int], first_step: int) -> None:
        """A plain chunk hops forward from its holder until the farthest destination has it."""
        p = position[start]
        reach = max(((position[t] - p) % n for t in targets), default=0)
        for k in range(reach):
            layout.send(c.id, order[(p + k) % n], order[(p + k + 1) % n], first_step + k)
            if c.reduce:
                layout.label(first_step + k, "all-gather: every GPU passes the finished sum it received to its "
                                             "ring neighbour")

    def reduce_around(self, layout: Layout, order: list[int], position: dict[int, int], n: int, c: Chunk) -> None:
        """Partial sums go round once ending at the owner (reduce-scatter), then the sum goes round (allgather)."""
        owner = _result_owner(c)
        p = position[owner]
        contributors = [order[(p + k) % n] for k in range(1, n + 1)]  # ends at the owner
        contributors = [r for r in contributors if r in c.pre or r == owner]
        for k, (a, b) in enumerate(zip(contributors, contributors[1:], strict=False)):
            layout.send(c.id, a, b, k, op="reduce")
            layout.label(k, "reduce-scatter: every GPU adds its own partial to the partial sum arriving from its "
                            "ring neighbour and passes it on")
        others = c.post - {owner}
        if others:
            self.carry_forward(layout, order, position, n, c, owner, others, len(contributors) - 1)


class BidirectionalRing(Ring):
    name = "ring-bidir"
    description = "two rings in opposite directions, each carrying alternate chunks (use --chunks 2+ to split)"
    bidirectional = True


# ========================================================================== direct
class Direct(ClassicAlgorithm):
    """Every holder sends straight to every destination (reductions: to the owner, then out)."""

    name = "direct"
    collectives = frozenset({"allgather", "reducescatter", "allreduce", "alltoall", "broadcast", "reduce",
                             "gather", "scatter", "sendrecv", "alltoallv"})
    description = "each rank sends directly to each destination along its shortest route"

    def plan(self, layout: Layout, topology: Topology, collective: Collective) -> list[str] | None:
        pairwise: list[tuple[int, int, int]] = []
        for c in collective.chunks:
            if c.reduce:
                owner = _result_owner(c)
                for p in sorted(c.pre - {owner}):
                    layout.send(c.id, p, owner, 0, op="reduce")
                for r in sorted(c.post - {owner}):
                    layout.send(c.id, owner, r, 1)
            else:
                src = _holder(c)
                for r in sorted(c.post - c.pre):
                    pairwise.append((c.id, src, r))
        # Pairwise order: the sends to the rank k places on come before those k + 1 places on, so every
        # link serves all sources round by round instead of one source's whole buffer first.
        position = {r: i for i, r in enumerate(collective.ranks)}
        n = len(position)
        pairwise.sort(key=lambda s: ((position[s[2]] - position[s[1]]) % n, position[s[1]]))
        layout.planned = collective.name in ("alltoall", "alltoallv")  # independent copies: routes and order by when they land
        for chunk, src, dst in pairwise:
            layout.send(chunk, src, dst, 0)
        if layout.planned:
            return ["AllToAll planned send by send: each on the fastest route that lands first, links booked in "
                    "time (gaps filled), the best of a few send orders (pairwise first)"]
        return None


# ==================================================================== tree helpers
class Tree:
    """A rooted tree over ranks: parent links plus per-node height (for reduce) and depth (for broadcast)."""

    def __init__(self, root: int, parent: dict[int, int]) -> None:
        self.root = root
        self.parent = parent
        self.children: dict[int, list[int]] = {}
        for v, p in parent.items():
            self.children.setdefault(p, []).append(v)
        self.depth = {root: 0}
        for v in self.top_down():
            for ch in self.children.get(v, []):
                self.depth[ch] = self.depth[v] + 1
        self.height: dict[int, int] = {}
        for v in reversed(self.top_down()):
            self.height[v] = 1 + max((self.height[ch] for ch in self.children.get(v, [])), default=-1)

    def top_down(self) -> list[int]:
        out, frontier = [], [self.root]
        while frontier:
            out.extend(frontier)
            frontier = [ch for v in frontier for ch in self.children.get(v, [])]
        return out

    def reduce_up(self, layout: Layout, chunk: int, first_step: int = 0) -> int:
        """Reduction: each node adds its subtree's partial into its parent once all its children have."""
        for v, p in self.parent.items():
            layout.send(chunk, v, p, first_step + self.height[v], op="reduce")
            layout.label(first_step + self.height[v], "reduce up the tree: every GPU whose subtree is done adds "
                                                      "its partial sum into its parent's")
        return first_step + self.height[self.root]

    def broadcast_down(self, layout: Layout, chunk: int, first_step: int = 0) -> int:
        """Broadcast: each edge carries the chunk down one level per step."""
        for v, p in self.parent.items():
            layout.send(chunk, p, v, first_step + self.depth[v] - 1)
            layout.label(first_step + self.depth[v] - 1, "down the tree: every GPU that has the data passes it to "
                                                         "its children")
        return first_step + self.height[self.root]

    def carry_up(self, layout: Layout, chunk: int, holder: int, first_step: int = 0) -> None:
        """Gather: a chunk climbs from its holder to the root, leaving each node when its subtree is done."""
        v = holder
        while v != self.root:
            layout.send(chunk, v, self.parent[v], first_step + self.height[v])
            v = self.parent[v]

    def carry_down(self, layout: Layout, chunk: int, target: int) -> None:
        """Scatter: a chunk descends from the root along the path to its destination."""
        path = [target]
        while path[-1] != self.root:
            path.append(self.parent[path[-1]])
        for child, par in zip(path[-2::-1], path[::-1], strict=False):
            layout.send(chunk, par, child, self.depth[child] - 1)


def balanced_tree(ranks: list[int]) -> tuple[int, dict[int, int]]:
    """In-order balanced binary tree (middle element is the root); returns (root, parent)."""
    parent: dict[int, int] = {}

    def build(lo: int, hi: int, up: int | None) -> int | None:
        if lo >= hi:
            return None
        mid = (lo + hi) // 2
        if up is not None:
            parent[ranks[mid]] = up
        build(lo, mid, ranks[mid])
        build(mid + 1, hi, ranks[mid])
        return ranks[mid]

    root = build(0, len(ranks), None)
    return root, parent  # type: ignore[return-value]


def binomial_tree(ranks: list[int], root: int) -> Tree:
    """Binomial tree rooted at ``root``: relative rank q hangs under q with its highest bit cleared."""
    start = ranks.index(root)
    n = len(ranks)
    rel = [ranks[(start + q) % n] for q in range(n)]
    parent = {rel[q]: rel[q - (1 << (q.bit_length() - 1))] for q in range(1, n)}
    return Tree(root, parent)


# ============================================================================= dbt
class DoubleBinaryTree(ClassicAlgorithm):
    """NCCL's double binary tree: two complementary in-order trees, alternate chunks on each."""

    name = "dbt"
    collectives = frozenset({"allreduce", "broadcast", "reduce"})
    description = ("double binary tree (two complementary trees, half the chunks each; "
                   "built over physical neighbours when possible)")

    def plan(self, layout: Layout, topology: Topology, collective: Collective) -> list[str]:
        pairs = self.physical_trees(topology, collective)
        notes = ["both trees follow physical links"] if pairs else [
            "no binary spanning trees over neighbouring GPUs: in-order trees over rank order, edges may relay"]
        pairs = pairs or [(t, t) for t in self.trees(list(collective.ranks), collective.root)]
        halves = _split(collective.chunks, collective.ranks)
        for (up, down), chunks in zip(pairs, halves, strict=True):
            for c in chunks:
                if collective.name == "broadcast":
                    down.broadcast_down(layout, c.id)
                elif collective.name == "reduce":
                    up.reduce_up(layout, c.id)
                else:  # allreduce: reduce to the tree root, then broadcast the sum
                    done = up.reduce_up(layout, c.id)
                    down.broadcast_down(layout, c.id, done + 1)
        return notes

    @classmethod
    def physical_trees(cls, topology: Topology, collective: Collective) -> list[tuple[Tree, Tree]] | None:
        """Build on the fabric: per tree, a reduction tree whose edges point to the parent and a broadcast tree
        whose edges point to the children (the same tree when links are two-way); the second tree makes the
        first one's leaves its inner nodes, so each GPU forwards in about one tree only."""
        adj = neighbour_gpus(topology, collective.chunk_bytes)
        ranks = set(collective.ranks)
        down_next = {u: {v: t for v, t in adj[u].items() if v in ranks} for u in ranks}
        up_next = {u: {v: adj[v][u] for v in ranks if u in adj.get(v, {})} for u in ranks}
        pairs: list[tuple[Tree, Tree]] = []
        prefer: set[int] = set()
        root = collective.root if collective.root is not None else collective.ranks[0]
        for _ in range(2):
            up = cls.binary_spanning_tree(root, up_next, prefer)
            down = cls.binary_spanning_tree(root, down_next, prefer)
            if up is None or down is None:
                return None
            pairs.append((up, down))
            prefer = {v for v in ranks if not down.children.get(v)}
            if collective.root is None:  # the second tree is rooted at a leaf of the first
                root = max(sorted(prefer), key=lambda v: len(down_next[v]) + len(up_next[v]))
        return pairs

    @staticmethod
    def binary_spanning_tree(root: int, hang: dict[int, dict[int, float]], prefer: set[int]) -> Tree | None:
        """Breadth-first, at most two children each (preferred, then fastest first); more only to span.

        ``hang[u]`` maps the GPUs that may become u's children to the link time between them.
        """
        parent: dict[int, int] = {}
        seen = {root}
        for cap in (2, len(hang)):
            queue = deque([root, *sorted(seen - {root})])
            while queue:
                u = queue.popleft()
                room = cap - sum(1 for p in parent.values() if p == u)
                fresh = sorted(set(hang[u]) - seen, key=lambda v: (v not in prefer, hang[u][v], v))[:max(room, 0)]
                for v in fresh:
                    parent[v] = u
                    seen.add(v)
                    queue.append(v)
            if len(seen) == len(hang):
                return Tree(root, parent)
        return None

    @staticmethod
    def trees(ranks: list[int], root: int | None) -> list[Tree]:
        """Build: the second tree is the first over the ranks shifted by one, so leaves and inner nodes swap."""
        others = [r for r in ranks if r != root] if root is not None else ranks
        out = []
        for shift in (0, 1):
            order = others[shift:] + others[:shift]
            top, parent = balanced_tree(order)
            if root is not None:  # a rooted collective hangs the tree under its root
                parent[top] = root
                top = root
            out.append(Tree(top, parent))
        return out


# ============================================================================= rhd
class RecursiveHalvingDoubling(ClassicAlgorithm):
    """Recursive halving reduce-scatter and recursive doubling allgather (Rabenseifner allreduce)."""

    name = "rhd"
    collectives = frozenset({"allgather", "reducescatter", "allreduce"})
    description = "recursive halving-doubling (Rabenseifner); power-of-two GPU counts"

    def plan(self, layout: Layout, topology: Topology, collective: Collective) -> None:
        n = collective.n_ranks
        if n & (n - 1):
            raise CcvizError(
                f"algorithm: rhd needs a power-of-two number of GPUs, {topology.name!r} has {n}; use ring or "
                "direct", "algorithm")
        ranks = list(collective.ranks)
        owner_pos = {c.id: ranks.index(_result_owner(c) if c.reduce else _holder(c)) for c in collective.chunks}
        stages = n.bit_length() - 1
        step = 0
        if collective.is_reducing:
            step = self.halve(layout, ranks, collective.chunks, owner_pos, stages)
        if collective.name in ("allgather", "allreduce"):
            self.double(layout, ranks, collective.chunks, owner_pos, stages, step)

    @staticmethod
    def halve(layout: Layout, ranks: list[int], chunks, owner_pos: dict[int, int], stages: int) -> int:
        """Halving: at distance d, a rank passes on the chunks owned across bit d that it is still responsible
        for."""
        done_mask = 0
        for s in range(stages):
            bit = 1 << (stages - 1 - s)
            layout.label(s, f"reduce-scatter (recursive halving), distance {bit}: every GPU sends its partner "
                            f"{bit} away the half of its partial sums that the partner's side owns")
            for i, rank in enumerate(ranks):
                for c in chunks:
                    o = owner_pos[c.id]
                    if (i ^ o) & done_mask == 0 and (i ^ o) & bit:
                        layout.send(c.id, rank, ranks[i ^ bit], s, op="reduce")
            done_mask |= bit
        return stages

    @staticmethod
    def double(layout: Layout, ranks: list[int], chunks, owner_pos: dict[int, int], stages: int,
               first_step: int) -> None:
        """Doubling: at distance d, a rank sends its partner every chunk it holds so far."""
        for s in range(stages):
            bit = 1 << s
            known = ~((1 << s) - 1)  # a rank holds chunks whose owner agrees with it above the low s bits
            layout.label(first_step + s, f"all-gather (recursive doubling), distance {bit}: every GPU sends its "
                                         f"partner {bit} away everything it holds so far")
            for i, rank in enumerate(ranks):
                for c in chunks:
                    if (i ^ owner_pos[c.id]) & known == 0:
                        layout.send(c.id, rank, ranks[i ^ bit], first_step + s)


# ============================================================================ tree
class BinomialTree(ClassicAlgorithm):
    """Binomial tree from/to the root; allreduce = reduce + broadcast, allgather = gather + broadcast."""

    name = "tree"
    collectives = frozenset({"broadcast", "reduce", "gather", "scatter", "allreduce", "allgather"})
    description = "binomial tree (log2 N rounds)"

    def plan(self, layout: Layout, topology: Topology, collective: Collective) -> None:
        ranks = list(collective.ranks)
        root = collective.root if collective.root is not None else ranks[0]
        tree = binomial_tree(ranks, root)
        top = tree.height[root] + 1
        for c in collective.chunks:
            if collective.name == "broadcast":
                tree.broadcast_down(layout, c.id)
            elif collective.name == "reduce":
                tree.reduce_up(layout, c.id)
            elif collective.name == "allreduce":
                tree.broadcast_down(layout, c.id, tree.reduce_up(layout, c.id) + 1)
            elif collective.name == "gather":
                tree.carry_up(layout, c.id, _holder(c))
            elif collective.name == "scatter":
                tree.carry_down(layout, c.id, min(c.post))
            else:  # allgather: gather every chunk at the root, then broadcast it
                tree.carry_up(layout, c.id, _holder(c))
                tree.broadcast_down(layout, c.id, top)


# =========================================================================== bruck
class Bruck(ClassicAlgorithm):
    """Bruck's log-step algorithms: distance-2^k hops, any rank count."""

    name = "bruck"
    collectives = frozenset({"allgather", "alltoall"})
    description = "Bruck (ceil(log2 N) steps of distance 2^k)"

    def plan(self, layout: Layout, topology: Topology, collective: Collective) -> None:
        ranks = list(collective.ranks)
        n = len(ranks)
        stages = (n - 1).bit_length()
        for k in range(stages):
            layout.label(k, f"distance {1 << k}: every GPU sends to the GPU {1 << k} ranks away "
                            + ("the blocks whose distance has this bit set" if collective.name == "alltoall"
                               else "every block it holds that the receiver still lacks"))
        for c in collective.chunks:
            src = ranks.index(_holder(c))
            if collective.name == "alltoall":
                self.hop_by_bits(layout, ranks, c.id, src, (ranks.index(min(c.post)) - src) % n, stages)
            else:
                self.spread(layout, ranks, c.id, src, stages)

    @staticmethod
    def hop_by_bits(layout: Layout, ranks: list[int], chunk: int, src: int, distance: int, stages: int) -> None:
        """Alltoall: a block at distance j hops 2^k for every set bit k of j, one bit per step."""
        n = len(ranks)
        here = src
        for k in range(stages):
            if distance >> k & 1:
                nxt = (here + (1 << k)) % n
                layout.send(chunk, ranks[here], ranks[nxt], k)
                here = nxt

    @staticmethod
    def spread(layout: Layout, ranks: list[int], chunk: int, src: int, stages: int) -> None:
        """Allgather: at step k every holder at distance d passes the block to distance d + 2^k."""
        n = len(ranks)
        holders = [0]
        for k in range(stages):
            for d in list(holders):
                if d + (1 << k) < n:
                    layout.send(chunk, ranks[(src - d) % n], ranks[(src - d - (1 << k)) % n], k)
                    holders.append(d + (1 << k))


# ``ring`` runs over NCCL's channels on boxes of parallel NVSwitch planes, as a runtime does: that code
# (``ccviz.synth.nccl.synthesizer.channeled_ring``) builds on this module, so it is registered by name.
register(Algorithm(Ring.name, "ccviz.synth.nccl.synthesizer:channeled_ring", Ring.collectives,
                   Ring.description + "; over NCCL's channels on boxes of parallel switch planes", kind="classic",
                   options_used=()))
# ``dbt`` across boxes is placed as NCCL places its tree (``ccviz.synth.nccl.synthesizer.channeled_dbt``), by name too.
register(Algorithm(DoubleBinaryTree.name, "ccviz.synth.nccl.synthesizer:channeled_dbt", DoubleBinaryTree.collectives,
                   DoubleBinaryTree.description + "; across boxes, chains in each box and the tree across them as "
                   "NCCL does", kind="classic", options_used=()))
for _algorithm in (BidirectionalRing(), Direct(), RecursiveHalvingDoubling(), BinomialTree(), Bruck()):
    _algorithm.register()
