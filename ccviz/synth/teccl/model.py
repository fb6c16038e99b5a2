"""The TE-CCL optimisation models in Pyomo, built from the pruned time-expanded index sets.

Liu et al., "Rethinking Machine Learning Collective Communication as a Multi-Commodity Flow Problem"
(TE-CCL, SIGCOMM'24). Two forms, as in the paper:

* ``copy_model`` (the general MILP): one commodity per chunk; binary ``send`` per
  (chunk, link, epoch); ``hold`` per (chunk, GPU, epoch). A GPU sends on each
  out-link what it holds (copy = one inequality per link), holdings grow only
  by arrivals, a switch forwards in the epoch a chunk reaches it (a copy
  switch on any number of links, a no-copy switch once per arrival), every
  link stays within its capacity in each window of kappa epochs, and every
  demand holds at the horizon.
* ``flow_model`` (the LP): one commodity per source, continuous flows, classic
  conservation with a read-off term at destinations; used when no chunk has
  two destinations, so copying cannot help.

Both maximise early delivery (weight 1/(k+1) per demand held in epoch k),
which guides the solver toward short schedules and lets the horizon carry a
little slack. ``hold`` may be continuous: it is bounded by integer arrivals,
so it is 0 or 1 wherever a send depends on it.

Each function ``_...`` below adds one family of constraints and names it as the paper does (capacity,
flow conservation, buffers, switches, destination constraints, the objective). The paper's equation
numbers are not cited: they could not be checked against the paper's text while this was written, so
the constraints are cited by name. The paper's variables in this model:

=================================  ===============================  =============================================
paper                              here                             meaning
=================================  ===============================  =============================================
F_{s,i,j,k,c}                      ``send[c, i, j, k]`` (MILP),     chunk c of source s leaves on link (i, j) in
                                   ``flow[c, i, j, k]`` (LP)        epoch k; our commodity ``c`` is the pair (s, c)
                                                                    in the MILP, the source s in the LP
B_{s,n,k,c}                        ``hold[c, n, k]`` (MILP),        GPU n holds the chunk in epoch k (the buffer)
                                   ``store[c, n, k]`` (LP)
R_{s,d,k,c}                        ``hold[c, d, k]`` at a           destination d has read the chunk by epoch k
                                   destination (MILP),
                                   ``read[c, d, k]`` (LP)
D_{s,d,c}                          ``Commodity.destinations`` /     the demand
                                   ``Commodity.needs``
tau, T_ij, alpha_ij                ``EpochGrid`` (``epochs.py``)    epoch length, link capacity, link latency
delta_ij = ceil(alpha_ij / tau)    ``LinkEpochs.offset``            epochs from a send to the receiver holding it
                                                                    (plus ``kappa``, the chunk's serialization
                                                                    epochs)
K                                  ``teg.horizon``                  the last epoch
=================================  ===============================  =============================================
"""

from __future__ import annotations

import pyomo.environ as pyo

from ccviz.synth.teccl.time_expanded import TimeExpandedGraph

PROGRESS_WEIGHT = 0.5  # A* rounds: reward for ending a round closer to a destination


def early_weight(epoch: int) -> float:
    """The objective's weight 1/(k+1) of a demand met in epoch k: earlier counts more."""
    return 1.0 / (epoch + 1)


def copy_model(teg: TimeExpandedGraph, buffer_limit: int | None = None,
               progress: dict[tuple[int, int], float] | None = None) -> pyo.ConcreteModel:
    """The MILP. ``progress[(commodity, node)]`` rewards holding there at the horizon (A* rounds)."""
    m = pyo.ConcreteModel("teccl_copy")
    m.SENDS = pyo.Set(dimen=4, initialize=teg.sends, ordered=False)
    m.HOLDS = pyo.Set(dimen=3, initialize=teg.holds, ordered=False)
    m.send = pyo.Var(m.SENDS, domain=pyo.Binary)
    m.hold = pyo.Var(m.HOLDS, bounds=(0, 1))
    _gpus_send_what_they_hold(m, teg)
    _buffers_grow_by_arrivals(m, teg)
    _switches_forward_what_reaches_them(m, teg)
    _add_capacity(m, teg, m.send, fractional=False, every_window=False)
    if teg.require_demands:
        _demands_held_at_the_horizon(m, teg)
    if buffer_limit is not None:
        _add_buffer_limit(m, teg, buffer_limit)
    _early_arrival(m, teg, progress)
    return m


