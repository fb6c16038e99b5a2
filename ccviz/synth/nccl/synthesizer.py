"""``-a nccl``: the schedule NCCL would run here, chosen by NCCL's tuner and judged by the simulator.

The tuner (``ccviz.synth.nccl.tuner``) estimates every algorithm+protocol the way NCCL does and picks the
fastest (``--opt algo=..``/``proto=..`` force one); the schedule is then built as NCCL runs it:

* ``ring``: one ring per channel (``ccviz.synth.nccl.channels``), each on its own switch plane or direct
  links, crossing boxes rail by rail; the data split evenly over the channels;
* ``tree``: NCCL's tree per channel: a chain through each box from the channel's rail GPU, the double binary
  tree of the boxes over those GPUs (``trees.py``);
* ``nvls``: NVLink SHARP inside one box (GPUs combine in the reducing NVSwitches, which multicast the sums);
  across boxes only where the rail leaves reduce too (NCCL enables NVLS across nodes with CollNet/SHARP);
* ``collnet``: the same schedule forced (NVLS in the box, SHARP at the rail leaves).

* ``nvlstree``: NVLS in each box, their rail GPUs exchanging box partials (two boxes) or reducing and
  broadcasting over NCCL's double binary tree of the boxes (more; ``nvlstree.py``). Beyond two boxes the
  tuner leaves it out unless forced: in the simulator's in-order link service the schedule reaches 0.6-0.75
  of NCCL's modelled rate (``--opt algo=nvlstree`` builds it and says so);
* ``pat``: AllGather / ReduceScatter with one GPU per node, where NCCL enables it (``pat.py``); forced
  elsewhere, one line naming where NCCL uses it.
"""

from __future__ import annotations

import dataclasses

from ccviz.errors import CcvizError
from ccviz.model.collectives import Collective, make_collective
from ccviz.model.link_model import LinkModel, declared, effective_topology
from ccviz.model.routing import ring_order as routing_ring_order
from ccviz.model.schedule import Schedule
from ccviz.model.topology import Topology
from ccviz.synth.classic import DoubleBinaryTree, Ring
from ccviz.synth.nccl import pat
from ccviz.synth.nccl.channels import Boxes, ChannelLayout, channel_count, ring_order, scaleup_switches
from ccviz.synth.nccl.chunking import nvls_pipeline
from ccviz.synth.nccl.nvlstree import nvls_tree
from ccviz.synth.nccl.options import NCCL_COLLECTIVES, NcclOptions
from ccviz.synth.nccl.readiness import finish_s
from ccviz.synth.nccl.trees import plan_allreduce
from ccviz.synth.nccl.tuner import Estimate, choose, estimates, read_fabric
from ccviz.synth.registry import SynthOptions

# NCCL's tree across boxes is a chain inside each box and a double binary tree over the boxes (``trees.py``
# builds it so). While ccviz laid the textbook tree over all ranks there, its box-crossing edges shared a few NICs
# (2x DGX A100 at 16 MiB: 39 GB/s busbw, ring at 32 MiB 162: busbw fell as the size grew) and the automatic
# choice left tree out across boxes; with NCCL's placement it is weighed again (109 GB/s at 16 MiB, rising).
ROOTED_PIECES = 8  # Broadcast / Reduce: pieces per channel, so a chain of n GPUs pipelines
MAX_TRANSFERS = 600_000  # channels are cut down (never below one per switch plane) to stay under this


@dataclasses.dataclass(frozen=True)
class Choice:
    """What NCCL's tuner chose for one collective, before any schedule is built (cheap: no synthesis)."""

    pick: Estimate
    menu: list[Estimate]
    boxes: Boxes
    channels: int
    model: LinkModel
    pipeline: dict[str, int] | None  # NVLS's chunk on one NVLink domain (``chunking.nvls_pipeline``)
    forced: bool

    @property
    def shape(self) -> tuple:
        """What the schedule's shape depends on besides the size: sizes with one shape build the same schedule
        with chunks scaled (``ccviz.runs.measured`` interpolates between them)."""
        return (self.pick.algo, self.pick.proto, self.channels,
                None if self.pipeline is None else self.pipeline["bytes"])


