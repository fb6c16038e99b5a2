"""TE-CCL's formulation extended with in-switch reduction (switches with ``Node.reduce``: NVLS, SHARP).

TE-CCL itself reduces by reversal: a reduction is a broadcast on the reversed fabric, summed at GPUs,
and AllReduce is ReduceScatter then AllGather. Where a switch adds, this model runs forward in time on
one time-expanded graph with two kinds of flow per reduction chunk c:

* ``up[c, i, j, k]``: a partial sum of c leaves i on link (i, j) in epoch k. Every contributing GPU
  sends its partial exactly once, after every partial it receives has landed (so it adds them first),
  or it is where the total forms. A reducing switch adds the partials of c landing in one epoch into
  one outgoing flow (the switch sum, op ``combine`` into it), once per chunk; a switch that cannot add forwards each
  arrival on its own, as in TE-CCL.
* ``root[c, n, k]``: the total of c forms at n in epoch k, exactly once per chunk: at the result's
  owner for ReduceScatter and Reduce, and for AllReduce at a GPU or at a reducing switch that copies,
  which multicasts the sum the epoch it forms (fused: no ReduceScatter/AllGather split).
* ``down[c, i, j, k]`` / ``hold[c, g, k]``: the total travelling to every GPU that needs it, with
  TE-CCL's copy rules (a GPU sends what it holds, a copy switch forwards on any links what reaches it
  or what it just summed).

Both flows share every link's capacity per window of kappa epochs; the objective is TE-CCL's (demands
met early count more). Each ``_...`` function adds one named family, as in ``model.py``.
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass, field

import pyomo.environ as pyo

from ccviz.model.collectives import Collective
from ccviz.model.routing import earliest_arrivals
from ccviz.model.topology import Topology
from ccviz.synth.teccl.epochs import EpochGrid
from ccviz.synth.teccl.model import early_weight

Send = tuple[int, int, int, int]  # (chunk, src, dst, epoch)
NodeEpoch = tuple[int, int, int]  # (chunk, node, epoch)
INF = float("inf")


def uses_in_switch_reduction(topology: Topology, collective: Collective) -> bool:
    """This model applies to reductions on a fabric with at least one reducing switch."""
    return bool(topology.reducing_switches) and collective.is_reducing


@dataclass
class InSwitchGraph:
    """The pruned index sets of the in-switch model over epochs 0..horizon."""

    topology: Topology
    grid: EpochGrid
    collective: Collective
    horizon: int
    up: list[Send] = field(default_factory=list)
    down: list[Send] = field(default_factory=list)
    roots: list[NodeEpoch] = field(default_factory=list)
    holds: list[NodeEpoch] = field(default_factory=list)
    contributors: list[tuple[int, int]] = field(default_factory=list)  # (chunk, GPU holding a contribution)
    demands: list[tuple[int, int]] = field(default_factory=list)  # (chunk, GPU needing the total)
    deadline: float | None = None  # perf_counter time past which the build stops, ``cut_short`` set (NVL72
    cut_short: bool = False  # AllReduce at 128 epochs: ~9 s of Python, begun with a 10 s limit nearly spent)

    def __post_init__(self) -> None:
        offsets = {key: link.offset for key, link in self.grid.links.items()}
        topo = self.topology
        for c in self.collective.chunks:
            if not c.reduce or not c.post:
                continue
            if self._past_deadline():
                return
            sites = self.root_sites(c)
            up_from = earliest_arrivals(topo, dict.fromkeys(c.pre, 0), offsets)
            to_root = earliest_arrivals(topo, dict.fromkeys(sites, 0), offsets, reverse=True)
            to_post = earliest_arrivals(topo, dict.fromkeys(c.post, 0), offsets, reverse=True)
            carriers = set(c.pre) | set(topo.switches)  # partials travel through contributors and switches
            for (i, j), link in self.grid.links.items():
                if i in carriers and j in carriers and up_from[i] < INF and to_root[j] < INF:
                    last = self.horizon - link.offset - to_root[j]
                    self.up.extend((c.id, i, j, k) for k in range(int(up_from[i]), int(last) + 1))
            for n in sites:
                first, last = up_from[n], self.horizon - to_post[n]
                if first < INF:
                    self.roots.extend((c.id, n, k) for k in range(int(first), int(last) + 1))
            reached: set[int] = set()
            if set(c.post) != set(sites):  # the total travels on to the other GPUs that need it
                start = {n: int(up_from[n]) for n in sites if up_from[n] < INF}
                down_from = earliest_arrivals(topo, start, offsets)
                for (i, j), link in self.grid.links.items():
                    if down_from[i] < INF and to_post[j] < INF:
                        last = self.horizon - link.offset - to_post[j]
                        self.down.extend((c.id, i, j, k) for k in range(int(down_from[i]), int(last) + 1))
                        reached.add(j)
            gpus_holding = {g for g in topo.gpus if g in c.post or g in reached}
            gpus_holding |= {n for n in sites if not topo.is_switch(n)}
            for g in sorted(gpus_holding):
                self.holds.extend((c.id, g, k) for k in range(self.horizon + 1))
            self.contributors.extend((c.id, g) for g in sorted(c.pre))
            self.demands.extend((c.id, d) for d in sorted(c.post))
        if self._past_deadline():
            return
        self.up = self._drop_switch_sends_without_arrival(self.up, set())
        root_set = {(c, n, k) for c, n, k in self.roots if topo.is_switch(n)}
        self.down = self._drop_switch_sends_without_arrival(self.down, root_set)

    def _past_deadline(self) -> bool:
        """True (and ``cut_short`` set) once the deadline has passed: the index sets are then incomplete."""
        if self.deadline is not None and time.perf_counter() >= self.deadline:
            self.cut_short = True
        return self.cut_short

    def root_sites(self, chunk) -> list[int]:
        """Where the total of ``chunk`` may form: its one owner (ReduceScatter, Reduce), else any contributing
        GPU or any reducing switch that can multicast the sum (AllReduce)."""
        if len(chunk.post) == 1 and chunk.post <= chunk.pre:
            return sorted(chunk.post)
        topo = self.topology
        return sorted(chunk.pre) + [s for s in topo.reducing_switches if topo.nodes[s].copy]

    def _drop_switch_sends_without_arrival(self, sends: list[Send], roots: set[NodeEpoch]) -> list[Send]:
        topo, links = self.topology, self.grid.links
        while True:
            reach = {(c, j, k + links[(i, j)].offset) for c, i, j, k in sends if topo.is_switch(j)} | roots
            kept = [s for s in sends if not topo.is_switch(s[1]) or (s[0], s[1], s[3]) in reach]
            if len(kept) == len(sends):
                return kept
            sends = kept

    def stranded(self) -> bool:
        """A contribution with no send and no total site in the horizon, or a demand without a holding:
        the horizon is too short (the model would be infeasible on its face)."""
        leaving = {(c, i) for c, i, _, _ in self.up} | {(c, n) for c, n, _ in self.roots}
        held = {(c, n) for c, n, k in self.holds if k == self.horizon}
        return any(x not in leaving for x in self.contributors) or any(d not in held for d in self.demands)

    def landing(self, s: Send) -> int:
        return s[3] + self.grid.links[(s[1], s[2])].offset

    def size(self) -> str:
        return (f"{len(self.up)} partial-sum sends, {len(self.roots)} total sites, {len(self.down)} result sends "
                f"over {self.horizon} epochs")


def in_switch_model(g: InSwitchGraph) -> pyo.ConcreteModel:
    """The MILP: partial sums up (added in reducing switches), one total per chunk, the total down."""
    m = pyo.ConcreteModel("teccl_in_switch")
    m.UP = pyo.Set(dimen=4, initialize=g.up, ordered=False)
    m.DOWN = pyo.Set(dimen=4, initialize=g.down, ordered=False)
    m.ROOTS = pyo.Set(dimen=3, initialize=g.roots, ordered=False)
    m.HOLDS = pyo.Set(dimen=3, initialize=g.holds, ordered=False)
    m.up = pyo.Var(m.UP, domain=pyo.Binary)
    m.down = pyo.Var(m.DOWN, domain=pyo.Binary)
    m.root = pyo.Var(m.ROOTS, domain=pyo.Binary)
    m.hold = pyo.Var(m.HOLDS, bounds=(0, 1))
    index = _Index(g)
    _each_contribution_leaves_once(m, g, index)
    _partials_added_before_sent(m, g, index)
    _switches_add_or_forward_partials(m, g, index)
    _one_total_per_chunk(m, g, index)
    _totals_sent_from_holders(m, g, index)
    _holdings_grow_by_total_or_arrival(m, g, index)
    _switches_forward_the_total(m, g, index)
    _demands_hold_the_total(m, g)
    _shared_link_capacity(m, g)
    m.early_total = pyo.Objective(expr=sum(early_weight(k) * m.hold[c, n, k] for c, n, k in g.holds
                                           if (c, n) in index.demand_set), sense=pyo.maximize)
    return m


class _Index:
    """Sends grouped by where they leave from and where they land, once for every family."""

    def __init__(self, g: InSwitchGraph) -> None:
        self.up_out: dict[tuple[int, int], list[Send]] = defaultdict(list)  # (chunk, node) -> up sends leaving
        self.up_out_at: dict[NodeEpoch, list[Send]] = defaultdict(list)
        self.up_in_at: dict[NodeEpoch, list[Send]] = defaultdict(list)  # by landing epoch
        self.down_out_at: dict[NodeEpoch, list[Send]] = defaultdict(list)
        self.down_in_at: dict[NodeEpoch, list[Send]] = defaultdict(list)
        self.roots_at: dict[tuple[int, int], list[int]] = defaultdict(list)
        for s in g.up:
            self.up_out[(s[0], s[1])].append(s)
            self.up_out_at[(s[0], s[1], s[3])].append(s)
            self.up_in_at[(s[0], s[2], g.landing(s))].append(s)
        for s in g.down:
            self.down_out_at[(s[0], s[1], s[3])].append(s)
            self.down_in_at[(s[0], s[2], g.landing(s))].append(s)
        for c, n, k in g.roots:
            self.roots_at[(c, n)].append(k)
        self.root_set = set(g.roots)
        self.hold_set = set(g.holds)
        self.demand_set = set(g.demands)

    def root(self, m, c: int, n: int, k: int):
        return m.root[c, n, k] if (c, n, k) in self.root_set else 0


def _expr(relation):
    """A rule's relation, or Skip/Infeasible where it involves no variable (an empty index list)."""
    if relation is True:
        return pyo.Constraint.Skip
    if relation is False:
        return pyo.Constraint.Infeasible
    return relation