def _gpus_send_what_they_hold(m: pyo.ConcreteModel, teg: TimeExpandedGraph) -> None:
    """Flow conservation with copy, at GPUs: F_{s,i,j,k,c} <= B_{s,i,k,c} for every out-link (i, j).

    A GPU sends (on each of its links, copying) only what it holds at the start of the epoch; one
    inequality per link is the paper's max over out-links.
    """
    topo = teg.topology
    holders = {c.id: c.holders for c in teg.commodities}
    m.GPU_SENDS = pyo.Set(dimen=4, ordered=False, initialize=[
        s for s in teg.sends if not topo.is_switch(s[1]) and s[1] not in holders[s[0]]])
    m.send_needs_holding = pyo.Constraint(
        m.GPU_SENDS, rule=lambda m, c, i, j, k: m.send[c, i, j, k] <= m.hold[c, i, k])


def _buffers_grow_by_arrivals(m: pyo.ConcreteModel, teg: TimeExpandedGraph) -> None:
    """Buffer constraints: B_{s,n,k,c} <= B_{s,n,k-1,c} + sum_i F_{s,i,n,k-delta_in,c}.

    A GPU holds a chunk in epoch k only if it held it before or it arrives now (``<=``: nothing
    forces a GPU to keep what it does not need; the extraction reads only sends).
    """
    hold_set = set(teg.holds)

    def holding_grows_by_arrivals(m, c, n, k):
        before = m.hold[c, n, k - 1] if (c, n, k - 1) in hold_set else 0
        arrived = sum(m.send[s] for s in teg.arrivals.get((c, n, k), ()))
        return m.hold[c, n, k] <= before + arrived
    m.holding_grows = pyo.Constraint(m.HOLDS, rule=holding_grows_by_arrivals)


def _switches_forward_what_reaches_them(m: pyo.ConcreteModel, teg: TimeExpandedGraph) -> None:
    """The paper's switch constraints: a switch has no buffer (B = 0), so what leaves it in epoch k is
    what reached it in epoch k. A copy switch may send each arrival on any number of links
    (F_{s,w,j,k,c} <= arrivals, per link); a no-copy switch sends each arrival once
    (sum_j F_{s,w,j,k,c} <= arrivals)."""
    topo = teg.topology

    def arrivals_at(m, c, s, k):
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


def _demands_held_at_the_horizon(m: pyo.ConcreteModel, teg: TimeExpandedGraph) -> None:
    """Destination constraints: R_{s,d,K,c} = D_{s,d,c}, every demand held by the last epoch K."""
    hold_set = set(teg.holds)
    demands = [(c.id, d) for c in teg.commodities for d in c.destinations if (c.id, d, teg.horizon) in hold_set]
    m.DEMANDS = pyo.Set(dimen=2, initialize=demands, ordered=False)
    m.demand_met = pyo.Constraint(m.DEMANDS, rule=lambda m, c, d: m.hold[c, d, teg.horizon] >= 1)


def _early_arrival(m: pyo.ConcreteModel, teg: TimeExpandedGraph,
                   progress: dict[tuple[int, int], float] | None) -> None:
    """The paper's objective: maximise sum_k 1/(k+1) R_{s,d,k,c}, demands met early count more; an A*
    round adds ``PROGRESS_WEIGHT`` per chunk held closer to its destinations at the round's end."""
    hold_set = set(teg.holds)
    destination_of = {(c.id, d) for c in teg.commodities for d in c.destinations}
    reward = sum(early_weight(k) * m.hold[c, n, k] for c, n, k in teg.holds if (c, n) in destination_of)
    if progress:
        reward += sum(PROGRESS_WEIGHT * w * m.hold[c, n, teg.horizon]
                      for (c, n), w in progress.items() if (c, n, teg.horizon) in hold_set)
    m.early_arrival = pyo.Objective(expr=reward, sense=pyo.maximize)


def flow_model(teg: TimeExpandedGraph, integral: bool = False) -> pyo.ConcreteModel:
    """The LP: continuous flows of each source's chunks, conserved, read off at destinations.

    ``integral`` makes the flows whole chunks (a small MILP): its paths then need no rounding.
    """
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
    sends_from = teg.sends_from()
    _flows_conserved_at_gpus(m, teg, sends_from, supply, holder_of, set(stores), set(reads))
    _flows_conserved_at_switches(m, teg, sends_from)
    _add_capacity(m, teg, m.flow, fractional=not integral, every_window=True)
    _demands_read_by_the_horizon(m, teg, set(reads))
    m.early_arrival = pyo.Objective(expr=sum(early_weight(k) * m.read[c, d, k] for c, d, k in reads),
                                    sense=pyo.maximize)
    return m


