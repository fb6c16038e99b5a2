"""``ccviz reproduce explainer``: the Collectives Explainer's worked tables beside ccviz's formulas and simulator.

Each row of ``ccviz/data/explainer_tables.csv`` names a reference number and how ccviz computes the same thing
(``ccviz.bounds.explained.explained_cost``); rows whose fabric is small enough are also built and simulated
(``simulated_us``; null elsewhere: the N = 512 and N = 144 fabrics are formula-only). A formula row counts as
agreeing within 1 % of the reference's printed value; otherwise its note says why (the reference rounds, or
ccviz's formula differs on purpose).
"""

from __future__ import annotations

import csv
import io
from dataclasses import asdict, dataclass
from importlib import resources
from typing import Any

from ccviz.bounds.explained import explained_cost
from ccviz.model.units import parse_size

TOLERANCE = 0.01


@dataclass
class ExplainerRow:
    table: str
    name: str
    reference_us: float
    formula_us: float
    simulated_us: float | None
    ratio: float  # formula / reference
    note: str
    within_1pct: bool
    explained: bool  # within 1 % or a reason is given
    command: str  # the ccviz cost call that gives formula_us
    limit_us: float | None = None  # the simulated fabric's limit (bandwidth alone), where a fabric is built
    below_limit: bool = False  # the formula sits below that limit: its ideal model is not a bound there

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def table_rows() -> list[dict[str, str]]:
    text = resources.files("ccviz").joinpath("data/explainer_tables.csv").read_text()
    lines = [line for line in text.splitlines() if not line.startswith("#")]
    return list(csv.DictReader(io.StringIO("\n".join(lines))))


def _command(r: dict[str, str]) -> str:
    parts = [f"ccviz cost -c {r['collective']} -a {r['algorithm']} -s {r['size']} --alpha {r['alpha']} --bw {r['bw']}"]
    for key, flag in (("n", "--n"), ("dims", "--dims"), ("tiers", "--tiers"), ("eta", "--eta"), ("ports", "--ports"),
                      ("segments", "--segments"), ("pods_per_leaf", "--pods-per-leaf")):
        if r.get(key):
            parts.append(f"{flag} {r[key]}")
    if r["per_dim"] and r["per_dim"] != "ring":
        parts.append(f"--per-dim {r['per_dim']}")
    if r["mesh"]:
        parts.append("--mesh")
    return " ".join(parts)


def _simulate(r: dict[str, str]) -> tuple[float | None, float | None]:
    """(simulated us, the fabric's limit in us) of the row's fabric, or (None, None) without one."""
    if not r["fabric"]:
        return None, None
    from ccviz.builders.loading import load_topology
    from ccviz.runs.pipeline import run
    from ccviz.synth.registry import SynthOptions

    extra = dict(item.split("=", 1) for item in r["sim_opts"].split(";") if item)
    result = run(load_topology(r["fabric"]), r["collective"], r["sim_algorithm"], parse_size(r["size"]),
                 int(r["sim_chunks"] or 1), options=SynthOptions(extra=extra))
    limit = None if result.limit_s is None else float(result.limit_s) * 1e6
    if not result.timeline.verified:
        return None, limit
    return result.finish_time_s * 1e6, limit


def reproduce_explainer(simulate: bool = True) -> list[ExplainerRow]:
    """Every row: the reference's number, ccviz's formula, the simulated schedule where a fabric is built."""
    out = []
    for r in table_rows():
        cost = explained_cost(r["collective"], r["algorithm"], parse_size(r["size"]), r["alpha"], r["bw"],
                              n=int(r["n"]) if r["n"] else None, dims=r["dims"] or None, mesh=bool(r["mesh"]),
                              per_dim=r["per_dim"] or "ring", tiers=r["tiers"] or None, eta=r["eta"] or None,
                              ports=int(r["ports"]) if r["ports"] else None,
                              segments=int(r["segments"]) if r["segments"] else None,
                              pods_per_leaf=int(r["pods_per_leaf"]) if r.get("pods_per_leaf") else None)
        reference = float(r["reference_us"])
        formula_us = cost.time_s * 1e6
        ratio = formula_us / reference
        within = abs(ratio - 1) <= TOLERANCE
        note = r["note"]
        if cost.reference and not within:
            note = f"{note}; the reference's own formula gives {cost.reference['time_s'] * 1e6:.4g} us".lstrip("; ")
        simulated, limit = _simulate(r) if simulate else (None, None)
        below = bool(limit is not None and formula_us < limit * (1 - 1e-9))  # a plain bool for --json
        if below:
            note = f"{note}; the formula is below this fabric's limit ({limit:.4g} us): not a bound here".lstrip("; ")
        out.append(ExplainerRow(r["table"], r["name"], reference, formula_us, simulated, ratio, note, within,
                                within or bool(r["note"]), _command(r), limit, below))
    return out


def summary(rows: list[ExplainerRow]) -> dict[str, Any]:
    return {"rows": len(rows), "within_1pct": sum(r.within_1pct for r in rows),
            "explained": sum(r.explained and not r.within_1pct for r in rows),
            "unexplained": [r.name for r in rows if not r.explained],
            "simulated": sum(r.simulated_us is not None for r in rows)}


def format_table(rows: list[ExplainerRow]) -> str:
    lines = [f"{'table':<22} {'row':<58} {'reference':>10} {'formula':>10} {'simulated':>10} {'limit':>8} "
             f"{'ratio':>6}  note"]
    for r in rows:
        sim = "-" if r.simulated_us is None else f"{r.simulated_us:.4g}"
        limit = "-" if r.limit_us is None else f"{r.limit_us:.4g}"
        lines.append(f"{r.table:<22} {r.name[:58]:<58} {r.reference_us:>10.4g} {r.formula_us:>10.4g} {sim:>10} "
                     f"{limit:>8} {r.ratio:>6.3f}  {r.note}")
    return "\n".join(lines)