TUNER_KEY = "nccl_tuner"  # meta: the rates NCCL's tuner saw before a calibration moved them (ccviz calibrate)


def tuner_view(topology: Topology, model: LinkModel) -> LinkModel:
    """The link model NCCL's tuner reads: the fabric's, or on a calibrated fabric its rates as built (NCCL
    chooses by its own constants on the machine the log came from, whatever its links really sustain)."""
    view = topology.meta.get(TUNER_KEY)
    if not isinstance(view, dict) or not isinstance(view.get("efficiency"), dict):
        return model
    return dataclasses.replace(model, efficiency={**model.efficiency, **view["efficiency"]})


def nccl_choice(topology: Topology, collective: Collective, options: SynthOptions) -> Choice:
    """NCCL's tuner's choice of algorithm and protocol (or the forced one) for ``collective``."""
    settings = options.settings(NcclOptions)
    forced, proto = (None if v == "auto" else v for v in (settings.algo, settings.proto))
    model = declared(topology) or LinkModel(name="nccl-constants")
    ranks = tuple(collective.ranks)
    boxes = Boxes.of(topology, ranks)
    channels = settings.channels or channel_count(topology, boxes)
    seen = tuner_view(topology, model)
    fabric = read_fabric(topology, ranks, list(boxes.boxes), channels, seen, _ring_GBps(topology, boxes, seen,
                                                                                        channels))
    reduce_factor = float((topology.meta.get(TUNER_KEY) or {}).get("reduce_factor", 1.0))
    if fabric.nvls_GBps and reduce_factor > 0:
        fabric = dataclasses.replace(fabric, nvls_GBps=fabric.nvls_GBps / reduce_factor)
    menu = estimates(fabric, collective.name, collective.size_bytes)
    if forced != "nvlstree" and len(boxes.boxes) > 2:  # see nvlstree.py: built, but only on request
        menu = [e for e in menu if e.algo != "nvlstree"]
    if forced == "pat" and not pat.enabled(collective, boxes):
        raise pat.refusal(collective, boxes)
    if forced == "collnet":
        if not fabric.sharp:
            raise CcvizError("algo: collnet needs rail leaves that reduce (SHARP), e.g. dgxh100:nodes=2,sharp=true",
                             "algo")
        pick = Estimate("collnet", "simple", 0.0, 0.0, 0.0)
    else:
        pick = choose(menu, forced, proto)
    if pick is None:
        raise CcvizError(f"algo: NCCL has no {forced or 'algorithm'}{'/' + proto if proto else ''} "
                         f"for {collective.name} on {topology.name}; it offers "
                         f"{', '.join(sorted({e.algo + '/' + e.proto for e in menu}))}", "algo")
    pipeline = None
    if pick.algo in ("nvls", "collnet") and len(boxes.boxes) == 1:
        pipeline = nvls_pipeline(collective.size_bytes, boxes.per_box, 1, fabric.nvls_GBps,
                                 topology.meta.get("system"))
    return Choice(pick, menu, boxes, channels, model, pipeline, bool(forced or proto))


def synthesize_nccl(topology: Topology, collective: Collective, options: SynthOptions) -> Schedule:
    """NCCL's choice for ``collective`` on ``topology``, built and named (see the module docstring)."""
    choice = nccl_choice(topology, collective, options)
    pick, model = choice.pick, choice.model
    if pick.algo in ("nvls", "collnet"):
        schedule = _in_network(topology, collective, options, choice.pipeline)
    elif pick.algo == "nvlstree":
        schedule = nvls_tree(topology, collective, model, options)
    elif pick.algo == "pat":
        schedule = pat.build(topology, collective)
    else:
        schedule = _channels(topology, collective, choice.boxes, choice.channels, pick.algo)
    schedule.options.update(protocol=pick.proto, nccl_algo=pick.algo)
    ranked = sorted(choice.menu, key=lambda e: e.time_s)
    why = "forced" if choice.forced else "NCCL's tuner picks the fastest estimate"
    schedule.notes.insert(0, f"nccl: {pick.algo}/{pick.proto} ({why}); "
                             + "; ".join(e.text() for e in ranked[:4]))
    schedule.estimated_finish_s = (pick.time_s + model.launch_us * 1e-6) if pick.time_s else None
    return schedule


