"""The TE-CCL optimisation models in Pyomo, built from the pruned time-expanded index sets.

Two forms, as in the paper:

* ``copy_model`` (MILP): one commodity per chunk; binary ``send`` per
  (chunk, link, epoch); ``hold`` per (chunk, GPU, epoch). A GPU sends on each
  out-link what it holds (copy = one inequality per link), holdings grow only
  by arrivals, a switch forwards in the epoch a chunk reaches it (a copy
  switch on any number of links, a no-copy switch once per arrival), every
  link stays within its capacity in each window of kappa epochs, and every
  demand holds at the horizon.
* ``flow_model`` (LP): one commodity per source, continuous flows, classic
  conservation with a read-off term at destinations; used when no chunk has
  two destinations, so copying cannot help.

Both maximise early delivery (weight 1/(k+1) per demand held in epoch k),
which guides the solver toward short schedules and lets the horizon carry a
little slack. ``hold`` may be continuous: it is bounded by integer arrivals,
so it is 0 or 1 wherever a send depends on it.
"""

from __future__ import annotations

import pyomo.environ as pyo

from ccviz.synth.teccl.time_expanded import TimeExpandedGraph

PROGRESS_WEIGHT = 0.5  # A* rounds: reward for ending a round closer to a destination


def early_weight(epoch: int) -> float:
    return 1.0 / (epoch + 1)


def copy_model(teg: TimeExpandedGraph, buffer_limit: int | None = None,
               progress: dict[tuple[int, int], float] | None = None) -> pyo.ConcreteModel:
    """The MILP. ``progress[(commodity, node)]`` rewards holding there at the horizon (A* rounds)."""
    topo = teg.topology
    holders = {c.id: c.holders for c in teg.commodities}
    m = pyo.ConcreteModel("teccl_copy")
    m.SENDS = pyo.Set(dimen=4, initialize=teg.sends, ordered=False)
    m.HOLDS = pyo.Set(dimen=3, initialize=teg.holds, ordered=False)
    m.send = pyo.Var(m.SENDS, domain=pyo.Binary)
    m.hold = pyo.Var(m.HOLDS, bounds=(0, 1))
    hold_set = set(teg.holds)

    # A GPU sends (on each of its links, copying) only what it holds at the start of the epoch.
    m.GPU_SENDS = pyo.Set(dimen=4, ordered=False, initialize=[
        s for s in teg.sends if not topo.is_switch(s[1]) and s[1] not in holders[s[0]]])
    m.send_needs_holding = pyo.Constraint(
        m.GPU_SENDS, rule=lambda m, c, i, j, k: m.send[c, i, j, k] <= m.hold[c, i, k])

    def holding_grows_by_arrivals(m, c, n, k):
        """A GPU holds a chunk in epoch k only if it held it before or it arrives now."""
        before = m.hold[c, n, k - 1] if (c, n, k - 1) in hold_set else 0
        arrived = sum(m.send[s] for s in teg.arrivals.get((c, n, k), ()))
        return m.hold[c, n, k] <= before + arrived
    m.holding_grows = pyo.Constraint(m.HOLDS, rule=holding_grows_by_arrivals)

    def arrivals_at(m, c, s, k):
        """A switch stores nothing: it forwards in the epoch a chunk reaches it."""
        return sum(m.send[a] for a in teg.switch_arrivals.get((c, s, k), ()))

    copy_switch_sends = [s for s in teg.sends if topo.is_switch(s[1]) and topo.nodes[s[1]].copy]
    m.COPY_SWITCH_SENDS = pyo.Set(dimen=4, initialize=copy_switch_sends, ordered=False)
    m.copy_switch_forwards_arrival = pyo.Constraint(
        m.COPY_SWITCH_SENDS, rule=lambda m, c, s, j, k: m.send[c, s, j, k] <= arrivals_at(m, c, s, k))
    sends_from = teg.sends_from()
    no_copy_switch_epochs = sorted({(c, s, k) for c, s, _, k in teg.sends
                                    if topo.is_switch(s) and not topo.nodes[s].copy})
    m.NO_COPY_SWITCH_EPOCHS = pyo.Set(dimen=3, initialize=no_copy_switch_epochs, ordered=False)
    m.no_copy_switch_forwards_each_arrival_once = pyo.Constraint(
        m.NO_COPY_SWITCH_EPOCHS,
        rule=lambda m, c, s, k: sum(m.send[x] for x in sends_from[(c, s, k)]) <= arrivals_at(m, c, s, k))

    _add_capacity(m, teg, m.send, fractional=False, every_window=False)

    demands = [(c.id, d) for c in teg.commodities for d in c.destinations if (c.id, d, teg.horizon) in hold_set]
    if teg.require_demands:
        m.DEMANDS = pyo.Set(dimen=2, initialize=demands, ordered=False)
        m.demand_met = pyo.Constraint(m.DEMANDS, rule=lambda m, c, d: m.hold[c, d, teg.horizon] >= 1)

    if buffer_limit is not None:
        _add_buffer_limit(m, teg, buffer_limit)

    destination_of = {(c.id, d) for c in teg.commodities for d in c.destinations}
    reward = sum(early_weight(k) * m.hold[c, n, k] for c, n, k in teg.holds if (c, n) in destination_of)
    if progress:
        reward += sum(PROGRESS_WEIGHT * w * m.hold[c, n, teg.horizon]
                      for (c, n), w in progress.items() if (c, n, teg.horizon) in hold_set)
    m.early_arrival = pyo.Objective(expr=reward, sense=pyo.maximize)
    return m


