"""Synthesizers. Importing this package fills ``REGISTRY``: the textbook algorithms register
themselves, the others are declared in ``catalog`` and their code loads on first use."""

from ccviz.synth import (
    catalog,  # noqa: F401
    classic,  # noqa: F401
    composed_catalog,  # noqa: F401
    recursive_doubling,  # noqa: F401
)
from ccviz.synth.registry import (
    REGISTRY,
    Algorithm,
    Progress,
    SynthOptions,
    algorithms_for,
    get_algorithm,
    register,
    synthesize,
)

__all__ = [
    "REGISTRY", "Algorithm", "Progress", "SynthOptions", "algorithms_for", "get_algorithm", "register", "synthesize",
]