def _each_contribution_leaves_once(m, g: InSwitchGraph, ix: _Index) -> None:
    """A contributing GPU sends its partial sum exactly once, or the total forms there (exactly once)."""
    m.CONTRIBUTORS = pyo.Set(dimen=2, initialize=g.contributors, ordered=False)
    m.contribution_leaves_once = pyo.Constraint(m.CONTRIBUTORS, rule=lambda m, c, n: _expr(sum(
        m.up[s] for s in ix.up_out[(c, n)]) + sum(m.root[c, n, k] for k in ix.roots_at[(c, n)]) == 1))


def _partials_added_before_sent(m, g: InSwitchGraph, ix: _Index) -> None:
    """A partial landing at a GPU in epoch l is added there: the GPU's one send (or its total) is at l or later."""
    into_gpus = [s for s in g.up if not g.topology.is_switch(s[2])]
    m.UP_INTO_GPUS = pyo.Set(dimen=4, initialize=into_gpus, ordered=False)

    def added_before_sent(m, c, i, n, k):
        land = g.landing((c, i, n, k))
        later = sum(m.up[s] for s in ix.up_out[(c, n)] if s[3] >= land)
        return m.up[c, i, n, k] <= later + sum(m.root[c, n, e] for e in ix.roots_at[(c, n)] if e >= land)
    m.partial_added_before_sent = pyo.Constraint(m.UP_INTO_GPUS, rule=added_before_sent)