def flow_model(teg: TimeExpandedGraph, integral: bool = False) -> pyo.ConcreteModel:
    """The LP: continuous flows of each source's chunks, conserved, read off at destinations.

    ``integral`` makes the flows whole chunks (a small MILP): its paths then need no rounding.
    """
    topo = teg.topology
    m = pyo.ConcreteModel("teccl_flow")
    supply = {c.id: c.amount for c in teg.commodities}
    holder_of = {c.id: next(iter(c.holders)) for c in teg.commodities}
    stores = list(teg.holds) + [(c.id, holder_of[c.id], k) for c in teg.commodities
                                for k in range(teg.horizon + 1)]
    hold_set = set(teg.holds)
    reads = [(c.id, d, k) for c in teg.commodities for d, _ in c.needs
             for k in range(teg.horizon + 1) if (c.id, d, k) in hold_set]
    m.SENDS = pyo.Set(dimen=4, initialize=teg.sends, ordered=False)
    m.STORES = pyo.Set(dimen=3, initialize=stores, ordered=False)
    m.READS = pyo.Set(dimen=3, initialize=reads, ordered=False)
    m.flow = pyo.Var(m.SENDS, domain=pyo.NonNegativeIntegers if integral else pyo.NonNegativeReals,
                     bounds=lambda m, c, i, j, k: (0, supply[c]))
    m.store = pyo.Var(m.STORES, domain=pyo.NonNegativeReals)
    m.read = pyo.Var(m.READS, domain=pyo.NonNegativeReals)
    store_set, read_set = set(stores), set(reads)
    sends_from = teg.sends_from()

    def out_of(m, c, n, k):
        return sum(m.flow[s] for s in sends_from.get((c, n, k), ()))

    def conservation(m, c, n, k):
        """A GPU's store: what it had, minus what it sent last epoch, plus arrivals, minus what it reads off."""
        if (c, n, k - 1) in store_set:
            before = m.store[c, n, k - 1] - out_of(m, c, n, k - 1)
        else:
            before = supply[c] if n == holder_of[c] else 0
        arrived = sum(m.flow[s] for s in teg.arrivals.get((c, n, k), ()))
        taken = m.read[c, n, k] if (c, n, k) in read_set else 0
        return m.store[c, n, k] == before + arrived - taken
    m.conservation = pyo.Constraint(m.STORES, rule=conservation)
    m.send_within_store = pyo.Constraint(
        m.STORES, rule=lambda m, c, n, k: out_of(m, c, n, k) <= m.store[c, n, k]
        if (c, n, k) in sends_from else pyo.Constraint.Skip)

    # A switch forwards exactly what reaches it in the epoch.
    switch_epochs = sorted({(c, s, k) for c, s, _, k in teg.sends if topo.is_switch(s)}
                           | {key for key in teg.switch_arrivals})
    m.SWITCH_EPOCHS = pyo.Set(dimen=3, initialize=switch_epochs, ordered=False)
    m.switch_conservation = pyo.Constraint(m.SWITCH_EPOCHS, rule=lambda m, c, s, k: out_of(m, c, s, k) == sum(
        m.flow[a] for a in teg.switch_arrivals.get((c, s, k), ())))

    _add_capacity(m, teg, m.flow, fractional=not integral, every_window=True)

    need = {(c.id, d): n for c in teg.commodities for d, n in c.needs}
    m.DEMANDS = pyo.Set(dimen=2, initialize=sorted(need), ordered=False)
    m.demand_met = pyo.Constraint(m.DEMANDS, rule=lambda m, c, d: sum(
        m.read[c, d, k] for k in range(teg.horizon + 1) if (c, d, k) in read_set) == need[(c, d)])
    m.early_arrival = pyo.Objective(expr=sum(early_weight(k) * m.read[c, d, k] for c, d, k in reads),
                                    sense=pyo.maximize)
    return m


def _add_capacity(m: pyo.ConcreteModel, teg: TimeExpandedGraph, amount: pyo.Var, fractional: bool,
                  every_window: bool) -> None:
    """At most the link's capacity (fractional chunks for the LP) in any window of kappa epochs."""
    windows = teg.capacity_windows(every_window)
    links = teg.grid.links
    m.WINDOWS = pyo.Set(dimen=3, initialize=sorted(windows), ordered=False)

    def within_capacity(m, i, j, w):
        limit = links[(i, j)].window_chunks if fractional else links[(i, j)].window_slots
        return sum(amount[s] for s in windows[(i, j, w)]) <= limit
    m.link_capacity = pyo.Constraint(m.WINDOWS, rule=within_capacity)


def _add_buffer_limit(m: pyo.ConcreteModel, teg: TimeExpandedGraph, limit: int) -> None:
    """Optional node buffer: a GPU holds at most ``limit`` chunks it received at any epoch."""
    by_node_epoch: dict[tuple[int, int], list] = {}
    for c, n, k in teg.holds:
        by_node_epoch.setdefault((n, k), []).append((c, n, k))
    m.NODE_EPOCHS = pyo.Set(dimen=2, initialize=sorted(by_node_epoch), ordered=False)
    m.buffer_limit = pyo.Constraint(
        m.NODE_EPOCHS, rule=lambda m, n, k: sum(m.hold[h] for h in by_node_epoch[(n, k)]) <= limit)
