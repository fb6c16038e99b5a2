"""Crossover sizes: the buffer size M* where one algorithm overtakes another.

Two ways to ask, both answered here:

* **formulas** (``formula_crossover``): each algorithm as the reference's straight line ``t = n_a alpha + n_b M/BW``
  (a pipelined algorithm at its asymptote, ``n_b`` times the practice factor ``c_real``), so M* has a closed form,
  ``M* = (n_a(B) - n_a(A)) eta_a alpha . eta_b BW / (n_b(A) - n_b(B))``. The Collectives Explainer's values:
  ring vs DBT AllReduce at alpha = 0.5 us, BW = 900 GB/s, c_real = 2 is about 2 GB at N = 72 and 116 GB at N = 512;
  recursive doubling vs DBT at N = 512 is about 506 KB. ccviz's own finite-pipeline formulas (``ccviz cost``)
  are searched numerically beside it (``finite_pipeline_crossover_bytes``), since their alpha count grows with S.
* **simulation** (``simulated_crossover``): both schedules synthesized on a fabric at a ladder of sizes and timed
  by the simulator; the size where the winner flips is bisected between the two ladder sizes that bracket it.

Each algorithm's ``balance_bytes`` is where its alpha term equals its BW term (the reference's
"M* = n_a alpha BW / 2 = 4 MB" for DBT at N = 512 is DBT's balance with c_real = 2).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ccviz.bounds.explained import INC_ROWS, Eta, explained_cost, parse_eta
from ccviz.errors import CcvizError
from ccviz.model.topology import Topology

SEARCH_BYTES = (1.0, 1e15)  # the numeric search range of finite-pipeline crossovers: 1 B to 1 PB


def _log(n: int) -> int:
    return math.ceil(math.log2(n))


# The reference's asymptotes of pipelined algorithms (Appendix C: the BW term collapses to M/BW at depth d):
# (collective, algorithm) -> (n_alpha(N), n_beta(N)); c_real multiplies these n_beta.
_ASYMPTOTES: dict[tuple[str, str], tuple[Callable[[int], float], Callable[[int], float], str]] = {
    ("allreduce", "dbt"): (lambda n: 2 * _log(n), lambda n: 1.0, "2 ceil(log2 N) a + c_real M/BW (01 section 5.2)"),
    ("allreduce", "pipelined-tree"): (lambda n: 2 * _log(n), lambda n: 2.0, "2 ceil(log2 N) a + 2 c_real M/BW"),
    ("broadcast", "dbt"): (_log, lambda n: 1.0, "ceil(log2 N) a + c_real M/BW"),
    ("broadcast", "pipelined-tree"): (_log, lambda n: 1.0, "ceil(log2 N) a + c_real M/BW"),
    ("broadcast", "ring"): (lambda n: n - 1, lambda n: 1.0, "(N-1) a + c_real M/BW (pipelined chain)"),
    ("reduce", "dbt"): (_log, lambda n: 1.0, "ceil(log2 N) a + c_real M/BW"),
    ("reduce", "pipelined-tree"): (_log, lambda n: 1.0, "ceil(log2 N) a + c_real M/BW"),
    ("reduce", "ring"): (lambda n: n - 1, lambda n: 1.0, "(N-1) a + c_real M/BW (pipelined chain)"),
}


@dataclass(frozen=True)
class Line:
    """One algorithm as a straight line in M: ``n_alpha`` alphas plus ``n_beta`` M/BW."""

    algorithm: str
    n_alpha: float
    n_beta: float
    words: str
    c_real_applied: bool

    def time_s(self, size: float, alpha_s: float, bw_Bps: float, eta: Eta) -> float:
        return eta.alpha * self.n_alpha * alpha_s + self.n_beta * size / (eta.beta * bw_Bps)

    def balance_bytes(self, alpha_s: float, bw_Bps: float, eta: Eta) -> float:
        """Where the alpha term equals the BW term."""
        return eta.alpha * self.n_alpha * alpha_s * eta.beta * bw_Bps / self.n_beta


def line(collective: str, algorithm: str, n: int, c_real: float = 1.0) -> Line:
    """The algorithm's straight line: its asymptote when pipelined (times c_real), else its closed form."""
    if (collective, algorithm) in _ASYMPTOTES:
        a, b, words = _ASYMPTOTES[(collective, algorithm)]
        return Line(algorithm, float(a(n)), b(n) * c_real, words, True)
    if algorithm == "inc":
        if collective not in INC_ROWS:
            raise CcvizError(f"algorithms: no in-network row for {collective}", "algorithms")
        na, nb, words = INC_ROWS[collective]
        return Line(algorithm, float(na), nb(n), words, False)
    c = explained_cost(collective, algorithm, 1e6, 1.0, 1.0, n=n)  # counts do not depend on M, alpha, BW here
    from ccviz.bounds.cost import FORMULAS

    f = FORMULAS.get((collective, algorithm))
    return Line(algorithm, c.n_alpha, c.n_beta, f.expression if f else c.formula, False)


