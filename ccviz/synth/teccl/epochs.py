"""Epochs: the time grid of TE-CCL and what one chunk costs on each link in epochs.

TE-CCL rounds time to epochs of length tau. On a link a chunk needs
``kappa`` epochs of serialization (1 when the link moves at least one chunk
per epoch), may be joined by others up to the link's capacity in any window
of ``kappa`` epochs, and is held by the receiver ``offset`` epochs after it
was sent (``Topology.delay_epochs``: kappa plus alpha rounded up to epochs;
alpha is ignored below 0.1 epoch, as in the paper). A hop out of a switch
under ``switch_hop="teccl"`` (TE-CCL's published runs) has offset
ceil(alpha / tau) with no serialization epoch, under ``"free"`` offset 0; both
still use the link's capacity.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ccviz.errors import CcvizError
from ccviz.topology import Topology

MAX_ALPHA_EPOCHS = 200  # the paper lengthens the epoch when the smallest alpha exceeds this many epochs
_EPS = 1e-9


@dataclass(frozen=True, slots=True)
class LinkEpochs:
    """One link in epoch units."""

    src: int
    dst: int
    kappa: int  # epochs to serialize one chunk
    window_chunks: float  # chunks the link carries in any window of kappa epochs (all lanes)
    lanes: int
    offset: int  # epochs from the send epoch to the epoch the receiver holds the chunk

    @property
    def window_slots(self) -> int:
        """Whole chunks per window (the MILP sends whole chunks)."""
        return max(1, math.floor(self.window_chunks / self.lanes + _EPS)) * self.lanes


@dataclass(frozen=True)
class EpochGrid:
    """tau plus every link's cost in epochs, for one chunk size."""

    tau_s: float
    links: dict[tuple[int, int], LinkEpochs]
    notes: tuple[str, ...] = ()

    @classmethod
    def build(cls, topology: Topology, chunk_bytes: float, epoch: str | float = "fastest",
              mirrored_from: Topology | None = None) -> EpochGrid:
        """Grid for ``epoch`` = 'fastest' | 'slowest' | seconds.

        With ``mirrored_from`` (a reduction solved as a broadcast on the reversed
        topology), link (i, j) takes the timing of the real link (j, i) it mirrors,
        so the broadcast reversed in time obeys the real links' physics.
        """
        real_topology = mirrored_from or topology
        tau, notes = epoch_length(real_topology, chunk_bytes, epoch)
        links = {}
        for key in topology.links:
            real = (key[1], key[0]) if mirrored_from is not None else key
            links[key] = _link_epochs(real_topology, real, chunk_bytes, tau, key)
        return cls(tau, links, tuple(notes))


def epoch_length(topology: Topology, chunk_bytes: float, epoch: str | float) -> tuple[float, list[str]]:
    """tau in seconds: chunk time on the fastest or slowest link (lengthened if alpha is huge), or given."""
    bandwidths = [link.bytes_per_s for link in topology.links.values()]
    notes: list[str] = []
    if isinstance(epoch, str):
        key = epoch.strip().lower()
        if key == "fastest":
            tau = chunk_bytes / max(bandwidths)
        elif key == "slowest":
            tau = chunk_bytes / min(bandwidths)
        else:
            try:
                tau = float(key)
            except ValueError:
                raise CcvizError(f"epoch: {epoch!r} is not 'fastest', 'slowest' or a number of seconds",
                                 "epoch") from None
    else:
        tau = float(epoch)
    if not (tau > 0 and math.isfinite(tau)):
        raise CcvizError(f"epoch: the epoch length must be a positive number of seconds, got {epoch!r}", "epoch")
    alphas = [link.alpha_s for link in topology.links.values() if link.alpha_s > 0]
    if isinstance(epoch, str) and key in ("fastest", "slowest") and alphas and min(alphas) / tau > MAX_ALPHA_EPOCHS:
        # only a derived epoch is lengthened: an epoch given in seconds is used as given (the published
        # DGX2 1KB Fast run used 1 ns, 350 epochs of its smallest alpha)
        tau = min(alphas) / MAX_ALPHA_EPOCHS
        notes.append(f"epoch lengthened to {tau * 1e6:.6g} us so the smallest alpha spans {MAX_ALPHA_EPOCHS} epochs")
    return tau, notes


def _link_epochs(topology: Topology, real: tuple[int, int], chunk_bytes: float, tau: float,
                 key: tuple[int, int]) -> LinkEpochs:
    """Link ``key`` with the timing of link ``real`` (itself, or the real link a mirrored one stands for)."""
    link = topology.links[real]
    per_epoch = link.bytes_per_s * tau / chunk_bytes  # one lane
    kappa = topology.busy_epochs(*real, chunk_bytes, tau)
    offset = topology.delay_epochs(*real, chunk_bytes, tau)
    return LinkEpochs(key[0], key[1], kappa, kappa * per_epoch * link.lanes, link.lanes, offset)
