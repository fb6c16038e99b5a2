"""TE-CCL (Liu et al., SIGCOMM 2024) on open source: Pyomo models solved by HiGHS.

Modules, in the order the data flows: ``epochs`` (tau, kappa, latency in
epochs), ``time_expanded`` (reachability-pruned index sets), ``bounds``
(arithmetic epoch lower bound = optimality certificate), ``greedy`` (epoch
upper bound and MIP start), ``model`` (the MILP and the LP), ``solve``
(HiGHS with limits, callbacks, progress), ``extract`` (pruning, LP path
decomposition, transfers), ``synthesizer`` (horizon search), ``reductions``
(ReduceScatter/Reduce by reversal, AllReduce = RS + AG), ``astar`` (rounds).
Registers ``teccl`` and ``teccl-astar``.
"""

from __future__ import annotations

import time

from ccviz.collectives import Collective
from ccviz.schedule import Schedule
from ccviz.synth.registry import Algorithm, SynthOptions, register
from ccviz.synth.teccl.reductions import allreduce, reduce_by_reversal
from ccviz.synth.teccl.synthesizer import DEFAULT_TIME_LIMIT_S, solve_copy_or_flow
from ccviz.topology import Topology

SUPPORTED = frozenset({"allgather", "broadcast", "alltoall", "gather", "scatter", "custom",
                       "reducescatter", "reduce", "allreduce"})
OPTIONS_USED = ("epoch", "epochs", "time_limit", "gap", "progress", "stop")


def synthesize_teccl(topology: Topology, collective: Collective, options: SynthOptions) -> Schedule:
    """TE-CCL: the MILP where copies help, the LP where they cannot; reductions by reversal."""
    started = time.perf_counter()
    deadline = started + (options.time_limit if options.time_limit is not None else DEFAULT_TIME_LIMIT_S)
    if collective.name == "allreduce":
        return allreduce(topology, collective, options, deadline, started)
    if collective.is_reducing:
        return reduce_by_reversal(topology, collective, options, deadline, started)
    return solve_copy_or_flow(topology, collective, options, deadline, started)


register(Algorithm(
    "teccl", synthesize_teccl, SUPPORTED,
    "TE-CCL multi-commodity flow: MILP (copy) or LP, Pyomo + HiGHS, epoch-optimal with a certificate",
    kind="optimal", options_used=OPTIONS_USED,
))