@dataclass
class Crossover:
    """The answer of ``ccviz crossover`` (``to_dict`` is its JSON; ``crossover_bytes`` None: no crossover)."""

    collective: str
    algorithms: list[str]
    n: int
    alpha_us: float
    bw_GBps: float
    c_real: float
    eta_alpha: float
    eta_beta: float
    crossover_bytes: float | None
    below: str | None  # the faster algorithm below M* (or at every M when there is no crossover)
    above: str | None
    lines: list[dict[str, Any]]
    finite_pipeline_crossover_bytes: list[float]
    sensitivity: list[dict[str, Any]]
    words: str

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _solve(a: Line, b: Line, alpha_s: float, bw_Bps: float, eta: Eta) -> float | None:
    """M where a and b cost the same (None when one is faster at every M > 0)."""
    d_beta = a.n_beta - b.n_beta
    d_alpha = (b.n_alpha - a.n_alpha) * eta.alpha * alpha_s
    if d_beta == 0:
        return None
    m = d_alpha * eta.beta * bw_Bps / d_beta
    return m if m > 0 else None


def _finite_crossovers(collective: str, algorithms: list[str], n: int, alpha_us: float, bw: float,
                       eta: str | None, c_real: float) -> list[float]:
    """Sign changes of ccviz's own formulas (finite pipelines, ``ccviz cost``) between 1 B and 1 PB."""

    def gap(m: float) -> float:
        t = []
        for alg in algorithms:
            c = explained_cost(collective, alg, m, alpha_us, bw, n=n, eta=eta)
            scale = c_real if (collective, alg) in _ASYMPTOTES else 1.0
            beta_part = c.n_beta * m / (c.eta_beta * bw * 1e9)
            t.append(c.time_s + (scale - 1) * beta_part)
        return t[0] - t[1]

    lo, hi = SEARCH_BYTES
    grid = [lo * (hi / lo) ** (k / 240) for k in range(241)]
    values = [gap(m) for m in grid]
    out = []
    for k in range(len(grid) - 1):
        m0, g0, m1, g1 = grid[k], values[k], grid[k + 1], values[k + 1]
        if g0 == 0 or (g0 < 0) != (g1 < 0):
            a, b = m0, m1
            for _ in range(60):
                mid = math.sqrt(a * b)
                if (gap(mid) < 0) == (g0 < 0):
                    a = mid
                else:
                    b = mid
            out.append(math.sqrt(a * b))
    return out


def formula_crossover(collective: str, algorithms: list[str] | str, n: int, alpha_us: float, bw_GBps: float,
                      c_real: float = 1.0, eta: str | None = None, eta_alpha: float | None = None,
                      eta_beta: float | None = None) -> Crossover:
    """Where ``algorithms[0]`` and ``algorithms[1]`` cost the same in the reference's alpha-beta model."""
    from ccviz.model.collectives import normalize_name

    collective = normalize_name(collective)
    algs = _pair(algorithms)
    if not isinstance(n, int) or n < 2:
        raise CcvizError(f"n: the number of ranks must be a whole number >= 2, got {n!r}", "n")
    if not (0 <= alpha_us < math.inf):
        raise CcvizError(f"alpha: a finite number >= 0 microseconds, got {alpha_us}", "alpha")
    if not (0 < bw_GBps < math.inf):
        raise CcvizError(f"bw: a positive number of GB/s, got {bw_GBps}", "bw")
    if not (1 <= c_real < math.inf):
        raise CcvizError(f"c-real: the practice factor on a pipelined algorithm's M/BW is >= 1, got {c_real}",
                         "c-real")
    e = parse_eta(eta, eta_alpha, eta_beta)
    alpha_s, bw_Bps = alpha_us * 1e-6, bw_GBps * 1e9
    a, b = (line(collective, alg, n, c_real) for alg in algs)
    m = _solve(a, b, alpha_s, bw_Bps, e)
    small = 1.0
    faster_small = a.algorithm if a.time_s(small, alpha_s, bw_Bps, e) <= b.time_s(small, alpha_s, bw_Bps, e) \
        else b.algorithm
    other = b.algorithm if faster_small == a.algorithm else a.algorithm
    from ccviz.model.units import format_size

    if m is None:
        big = 1e18
        winner = a.algorithm if a.time_s(big, alpha_s, bw_Bps, e) <= b.time_s(big, alpha_s, bw_Bps, e) \
            else b.algorithm
        words = (f"no crossover: {winner} is faster at every M > 0" if winner == faster_small
                 else f"no crossover at M > 0: {faster_small} at small M, {winner} at large M")
        below, above = faster_small, None
    else:
        words = f"{faster_small} is faster below M* = {format_size(m)}, {other} above it"
        below, above = faster_small, other
    sensitivity = []
    for c in sorted({1.0, 1.5, 2.0, 3.0, c_real}):
        la, lb = (line(collective, alg, n, c) for alg in algs)
        sensitivity.append({"c_real": c, "crossover_bytes": _solve(la, lb, alpha_s, bw_Bps, e)})
    for ea, eb in ((1.0, 1.0), (1.2, 0.6), (1.0, 0.8)):
        ee = Eta(ea, eb)
        sensitivity.append({"eta_alpha": ea, "eta_beta": eb, "c_real": c_real,
                            "crossover_bytes": _solve(a, b, alpha_s, bw_Bps, ee)})
    lines = [{"algorithm": x.algorithm, "n_alpha": x.n_alpha, "n_beta": x.n_beta, "formula": x.words,
              "c_real_applied": x.c_real_applied, "balance_bytes": x.balance_bytes(alpha_s, bw_Bps, e)}
             for x in (a, b)]
    finite = _finite_crossovers(collective, algs, n, alpha_us, bw_GBps, eta, c_real) \
        if eta_alpha is None and eta_beta is None else []
    return Crossover(collective, algs, n, alpha_us, bw_GBps, c_real, e.alpha, e.beta, m, below, above, lines,
                     finite, sensitivity, words)


