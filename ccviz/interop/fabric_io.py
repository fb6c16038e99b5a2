"""Write any fabric to a file a person or another tool reads: ccviz's own JSON or InfraGraph.

One entry point, ``write_fabric``, serves `ccviz fabric SPEC --format json|infragraph --out FILE` and
`ccviz fabric --from-nvidia-smi topo.txt`.
"""

from __future__ import annotations

from pathlib import Path

from ccviz.errors import CcvizError
from ccviz.model.topology import Topology

FABRIC_FORMATS = ("json", "infragraph")


def write_fabric(topology: Topology, path: str | Path, fmt: str = "json") -> Path:
    """Write ``topology`` as ``fmt`` to ``path`` and return the path written."""
    out = Path(path)
    if fmt == "json":
        out.write_text(topology.to_json())
    elif fmt == "infragraph":
        from ccviz.builders.infragraph import write_infragraph

        write_infragraph(topology, out)
    else:
        raise CcvizError(f"format: unknown fabric format {fmt!r}; choose one of {', '.join(FABRIC_FORMATS)}",
                         "format")
    return out
