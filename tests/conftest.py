"""Session hooks: print the fuzz suite's figures in the test log (whatever -r/-q options are given)."""

from __future__ import annotations


def pytest_terminal_summary(terminalreporter) -> None:
    from tests.hostile import FIGURES

    if FIGURES["cases tried"]:
        terminalreporter.write_line(
            "fuzz figures: " + ", ".join(f"{name} {count}" for name, count in FIGURES.items()))
