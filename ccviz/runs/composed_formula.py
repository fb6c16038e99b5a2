"""The composed algorithms (dimdecomp, hierarchical, pat) for Learn and Compare: where they run and their formula.

``lesson_formula`` is ``ccviz.bounds.schedule_formula`` extended to them: the Collectives Explainer's formula
(``ccviz.bounds.explained``) evaluated for one schedule, with the grid, tiers and links the schedule really has.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ccviz.bounds.cost import CostResult, used_link_parameters
from ccviz.bounds.explained import explained_cost
from ccviz.bounds.schedule_formula import schedule_formula
from ccviz.errors import CcvizError
from ccviz.model.collectives import Collective
from ccviz.model.schedule import Schedule
from ccviz.model.topology import Topology

COMPOSED = ("dimdecomp", "hierarchical", "pat")


def composed_unavailable(algorithm: str, topology: Topology) -> str | None:
    """Why a composed algorithm cannot run on this fabric (None when it can, or it is not a composed one)."""
    if algorithm == "dimdecomp":
        from ccviz.synth.dimdecomp import grid_coordinates

        try:
            grid_coordinates(topology)
        except CcvizError:
            return "needs a grid fabric (torus, mesh, hypercube)"
    if algorithm == "hierarchical":
        from ccviz.synth.hierarchical import infer_groups

        try:
            infer_groups(topology)
        except CcvizError:
            return "needs a fabric with two tiers of links"
    return None


def _grid(topology: Topology) -> tuple[str, bool]:
    from ccviz.synth.dimdecomp import grid_coordinates

    dims, _ = grid_coordinates(topology)
    kinds = topology.meta.get("kinds") or []
    mesh = (topology.meta.get("wrap") is False or any(k == "mesh" for k in kinds)
            or topology.name == f"line{topology.n_gpus}")
    return "x".join(str(d) for d in dims if d > 1), mesh


def lesson_formula(topology: Topology, collective: Collective, algorithm: str, links: Iterable[tuple[int, int]],
                   options: dict[str, Any] | None = None) -> CostResult | None:
    """The formula for exactly this schedule (None when it has none)."""
    links = set(links)
    if algorithm == "inc":
        alpha_us, bw = used_link_parameters(topology, links)
        try:
            c = explained_cost(collective.name, "inc", collective.size_bytes, alpha_us, bw, n=collective.n_ranks)
        except CcvizError:
            return None
        return CostResult(c.time_s, c.n_alpha, c.n_beta, f"{c.formula} ({c.assumptions})")
    if algorithm not in COMPOSED:
        return schedule_formula(topology, collective, algorithm, links)
    options = options or {}
    alpha_us, bw = used_link_parameters(topology, links)
    name, size, segments = collective.name, collective.size_bytes, collective.chunks_per_rank
    try:
        if algorithm == "pat":
            c = explained_cost(name, "pat", size, alpha_us, bw, n=collective.n_ranks)
        elif algorithm == "dimdecomp":
            dims, mesh = _grid(topology)
            c = explained_cost(name, "dimdecomp", size, alpha_us, bw, dims=dims, mesh=mesh,
                               per_dim=str(options.get("per_dim", "ring")), segments=segments)
        else:
            from ccviz.synth.hierarchical import infer_groups

            group_size = options.get("group_size")
            n_inner = int(group_size) if group_size else len(infer_groups(topology)[0][0])
            used = [topology.links[k] for k in links if k in topology.links] or list(topology.links.values())
            slowest = min(lk.bandwidth_GBps for lk in used)  # the outer tier: the slowest class used
            outer = [lk for lk in used if lk.bandwidth_GBps == slowest]
            inner = [lk for lk in used if lk.bandwidth_GBps > slowest] or outer
            tiers = f"{n_inner}x{collective.n_ranks // n_inner}"
            c = explained_cost(name, "hierarchical", size,
                               f"{max(lk.alpha_us for lk in inner)}/{max(lk.alpha_us for lk in outer)}",
                               f"{min(lk.bandwidth_GBps for lk in inner)}/{slowest}", tiers=tiers,
                               inner=str(options.get("inner", "ring")), outer=str(options.get("outer", "ring")))
    except CcvizError:
        return None
    words = c.formula if " = " in c.formula else f"{c.formula} = {c.n_alpha:g} a + {c.n_beta:.6g} M/BW"
    text = f"{words} ({c.assumptions})"
    return CostResult(c.time_s, c.n_alpha, c.n_beta, text)


def formula_fields(schedule: Schedule) -> dict[str, Any]:
    """``formula_s`` and ``formula`` of ``synth --json``: the closed form for the schedule that ran (None: none)."""
    f = lesson_formula(schedule.topology, schedule.collective, schedule.algorithm,
                       {(t.src, t.dst) for t in schedule.transfers}, schedule.options)
    return {"formula_s": None if f is None else f.time_s, "formula": None if f is None else f.text}
