"""The catalog of the built-in synthesizers: what each is, which collectives it runs, what it takes.

Each entry names its code as ``"module:function"`` (imported on the first synthesis), so the
listing, ``ccviz list`` and the app's menus load no numpy, networkx or solver. Each algorithm's
specific options are one dataclass here, declared once: the registry checks ``--opt`` and
``SynthOptions.extra`` against it, the synthesizer reads it with ``options.settings(...)``,
``ccviz list`` prints it and the app draws its widgets from it. The textbook algorithms
(``ccviz.synth.classic``) take no options and register themselves.
"""

from __future__ import annotations

from dataclasses import dataclass

from ccviz.synth.options import AlgorithmOptions, option
from ccviz.synth.registry import Algorithm, register

# ----------------------------------------------------------------------------------------- TACOS
LINK_HOLDS = ("arrival", "serialization")
PATIENCE = ("on", "off", "alternate")
PICKS = ("spread", "random")


@dataclass(frozen=True)
class TacosOptions(AlgorithmOptions):
    """TACOS's matching rules (``ccviz.synth.tacos``)."""

    link_hold: str = option("arrival", "how long a route books its links: 'arrival' until its chunk lands (TACOS), "
                            "'serialization' for bytes/bandwidth only", choices=LINK_HOLDS)
    pick: str = option("spread", "which chunk a free link pulls: 'spread' one the rank's later free links cannot "
                       "bring (when it has one), 'random' any chunk its source holds", choices=PICKS)
    patience: str = option("on", "'off' is the paper's greedy, 'on' keeps slow links off chunks a faster route can "
                           "bring, 'alternate' tries both over the restarts", choices=PATIENCE)
    workers: int = option(1, "restarts run in this many processes (the best run wins, as sequentially)",
                          minimum=1, maximum=256)


# ----------------------------------------------------------------------------------------- MTEG
GROWTHS = ("interleaved", "sequential")


@dataclass(frozen=True)
class MtegOptions(AlgorithmOptions):
    """How MTEG grows its multicast trees (``ccviz.synth.mteg``)."""

    growth: str = option("interleaved", "'interleaved' grows all trees together in time order (the tree furthest "
                         "behind first), 'sequential' builds one tree after another as in the paper",
                         choices=GROWTHS)


# ----------------------------------------------------------------------------------------- ForestColl
@dataclass(frozen=True)
class ForestcollOptions(AlgorithmOptions):
    """ForestColl's packing and pipelining (``ccviz.synth.forestcoll``)."""

    trees: int | None = option(None, "trees per root (auto: 8 and 12 tried up to 32 GPUs, fewer beyond, the less "
                               "congested packing kept)", minimum=1, maximum=256)
    pieces: int | None = option(None, "pieces each tree's share is cut into (auto: as many as keep the schedule "
                                "under 200,000 transfers; --chunks also fixes them)", minimum=1, maximum=100_000)
    switch_queue: bool | None = option(None, "chunks may wait in a switch's queue for its out-link (auto: when every "
                                       "switch has a buffer); false books routes cut-through")
    slots: bool | None = option(None, "book cut-through routes on a slot grid, each slot's senders matched together "
                                "(auto: up to 32 GPUs, tried beside first-come booking where that ends over 1.03 x "
                                "the limit and the GPUs' up-links are alike, 4 trees per root balanced to the limit "
                                "first, the faster kept; 33-64 GPUs where every route crosses one switch and first "
                                "come ends over 1.05 x, the packed trees' count balanced on the tight grid); false: "
                                "first come, first served")
    ring: bool | None = option(None, "one ring through every GPU, each GPU streaming to one successor (auto: tried "
                               "first for allgather/reducescatter/allreduce where a ring is at most 1.01 x as "
                               "congested as the limit allows, kept alone where it ends within 1.01 x the limit, "
                               "else beside the trees, the faster kept); true: the ring alone")
    spare_crossings: bool | None = option(None, "pack trees for 0.9 of the bandwidth of links between two bufferless "
                                          "switches, which cut-through routes cannot keep full (auto: tried beside "
                                          "the full-bandwidth packing where that ends over 1.05 x the limit and "
                                          "loads such a link above 0.9, the faster kept); true: only those trees; "
                                          "false: never")
    switch_sums: bool | None = option(None, "where the fabric's switches reduce (NVLS, SHARP), reductions "
                                      "(reducescatter, allreduce, reduce) may sum in them, as the inc algorithm "
                                      "does. auto: book that schedule beside the trees summing at GPUs and keep "
                                      "the faster (the trees are skipped where it beats every schedule summing at "
                                      "GPUs); true: only the in-switch schedule (an error where no switch "
                                      "reduces); false: only trees summing at GPUs")
    explain: bool = option(False, "add forestcoll's plan table to the notes: every plan, the fabric traits it needs, "
                           "which fit this fabric and which was taken (the notes always name the plan taken)")