def _ring_GBps(topology: Topology, boxes: Boxes, model: LinkModel, channels: int) -> float:
    """A GPU's sustained scale-up rate over the links its channels use."""
    first = boxes.boxes[0][0]
    if scaleup_switches(topology, first):
        used = {link.dst: link.bandwidth_GBps for link in topology.out_links[first]
                if topology.nodes[link.dst].kind == "switch" and model.medium(topology, first, link.dst) == "scaleup"}
        return sum(used.values()) * model.efficiency["scaleup"]
    peers = sorted(link.bandwidth_GBps for link in topology.out_links.get(first, [])
                   if topology.nodes[link.dst].kind == "gpu")
    return sum(peers[-min(channels, len(peers)):]) * model.efficiency["scaleup"] if peers else 1.0


def channeled_ring(topology: Topology, collective: Collective, options: SynthOptions) -> Schedule:
    """The classic ``ring``: over NCCL's channels where the GPUs sit on parallel switch planes (one chunk per
    rank would ride one plane), elsewhere the textbook ring."""
    if collective.chunks_per_rank == 1:
        channeled = ring_over_channels(topology, collective, Ring.name)
        if channeled is not None:
            return channeled
    return Ring()(topology, collective, options)


def channeled_dbt(topology: Topology, collective: Collective, options: SynthOptions) -> Schedule:
    """The classic ``dbt``: AllReduce across boxes placed as NCCL places its tree (chains in the boxes, the double
    binary tree across them, over NCCL's channels) where that ends sooner than the textbook's two trees over all
    GPUs, which keep small sizes (a chain through a box costs a hop latency per GPU; two trees over all GPUs
    cost log2 N); one box, other collectives or --chunks 2+: the textbook dbt."""
    boxes = Boxes.of(topology, tuple(collective.ranks))
    textbook = DoubleBinaryTree()(topology, collective, options)
    if collective.name != "allreduce" or collective.chunks_per_rank != 1 or len(boxes.boxes) < 2:
        return textbook
    placed = _channels(topology, collective, boxes, channel_count(topology, boxes), "tree")
    placed_s, textbook_s = finish_s(placed), finish_s(textbook)
    if textbook_s <= placed_s:
        textbook.notes.append(f"dbt: the two trees over all GPUs end sooner here ({textbook_s * 1e6:.4g} us) than "
                              f"NCCL's placement across the {len(boxes.boxes)} boxes ({placed_s * 1e6:.4g} us: "
                              "chains through each box, a hop latency per GPU)")
        return textbook
    placed.algorithm = DoubleBinaryTree.name
    placed.notes = [f"dbt across {len(boxes.boxes)} boxes, placed as NCCL places its tree: "
                    f"{placed.collective.chunks_per_rank} channels, each a chain through every box from the "
                    "channel's rail GPU and the double binary tree of the boxes over those GPUs (ends at "
                    f"{placed_s * 1e6:.4g} us, the textbook's two trees over all GPUs at {textbook_s * 1e6:.4g} us); "
                    "--chunks 2+ lays the textbook dbt as given"]
    return placed


def ring_over_channels(topology: Topology, collective: Collective, name: str) -> Schedule | None:
    """The classic ring as a runtime runs it on a box of parallel switch planes: over NCCL's channels, every
    plane carrying its share (None where the GPUs have one plane or the collective is not NCCL's)."""
    boxes = Boxes.of(topology, tuple(collective.ranks))
    if len(scaleup_switches(topology, boxes.boxes[0][0])) < 2 or collective.name not in NCCL_COLLECTIVES:
        return None
    channels = channel_count(topology, boxes)
    schedule = _channels(topology, collective, boxes, channels, "ring")
    schedule.algorithm = name
    schedule.notes = [f"{name}: {schedule.collective.chunks_per_rank} rings (channels), one chunk per rank each, "
                      "spread over every NVSwitch plane as NCCL runs them (one chunk per rank would ride one "
                      "plane); --chunks 2+ lays the textbook ring as given"]
    return schedule


