"""forestcoll's tuning: every threshold and count the stages read, each beside the measurement that set it.

One place, so that a newcomer sees what is tuned and a test can move a threshold (``monkeypatch.setattr(tuning,
...)``); the stages read the ones tests move as ``tuning.NAME`` (at call time), the rest by name.
"""

from __future__ import annotations

LOOKAHEAD = 32  # waiting chunks a free link considers (cut-through): the most urgent that can start soonest
WIDE_LOOKAHEAD = 256  # ... and, where that ends over WIDE_ABOVE x the limit, this many (the faster kept)
WIDE_ABOVE = 1.03  # random two-box fabric (odd3 in bench/limit.py --odd, deep first): 1.064 -> 1.049; rfs3d no better
PIECE_COUNTS = (1, 2, 4, 8, 16, 32)
MIN_PIECES = 2  # even a big fabric pipelines each tree in two pieces
MORE_PIECES_ABOVE = 1.03  # a schedule this far over the limit with transfers to spare tries twice the pieces
ROOTED_TREE_COUNTS = (16, 32)  # one root needs many trees to use all its out-links
PACKING_SHARE = 0.5  # under a time limit, a further tree count is packed only if it ends within this share of it
_SEPARATION = 1e-9  # s between two partial sums of one chunk at a copy switch (far above the simulator's tolerance)
REROUTE_PASSES = 8
STALE_PASSES = 2  # beyond EXACT_TREES_UP_TO GPUs re-laying stops after this many passes without a better packing
STEEPER = 1.3  # each re-laying pass weighs the busiest links more (annealing)
MAX_TRANSFERS = 200_000  # the automatic piece count keeps a schedule below this many transfers (64-GPU tori: 4 pieces, 1.044 x the limit instead of 2 pieces, 1.069 x)
STEEPNESS = 8.0  # link length = exp(STEEPNESS * load / limit) / bandwidth
SLOTS_ABOVE = 1.03  # first-come booking this far over the limit: the slot grid is tried too
DEEP_FIRST_ABOVE = 1.01  # pipelining by chunk index ends this far over the limit: deep trees first is tried too
DEEP_FIRST_BELOW = 1.25  # ... and no further (railclos ReduceScatter's mirror: by index 1.180, deep first 1.004)
WIDE_BELOW = 1.1  # a wider look-ahead only below this: further off, crossbar conflicts, not the order, hold it back
LATENCY_ABOVE = 1.5  # packed trees this far over the limit (small sizes): shortest-path trees are tried
SLOTS_AUTO_MAX_GPUS = 32  # beyond, the grid runs only when asked: a matching per slot over 64 senders costs
# minutes (8x8 leaf-spine AllGather 1.084 -> 1.073 x, 14 s -> 2 min; dgx2:chassis=4 100 s, not kept)
SLOT_PIECES = (4,)  # pieces per tree on the slot grid (alpha per slot: few, large pieces; 8 rarely better)
SLOT_MAX_OVERHEAD = 0.25  # a slot's alpha over its bytes' time beyond which the grid is not tried
RING_PASSES = 4  # re-laying passes of a ring's routes while a link is over the limit
RING_HOP_COST = 0.1  # a ring route's length per hop, over a link's bandwidth: detours are not free
RING_PIECES = (8, 16, 32, 64)  # pieces of a root's share on a ring (the last piece's trip round it is the overhead)
RING_MIN_PIECES = 4  # even beyond MAX_TRANSFERS: with 2, a piece's trip to the next GPU outlasts a level's sends
# (256-GPU leaf-spine AllGather 1.031 x the limit; 4 pieces, 555,000 transfers: 1.002 x in 11 s)
RING_CONGESTION_SLACK = 0.01  # a ring this far over the limit's bandwidth is not pipelined at all
RING_ENOUGH = 1.01  # a ring ending this close to the limit is kept without packing trees (fat trees, leaf-spines)
RING_ENOUGH_LARGE = 1.05  # beyond EXACT_TREES_UP_TO GPUs (2-4 trees grown Prim's way end 1.07-1.19 x there)
RING_BOOKING = ("one ring through every GPU (each GPU streams to one successor), pipelined level by level: a GPU "
                "sends its own pieces first, then each predecessor's as they arrive")
