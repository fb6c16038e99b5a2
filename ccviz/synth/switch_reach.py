"""Which GPUs reach a GPU through switches alone: the relays a unicast search tries first where the switches
do not join a pair (two NVL72 racks: another rack's GPU on another NIC rail is reached through one GPU next to
it, and searching through every GPU on the way settled all 144 of them)."""

from __future__ import annotations

from ccviz.model.topology import Topology


class OnePass:
    """Per GPU, the GPUs one pass through switches from it (a walk back over links out of switches), found
    once each."""

    def __init__(self, topology: Topology) -> None:
        self.is_switch = {n: topology.is_switch(n) for n in topology.nodes}
        self.into: dict[int, list[int]] = {}
        for u, v in topology.links:
            self.into.setdefault(v, []).append(u)
        self._near: dict[int, set[int]] = {}

    def to(self, targets) -> set[int]:
        """The GPUs from which one of ``targets`` is reached through switches alone."""
        found: set[int] = set()
        for target in targets:
            if target not in self._near:
                near, seen, frontier = set(), {target}, [target]
                while frontier:
                    node = frontier.pop()
                    for src in self.into.get(node, ()):
                        if src in seen:
                            continue
                        seen.add(src)
                        if self.is_switch[src]:
                            frontier.append(src)
                        else:
                            near.add(src)
                self._near[target] = near
            found |= self._near[target]
        return found
