"""Whether an algorithm can run on a fabric at all, whatever the size: dimdecomp needs a grid, hierarchical two
tiers, inc reducing switches. Compare's defaults hold only the algorithms that run on the chosen fabric (on DGX-1
it defaulted to dimdecomp and hierarchical, which fail there)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ccviz.errors import CcvizError
from ccviz.model.topology import Topology


def _grid(topology: Topology) -> None:
    from ccviz.synth.dimdecomp import grid_coordinates

    grid_coordinates(topology)


def _tiers(topology: Topology) -> None:
    from ccviz.synth.hierarchical import infer_groups

    infer_groups(topology)


def _reducing_switches(topology: Topology) -> None:
    if not topology.reducing_switches:
        raise CcvizError("topology: inc needs switches that reduce in the network (reduce=true)", "topology")


_NEEDS: dict[str, Callable[[Topology], None]] = {"dimdecomp": _grid, "hierarchical": _tiers, "inc": _reducing_switches}


def unfit_reason(topology: Topology, algorithm: str) -> str | None:
    """The one-line reason ``algorithm`` cannot run on ``topology`` (its own refusal), or None where it can."""
    check = _NEEDS.get(algorithm)
    if check is None:
        return None
    try:
        check(topology)
    except CcvizError as exc:
        return str(exc).removeprefix("topology: ")
    return None


def fitting(topology: Topology, algorithms: Sequence[str]) -> list[str]:
    """The algorithms of ``algorithms`` that run on ``topology``, in order."""
    return [a for a in algorithms if unfit_reason(topology, a) is None]