def _switches_add_or_forward_partials(m, g: InSwitchGraph, ix: _Index) -> None:
    """A switch stores nothing: the partials landing in epoch k leave in epoch k. A reducing switch adds
    them into one outgoing sum (or the total, where it forms), once per chunk: the judge merges every
    contribution that lands before a sum leaves, and the simulator may move a later group of contributions
    earlier, so one sum per (chunk, switch) keeps the plan and its replay the same. A switch that cannot
    add forwards each arrival on its own (TE-CCL's switch constraint)."""
    topo = g.topology
    epochs = sorted({key for key in ix.up_in_at if topo.is_switch(key[1])}
                    | {key for key in ix.up_out_at if topo.is_switch(key[1])})
    adding = [key for key in epochs if topo.nodes[key[1]].reduce]
    plain = [key for key in epochs if not topo.nodes[key[1]].reduce]

    def leaving(m, c, s, k):
        return sum(m.up[x] for x in ix.up_out_at.get((c, s, k), ())) + ix.root(m, c, s, k)

    def arriving(m, c, s, k):
        return sum(m.up[x] for x in ix.up_in_at.get((c, s, k), ()))

    m.ADDING_SWITCH_EPOCHS = pyo.Set(dimen=3, initialize=adding, ordered=False)
    m.switch_sends_one_sum = pyo.Constraint(m.ADDING_SWITCH_EPOCHS, rule=lambda m, c, s, k: _expr(leaving(m, c, s, k) <= 1))
    m.switch_sum_needs_a_partial = pyo.Constraint(
        m.ADDING_SWITCH_EPOCHS, rule=lambda m, c, s, k: _expr(leaving(m, c, s, k) <= arriving(m, c, s, k)))
    m.UP_INTO_ADDING_SWITCHES = pyo.Set(dimen=4, ordered=False, initialize=[
        s for s in g.up if topo.is_switch(s[2]) and topo.nodes[s[2]].reduce])
    m.switch_adds_every_partial = pyo.Constraint(
        m.UP_INTO_ADDING_SWITCHES,
        rule=lambda m, c, i, s, k: m.up[c, i, s, k] <= leaving(m, c, s, g.landing((c, i, s, k))))
    by_switch: dict[tuple[int, int], list[NodeEpoch]] = defaultdict(list)
    for key in adding:
        by_switch[(key[0], key[1])].append(key)
    m.ADDING_SWITCHES = pyo.Set(dimen=2, initialize=sorted(by_switch), ordered=False)
    m.switch_sums_a_chunk_once = pyo.Constraint(
        m.ADDING_SWITCHES, rule=lambda m, c, s: _expr(sum(leaving(m, *key) for key in by_switch[(c, s)]) <= 1))
    m.PLAIN_SWITCH_EPOCHS = pyo.Set(dimen=3, initialize=plain, ordered=False)
    m.plain_switch_forwards_each_partial = pyo.Constraint(
        m.PLAIN_SWITCH_EPOCHS, rule=lambda m, c, s, k: _expr(leaving(m, c, s, k) == arriving(m, c, s, k)))


