"""Synthesizers. Importing this package registers every algorithm in ``REGISTRY``."""

# Each algorithm module registers itself on import (one line per module).
from ccviz.synth import (
    classic,  # noqa: F401
    forestcoll,  # noqa: F401
    mteg,  # noqa: F401
    tacos,  # noqa: F401
    teccl,  # noqa: F401
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
