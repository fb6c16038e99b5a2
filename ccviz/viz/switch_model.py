"""How a switch hop is charged, in words for Learn, and the same run under the other model.

The Collectives Explainer's star costs one alpha per endpoint-to-endpoint traversal (the switch is cut-through:
``switch_hop="free"``, ring AllReduce on 8 GPUs at 16 MB = 567 us); ccviz's default star charges both hops of a
switch crossing in full (``"paid"``, store-and-forward: 1,134 us). Learn names the model it runs and lets the
student see what the other one costs.
"""

from __future__ import annotations

from ccviz.model.topology import SWITCH_HOPS, Topology

_SHORT = {
    "free": "one α per GPU-to-GPU traversal — the switch forwards cut-through, its hop out adds no time "
            "(the Collectives Explainer's star)",
    "paid": "store-and-forward — both hops of a switch crossing are charged α + bytes/BW, so a traversal costs "
            "two of each",
    "teccl": "the hop out of a switch is charged its α but not a second serialization (TE-CCL's published runs)",
}


def switch_model_words(topology: Topology) -> str:
    """The fabric's switch model in one sentence (``switch_hop=...`` named, so a student can find it)."""
    hop = topology.switch_hop
    return f"switch_hop={hop}: {_SHORT.get(hop, SWITCH_HOPS.get(hop, hop))}"


def other_switch_model(topology: Topology) -> Topology:
    """The same fabric under the other teaching model: cut-through <-> store-and-forward."""
    return topology.with_changes(switch_hop="paid" if topology.switch_hop == "free" else "free")


def switch_model_time(topology: Topology, collective: str, algorithm: str, size: float, chunks: int) -> float:
    """Simulated finish of the algorithm on this fabric (the switch model is the fabric's)."""
    from ccviz.runs.pipeline import run

    return run(topology, collective, algorithm, size, chunks).finish_time_s
