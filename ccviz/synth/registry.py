"""The one algorithm registry: every synthesizer is ``synthesize(topology, collective, options)``.

The app, the CLI and comparisons look algorithms up here and never
special-case one. An algorithm module registers itself at import time with
``register(Algorithm(...))``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from ccviz.collectives import Collective
from ccviz.errors import CcvizError
from ccviz.schedule import Schedule
from ccviz.topology import Topology
from ccviz.units import format_time


@dataclass
class Progress:
    """A progress report from a long synthesis (the app shows it, the CLI may print it)."""

    elapsed_s: float
    message: str = ""
    incumbent_s: float | None = None  # best finish time found so far
    bound_s: float | None = None  # best proven lower bound so far
    gap: float | None = None
    fraction: float | None = None  # 0..1 when the algorithm knows how far it is

    def text(self) -> str:
        """The report in words, the same in the CLI and the app (a gap is shown only when meaningful)."""
        parts = [self.message] if self.message else []
        if self.incumbent_s is not None:
            parts.append(f"best finish so far {format_time(self.incumbent_s)}")
        if self.gap is not None and 0 <= self.gap < 1e6:
            parts.append(f"gap {self.gap:.1%}")
        return ", ".join(parts)


@dataclass
class SynthOptions:
    """Knobs shared by all algorithms; each uses what applies and ignores the rest.

    ``epoch`` is 'fastest', 'slowest' or seconds; ``stop`` lets a front end
    cancel a long solve (the algorithm returns its best schedule so far).
    Algorithm-specific settings go into ``extra``.
    """

    epoch: str | float = "fastest"
    epochs: int | None = None
    time_limit: float | None = None
    gap: float | None = None
    seed: int | None = None
    restarts: int = 1
    progress: Callable[[Progress], None] | None = None
    stop: threading.Event | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def report(self, progress: Progress) -> None:
        if self.progress is not None:
            self.progress(progress)

    def choice(self, key: str, default: str, allowed: tuple[str, ...], meaning: str) -> str:
        """``extra[key]`` (``default`` when absent), one of ``allowed``; else a CcvizError that lists them and
        says what they mean."""
        value = self.extra.get(key, default)
        if value not in allowed:
            raise CcvizError(f"{key}: {value!r} is not one of {', '.join(allowed)}; {meaning}", key)
        return value

    def stopped(self) -> bool:
        return self.stop is not None and self.stop.is_set()

    def public(self) -> dict[str, Any]:
        """The options as recorded in a schedule (no callables)."""
        return {
            "epoch": self.epoch, "epochs": self.epochs, "time_limit": self.time_limit, "gap": self.gap,
            "seed": self.seed, "restarts": self.restarts, **self.extra,
        }


class SynthFunction(Protocol):
    def __call__(self, topology: Topology, collective: Collective, options: SynthOptions) -> Schedule: ...


@dataclass(frozen=True)
class Algorithm:
    """A registered synthesizer and what it can do (for listings and app menus)."""

    name: str
    synthesize: SynthFunction
    collectives: frozenset[str]
    description: str
    kind: str = "classic"  # classic | optimal | heuristic
    options_used: tuple[str, ...] = ()  # which SynthOptions fields matter (the app shows only these)
    extra_keys: tuple[str, ...] = ()  # the algorithm-specific ``extra`` settings it reads (others are refused)

    def supports(self, collective_name: str) -> bool:
        return collective_name in self.collectives


REGISTRY: dict[str, Algorithm] = {}


def register(algorithm: Algorithm) -> Algorithm:
    REGISTRY[algorithm.name] = algorithm
    return algorithm


def get_algorithm(name: str) -> Algorithm:
    key = str(name).strip().lower()
    if key not in REGISTRY:
        raise CcvizError(
            f"algorithm: unknown algorithm {name!r}; choose one of {', '.join(sorted(REGISTRY))}", "algorithm"
        )
    return REGISTRY[key]


def algorithms_for(collective_name: str) -> list[str]:
    return sorted(name for name, alg in REGISTRY.items() if alg.supports(collective_name))


def synthesize(
    topology: Topology,
    collective: Collective,
    algorithm: str = "ring",
    options: SynthOptions | None = None,
) -> Schedule:
    """Run one registered algorithm, recording its wall-clock synthesis time and options."""
    alg = get_algorithm(algorithm)
    if not alg.supports(collective.name):
        raise CcvizError(
            f"algorithm: {alg.name} does not implement {collective.name}; "
            f"algorithms that do: {', '.join(algorithms_for(collective.name)) or 'none'}",
            "algorithm",
        )
    options = options or SynthOptions()
    unknown = sorted(set(options.extra) - set(alg.extra_keys))
    if unknown:
        takes = f"it takes {', '.join(alg.extra_keys)}" if alg.extra_keys else "it takes none"
        raise CcvizError(f"opt: {alg.name} has no option {unknown[0]!r}; {takes}", "opt")
    t0 = time.perf_counter()
    schedule = alg.synthesize(topology, collective, options)
    elapsed = time.perf_counter() - t0
    if schedule.synth_time_s is None:
        schedule.synth_time_s = elapsed
    schedule.algorithm = alg.name
    schedule.options = {**options.public(), **schedule.options}
    return schedule
