"""The numbers quoted in docs/teaching.md, computed by the simulator and the formulas, never typed.

The lesson text marks each number as ``<!--n:KEY-->63.0 µs<!--/n-->``: the comments do not render, the number does.
``python -m ccviz.viz.teaching_numbers`` rewrites every marked number from ``NUMBERS``; ``--check`` exits 1 (and
names the stale keys) when the document disagrees with the code, which a test runs.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from functools import cache
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "teaching.md"
MARK = re.compile(r"<!--n:(?P<key>[a-z0-9_]+)-->(?P<value>.*?)<!--/n-->")


@cache
def _run(spec: str, collective: str, algorithm: str, size: float, chunks: int = 1):
    from ccviz.builders.loading import load_topology
    from ccviz.runs.pipeline import run

    return run(load_topology(spec), collective, algorithm, size, chunks)


def _sim(spec: str, collective: str, algorithm: str, size: float, chunks: int = 1) -> Callable[[], str]:
    return lambda: _us(_run(spec, collective, algorithm, size, chunks).finish_time_s)


def _formula(spec: str, collective: str, algorithm: str, size: float, chunks: int = 1) -> Callable[[], str]:
    def value() -> str:
        from ccviz.runs.composed_formula import formula_fields

        if algorithm == "inc":
            from ccviz.viz.inc_lesson import inc_cost

            r = _run(spec, collective, algorithm, size, chunks)
            return _us(inc_cost(r.topology, r.collective).time_s)
        return _us(formula_fields(_run(spec, collective, algorithm, size, chunks).schedule)["formula_s"])

    return value


def _rounds(spec: str, collective: str, algorithm: str, size: float) -> Callable[[], str]:
    return lambda: str(_run(spec, collective, algorithm, size).schedule.n_rounds)


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:.1f} µs"


MB = 1e6
NUMBERS: dict[str, Callable[[], str]] = {
    "ring_rounds": _rounds("ring:n=8", "allreduce", "ring", MB),
    "ring_formula": _formula("ring:n=8", "allreduce", "ring", MB),
    "ring_sim": _sim("ring:n=8", "allreduce", "ring", MB),
    "rhd_rounds": _rounds("ring:n=8", "allreduce", "rhd", MB),
    "rhd_formula": _formula("ring:n=8", "allreduce", "rhd", MB),
    "rhd_ring_sim": _sim("ring:n=8", "allreduce", "rhd", MB),
    "rhd_cube_sim": _sim("hypercube:n=8", "allreduce", "rhd", MB),
    "tree_sim": _sim("ring:n=8", "allreduce", "tree", MB),
    "tree_formula": _formula("ring:n=8", "allreduce", "tree", MB),
    "inc_sim": _sim("star:n=8,reduce=true", "allreduce", "inc", MB, 4),  # the INC table's 4 chunks per GPU
    "box_ring_sim": _sim("star:n=8", "allreduce", "ring", MB, 4),
    "box_dbt_sim": _sim("star:n=8", "allreduce", "dbt", MB, 4),
    "star_free_ring_16mb": _sim("star:n=8,switch_hop=free", "allreduce", "ring", 16 * MB),
    "star_paid_ring_16mb": _sim("star:n=8", "allreduce", "ring", 16 * MB),
}


def rewrite(text: str) -> tuple[str, list[str]]:
    """(the text with every marked number recomputed, the keys whose number changed)."""
    stale: list[str] = []

    def fill(m: re.Match[str]) -> str:
        key = m["key"]
        if key not in NUMBERS:
            raise KeyError(f"docs/teaching.md marks an unknown number {key!r}; add it to NUMBERS")
        value = NUMBERS[key]()
        if value != m["value"]:
            stale.append(key)
        return f"<!--n:{key}-->{value}<!--/n-->"

    return MARK.sub(fill, text), stale


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    text = DOC.read_text()
    new, stale = rewrite(text)
    if "--check" in argv:
        if stale:
            print(f"docs/teaching.md is stale: {', '.join(stale)} (run python -m ccviz.viz.teaching_numbers)")
            return 1
        return 0
    DOC.write_text(new)
    print(f"docs/teaching.md: {len(MARK.findall(new))} numbers, {len(stale)} rewritten ({', '.join(stale) or 'none'})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