# ----------------------------------------------------------------------------------------- TE-CCL
REPLAYS = ("asap", "epoch")
MAX_VARIABLES = 250_000  # beyond this Pyomo + APPSI setup alone takes minutes


@dataclass(frozen=True)
class TecclOptions(AlgorithmOptions):
    """TE-CCL's model and replay (``ccviz.synth.teccl``)."""

    replay: str = option("asap", "how the simulator replays the epochs: 'asap' each transfer starts as soon as its "
                         "chunk and link are ready (a runtime like MSCCL), 'epoch' none before its epoch opens "
                         "(TE-CCL's epoch-synchronous view)", choices=REPLAYS)
    buffer_limit: int | None = option(None, "a GPU holds at most this many received chunks at any epoch "
                                      "(auto: unlimited)", minimum=1)
    max_variables: int = option(MAX_VARIABLES, "largest model built, in variables (larger horizons are skipped "
                                "as too large to solve in time)", minimum=1)


@dataclass(frozen=True)
class TecclAstarOptions(TecclOptions):
    """TE-CCL A*'s rounds (``ccviz.synth.teccl.astar``) on top of TE-CCL's options."""

    astar_round: int | None = option(None, "epochs committed per round (auto: 2 or the slowest link's epochs, "
                                     "whichever is more)", minimum=1, maximum=10_000)
    astar_horizon: int | None = option(None, "epochs each round looks ahead (auto: the round plus the largest "
                                       "link delay and a margin)", minimum=1, maximum=10_000)
    astar_greedy: bool = option(True, "also run the greedy continuation and keep the better; false measures the "
                                "rounds alone")


# ----------------------------------------------------------------------------------------- entries
EPOCH_OPTIONS = ("epoch", "epochs", "time_limit", "gap", "progress", "stop")
TECCL_COLLECTIVES = frozenset({"allgather", "broadcast", "alltoall", "gather", "scatter", "custom",
                               "reducescatter", "reduce", "allreduce"})

