"""Where the Collectives Explainer contradicts itself: both statements, the one ccviz follows, why, and a run.

``ccviz reproduce explainer`` prints these after its table (``inconsistencies`` in ``--json``). Each entry's
``demonstration`` is computed by ccviz now (a formula via ``ccviz cost`` or a schedule via the simulator), so the
choice is shown, not asserted.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ccviz.bounds.explained import explained_cost


@dataclass(frozen=True)
class Conflict:
    topic: str
    statement_a: str
    statement_b: str
    ccviz_follows: str
    why: str
    command: str
    demonstrate: Callable[[], str]

    def to_dict(self) -> dict[str, Any]:
        return {"topic": self.topic, "statement_a": self.statement_a, "statement_b": self.statement_b,
                "ccviz_follows": self.ccviz_follows, "why": self.why, "command": self.command,
                "demonstration": self.demonstrate()}


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:,.1f} us"


def _dbt_ports() -> str:
    ideal = explained_cost("allreduce", "dbt", 16e6, 0.5, 50, n=8)
    one = explained_cost("allreduce", "dbt", 16e6, 0.5, 50, n=8, ports=1)
    from ccviz.builders.loading import load_topology
    from ccviz.runs.pipeline import run

    sim = run(load_topology("star:n=8,switch_hop=free"), "allreduce", "dbt", 16e6, 8).finish_time_s
    ring = run(load_topology("star:n=8,switch_hop=free"), "allreduce", "ring", 16e6, 1).finish_time_s
    return (f"8-GPU star, 16 MB: DBT formula {_us(ideal.time_s)} with its 2 ports, {_us(one.time_s)} at the star's "
            f"1 port; simulated DBT (8 chunks) {_us(sim)} against ring {_us(ring)}")


def _dbt_beta() -> str:
    one = explained_cost("allreduce", "dbt", 16e6, 0.5, 900, n=512)
    return (f"N=512, 16 MB, 900 GB/s: ccviz {_us(one.time_s)} ({one.n_beta:.3g} M/BW, finite pipeline); the 00 table's "
            f"2 M/BW gives {_us(18 * 0.5e-6 + 2 * 16e6 / 900e9)}, 01's M/BW {_us(18 * 0.5e-6 + 16e6 / 900e9)}")


def _a2a_torus() -> str:
    from ccviz.builders.loading import load_topology
    from ccviz.runs.pipeline import run

    c = explained_cost("alltoall", "dimdecomp", 16e6, 0.5, 50, dims="4x4")
    sim = run(load_topology("torus2d:dims=4x4"), "alltoall", "dimdecomp", 16e6, 1).finish_time_s
    return (f"4x4 torus, 16 MB: decomposed formula {_us(c.time_s)}, simulated dimdecomp {_us(sim)}; the flat form "
            f"would print {_us(c.reference['time_s'])}")


def _inc_alpha() -> str:
    b = explained_cost("broadcast", "inc", 16e6, 0.5, 900, n=512)
    a = explained_cost("alltoall", "inc", 16e6, 0.5, 900, n=512)
    return f"N=512, 16 MB: inc broadcast {_us(b.time_s)} ({b.n_alpha:g} a), inc alltoall {_us(a.time_s)} ({a.n_alpha:g} a)"


def _busbw() -> str:
    from ccviz.builders.loading import load_topology
    from ccviz.model.collectives import make_collective

    star = load_topology("star:n=8")
    b, g = (make_collective(name, star, 16e6).busbw_factor for name in ("broadcast", "allgather"))
    return f"ccviz's busbw factor at N=8: broadcast {b:g}, allgather {g:g}"


CONFLICTS: tuple[Conflict, ...] = (
    Conflict("DBT AllReduce's bandwidth term",
             "00 summary table: DBT n_beta = 2 (BW_eff = BW/2), as 04's N=512 ladder prices it (45 us)",
             "01 section 5.2: pipelined DBT collapses to M/BW, 'DBT strictly dominates ring at every M'",
             "neither asymptote: a finite pipeline 2(d+S-1)(a + M/(2 S BW)) at the best S, priced at the ports the "
             "fabric gives (2 links each way; one port doubles it)",
             "M/BW holds only when each rank drives its two trees' links at once; on a one-port star the bytes a "
             "rank moves (2 M each way) set 2 M/BW, so the 00 table's 2 is the one-port value",
             "ccviz cost -c allreduce -a dbt --n 8 -s 16MB --ports 1", _dbt_ports),
    Conflict("DBT at N = 512",
             "00 / 04: 2 ceil(log2 N) a + 2 M/BW",
             "01 section 5.2: 2 ceil(log2 N) a + M/BW (c_real >= 1 in practice)",
             "neither: a finite pipeline at the best S, which sits above both asymptotes; c_real is a parameter of "
             "ccviz crossover",
             "a schedule of finitely many segments cannot reach M/BW; ccviz crossover takes the 01 form times c_real "
             "so its M* values match 01 section 5.3", "ccviz cost -c allreduce -a dbt --n 512 --alpha 0.5 --bw 900 "
             "-s 16MB", _dbt_beta),
    Conflict("Torus AllToAll",
             "02 / 04 ladders: diam a + d_max/8 M/BW (flat, every dimension at once; 23.8 us at 8x8x8)",
             "02 section 3: dimension-decomposed diam a + sum(d_i)/8 M/BW",
             "the decomposed form for dimdecomp, with the flat form printed as the reference's variant",
             "it is the cost of the schedule dimdecomp runs (one dimension at a time); the flat form needs a schedule "
             "that routes over all dimensions at once", "ccviz synth torus2d:dims=4x4 -c alltoall -a dimdecomp "
             "-s 16MB --json", _a2a_torus),
    Conflict("Switch hops of in-network Broadcast and AllToAll",
             "00 capability table: Broadcast ~2 a_switch (multicast crossbar), HW AllToAll ~1 a_switch",
             "04 section 3.3 ladder: Broadcast a + M/BW (one hop), HW AllToAll 2 a + (N-1)/N M/BW",
             "04 section 3.3 (its worked numbers: BC 18.3 us, A2A 19 us at N=512)",
             "the worked ladder is what a lecturer checks against; the 00 table gives orders of magnitude (~)",
             "ccviz cost -c broadcast -a inc --n 512 --alpha 0.5 --bw 900 -s 16MB", _inc_alpha),
    Conflict("Broadcast's busbw factor",
             "00 / 01 busbw table: Broadcast (N-1)/N, like AllGather",
             "nccl-tests (and the reference's own Reduce row): factor 1 for Broadcast and Reduce",
             "nccl-tests: busbw = algbw for Broadcast and Reduce",
             "busbw exists to compare with nccl-tests' published numbers, which use 1",
             "ccviz synth star:n=8 -c broadcast -a ring -s 16MB --json", _busbw),
)


def conflicts() -> list[dict[str, Any]]:
    """Every inconsistency with its demonstration computed now."""
    return [c.to_dict() for c in CONFLICTS]


def format_conflicts(items: list[dict[str, Any]]) -> str:
    lines = ["", "Where the reference contradicts itself (and what ccviz does):"]
    for c in items:
        lines += [f"- {c['topic']}", f"    one place     {c['statement_a']}", f"    another place {c['statement_b']}",
                  f"    ccviz follows {c['ccviz_follows']}", f"    because       {c['why']}",
                  f"    shown by      {c['command']}: {c['demonstration']}"]
    return "\n".join(lines)
