"""The judge's in-network reduction rule: what a reducing switch (``Node.reduce``) may do with partial sums.

A transfer with ``op="combine"`` into a reducing switch adds the value it carries into the switch's one
open sum of that chunk. The sum is forwarded (on several out-links at one instant where the switch may
copy: multicast) when the contributions it combines have arrived, or, with a reduction engine slower
than the ports (``Node.reduce_GBps``), when the engine has summed it: the engine sums one chunk at a
time, starting each as soon as its contributions are in and it is free. Chunk by chunk, so a long
buffer pipelines through the switch. After its forwarding instant the sum is closed; a later
contribution opens a new sum. The switch stores nothing beyond the sum it is combining.

Violations, each naming the switch: a contribution added twice (``double_count``); a sum forwarded
before its contributions (or its engine) are done (``too_fast``) or held after (``switch_hold``, unless
the switch has a buffer); a sum missing contributions forwarded as a finished result, op ``copy``
(``partial_sum``: partial sums travel on with ``reduce`` into a GPU or ``combine`` into the next
reducing switch); a sum combined and never forwarded (``unforwarded_sum``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ccviz.model.physics import tol
from ccviz.model.topology import Topology
from ccviz.model.units import BYTES_PER_GB, us_text


@dataclass
class SwitchSum:
    """One open (or just forwarded) sum of one chunk inside one switch."""

    value: int  # bitmask of the contributions combined (bit k = the chunk's k-th pre rank)
    last_arrival_s: float
    forwarded_s: float | None = None


class InNetworkSums:
    """Pass 2's bookkeeping of the partial sums inside reducing switches (driven by ``_HoldingsReplay``)."""

    def __init__(self, topology: Topology, chunks, chunk_bytes: float,
                 flag: Callable[[str, str, int | None, float | None], None]) -> None:
        self.topology = topology
        self.chunks = chunks
        self.chunk_bytes = chunk_bytes
        self.flag = flag
        self.sums: dict[tuple[int, int], SwitchSum] = {}
        self.engine_free: dict[int, float] = {}

    def name(self, switch: int) -> str:
        label = self.topology.nodes[switch].label
        return f"switch {switch} ({label})" if label and label != f"S{switch}" else f"switch {switch}"

    def ranks(self, chunk: int, mask: int) -> list[int]:
        return [r for k, r in enumerate(sorted(self.chunks[chunk].pre)) if mask >> k & 1]

    def combine(self, j: int, switch: int, chunk: int, value: int, arrival_s: float) -> int:
        """Transfer ``j`` lands at ``switch``: its value joins the open sum (or opens one); returns the sum."""
        key = (switch, chunk)
        current = self.sums.get(key)
        if current is None or current.forwarded_s is not None:
            current = self.sums[key] = SwitchSum(0, arrival_s)
        twice = current.value & value
        if twice:
            self.flag("double_count", f"transfer #{j}: {self.name(switch)} adds the contribution(s) of rank(s) "
                      f"{self.ranks(chunk, twice)} to chunk {chunk} twice (its sum already holds them); each "
                      "contribution must be combined exactly once", j, None)
        current.value |= value
        current.last_arrival_s = max(current.last_arrival_s, arrival_s)
        return current.value

    def take(self, i: int, src: int, dst: int, chunk: int, op: str, start_s: float, has_tokens: bool) -> int | None:
        """The value transfer ``i`` forwards out of ``src`` if it forwards a sum, else None (a plain arrival)."""
        current = self.sums.get((src, chunk))
        if current is None:
            return None
        node = self.topology.nodes[src]
        if current.forwarded_s is None:
            self._check_ready(i, src, chunk, node, current, start_s)
            current.forwarded_s = start_s
        elif abs(start_s - current.forwarded_s) > tol(start_s):
            if has_tokens:
                return None  # a later plain arrival (a result coming back down) is what leaves now
            if not (node.copy and node.buffer):
                self.flag("switch_hold", f"transfer #{i}: {self.name(src)} forwards its sum of chunk {chunk} again "
                          f"at {us_text(start_s)}, after forwarding it at {us_text(current.forwarded_s)}; a switch "
                          "stores nothing beyond the sum it is combining", i, start_s - current.forwarded_s)
        elif not node.copy:
            self.flag("switch_copy", f"transfer #{i}: {self.name(src)} cannot copy, and its sum of chunk {chunk} "
                      "has already been forwarded", i, None)
        self._check_whole(i, src, dst, chunk, op, current.value)
        return current.value

    def _check_ready(self, i: int, switch: int, chunk: int, node, current: SwitchSum, start_s: float) -> None:
        """The sum leaves when its last contribution is in (and the engine, if slower than line rate, is done)."""
        ready = current.last_arrival_s
        engine = ""
        if node.reduce_GBps:
            begin = max(ready, self.engine_free.get(switch, 0.0))
            ready = begin + self.chunk_bytes / (node.reduce_GBps * BYTES_PER_GB)
            self.engine_free[switch] = ready
            engine = f" and its reduction engine ({node.reduce_GBps:g} GB/s) has summed it"
        if start_s < ready - tol(ready):
            self.flag("too_fast", f"transfer #{i}: {self.name(switch)} forwards its sum of chunk {chunk} at "
                      f"{us_text(start_s)}, but the sum is ready only at {us_text(ready)} (when its last "
                      f"contribution has arrived{engine})", i, ready - start_s)
        elif start_s > ready + tol(ready) and not node.buffer:
            self.flag("switch_hold", f"transfer #{i}: {self.name(switch)} holds its sum of chunk {chunk} for "
                      f"{us_text(start_s - ready)} (ready at {us_text(ready)}, forwarded at {us_text(start_s)}); a "
                      "switch without a buffer forwards a sum when it is ready", i, start_s - ready)

    def _check_whole(self, i: int, src: int, dst: int, chunk: int, op: str, value: int) -> None:
        """A sum forwarded as a finished result (op copy overwrites the receiver) must hold every contribution."""
        full = (1 << len(self.chunks[chunk].pre)) - 1
        if op == "copy" and value != full:
            missing = self.ranks(chunk, full & ~value)
            self.flag("partial_sum", f"transfer #{i}: {self.name(src)} forwards a sum of chunk {chunk} to node {dst} "
                      f"that misses the contribution(s) of rank(s) {missing} ({value.bit_count()} of "
                      f"{len(self.chunks[chunk].pre)}) as a finished result (op 'copy'); forward a partial sum "
                      "with op 'reduce' (into a GPU) or 'combine' (into a reducing switch)", i, None)

    def finish(self) -> None:
        """Sums combined but never forwarded lose their contributions."""
        for (switch, chunk), current in sorted(self.sums.items()):
            if current.forwarded_s is None:
                self.flag("unforwarded_sum", f"{self.name(switch)} combines the contribution(s) of rank(s) "
                          f"{self.ranks(chunk, current.value)} into chunk {chunk} but never forwards the sum", None,
                          None)