def _refined(topology: Topology, collective: Collective, per_rank: int) -> Collective:
    whole = tuple(collective.ranks) == tuple(topology.gpus)
    return make_collective(collective.name, topology if whole else list(collective.ranks), collective.size_bytes,
                           per_rank, collective.root)


def _channels(topology: Topology, collective: Collective, boxes: Boxes, channels: int, algo: str) -> Schedule:
    """Ring or tree over ``channels`` channels: chunk index c of every rank travels on channel c."""
    n = len(collective.ranks)
    hops = 2  # every ring hop crosses one switch (NVSwitch plane or rail leaf): two transfers
    steps = 2 * (n - 1) if collective.name == "allreduce" else n
    step = boxes.per_box if len(boxes.boxes) > 1 and channels % boxes.per_box == 0 else 1  # keep NICs even
    while channels > step and channels * n * steps * hops > MAX_TRANSFERS:
        channels -= step
    rooted = collective.name in ("broadcast", "reduce")  # a chain per channel: its data pipelined in pieces
    pieces = ROOTED_PIECES if rooted and channels * ROOTED_PIECES * n * hops <= MAX_TRANSFERS else 1
    refined = _refined(topology, collective, channels * pieces)
    layout = ChannelLayout(topology, refined, {c.id: c.index % channels for c in refined.chunks}, channels)
    notes = [f"nccl: {algo} over {channels} channel(s)" + (f", {pieces} pieces each" if pieces > 1 else "")]
    if algo == "ring":
        ring = Ring()
        first = boxes.boxes[0][0]
        direct = not scaleup_switches(topology, first)
        complete = all((first, g) in topology.links for g in boxes.boxes[0] if g != first)
        physical = None if not direct or complete else routing_ring_order(topology, refined.chunk_bytes,
                                                                          group=list(refined.ranks))[0]
        for c in range(channels):
            order = physical or ring_order(boxes, c, direct)
            ring.lay_direction(layout, order, [ch for ch in refined.chunks if ch.index % channels == c])
    else:
        if collective.name != "allreduce":
            raise CcvizError(f"algo: NCCL's tree runs allreduce only, not {collective.name}", "algo")
        notes += plan_allreduce(layout, refined, boxes, channels, not scaleup_switches(topology, boxes.boxes[0][0]))
    transfers = layout.transfers()
    rounds, labels = layout.numbered_rounds()
    return Schedule(topology, refined, transfers, "nccl", {"channels": channels}, status="heuristic", notes=notes,
                    rounds=rounds, round_labels=labels)


def _in_network(topology: Topology, collective: Collective, options: SynthOptions,
                pipeline: dict[str, int] | None) -> Schedule:
    """NVLS (one box) or NVLS with SHARP leaves (CollNet): the in-network schedule of ``ccviz.synth.inc``,
    declaring NCCL's NVLS chunk and pipelines on one NVLink domain (``chunking.nvls_pipeline``: the link
    model's chunk share); across boxes NCCL's NVLS heads are its NICs, not modelled here: no chunk declared."""
    from ccviz.synth.inc import synthesize_inc

    plain = SynthOptions(time_limit=options.time_limit, stop=options.stop, progress=options.progress)
    model = declared(topology)
    share = model.chunk_share(pipeline["bytes"], pipeline["full"]) if model is not None and pipeline else 1.0
    planned = synthesize_inc(effective_topology(topology, "simple", share=share) if model else topology, collective,
                             plain)
    schedule = dataclasses.replace(planned, topology=topology, algorithm="nccl")
    if pipeline:
        schedule.options["nccl_chunk"] = dict(pipeline)
    if model is not None:  # timed on the fabric the judge uses: it verifies these times as they stand
        schedule.options["planned_on"] = "hardware"
    if model is not None and pipeline:
        schedule.notes.append(f"nccl: NVLS moves {pipeline['bytes'] // 1024} KiB chunks at this size over "
                              f"{pipeline['pipelines']} pipelines (channels x heads, NCCL's calcCollChunking): "
                              f"{share:.3f} of its rate at the full {pipeline['full'] // 1024} KiB")
    return schedule
