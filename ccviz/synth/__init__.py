"""Synthesizers. Importing this package registers every algorithm in ``REGISTRY``."""

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

# Each algorithm module registers itself on import (one line per module).

__all__ = [
    "REGISTRY", "Algorithm", "Progress", "SynthOptions", "algorithms_for", "get_algorithm", "register", "synthesize",
]
