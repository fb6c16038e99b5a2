"""Which plan a fabric takes: a declared table of fabric traits, read top to bottom, the first row that fits wins.

A plan names the stages ``copies.copy_schedule`` runs for a copy collective (a reduction's mirrored copy too)
under the default options; an option that shapes trees or bookings (``trees``, ``slots``, ``ring``, ...) is
obeyed on top of it. The traits are facts about the fabric alone: whether it has switches, whether they hold
chunks (a buffer), whether they copy, whether every route crosses one switch, whether the slot grid fits
(bufferless switches with alike up-links), how many GPUs. Every schedule's notes name the plan taken and why
(``plan_note``); ``--opt explain=true`` adds the whole table with each row's verdict (``explain``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import ccviz.synth.forestcoll.tuning as tuning
from ccviz.model.topology import Topology
from ccviz.synth.forestcoll.crossbar import crossbar_planes
from ccviz.synth.forestcoll.rails import boxes_on_rails
from ccviz.synth.slotted import one_switch_routes, slot_eligible


@dataclass(frozen=True)
class FabricTraits:
    """What the plan table reads of a fabric."""

    gpus: int
    switched: bool  # some switch in the fabric
    buffered: bool  # every switch has a buffer: a chunk may wait in its queue (default switch_queue)
    copies: bool  # some switch copies one arriving chunk to several out-links (multicast)
    crossbar_planes: bool  # every switch cabled to every GPU, once each way, and to nothing else
    boxes_on_rails: bool  # every switch a crossbar plane of one box or a rail joining GPU j of every box
    one_switch_routes: bool  # no switch -> switch link: a route crosses one switch at most
    slot_grid_fits: bool  # bufferless switches whose GPU -> switch links are alike (``slotted.slot_eligible``)

    def words(self) -> str:
        if not self.switched:
            return f"{self.gpus} GPUs, direct links only (no switch)"
        parts = [f"{self.gpus} GPUs", ("switches with buffers" if self.buffered else "bufferless switches")
                 + (" that copy" if self.copies else " that do not copy"),
                 "every switch a crossbar plane" if self.crossbar_planes else
                 "boxes of crossbar planes on rails" if self.boxes_on_rails else
                 "routes through one switch" if self.one_switch_routes else "routes through two switches or more"]
        if not self.buffered and not (self.crossbar_planes or self.boxes_on_rails):
            parts.append("up-links alike (the slot grid fits)" if self.slot_grid_fits else "up-links differ")
        return ", ".join(parts)


def fabric_traits(topology: Topology) -> FabricTraits:
    switches = list(topology.switches)
    buffered = all(topology.nodes[s].buffer for s in switches)
    return FabricTraits(
        gpus=topology.n_gpus, switched=bool(switches), buffered=bool(switches) and buffered,
        copies=any(topology.nodes[s].copy for s in switches),
        crossbar_planes=crossbar_planes(topology) is not None,
        boxes_on_rails=boxes_on_rails(topology) is not None,
        one_switch_routes=one_switch_routes(topology),
        slot_grid_fits=bool(switches) and slot_eligible(topology))


@dataclass(frozen=True)
class Plan:
    """One row of the table: its name, the traits it needs (in words and as a test) and the stages it runs."""

    name: str
    when: str
    stages: str
    fits: Callable[[FabricTraits], bool]


def _grid_first(t: FabricTraits) -> bool:
    return (t.switched and not t.buffered and t.slot_grid_fits and not t.one_switch_routes
            and tuning.SLOTS_AUTO_MAX_GPUS < t.gpus <= tuning.GRID_FEW_TREES_MAX_GPUS)


def _tight_grid(t: FabricTraits) -> bool:
    return (t.switched and not t.buffered and t.slot_grid_fits and t.one_switch_routes
            and tuning.SLOTS_AUTO_MAX_GPUS < t.gpus <= tuning.PACKED_GRID_MAX_GPUS)


PLANS: tuple[Plan, ...] = (
    Plan("crossbar planes", "every switch is a crossbar plane: cabled to every GPU and to nothing else (an NVSwitch "
         "box, NVL72)",
         "the closed form: one star per root split over the planes by bandwidth, one shift per plane per slot, no "
         "trees packed (AllGather of every GPU and its mirror; where it ends over "
         f"{tuning.CROSSBAR_ENOUGH:g} x the limit, the next plan that fits)",
         lambda t: t.crossbar_planes),
    Plan("boxes on rails", "every switch is a crossbar plane of one box or a rail joining GPU j of every box "
         "(NVSwitch boxes on rails, dgxh100:boxes=N)",
         "the closed form: every shard over its rail to the other boxes and relayed there over the box's planes "
         "(some also forwarded over a second rail, so rails and planes end together), "
         "one shift per slot on rails and planes, no trees packed (AllGather of every GPU and its mirror; where it "
         f"ends over {tuning.CROSSBAR_ENOUGH:g} x the limit, the next plan that fits)",
         lambda t: t.boxes_on_rails),
    Plan("direct links", "no switch: GPUs cabled to GPUs",
         "one ring tried first; packed trees booked first come on the links, deep trees first and a wider "
         "look-ahead where that ends over the limit, twice the pieces where it ends over "
         f"{tuning.MORE_PIECES_ABOVE:g} x", lambda t: not t.switched),
    Plan("switch queues", "every switch has a buffer",
         "packed trees booked first come, a chunk waiting in a switch's queue for its out-link (no ring: queues "
         "keep streams apart)", lambda t: t.buffered),
    Plan("grid first", f"bufferless switches, up-links alike, {tuning.SLOTS_AUTO_MAX_GPUS + 1}-"
         f"{tuning.GRID_FEW_TREES_MAX_GPUS} GPUs, routes through two switches or more (a dragonfly)",
         "one ring tried; a few balanced trees per root on the slot grid first; the packed trees' first-come "
         f"booking only where the grid ends over {tuning.GRID_FIRST_ENOUGH:g} x the limit", _grid_first),
    Plan("trees, then the tight grid", f"bufferless switches, up-links alike, {tuning.SLOTS_AUTO_MAX_GPUS + 1}-"
         f"{tuning.PACKED_GRID_MAX_GPUS} GPUs, every route through one switch",
         "one ring tried; packed trees booked first come (cut-through); where that ends over "
         f"{tuning.GRID_ENOUGH:g} x the limit, the same count of trees balanced on the tight slot grid",
         _tight_grid),
    Plan("trees, then the grid", f"bufferless switches, up-links alike, up to {tuning.SLOTS_AUTO_MAX_GPUS} GPUs",
         "one ring tried; packed trees booked first come (cut-through); where that ends over "
         f"{tuning.SLOTS_ABOVE:g} x the limit, balanced few trees and then the packed trees on the slot grid, the "
         "faster kept",
         lambda t: t.switched and not t.buffered and t.slot_grid_fits and t.gpus <= tuning.SLOTS_AUTO_MAX_GPUS),
    Plan("trees, cut-through", "bufferless switches otherwise (up-links differ, or beyond the grid's sizes)",
         "one ring tried; packed trees booked first come (cut-through), sparing links between bufferless switches "
         f"and twice the pieces where that ends over {tuning.CROSSING_ABOVE:g} / {tuning.MORE_PIECES_ABOVE:g} x "
         "the limit", lambda t: True),
)


def choose_plan(traits: FabricTraits, skip: tuple[str, ...] = ()) -> Plan:
    """The first row of ``PLANS`` whose traits the fabric has (``skip``: rows ruled out, e.g. a closed form that
    ended too far from the limit)."""
    return next(plan for plan in PLANS if plan.name not in skip and plan.fits(traits))


def plan_note(plan: Plan, traits: FabricTraits, skipped: tuple[str, ...] = ()) -> str:
    """The note every schedule carries: the plan taken and why."""
    passed = f" ({', '.join(skipped)} fit but ended too far from the limit)" if skipped else ""
    return f"plan '{plan.name}'{passed}: {traits.words()}; {plan.stages}"


def explain(traits: FabricTraits, taken: Plan) -> list[str]:
    """The whole table, each row with whether this fabric has its traits (``--opt explain=true``)."""
    lines = [f"plan table (first row that fits wins; this fabric: {traits.words()}):"]
    for i, plan in enumerate(PLANS, 1):
        verdict = "TAKEN" if plan is taken else "fits" if plan.fits(traits) else "no"
        lines.append(f"{i}. {plan.name} [{verdict}] when {plan.when}")
    return lines
