"""Proof by schedule: the plan's fabrics synthesized and judged, the gain promised beside the gain realized.

The advisor's times are limits: no schedule beats them, but a plan is only worth buying if schedules get
close. For the fabric before the plan and after each step, every collective of the mix is synthesized with
the algorithm that reaches the limit in its class (forestcoll for AllGather, ReduceScatter, AllReduce,
Broadcast and Reduce; mcf for AllToAll; inc as well where switches reduce, the faster kept) and judged by
the simulator; each step then shows its promised and realized weighted time.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ccviz.advise.advisor import Advice
from ccviz.advise.upgrades import apply_upgrades
from ccviz.model.topology import Topology

ALGORITHMS = {"alltoall": ("mcf",), "allreduce": ("forestcoll",), "allgather": ("forestcoll",),
              "reducescatter": ("forestcoll",), "broadcast": ("forestcoll",), "reduce": ("forestcoll",)}


@dataclass(frozen=True)
class Realized:
    """One fabric of the plan (step 0: before it): weighted time at the limits and by verified schedules."""

    step: int
    promised_s: float
    realized_s: float
    verified: bool
    runs: tuple[dict[str, Any], ...]

    @property
    def ratio(self) -> float:
        return self.realized_s / self.promised_s

    def to_dict(self) -> dict[str, Any]:
        return {"step": self.step, "promised_s": self.promised_s, "realized_s": self.realized_s,
                "ratio": self.ratio, "verified": self.verified, "runs": list(self.runs)}


def confirm(topology: Topology, advice: Advice, time_limit: float = 60.0,
            progress: Callable[[int, int], None] | None = None) -> list[Realized]:
    """Synthesize the mix before the plan and after each of its steps (``time_limit`` seconds per run)."""
    from ccviz.runs.pipeline import run
    from ccviz.synth.registry import SynthOptions

    out = []
    total = len(advice.steps) + 1
    for step in range(total):
        fabric = apply_upgrades(topology, [advice.candidates[i] for i in advice.plan[:step]])
        runs, weighted, verified = [], 0.0, True
        for item, limit_s in zip(advice.mix, _limits(advice, step), strict=True):
            names = ALGORITHMS[item.collective] + (("inc",) if item.collective == "allreduce"
                                                    and fabric.reducing_switches else ())
            best = None
            for name in names:
                result = run(fabric, item.collective, name, size_bytes=item.size_bytes,
                             options=SynthOptions(time_limit=time_limit))
                summary = result.summary()
                if summary["verified"] and (best is None or summary["finish_time_s"] < best["finish_time_s"]):
                    best = {"collective": item.collective, "size_bytes": item.size_bytes, "algorithm": name,
                            "finish_time_s": summary["finish_time_s"], "limit_s": limit_s,
                            "verified": summary["verified"]}
            if best is None:
                verified = False
                best = {"collective": item.collective, "size_bytes": item.size_bytes, "algorithm": "/".join(names),
                        "finish_time_s": None, "limit_s": limit_s, "verified": False}
            else:
                weighted += item.weight * best["finish_time_s"]
            runs.append(best)
        promised = advice.weighted_time_s[step]
        out.append(Realized(step, promised, weighted if verified else float("nan"), verified, tuple(runs)))
        if progress is not None:
            progress(step + 1, total)
    return out


def _limits(advice: Advice, step: int) -> tuple[float, ...]:
    return advice.start_limits_s if step == 0 else advice.steps[step - 1].limits_s