def _one_total_per_chunk(m, g: InSwitchGraph, ix: _Index) -> None:
    """Every partial ends in one total: the chunk's sum forms at exactly one (node, epoch)."""
    chunks = sorted({c for c, _, _ in g.roots})
    m.REDUCED_CHUNKS = pyo.Set(initialize=chunks)
    by_chunk: dict[int, list[NodeEpoch]] = defaultdict(list)
    for r in g.roots:
        by_chunk[r[0]].append(r)
    m.one_total = pyo.Constraint(m.REDUCED_CHUNKS, rule=lambda m, c: sum(m.root[r] for r in by_chunk[c]) == 1)


def _totals_sent_from_holders(m, g: InSwitchGraph, ix: _Index) -> None:
    """Flow conservation with copy, at GPUs (TE-CCL): a GPU sends the total only once it holds it."""
    from_gpus = [s for s in g.down if not g.topology.is_switch(s[1])]
    m.DOWN_FROM_GPUS = pyo.Set(dimen=4, initialize=from_gpus, ordered=False)
    m.total_sent_when_held = pyo.Constraint(m.DOWN_FROM_GPUS, rule=lambda m, c, i, j, k: m.down[c, i, j, k] <= (
        m.hold[c, i, k] if (c, i, k) in ix.hold_set else 0))


