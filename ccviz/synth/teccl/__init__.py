"""TE-CCL (Liu et al., SIGCOMM 2024) on open source: Pyomo models solved by HiGHS.

Modules, in the order the data flows: ``epochs`` (tau, kappa, latency in
epochs), ``time_expanded`` (reachability-pruned index sets), ``bounds``
(arithmetic epoch lower bound = optimality certificate), ``greedy`` (epoch
upper bound and MIP start), ``model`` (the MILP and the LP), ``solve``
(HiGHS with limits, callbacks, progress), ``extract`` (pruning, LP path
decomposition, transfers), ``synthesizer`` (horizon search), ``frame``
(TE-CCL in the shared frame: reductions by reversal, AllReduce = RS + AG), ``astar`` (rounds).
``ccviz.synth.catalog`` declares ``teccl`` and ``teccl-astar`` (and their options); the solver
modules (Pyomo, HiGHS) load on first use, so listing algorithms stays instant.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from ccviz.model.collectives import Collective
from ccviz.model.schedule import Schedule
from ccviz.model.topology import Topology
from ccviz.synth.catalog import TecclAstarOptions, TecclOptions
from ccviz.synth.registry import SynthOptions

if TYPE_CHECKING:
    from ccviz.synth.teccl.frame import ForwardSolver


def _run(topology: Topology, collective: Collective, options: SynthOptions, solve_forward: ForwardSolver,
         kind: type[TecclOptions]) -> Schedule:
    """One TE-CCL synthesis in the shared frame (``frame.Teccl``) with the given epoch solver; ``kind``
    types ``extra`` for every solver step (the registry has done so already)."""
    from ccviz.synth.teccl.frame import Teccl
    from ccviz.synth.teccl.synthesizer import DEFAULT_TIME_LIMIT_S

    settings = options.settings(kind)
    options = replace(options, algorithm_options=settings)
    return Teccl(topology, collective, options, solve_forward, settings.replay, DEFAULT_TIME_LIMIT_S).synthesize()


def synthesize_teccl(topology: Topology, collective: Collective, options: SynthOptions) -> Schedule:
    """TE-CCL: the MILP where copies help, the LP where they cannot; reductions by reversal."""
    from ccviz.synth.teccl.synthesizer import solve_copy_or_flow

    return _run(topology, collective, options, solve_copy_or_flow, TecclOptions)


def synthesize_teccl_astar(topology: Topology, collective: Collective, options: SynthOptions) -> Schedule:
    """TE-CCL A*: successive small MILP rounds (faster, not optimal)."""
    from ccviz.synth.teccl.astar import solve_astar

    return _run(topology, collective, options, solve_astar, TecclAstarOptions)
