"""What to buy: the plan for a budget, and the cost-against-time curve, each step naming the cut it breaks.

Two searches, both on the exact limits (``scoring.Scorer``), both pruned by certificates so only candidates
that could still win are solved:

* ``best_subset``: where the candidate sets within the budget and step count are few enough
  (``EXHAUSTIVE_SETS``), every set is ranked by its lower bound and solved in that order until no bound can
  beat the best solved: the best plan among the candidates, proven.
* ``greedy``: otherwise, the candidate with the most time saved per unit of cost, re-solved after each choice
  (exactly as if every candidate were solved), then ``improve_by_swaps`` trades one bought candidate for one
  not bought while that helps. Not proven best; the result says which search ran.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import combinations

from ccviz.advise.scoring import REL_TOL, Scorer

EXHAUSTIVE_SETS = 3_000


class Clock:
    """The search's time limit and Stop: ``expired()`` once either has come."""

    def __init__(self, time_limit: float | None, stop: Callable[[], bool] | None = None) -> None:
        self.deadline = None if time_limit is None else time.monotonic() + time_limit
        self.stop = stop
        self.reason: str | None = None

    def expired(self) -> bool:
        if self.reason is None:
            if self.deadline is not None and time.monotonic() > self.deadline:
                self.reason = "time_limit"
            elif self.stop is not None and self.stop():
                self.reason = "stopped"
        return self.reason is not None


@dataclass(frozen=True)
class Search:
    """The candidates a plan may use and its limits: total cost and number of upgrades."""

    allowed: tuple[int, ...]
    budget: float
    max_steps: int


def _better(a: float, b: float) -> bool:
    """``a`` a shorter weighted time than ``b`` beyond the limits' numerical tolerance."""
    return a < b * (1 - REL_TOL)


def _cost(scorer: Scorer, chosen) -> float:
    return sum(scorer.candidates[i].cost for i in chosen)


def _per_cost(saved: float, cost: float) -> float:
    return math.inf if cost <= 0 else saved / cost


def greedy(scorer: Scorer, search: Search, clock: Clock, start: Sequence[int] = ()) -> list[int]:
    """Buy, one at a time, the affordable candidate saving the most weighted time per unit of cost.

    Each round ranks candidates by the most they could save (their lower bound) and solves them in that
    order, stopping once no unsolved candidate's bound can beat the best solved: the same choice as solving
    them all."""
    chosen = list(start)
    while len(chosen) < search.max_steps and not clock.expired():
        now = scorer.exact(chosen).weighted_s
        spent = _cost(scorer, chosen)
        options = [i for i in search.allowed if i not in chosen and spent + scorer.candidates[i].cost <= search.budget]
        ranked = sorted(((_per_cost(now - scorer.lower([*chosen, i]), scorer.candidates[i].cost), i)
                         for i in options), reverse=True)
        best, best_rate = None, 0.0
        for optimistic, i in ranked:
            if optimistic <= best_rate or clock.expired():  # no unsolved candidate can beat the best solved
                break
            after = scorer.exact([*chosen, i]).weighted_s
            rate = _per_cost(now - after, scorer.candidates[i].cost)
            if _better(after, now) and (best is None or rate > best_rate):
                best, best_rate = i, rate
        if best is None:
            break
        chosen.append(best)
    return chosen


def improve_by_swaps(scorer: Scorer, search: Search, clock: Clock, chosen: list[int], rounds: int = 3) -> list[int]:
    """Trade one bought candidate for one not bought (within the budget) while the weighted time drops."""
    current = list(chosen)
    for _ in range(rounds):
        now = scorer.exact(current).weighted_s
        improved = False
        for out in list(current):
            rest = [i for i in current if i != out]
            spent = _cost(scorer, rest)
            for into in search.allowed:
                if into in current or spent + scorer.candidates[into].cost > search.budget or clock.expired():
                    continue
                trial = [*rest, into]
                if not _better(scorer.lower(trial), now):
                    continue
                if _better(scorer.exact(trial).weighted_s, now):
                    current, now, improved = trial, scorer.exact(trial).weighted_s, True
                    break
            if improved:
                break
        if not improved:
            break
    return current


def count_sets(search: Search, costs: Sequence[float]) -> int:
    """How many candidate sets fit the budget and step count (counted up to ``EXHAUSTIVE_SETS`` + 1)."""
    n = 0
    for k in range(1, search.max_steps + 1):
        for combo in combinations(search.allowed, k):
            if sum(costs[i] for i in combo) <= search.budget:
                n += 1
                if n > EXHAUSTIVE_SETS:
                    return n
    return n


def best_subset(scorer: Scorer, search: Search, clock: Clock) -> tuple[list[int], bool]:
    """The set within budget and step count with the least weighted time (ties: the cheaper, then the
    smaller): every set ranked by its lower bound, solved in that order until no bound can win.
    Returns the set and whether the search finished (False: cut short, the best so far)."""
    costs = [c.cost for c in scorer.candidates]
    sets = [()] + [combo for k in range(1, search.max_steps + 1) for combo in combinations(search.allowed, k)
                   if sum(costs[i] for i in combo) <= search.budget]
    best, best_key = (), (scorer.exact(()).weighted_s, 0.0, 0)
    ranked = sorted((scorer.lower(s), s) for s in sets)
    for bound, s in ranked:
        if bound > best_key[0] * (1 + REL_TOL):
            return list(best), True
        if clock.expired():
            return list(best), False
        key = (scorer.exact(s).weighted_s, _cost(scorer, s), len(s))
        if _better(key[0], best_key[0]) or (not _better(best_key[0], key[0]) and key[1:] < best_key[1:]):
            best, best_key = s, key
    return list(best), True


def buying_order(scorer: Scorer, chosen: Sequence[int]) -> list[int]:
    """The chosen set in the order to buy it: each time the one saving the most per unit of cost."""
    order: list[int] = []
    left = list(chosen)
    while left:
        now = scorer.exact(order).weighted_s
        pick = max(left, key=lambda i: (_per_cost(now - scorer.exact([*order, i]).weighted_s,
                                                  scorer.candidates[i].cost), -i))
        order.append(pick)
        left.remove(pick)
    return order