def _holdings_grow_by_total_or_arrival(m, g: InSwitchGraph, ix: _Index) -> None:
    """Buffer constraints (TE-CCL): a GPU holds the total if it held it, it arrives now, or it forms here now."""
    def grows(m, c, n, k):
        before = m.hold[c, n, k - 1] if (c, n, k - 1) in ix.hold_set else 0
        arrived = sum(m.down[s] for s in ix.down_in_at.get((c, n, k), ()))
        return m.hold[c, n, k] <= before + arrived + ix.root(m, c, n, k)
    m.total_held_grows = pyo.Constraint(m.HOLDS, rule=grows)


def _switches_forward_the_total(m, g: InSwitchGraph, ix: _Index) -> None:
    """TE-CCL's switch constraints for the total: a copy switch sends on any links what reaches it, or the
    sum it forms, in that epoch; a switch that cannot copy sends each once."""
    topo = g.topology
    copying = [s for s in g.down if topo.is_switch(s[1]) and topo.nodes[s[1]].copy]
    single = sorted({(c, i, k) for c, i, _, k in g.down if topo.is_switch(i) and not topo.nodes[i].copy})

    def reaching(m, c, s, k):
        return sum(m.down[x] for x in ix.down_in_at.get((c, s, k), ())) + ix.root(m, c, s, k)

    m.DOWN_FROM_COPY_SWITCHES = pyo.Set(dimen=4, initialize=copying, ordered=False)
    m.copy_switch_forwards_total = pyo.Constraint(
        m.DOWN_FROM_COPY_SWITCHES, rule=lambda m, c, s, j, k: m.down[c, s, j, k] <= reaching(m, c, s, k))
    m.NO_COPY_SWITCH_TOTAL_EPOCHS = pyo.Set(dimen=3, initialize=single, ordered=False)
    m.no_copy_switch_forwards_total_once = pyo.Constraint(
        m.NO_COPY_SWITCH_TOTAL_EPOCHS,
        rule=lambda m, c, s, k: sum(m.down[x] for x in ix.down_out_at[(c, s, k)]) <= reaching(m, c, s, k))


def _demands_hold_the_total(m, g: InSwitchGraph) -> None:
    """Destination constraints: every GPU that needs the total holds it by the horizon."""
    m.DEMANDS = pyo.Set(dimen=2, initialize=g.demands, ordered=False)
    m.demand_holds_total = pyo.Constraint(m.DEMANDS, rule=lambda m, c, d: m.hold[c, d, g.horizon] >= 1)


def _shared_link_capacity(m, g: InSwitchGraph) -> None:
    """Capacity constraints: partial sums and totals together within T_ij * tau per window of kappa epochs."""
    per_link: dict[tuple[int, int], dict[int, list]] = defaultdict(lambda: defaultdict(list))
    for s in g.up:
        per_link[(s[1], s[2])][s[3]].append(m.up[s])
    for s in g.down:
        per_link[(s[1], s[2])][s[3]].append(m.down[s])
    windows: dict[tuple[int, int, int], list] = {}
    for key, per_epoch in per_link.items():
        link = g.grid.links[key]
        for w in sorted(per_epoch):
            covered = [v for k in range(w, w + link.kappa) for v in per_epoch.get(k, ())]
            if len(covered) > link.window_slots:
                windows[(key[0], key[1], w)] = covered
    m.WINDOWS = pyo.Set(dimen=3, initialize=sorted(windows), ordered=False)
    m.link_capacity = pyo.Constraint(m.WINDOWS, rule=lambda m, i, j, w: sum(windows[(i, j, w)]) <= g.grid.links[
        (i, j)].window_slots)
