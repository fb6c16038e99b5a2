"""The link rule: what one chunk costs on one link, in seconds and in epochs. Every timing decision
in ccviz (the simulator, every synthesizer, the bounds) reads it from here.

A send of ``nbytes`` on link u->v keeps a lane of the link busy for ``bytes / bandwidth``
(``LinkCost.busy``) and lands ``alpha + bytes / bandwidth`` after it starts (``LinkCost.delay``);
a hop out of a switch is charged less under ``Topology.switch_hop`` (``hop_charges``). Links
with several ``lanes`` serialize that many sends at once, first come first served
(``LaneBook``).

The epoch models (TE-CCL's epochs, MTEG's slots) cut time into one grid (``epoch_length``) and
round the same rule onto it (``EpochCost``): kappa epochs of serialization, alpha rounded up to
epochs, alpha ignored below ``ALPHA_IGNORED_BELOW`` epoch.

Tolerances: the simulator treats times within ``ABS_TOL + REL_TOL * |t|`` as equal (``tol``).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple, Protocol

from ccviz.errors import CcvizError
from ccviz.model.units import us_text


class Topology(Protocol):
    """What the link rule reads of a fabric (``ccviz.model.topology.Topology`` is one). A protocol, so
    that the topology can lean on this module without this module leaning back on it."""

    nodes: Mapping[int, Any]
    links: Mapping[tuple[int, int], Any]
    switch_hop: str

REL_TOL = 1e-9  # relative slack under which two simulated times are the same instant
ABS_TOL = 1e-13  # absolute slack (seconds) for times near zero
ALPHA_IGNORED_BELOW = 0.1  # epochs: TE-CCL drops alpha when alpha / tau is smaller
EPOCH_EPS = 1e-9  # rounding slack when a time is cut into whole epochs
MAX_ALPHA_EPOCHS = 200  # the paper lengthens the epoch when the smallest alpha exceeds this many epochs


def tol(t: float) -> float:
    """How far apart two simulated times near ``t`` may be and still count as the same instant."""
    return ABS_TOL + REL_TOL * abs(t)


# ---------------------------------------------------------------------------- seconds
def hop_charges(topology: Topology, src: int, dst: int) -> tuple[bool, bool]:
    """(alpha charged, serialization charged) on the hop src->dst under ``topology.switch_hop``."""
    if topology.switch_hop == "paid" or topology.nodes[src].kind != "switch":
        return True, True
    return topology.switch_hop == "teccl", False


def occupancy(topology: Topology, src: int, dst: int, nbytes: float) -> float:
    """Seconds a lane of the link is busy for one send of ``nbytes`` (under every switch rule)."""
    return topology.links[(src, dst)].serialization_s(nbytes)


def arrival_delay(topology: Topology, src: int, dst: int, nbytes: float) -> float:
    """Seconds from the start of a send to its arrival: alpha + bytes/bandwidth, minus what the rule skips."""
    link = topology.links[(src, dst)]
    alpha, serialization = hop_charges(topology, src, dst)
    return (link.alpha_s if alpha else 0.0) + (link.serialization_s(nbytes) if serialization else 0.0)


class LinkCost(NamedTuple):
    """One chunk on one link: start-to-arrival seconds, seconds a lane stays busy, and lanes."""

    delay: float
    busy: float
    lanes: int

    @property
    def over(self) -> float:
        """Seconds until the send is over: landed, and its lane free again."""
        return max(self.delay, self.busy)


def link_costs(topology: Topology, nbytes: float) -> dict[tuple[int, int], LinkCost]:
    """Every link's ``LinkCost`` for chunks of ``nbytes``, in ``topology.links`` order."""
    return {
        key: LinkCost(arrival_delay(topology, *key, nbytes), occupancy(topology, *key, nbytes), link.lanes)
        for key, link in topology.links.items()
    }


class LaneBook:
    """First come, first served lanes: when each link can take its next send, and booking it."""

    def __init__(self) -> None:
        self.free: dict[tuple[int, int], float | list[float]] = {}  # one lane: a time; several: a heap

    def free_at(self, key: tuple[int, int], lanes: int) -> float:
        """When the link (its first lane to free up) can take a send."""
        if lanes == 1:
            return self.free.get(key, 0.0)
        return min(self.free.setdefault(key, [0.0] * lanes))

    def earliest_start(self, ready: float, hops: Iterable[tuple[tuple[int, int], int, float]]) -> float:
        """The first moment from ``ready`` at which every hop (link, lanes, its start's offset from the first
        hop's start) finds its link free when the chunk gets there: how a chunk crosses bufferless switches
        in one go (forwarded on arrival, never held)."""
        start = ready
        for key, lanes, offset in hops:
            start = max(start, self.free_at(key, lanes) - offset)
        return start

    def occupy(self, key: tuple[int, int], lanes: int, start: float, busy: float) -> None:
        """Book the earliest-free lane from ``start`` for ``busy`` seconds."""
        if lanes == 1:
            self.free[key] = start + busy
        else:
            heapq.heapreplace(self.free[key], start + busy)