BUILT_IN = (
    Algorithm(
        "tacos", "ccviz.synth.tacos:synthesize_tacos",
        frozenset({"allgather", "broadcast", "reducescatter", "reduce", "allreduce"}),
        "TACOS (MICRO'24): greedy link-chunk matching on an event-driven time-expanded network; "
        "reductions by time reversal on the reversed topology",
        kind="heuristic", options_used=("seed", "restarts", "time_limit", "progress", "stop"), options=TacosOptions,
    ),
    Algorithm(
        "mteg", "ccviz.synth.mteg:synthesize_mteg",
        frozenset({"allgather", "broadcast", "gather", "scatter", "alltoall", "custom", "reducescatter", "reduce",
                   "allreduce"}),
        "Multicast time-expanded graph: one Steiner tree (Takahashi-Matsuyama) per chunk in a slotted "
        "time-expanded graph, all trees grown together in time order on shared link calendars",
        kind="heuristic", options_used=("epoch", "restarts", "seed", "time_limit", "progress", "stop"),
        options=MtegOptions,
    ),
    Algorithm(
        "forestcoll", "ccviz.synth.forestcoll:synthesize_forestcoll",
        frozenset({"allgather", "reducescatter", "allreduce", "broadcast", "reduce"}),
        "ForestColl (arXiv 2402.06787): spanning trees packed up to the fabric's limit, switches turned into "
        "routes, each tree pipelined in pieces (one ring through every GPU where that streams better: fat trees, "
        "leaf-spines; on NVSwitch boxes, alone or on rails, a closed form without packing); reductions are the copy "
        "on the reversed fabric, mirrored in time",
        kind="heuristic", options_used=("time_limit", "progress", "stop"), options=ForestcollOptions,
    ),
    Algorithm(
        "teccl", "ccviz.synth.teccl:synthesize_teccl", TECCL_COLLECTIVES,
        "TE-CCL multi-commodity flow: MILP (copy) or LP, Pyomo + HiGHS, epoch-optimal with a certificate; "
        "on switches that reduce, partial sums added in the switch (AllReduce fused)",
        kind="optimal", options_used=EPOCH_OPTIONS, options=TecclOptions,
    ),
    Algorithm(
        "teccl-astar", "ccviz.synth.teccl:synthesize_teccl_astar", TECCL_COLLECTIVES,
        "TE-CCL A*: rounds of a few epochs solved as small MILPs, rewarding progress toward destinations",
        kind="heuristic", options_used=EPOCH_OPTIONS, options=TecclAstarOptions,
    ),
    Algorithm(
        "mcf", "ccviz.synth.alltoallv:synthesize_mcf_any", frozenset({"alltoall", "alltoallv"}),
        "AllToAll (and AllToAllv, a traffic matrix) along the flows of its exact limit (maximum concurrent flow LP "
        "on HiGHS): flows split into "
        "paths, every pair's data cut into chunks on its least loaded paths, booked hop by hop on link calendars",
        kind="heuristic", options_used=("seed", "time_limit", "progress", "stop"),
    ),
    Algorithm(
        "twophase", "ccviz.synth.alltoallv:synthesize_twophase", frozenset({"alltoall", "alltoallv"}),
        "FAST (arXiv 2505.09764) AllToAllv: balance each box's outgoing bytes over its GPUs on the fast links, "
        "one balanced exchange between boxes rail by rail, then delivery inside the box",
        kind="heuristic", options_used=("time_limit", "progress", "stop"),
    ),
)

for _algorithm in BUILT_IN:
    register(_algorithm)


# ----------------------------------------------------------------------------------------- INC (in-network)
def _register_inc() -> None:
    """``inc``: reduction inside switches that can (NVLS, SHARP); its options live beside its code."""
    from ccviz.synth.inc import INC_COLLECTIVES, IncOptions

    register(Algorithm(
        "inc", "ccviz.synth.inc:synthesize_inc", INC_COLLECTIVES,
        "In-network collectives (NVLS / SHARP): GPUs combine each chunk inside a reducing switch, which "
        "multicasts the sum back, pipelined chunk by chunk; rail leaves add across boxes",
        kind="heuristic", options_used=(), options=IncOptions,
    ))


_register_inc()


# ----------------------------------------------------------------------------------------- NCCL
def _register_nccl() -> None:
    """``nccl``: what NCCL would run here (its tuner's choice per size); options live beside its code."""
    from ccviz.synth.nccl.options import NCCL_COLLECTIVES, NcclOptions

    register(Algorithm(
        "nccl", "ccviz.synth.nccl.synthesizer:synthesize_nccl", NCCL_COLLECTIVES,
        "NCCL as it runs: ring over channels, double binary tree, NVLS, with LL/LL128/Simple, chosen per size "
        "by NCCL's tuner model (--opt algo=ring|tree|nvls|nvlstree|collnet|pat, proto=ll|ll128|simple force one)",
        kind="heuristic", options_used=("time_limit", "stop"), options=NcclOptions,
    ))


_register_nccl()
