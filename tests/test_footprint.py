"""Runs that cannot fit in memory are refused up front with the estimate, never started."""

from __future__ import annotations

import pytest

import ccviz
from ccviz.cli import main
from ccviz.model.collectives import min_transfers
from ccviz.model.footprint import estimate_bytes


def test_min_transfers_counts_every_demand() -> None:
    topo = ccviz.load_topology("ring:n=8")
    assert min_transfers(ccviz.make_collective("allgather", topo, 1e6)) == 8 * 7
    assert min_transfers(ccviz.make_collective("broadcast", topo, 1e6, root=0)) == 7
    assert min_transfers(ccviz.make_collective("reducescatter", topo, 1e6)) == 8 * 7
    assert min_transfers(ccviz.make_collective("alltoall", topo, 1e6)) == 8 * 7


def test_a_4096_gpu_ring_allgather_is_refused_with_its_estimate(capsys, monkeypatch) -> None:
    monkeypatch.delenv("CCVIZ_MEMORY_GB", raising=False)
    code = main(["synth", "ring:n=4096", "--algorithm", "ring", "--size", "1GiB", "--json"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert "16,773,120 transfers" in err and "GB" in err
    assert estimate_bytes(16_773_120) > 8e9


def test_the_budget_follows_the_environment(monkeypatch) -> None:
    topo = ccviz.load_topology("ring:n=8")
    monkeypatch.setenv("CCVIZ_MEMORY_GB", "0.1")
    with pytest.raises(ccviz.CcvizError, match="budget"):
        ccviz.run(topo, "allgather", "ring", size_bytes=1e6)
    monkeypatch.setenv("CCVIZ_MEMORY_GB", "lots")
    with pytest.raises(ccviz.CcvizError, match="CCVIZ_MEMORY_GB"):
        ccviz.run(topo, "allgather", "ring", size_bytes=1e6)
    monkeypatch.setenv("CCVIZ_MEMORY_GB", "4")
    assert ccviz.run(topo, "allgather", "ring", size_bytes=1e6).timeline.verified
