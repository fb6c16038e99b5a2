"""Session hooks: print the fuzz suite's figures in the test log (whatever -r/-q options are given); shared fixtures."""

from __future__ import annotations

import threading

import pytest


def pytest_terminal_summary(terminalreporter) -> None:
    from tests.hostile import FIGURES

    if FIGURES["cases tried"]:
        terminalreporter.write_line(
            "fuzz figures: " + ", ".join(f"{name} {count}" for name, count in FIGURES.items()))


@pytest.fixture
def stop_at_first_offer():
    """Synthesis options whose Stop is set by the first schedule offered (``SynthOptions.best``), and the list the
    offers go into: what the app's Stop does right after a solve's first complete schedule."""
    from ccviz.synth.registry import SynthOptions

    stop = threading.Event()
    offers: list = []

    def offered(schedule) -> None:
        offers.append(schedule)
        stop.set()

    return SynthOptions(stop=stop, best=offered), offers
