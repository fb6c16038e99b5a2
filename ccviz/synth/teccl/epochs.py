"""Epochs: TE-CCL's view of every link on the time grid (``ccviz.model.physics.epoch_length``).

TE-CCL rounds time to epochs of length tau (the rounding itself is ``ccviz.model.physics.epoch_cost``). On a link a chunk needs
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

from ccviz.model.physics import EPOCH_EPS, epoch_cost, epoch_length
from ccviz.model.topology import Topology


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
        return max(1, math.floor(self.window_chunks / self.lanes + EPOCH_EPS)) * self.lanes


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


def _link_epochs(topology: Topology, real: tuple[int, int], chunk_bytes: float, tau: float,
                 key: tuple[int, int]) -> LinkEpochs:
    """Link ``key`` with the timing of link ``real`` (itself, or the real link a mirrored one stands for)."""
    cost = epoch_cost(topology, real, chunk_bytes, tau)
    return LinkEpochs(key[0], key[1], cost.busy, cost.busy * cost.per_epoch * cost.lanes, cost.lanes, cost.delay)
