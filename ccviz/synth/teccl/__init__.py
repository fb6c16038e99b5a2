"""TE-CCL (Liu et al., SIGCOMM 2024) on open source: Pyomo models solved by HiGHS.

Modules, in the order the data flows: ``epochs`` (tau, kappa, latency in
epochs), ``time_expanded`` (reachability-pruned index sets), ``bounds``
(arithmetic epoch lower bound = optimality certificate), ``greedy`` (epoch
upper bound and MIP start), ``model`` (the MILP and the LP), ``solve``
(HiGHS with limits, callbacks, progress), ``extract`` (pruning, LP path
decomposition, transfers), ``synthesizer`` (horizon search), ``frame``
(TE-CCL in the shared frame: reductions by reversal, AllReduce = RS + AG), ``astar`` (rounds);
``in_switch`` and ``in_switch_solve`` (the formulation extended with in-switch reduction, used for
reductions on fabrics whose switches add).
``ccviz.synth.catalog`` declares ``teccl`` and ``teccl-astar`` (and their options); the solver
modules (Pyomo, HiGHS) load on first use, so listing algorithms stays instant.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from ccviz.model.collectives import Collective
from ccviz.model.groups import is_whole, judged_on, relay_fabric
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
    """TE-CCL: the MILP where copies help, the LP where they cannot; reductions by reversal, or, on a fabric
    whose switches add, by the in-switch reduction model (``in_switch``), AllReduce fused."""
    from ccviz.synth.teccl.in_switch import uses_in_switch_reduction
    from ccviz.synth.teccl.synthesizer import solve_copy_or_flow

    if uses_in_switch_reduction(topology, collective) and options.settings(TecclOptions).buffer_limit is None:
        return _in_switch_or_reversal(topology, collective, options)
    return _run(topology, collective, options, solve_copy_or_flow, TecclOptions)


def _in_switch_or_reversal(topology: Topology, collective: Collective, options: SynthOptions) -> Schedule:
    """The in-switch model (the whole time limit where its greedy gives a first schedule, else most of it); if
    it finds no schedule the judge accepts, TE-CCL by reversal (summing at GPUs) with what time is left, saying
    so. A buffer limit keeps the reversal, whose model has it."""
    import time

    from ccviz.synth.teccl.in_switch_solve import solve_in_switch
    from ccviz.synth.teccl.synthesizer import DEFAULT_TIME_LIMIT_S, solve_copy_or_flow

    started = time.perf_counter()
    settings = options.settings(TecclOptions)
    limit = options.time_limit if options.time_limit is not None else DEFAULT_TIME_LIMIT_S
    schedule, notes = solve_in_switch(topology, collective, replace(options, algorithm_options=settings),
                                      started + limit, started)
    if schedule is not None:
        return schedule
    left = max(1.0, limit - (time.perf_counter() - started))
    fallback = _run(topology, collective, replace(options, time_limit=left), solve_copy_or_flow, TecclOptions)
    fallback.notes = [*notes, "the in-switch reduction model found no verified schedule in time: TE-CCL by "
                      "reversal, summed at GPUs", *fallback.notes]
    return fallback


def synthesize_teccl_astar(topology: Topology, collective: Collective, options: SynthOptions) -> Schedule:
    """TE-CCL A*: successive small MILP rounds (faster, not optimal)."""
    from ccviz.synth.teccl.astar import solve_astar

    if collective.is_reducing and not is_whole(topology, collective.ranks):
        # A reduction over a process group is solved on the fabric with the other GPUs as relay switches, then put
        # back on the real fabric: solved there directly, the mirror of a group's gather let a relay GPU send a
        # partial sum before it held one (the judge refused it; found by tests/test_files_read_back.py)
        fabric = relay_fabric(topology, collective.ranks)
        return judged_on(topology, _run(fabric, collective, options, solve_astar, TecclAstarOptions))
    return _run(topology, collective, options, solve_astar, TecclAstarOptions)
