"""Logical algorithms laid on a physical fabric: a textbook algorithm's sends (rank to rank, step by
step) become per-hop transfers over the fabric's routes (``ccviz.model.routing``), spread over
equal-cost paths by load (``ccviz.model.paths``)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import NamedTuple

from ccviz.errors import CcvizError
from ccviz.model.collectives import Collective
from ccviz.model.paths import PlanningEnded, SpreadRoutes, plan_sends
from ccviz.model.routing import router_for
from ccviz.model.schedule import Op, Transfer
from ccviz.model.topology import Topology


class LogicalSend(NamedTuple):
    """Rank ``src`` sends ``chunk`` to rank ``dst`` at logical ``step``; ``reduce`` adds a partial."""

    chunk: int
    src: int
    dst: int
    step: int
    op: Op = "copy"


class Layout:
    """Collects logical sends and lays them on shortest routes as untimed per-hop transfers.

    A ``copy`` of a reducing chunk is taken to carry a finished (fully reduced)
    value; partial sums always travel with ``op="reduce"``.
    """

    def __init__(self, topology: Topology, collective: Collective) -> None:
        self.topology = topology
        self.collective = collective
        self.router = router_for(topology, collective.chunk_bytes)
        self.sends: list[LogicalSend] = []
        self.rounds: list[int] = []  # per emitted transfer: the logical step of the send it belongs to
        self.labels: dict[int, str] = {}  # logical step -> what the algorithm does in it
        # independent copies (direct AllToAll): each send's route and hop order planned by when it lands
        # (``ccviz.model.paths.PlannedRoutes``) instead of hop numbers
        self.planned = False
        self.give_up: Callable[[], str | None] | None = None  # a planned layout's time limit / Stop (Budget.reason)
        self.cut_short: str | None = None  # why a planned layout tried fewer orders than it would have

    def send(self, chunk: int, src: int, dst: int, step: int, op: Op = "copy") -> None:
        if src != dst:
            self.sends.append(LogicalSend(chunk, src, dst, step, op))

    def label(self, step: int, text: str) -> None:
        """Name what the algorithm does at a logical step ("reduce-scatter, distance 2")."""
        self.labels.setdefault(step, text)

    def numbered_rounds(self) -> tuple[list[int], list[str]]:
        """After ``transfers()``: each transfer's 1-based round (used steps renumbered densely) and the
        label of every round (the algorithm's, else a phase name read from the sends)."""
        steps = sorted(set(self.rounds))
        number = {step: k + 1 for k, step in enumerate(steps)}
        ops = defaultdict(set)
        for s in self.sends:
            ops[s.step].add(s.op)
        labels = [self.labels.get(step) or self._phase(ops[step]) for step in steps]
        return [number[step] for step in self.rounds], labels

    def _phase(self, ops: set[str]) -> str:
        name = self.collective.name
        if "reduce" in ops:
            return "reduce" if name == "reduce" else "reduce-scatter"
        return {"allreduce": "all-gather", "reducescatter": "reduce-scatter"}.get(name, name.replace("all", "all-"))

    def hint(self) -> str:
        return (f"{self.collective.name} on {self.topology.name!r} needs another algorithm "
                "(ring over a cycle of neighbouring GPUs is the most widely applicable)")

    def routes(self) -> list[list[int]]:
        """Step 1: every send takes a fastest route, spread over equal-cost ones by load in step order
        (``ccviz.model.paths``); a partial sum crosses other GPUs as a relay."""
        spread = SpreadRoutes(self.topology, self.collective.chunk_bytes)
        scale = self._hop_scale()
        routes: list[list[int]] = [[] for _ in self.sends]
        for i in sorted(range(len(self.sends)), key=lambda i: self.sends[i].step):
            s = self.sends[i]
            route = spread.route(s.src, s.dst, s.chunk, float(s.step * scale))
            if route is None:
                raise CcvizError(f"topology: no route from GPU {s.src} to GPU {s.dst}: {self.hint()}", "topology")
            routes[i] = route
        return routes

    def _hop_scale(self) -> int:
        """The longest fastest route's hop count: hop h of a send at step s goes at step s * scale + h."""
        route_of = self.router.route
        return max((len(r) - 1 for s in self.sends if (r := route_of(s.src, s.dst)) is not None), default=1)

    def transfers(self) -> list[Transfer]:
        """Step 2: expand routes into per-hop transfers with increasing steps; shared copy hops are sent once."""
        if self.planned:
            return self._planned_transfers()
        routes = self.routes()
        scale = max((len(r) - 1 for r in routes), default=1)
        plain_switches = {n.id for n in self.topology.nodes.values() if n.is_switch and not n.copy}
        emitted: set[tuple[int, int, int, int]] = set()
        out: list[Transfer] = []
        order = sorted(range(len(self.sends)), key=lambda i: self.sends[i].step)
        for i in order:
            chunk, _, _, logical_step, logical_op = self.sends[i]
            route = routes[i]
            last = len(route) - 2
            base = logical_step * scale
            for h in range(last + 1):
                u, v = route[h], route[h + 1]
                key = (chunk, u, v, base + h)
                if key in emitted and logical_op == "copy" and v not in plain_switches:
                    continue  # a multicast already carries this chunk over this hop at this step
                emitted.add(key)
                hop_op = logical_op if h == last else "relay" if logical_op == "reduce" else "copy"
                out.append(Transfer(chunk, u, v, None, None, hop_op, float(base + h)))
                self.rounds.append(logical_step)
        return out

    def _planned_transfers(self) -> list[Transfer]:
        """Every send (a plain copy from a GPU that holds it) on the fastest route that lands first, timed
        (``ccviz.model.paths.plan_sends``): a *timed* schedule, which the simulator verifies as it stands."""
        sends = sorted(self.sends, key=lambda s: s.step)
        if any(s.op != "copy" for s in sends):
            raise CcvizError("algorithm: a planned layout carries plain copies only", "algorithm")
        for s in sends:
            if self.router.route(s.src, s.dst) is None:
                raise CcvizError(f"topology: no route from GPU {s.src} to GPU {s.dst}: {self.hint()}", "topology")
        try:
            plan, self.order, self.cut_short = plan_sends(
                self.topology, self.collective.chunk_bytes, [(s.chunk, s.src, s.dst) for s in sends],
                list(self.collective.ranks), self.give_up)
        except PlanningEnded as ended:
            why = "its time limit passed" if ended.reason == "time_limit" else "Stop was pressed"
            raise CcvizError(f"{ended.reason}: {why} after {ended.planned:,} of {ended.total:,} sends were "
                             "planned, so there is no complete schedule; give it a longer time limit, or use "
                             "mcf, which books AllToAll from a flow", "time_limit") from None
        out: list[Transfer] = []
        for i, route, starts in plan:
            s = sends[i]
            for (u, v), start in zip(zip(route, route[1:], strict=False), starts, strict=True):
                end = start + self.topology.arrival_delay(u, v, self.collective.chunk_bytes)
                out.append(Transfer(s.chunk, u, v, start, end, "copy", float(s.step)))
                self.rounds.append(s.step)
        return out