BALANCE_MOVES = 200  # tree edges moved off the busiest links at most (dragonfly mirror, 4 trees: 22)
GRID_TREES = 4  # the slot grid also tries this few trees per root, balanced to the limit, deep trees first ...
GRID_PIECES = 8  # ... in this many pieces each (dragonfly ReduceScatter 1.080 -> 1.042 x the limit), or fewer ...
GRID_SLOT_ALPHA = 0.03  # ... where alpha would take more of a slot than this (64-GPU dragonfly AllGather: 8 pieces,
# alpha 5 % of a slot, 1.062 x the limit; 4 pieces, 2.6 %, 1.042 x; the 32-GPU one keeps 8 pieces at 2.6 %)
GRID_FEW_TREES_MAX_GPUS = 64  # beyond SLOTS_AUTO_MAX_GPUS and up to this, the automatic choice puts only the
# balanced few trees on the grid, and only where routes cross two switches or more (a dragonfly), not the packed ones
GRID_ENOUGH = 1.05  # balanced few trees ending this close to the limit: the packed trees are not put on the grid
# (and, further from it, the balanced trees are booked again in piece waves, the faster kept)
GRID_HOP_COST = 0.5  # where the grid goes first, the balanced trees are packed with this price per link crossed
# first (over the bandwidth, against 1 for the busiest link): a measured setting, 0.3-2 gave the same routes
GRID_FEWER_TREES = 2  # ... and, where neither 4 priced trees nor 4 unpriced in piece waves end within GRID_ENOUGH, 2
PACKED_GRID_MAX_GPUS = 64  # beyond SLOTS_AUTO_MAX_GPUS and up to this, where every route crosses one switch and
# first-come booking ends over GRID_ENOUGH x the limit, the packed trees' count goes on the tight grid balanced
# (``_packed_trees_tight_grid``; rfs3d:dims=2x4x8 ReduceScatter: first come 1.057 x, 8 balanced trees 1.041 x)
TIGHT_GRID_BOOKING = ("routes through switches booked cut-through on a slot grid of an up-link's bytes' time (every "
                      "route crosses one switch, so hops stay aligned and no slot pays alpha), each slot's senders "
                      "matched together")
GRID_FIRST_ENOUGH = 1.15  # where the balanced few trees go on the grid first (``_few_trees_grid_only``), ending this
# close to the limit they are kept without packing 8 trees for first-come booking (64-GPU dragonflies, 2026-11-27:
# first come 1.12-1.37 x the limit, the grid 1.04-1.13 x; the packing and its booking were a third of the time)
MORE_TREES = 24  # trees per root also tried where 8 and 12 leave the packing over MORE_TREES_ABOVE x the limit ...
MORE_TREES_ABOVE = 1.02  # (shares of 1/8 or 1/12 cannot split a 12.5 GB/s NIC's load exactly: odd2 in bench/limit.py
MORE_TREES_UP_TO = 16  # --odd packs at 1.042 with 8 or 12 trees, 1.007 with 24) on fabrics of this many GPUs at most
CROSSING_SHARE = 0.9  # of a bufferless switch -> switch link's bandwidth the packing may plan on (see spare_crossings)
CROSSING_ABOVE = 1.05  # first-come booking this far over the limit: trees sparing such links are packed too ...
CROSSING_LIMIT_COST = 1.02  # ... where the limit with those links at that share is at most this much higher (the
# MI250 two-box: 1.008; where those links bind, as a dragonfly's global cables do, sparing them cannot help)
STARS_NOTE = "one star per root (every GPU sends to every other itself), routes spread over parallel switches"
SPREAD_NOTE = "each tree's routes spread over parallel switches (the closure alone put a tree's edges on one)"
STARS_GRID_MAX_GPUS = 72  # stars go on the tight slot grid up to this many GPUs (``_stars_grid``; NVL72)
STARS_ENOUGH = 1.02  # stars with spread routes this close to the limit: no spread trees are packed
SPREAD_ABOVE = 1.05  # a packing this far over the limit where no switch copies: trees with spread routes are tried
CROSSBAR_ENOUGH = 1.05  # the closed form over crossbar planes is kept where it ends this close to the limit
EXACT_TREES_UP_TO = 64  # GPUs; beyond, trees are grown Prim's way (within 0.5 % of the cheapest, 10-25 x faster at 256)