def _flows_conserved_at_gpus(m: pyo.ConcreteModel, teg: TimeExpandedGraph, sends_from: dict,
                             supply: dict[int, float], holder_of: dict[int, int], store_set: set,
                             read_set: set) -> None:
    """Flow conservation (the LP form, no copy): B_{s,n,k} = B_{s,n,k-1} - sum_j F_{s,n,j,k-1}
    + sum_i F_{s,i,n,k-delta_in} - R_{s,n,k}, and a GPU sends no more than it stores,
    sum_j F_{s,n,j,k} <= B_{s,n,k}. The source starts with its whole supply."""

    def out_of(m, c, n, k):
        return sum(m.flow[s] for s in sends_from.get((c, n, k), ()))

    def conservation(m, c, n, k):
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


def _flows_conserved_at_switches(m: pyo.ConcreteModel, teg: TimeExpandedGraph, sends_from: dict) -> None:
    """The switch constraints of the LP: a switch forwards exactly what reaches it in the epoch,
    sum_j F_{s,w,j,k} = sum_i F_{s,i,w,k-delta_iw}."""
    topo = teg.topology
    switch_epochs = sorted({(c, s, k) for c, s, _, k in teg.sends if topo.is_switch(s)}
                           | {key for key in teg.switch_arrivals})
    m.SWITCH_EPOCHS = pyo.Set(dimen=3, initialize=switch_epochs, ordered=False)
    m.switch_conservation = pyo.Constraint(m.SWITCH_EPOCHS, rule=lambda m, c, s, k: sum(
        m.flow[x] for x in sends_from.get((c, s, k), ())) == sum(
        m.flow[a] for a in teg.switch_arrivals.get((c, s, k), ())))


def _demands_read_by_the_horizon(m: pyo.ConcreteModel, teg: TimeExpandedGraph, read_set: set) -> None:
    """Destination constraints of the LP: sum_k R_{s,d,k} = D_{s,d}, every demand read by epoch K."""
    need = {(c.id, d): n for c in teg.commodities for d, n in c.needs}
    m.DEMANDS = pyo.Set(dimen=2, initialize=sorted(need), ordered=False)
    m.demand_met = pyo.Constraint(m.DEMANDS, rule=lambda m, c, d: sum(
        m.read[c, d, k] for k in range(teg.horizon + 1) if (c, d, k) in read_set) == need[(c, d)])


def _add_capacity(m: pyo.ConcreteModel, teg: TimeExpandedGraph, amount: pyo.Var, fractional: bool,
                  every_window: bool) -> None:
    """Capacity constraints: sum_{s,c} F_{s,i,j,k,c} <= T_ij * tau, summed over any window of kappa
    epochs where a chunk takes kappa epochs to cross the link (fractional chunks for the LP)."""
    windows = teg.capacity_windows(every_window)
    links = teg.grid.links
    m.WINDOWS = pyo.Set(dimen=3, initialize=sorted(windows), ordered=False)

    def within_capacity(m, i, j, w):
        limit = links[(i, j)].window_chunks if fractional else links[(i, j)].window_slots
        return sum(amount[s] for s in windows[(i, j, w)]) <= limit
    m.link_capacity = pyo.Constraint(m.WINDOWS, rule=within_capacity)


def _add_buffer_limit(m: pyo.ConcreteModel, teg: TimeExpandedGraph, limit: int) -> None:
    """An optional limit on the buffers, beyond the paper's general form: sum_{s,c} B_{s,n,k,c} <= ``limit``,
    the chunks a GPU holds that it received, at any epoch."""
    by_node_epoch: dict[tuple[int, int], list] = {}
    for c, n, k in teg.holds:
        by_node_epoch.setdefault((n, k), []).append((c, n, k))
    m.NODE_EPOCHS = pyo.Set(dimen=2, initialize=sorted(by_node_epoch), ordered=False)
    m.buffer_limit = pyo.Constraint(
        m.NODE_EPOCHS, rule=lambda m, n, k: sum(m.hold[h] for h in by_node_epoch[(n, k)]) <= limit)
