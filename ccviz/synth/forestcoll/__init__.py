"""ForestColl: spanning-tree packing that reaches the fabric's limit, pipelined in pieces.

Zhao et al., "ForestColl: Throughput-Optimal Collective Communications on Heterogeneous Network
Fabrics" (arXiv 2402.06787). The AllGather limit (``ccviz.bounds.limit``) is reached by k out-trees rooted
at every GPU, each carrying 1/k of its root's shard, packed so that no link carries more than the
limit allows. This module packs them and schedules them:

* Packing. Switches are taken out the way ForestColl's edge splitting does: a tree edge u -> x is a
  GPU-to-GPU route through switches (``RouteClosure``), so a switch never has to copy. Trees are
  added by multiplicative weights: each new tree is the cheapest arborescence (Chu-Liu/Edmonds; beyond
  ``EXACT_TREES_UP_TO`` GPUs grown Prim's way, ``greedy_arborescence``) under link lengths that grow exponentially with the link's load relative to the limit; then every tree is
  ripped up and re-laid eight times with ever steeper lengths. ForestColl builds an exactly optimal
  packing with integer capacities; this is the practical approximation, reported as the packing's
  congestion (1.0 = at the limit). ``--opt trees=k`` fixes k; by default k = 8 and 12 are tried up to
  32 GPUs (fewer beyond) and the less congested kept.
* Pipelining (``pipeline``). Each tree's share is cut into pieces (the collective's chunks: k x pieces
  per rank) and sent down its tree as pieces arrive; a GPU's free out-link sends its most urgent
  waiting piece. A piece reaching a switch whose out-link is busy waits in the switch's queue and
  leaves once, where switches have a buffer (``Node.buffer``); elsewhere, or with
  ``--opt switch_queue=false``, routes are booked cut-through, a free link sending the most urgent
  of its next ``LOOKAHEAD`` waiting pieces that can start soonest, and other tree edges of the same
  piece riding along where they branch off at a copy switch (the sender's link carries it once).
  ``--chunks C`` (C > 1) fixes the chunks per rank; by default as many pieces as keep the schedule
  under ``MAX_TRANSFERS`` (more pieces never hurt in this link model: alpha is paid per hop).

* One ring (``TreePacker.ring``). Where every GPU's one cable is saturated both ways (fat trees,
  leaf-spines), branching trees make streams meet at a GPU's in-link; one path per root along a ring
  through every GPU, pipelined level by level, streams each GPU to one successor. Tried first for the
  collectives of every rank and kept alone where it ends within ``RING_ENOUGH`` x the limit.
* Spread routes and stars (``TreePacker.spread_routes``, ``TreePacker.stars``). Where no switch copies (a
  reduction's mirror) and the packing stays over ``SPREAD_ABOVE`` x the limit, each parent's edges are assigned
  to its parallel switches together instead of all taking the one the closure found cheapest (NVL72: 18 chips),
  and one star per root is tried first; stars go on the tight slot grid up to ``STARS_GRID_MAX_GPUS``.
* Balance (``TreePacker.balance``). Wherever the slot grid runs it also tries ``GRID_TREES`` trees per
  root with tree edges moved off the busiest links down to the limit: a reduction's mirror saturates
  every GPU link, and one up-link a few edges over holds the whole grid back. Between 33 and 64 GPUs,
  where routes cross two switches (a dragonfly), these are the only trees put on the grid by default, and
  they go first (``_grid_first``: packed with a price per link crossed, so routes take the fewest links
  among equally loaded ones, then unpriced in piece waves, then two priced trees per root, while the
  fastest ends over ``GRID_ENOUGH`` x the limit): the packed trees' first-come booking runs only where the
  grid ends over ``GRID_FIRST_ENOUGH`` x the limit or is refused.
* Switch sums (``_with_switch_sums``). Where the fabric's switches reduce (NVLS, SHARP), a ReduceScatter,
  AllReduce or Reduce also books the in-switch schedule ``-a inc`` makes, the faster kept.

ReduceScatter schedules the mirrored AllGather on the reversed fabric and turns it around in time
(``reduction_schedule``; partial sums run up the trees where a switch rule makes that mirror
acausal); AllReduce is ReduceScatter then AllGather (``concatenate``); Broadcast packs 16 or 32
trees of one root; Reduce is the mirror of a Broadcast as ReduceScatter is of an AllGather.
The simulator judges the result like every other algorithm's.

The stages, one module each (read them in this order):

* ``plan``: which plan a fabric takes, from a declared table of its traits (``--opt explain=true`` prints it).
* ``crossbar``: the closed form over crossbar planes (a box whose GPUs are cabled to parallel switches only).
* ``rails``: the closed form for such boxes joined by rail switches (shards relayed from a rail into a box).
* ``packing``: the tree packing, the limit's certificate (trees, rings, stars, balancing).
* ``routing``: which switch paths tree edges take and which packing is kept (``best_packing``).
* ``booking``: pipelined booking of pieces on link calendars, first come first served.
* ``grid``: the slot grid, where every slot's senders are matched together.
* ``copies``: one copy collective end to end (``copy_schedule``), the notes.
* ``collectives``: reductions mirrored, AllReduce composed, switch sums (``synthesize_forestcoll``).
* ``tuning``: every threshold, beside the measurement that set it.

The package itself exports the entry points and the packing's types; every other name lives in (and is
imported from) the stage module that defines it, e.g. ``forestcoll.grid._deep_first_grid``,
``forestcoll.tuning.GRID_TREES`` (patch thresholds there: the stages read them from ``tuning``).
"""

from __future__ import annotations

from ccviz.synth.forestcoll import (
    booking,
    collectives,
    copies,
    crossbar,
    grid,
    packing,
    plan,
    rails,
    routing,
    tuning,
)
from ccviz.synth.forestcoll.booking import ordered_pipeline, pipeline
from ccviz.synth.forestcoll.collectives import reduction_schedule, synthesize_forestcoll
from ccviz.synth.forestcoll.copies import copy_schedule
from ccviz.synth.forestcoll.packing import Packing, Tree, TreePacker, move_edge
from ccviz.synth.forestcoll.plan import PLANS, choose_plan, fabric_traits
from ccviz.synth.forestcoll.routing import best_packing

__all__ = [
    "PLANS", "Packing", "Tree", "TreePacker", "best_packing", "booking", "choose_plan", "collectives", "copies",
    "copy_schedule", "crossbar", "fabric_traits", "grid", "move_edge", "ordered_pipeline", "packing", "pipeline",
    "plan", "rails", "reduction_schedule", "routing", "synthesize_forestcoll", "tuning",
]