def _pair(algorithms: list[str] | str) -> list[str]:
    algs = [a.strip().lower() for a in (algorithms.split(",") if isinstance(algorithms, str) else algorithms)]
    algs = [a for a in algs if a]
    if len(algs) != 2 or algs[0] == algs[1]:
        raise CcvizError(f"algorithms: two different algorithms separated by a comma, e.g. ring,dbt, got "
                         f"{','.join(algs) or 'none'}", "algorithms")
    return algs


def simulated_crossover(topology_spec: str | Topology, collective: str, algorithms: list[str] | str,
                        sizes: list[float] | None = None, chunks: int = 1, refine: int = 6) -> dict[str, Any]:
    """Where the simulated schedules of two algorithms on a fabric change winner (a ladder, then bisection)."""
    from ccviz.builders.loading import load_topology
    from ccviz.runs.pipeline import run

    algs = _pair(algorithms)
    topology = load_topology(topology_spec) if isinstance(topology_spec, str) else topology_spec
    sizes = sorted(sizes or [4.0 ** k * 1024 for k in range(11)])  # 1 KB .. 1 GB

    def times(m: float) -> tuple[float, float]:
        a, b = (run(topology, collective, alg, m, chunks).finish_time_s for alg in algs)
        return a, b

    ladder = []
    for m in sizes:
        ta, tb = times(m)
        ladder.append({"size_bytes": m, algs[0]: ta, algs[1]: tb})
    crossings = []
    for lo, hi in zip(ladder, ladder[1:], strict=False):
        s0 = lo[algs[0]] - lo[algs[1]]
        s1 = hi[algs[0]] - hi[algs[1]]
        if (s0 < 0) != (s1 < 0):
            a, b = lo["size_bytes"], hi["size_bytes"]
            for _ in range(refine):
                mid = math.sqrt(a * b)
                ta, tb = times(mid)
                if ((ta - tb) < 0) == (s0 < 0):
                    a = mid
                else:
                    b = mid
            crossings.append(math.sqrt(a * b))
    return {"topology": topology.name, "collective": collective, "algorithms": algs, "chunks_per_rank": chunks,
            "crossover_bytes": crossings[0] if crossings else None, "all_crossovers_bytes": crossings,
            "ladder": ladder, "model": "simulated schedules (c_real and eta do not apply: the simulator prices the "
                                       "schedule that runs)"}


def format_crossover(c: Crossover) -> str:
    """The answer in words: M*, each line's formula and balance point, and how M* moves with c_real and eta."""
    from ccviz.model.units import format_size

    lines = [f"{c.collective} {' vs '.join(c.algorithms)}, N={c.n}, alpha={c.alpha_us:g} us, BW={c.bw_GBps:g} GB/s, "
             f"c_real={c.c_real:g}: {c.words}"]
    for x in c.lines:
        lines.append(f"  {x['algorithm']:<15} {x['n_alpha']:g} a + {x['n_beta']:.4g} M/BW   ({x['formula']}); "
                     f"alpha term = BW term at {format_size(x['balance_bytes'])}")
    if c.finite_pipeline_crossover_bytes:
        lines.append("  ccviz's finite-pipeline formulas cross at "
                     + ", ".join(format_size(m) for m in c.finite_pipeline_crossover_bytes))
    for s in c.sensitivity:
        m = s["crossover_bytes"]
        what = (f"eta_alpha={s['eta_alpha']:g}, eta_beta={s['eta_beta']:g}" if "eta_alpha" in s
                else f"c_real={s['c_real']:g}")
        lines.append(f"  sensitivity  {what}: {'none' if m is None else format_size(m)}")
    return "\n".join(lines)