# ----------------------------------------------------------------------------- epochs
def epoch_length(topology: Topology, chunk_bytes: float, epoch: str | float | None,
                 lengthen: bool = True) -> tuple[float, list[str]]:
    """The time grid: seconds per epoch (TE-CCL) or slot (MTEG), and notes on how it was chosen.

    ``epoch`` is 'fastest' / 'slowest' (the chunk time on the fastest / slowest link; None means
    fastest) or seconds. With ``lengthen`` a derived epoch grows until the smallest alpha spans at most
    ``MAX_ALPHA_EPOCHS`` epochs (TE-CCL's rule); an epoch given in seconds is used as given (the
    published DGX2 1KB Fast run used 1 ns, 350 epochs of its smallest alpha).
    """
    bandwidths = [link.bytes_per_s for link in topology.links.values()]
    key = "fastest" if epoch is None else epoch.strip().lower() if isinstance(epoch, str) else None
    try:
        tau = (chunk_bytes / max(bandwidths) if key == "fastest" else chunk_bytes / min(bandwidths)
               if key == "slowest" else float(epoch))
    except (TypeError, ValueError):
        raise CcvizError(f"epoch: {epoch!r} is not 'fastest', 'slowest' or a number of seconds", "epoch") from None
    if not (tau > 0 and math.isfinite(tau)):
        raise CcvizError(f"epoch: the epoch length must be a positive number of seconds, got {epoch!r}", "epoch")
    notes: list[str] = []
    alphas = [link.alpha_s for link in topology.links.values() if link.alpha_s > 0]
    if lengthen and key in ("fastest", "slowest") and alphas and min(alphas) / tau > MAX_ALPHA_EPOCHS:
        tau = min(alphas) / MAX_ALPHA_EPOCHS
        notes.append(f"epoch lengthened to {us_text(tau)} so the smallest alpha spans {MAX_ALPHA_EPOCHS} epochs")
    return tau, notes


def chunks_per_epoch(topology: Topology, src: int, dst: int, nbytes: float, tau_s: float) -> float:
    """Chunks one lane of the link serializes in one epoch (below 1 when a chunk spans several)."""
    return topology.links[(src, dst)].bytes_per_s * tau_s / nbytes


def busy_epochs(topology: Topology, src: int, dst: int, nbytes: float, tau_s: float) -> int:
    """kappa: epochs of length tau one send keeps a lane of the link busy (at least 1)."""
    return max(1, math.ceil(1.0 / chunks_per_epoch(topology, src, dst, nbytes, tau_s) - EPOCH_EPS))


def delay_epochs(topology: Topology, src: int, dst: int, nbytes: float, tau_s: float) -> int:
    """``arrival_delay`` in epochs: kappa + ceil(alpha / tau), alpha ignored below ``ALPHA_IGNORED_BELOW`` epoch.

    A switch->X hop drops kappa under 'teccl' (and alpha too under 'free'); a hop between two
    switches takes at least one epoch, so no chunk circles switches in zero time.
    """
    alpha_charged, serialization_charged = hop_charges(topology, src, dst)
    alpha_epochs = topology.links[(src, dst)].alpha_s / tau_s
    latency = 0 if alpha_epochs < ALPHA_IGNORED_BELOW else math.ceil(alpha_epochs - EPOCH_EPS)
    delay = ((busy_epochs(topology, src, dst, nbytes, tau_s) if serialization_charged else 0)
             + (latency if alpha_charged else 0))
    if delay == 0 and topology.nodes[src].kind == "switch" and topology.nodes[dst].kind == "switch":
        return 1
    return delay


class EpochCost(NamedTuple):
    """One chunk on one link in epochs: kappa epochs busy, delivered ``delay`` epochs after its send
    epoch, ``per_epoch`` chunks per lane per epoch, and the link's lanes."""

    busy: int
    delay: int
    per_epoch: float
    lanes: int

    @property
    def whole_per_epoch(self) -> int:
        """Whole chunks one lane takes in one epoch (at least 1: a slower link takes one per kappa epochs)."""
        return max(1, math.floor(self.per_epoch + EPOCH_EPS))


def epoch_cost(topology: Topology, key: tuple[int, int], nbytes: float, tau_s: float) -> EpochCost:
    """The link ``key``'s ``EpochCost`` for chunks of ``nbytes`` on epochs of ``tau_s`` seconds."""
    return EpochCost(busy_epochs(topology, *key, nbytes, tau_s), delay_epochs(topology, *key, nbytes, tau_s),
                     chunks_per_epoch(topology, *key, nbytes, tau_s), topology.links[key].lanes)
