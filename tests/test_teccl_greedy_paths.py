"""The epoch greedy never routes a chunk around a loop of switches (issue 26, item 17).

On ``dragonfly:groups=3,routers=2,gpus=1,copy=false,switch_hop=teccl`` the greedy used 9 -> 8 -> 9 -> 8 as a
way to wait an epoch: in continuous time the chunk re-entered link 9->8 while still serializing on it, and
teccl-astar's AllReduce (its ReduceScatter half is this greedy, reversed) failed the judge.
"""

from __future__ import annotations

import time

import pytest

from ccviz import load_topology, make_collective
from ccviz.synth.registry import SynthOptions
from ccviz.synth.reversal import mirror_fabric
from ccviz.synth.teccl import greedy
from ccviz.synth.teccl.synthesizer import EpochSolver

SPEC = "dragonfly:groups=3,routers=2,gpus=1,copy=false,switch_hop=teccl"


def _paths(monkeypatch, topology, collective) -> list[list[tuple[int, int, int]]]:
    found: list[list[tuple[int, int, int]]] = []
    original = greedy.EpochGreedy._nearest_destination

    def recording(self, *args):  # noqa: ANN001, ANN202
        dest, path = original(self, *args)
        found.append(path)
        return dest, path

    monkeypatch.setattr(greedy.EpochGreedy, "_nearest_destination", recording)
    EpochSolver(topology, collective, SynthOptions(), time.perf_counter() + 60, time.perf_counter()).greedy_plan()
    return found


@pytest.mark.parametrize("mirrored", [False, True])
@pytest.mark.parametrize("name", ["allgather", "broadcast"])
def test_no_greedy_path_visits_a_node_twice(monkeypatch, mirrored, name):
    topology = load_topology(SPEC)
    topology = mirror_fabric(topology) if mirrored else topology
    paths = _paths(monkeypatch, topology, make_collective(name, topology, 5818755, 2))
    assert paths
    for path in paths:
        nodes = [path[0][0]] + [j for _, j, _ in path]
        assert len(nodes) == len(set(nodes)), path


def test_the_check_is_what_prevents_the_loops(monkeypatch):
    # Without the pass check the same search does loop on this fabric: the test above can fail.
    monkeypatch.setattr(greedy.EpochGreedy, "_switch_chain", lambda self, parent, state: set())
    topology = mirror_fabric(load_topology(SPEC))
    paths = _paths(monkeypatch, topology, make_collective("broadcast", topology, 5818755, 2))
    paths += _paths(monkeypatch, topology, make_collective("allgather", topology, 5818755, 2))
    assert any(len({p[0][0]} | {j for _, j, _ in p}) < len(p) + 1 for p in paths)
