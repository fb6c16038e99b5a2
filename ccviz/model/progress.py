"""A progress report from long work (a synthesis, a sweep, a replay): one shape for the app and the CLI to
show, whichever stage reports it."""

from __future__ import annotations

from dataclasses import dataclass

from ccviz.model.units import format_time


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
