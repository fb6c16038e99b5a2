"""TE-CCL (Liu et al., SIGCOMM 2024) on open source: Pyomo models solved by HiGHS.

Modules, in the order the data flows: ``epochs`` (tau, kappa, latency in
epochs), ``time_expanded`` (reachability-pruned index sets), ``bounds``
(arithmetic epoch lower bound = optimality certificate), ``greedy`` (epoch
upper bound and MIP start), ``model`` (the MILP and the LP), ``solve``
(HiGHS with limits, callbacks, progress), ``extract`` (pruning, LP path
decomposition, transfers), ``synthesizer`` (horizon search), ``frame``
(TE-CCL in the shared frame: reductions by reversal, AllReduce = RS + AG), ``astar`` (rounds).
Registers ``teccl`` and ``teccl-astar``; the solver modules (Pyomo, HiGHS) load on first use, so
listing algorithms stays instant.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ccviz.collectives import Collective
from ccviz.errors import CcvizError
from ccviz.schedule import Schedule
from ccviz.synth.registry import Algorithm, SynthOptions, register
from ccviz.topology import Topology

if TYPE_CHECKING:
    from ccviz.synth.teccl.frame import ForwardSolver

SUPPORTED = frozenset({"allgather", "broadcast", "alltoall", "gather", "scatter", "custom",
                       "reducescatter", "reduce", "allreduce"})
OPTIONS_USED = ("epoch", "epochs", "time_limit", "gap", "progress", "stop")


REPLAYS = ("asap", "epoch")


def replay_mode(options: SynthOptions) -> str:
    """How the simulator replays the epochs.

    'asap' (default) is what a runtime executing the schedule by dependencies does (MSCCL); 'epoch' is
    TE-CCL's epoch-synchronous view, where no transfer starts before its epoch opens.
    """
    mode = str(options.extra.get("replay", "asap")).lower()
    if mode not in REPLAYS:
        raise CcvizError(
            f"replay: {mode!r} is not 'asap' (each transfer starts as soon as its chunk and link are ready) "
            "or 'epoch' (no transfer starts before its epoch, TE-CCL's epoch-synchronous view)", "replay")
    return mode


def _run(topology: Topology, collective: Collective, options: SynthOptions, solve_forward: ForwardSolver
         ) -> Schedule:
    """One TE-CCL synthesis in the shared frame (``frame.Teccl``) with the given epoch solver."""
    from ccviz.synth.teccl.frame import Teccl
    from ccviz.synth.teccl.synthesizer import DEFAULT_TIME_LIMIT_S

    return Teccl(topology, collective, options, solve_forward, replay_mode(options), DEFAULT_TIME_LIMIT_S).synthesize()


def synthesize_teccl(topology: Topology, collective: Collective, options: SynthOptions) -> Schedule:
    """TE-CCL: the MILP where copies help, the LP where they cannot; reductions by reversal."""
    from ccviz.synth.teccl.synthesizer import solve_copy_or_flow

    return _run(topology, collective, options, solve_copy_or_flow)


def synthesize_teccl_astar(topology: Topology, collective: Collective, options: SynthOptions) -> Schedule:
    """TE-CCL A*: successive small MILP rounds (faster, not optimal)."""
    from ccviz.synth.teccl.astar import solve_astar

    return _run(topology, collective, options, solve_astar)


register(Algorithm(
    "teccl", synthesize_teccl, SUPPORTED,
    "TE-CCL multi-commodity flow: MILP (copy) or LP, Pyomo + HiGHS, epoch-optimal with a certificate",
    kind="optimal", options_used=OPTIONS_USED, extra_keys=("replay", "buffer_limit", "max_variables"),
))
register(Algorithm(
    "teccl-astar", synthesize_teccl_astar, SUPPORTED,
    "TE-CCL A*: rounds of a few epochs solved as small MILPs, rewarding progress toward destinations",
    kind="heuristic", options_used=OPTIONS_USED,
    extra_keys=("replay", "buffer_limit", "max_variables", "astar_round", "astar_horizon", "astar_greedy"),
))
