"""Process groups (--ranks): parsing, refusals, rings over a group's own links, the group's limit."""

from __future__ import annotations

import json

import pytest

import ccviz
from ccviz.bounds.limit import bandwidth_limit
from ccviz.cli import main
from ccviz.errors import CcvizError
from ccviz.judge.simulate import simulate
from ccviz.model.collectives import make_collective
from ccviz.model.groups import group_ranks, needs_relays, parse_ranks, relay_fabric, span_text
from ccviz.runs.pipeline import run
from ccviz.synth.registry import synthesize


def test_parse_ranks_reads_ranges_and_lists():
    assert parse_ranks("0-3,16,18") == [0, 1, 2, 3, 16, 18]
    assert span_text([0, 1, 2, 3, 16, 18]) == "0-3,16,18"
    for bad in ("", "a", "3-1", "1-", "-2"):
        with pytest.raises(CcvizError, match="ranks"):
            parse_ranks(bad)


def test_group_ranks_refuses_switches_absent_and_repeated_gpus():
    ndv2 = ccviz.load_topology("ndv2:chassis=4")  # node 0 is the NIC switch, GPUs are 1-32
    with pytest.raises(CcvizError, match="switch"):
        group_ranks(ndv2, "0-3")
    with pytest.raises(CcvizError, match="not in"):
        group_ranks(ndv2, [1, 99])
    with pytest.raises(CcvizError, match="twice"):
        group_ranks(ndv2, [1, 2, 1])
    with pytest.raises(CcvizError, match="at least two"):
        group_ranks(ndv2, [3])
    assert group_ranks(ndv2, "1-4") == (1, 2, 3, 4)


def test_ring_over_a_torus_row_stays_in_the_row(capsys):
    code = main(["synth", "torus2d:dims=4x4", "-c", "allreduce", "-a", "ring", "--ranks", "0-3", "-s", "1MB",
                 "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    data = json.loads(out)
    assert data["verified"]
    topo = ccviz.load_topology("torus2d:dims=4x4")
    result = run(topo, "allreduce", "ring", 1e6, ranks="0-3")
    nodes = {n for t in result.timeline.schedule.transfers for n in (t.src, t.dst)}
    assert nodes == {0, 1, 2, 3}
    assert data["finish_time_s"] == pytest.approx(result.finish_time_s)
    # three reduce-scatter and three all-gather steps of 1 MB/4 over 50 GB/s links, alpha 0.5 us
    assert result.finish_time_s == pytest.approx(6 * (0.5e-6 + 0.25e6 / 50e9))


@pytest.mark.parametrize("algorithm", ["ring", "ring-bidir", "direct", "dbt", "rhd", "tree", "tacos", "mteg"])
def test_every_algorithm_runs_a_group_that_needs_relays(algorithm):
    ndv2 = ccviz.load_topology("ndv2:chassis=4")
    ranks = [1, 9, 17, 25]  # one GPU per box: only GPUs 2, 10, 18, 26 reach the NIC switch
    assert needs_relays(ndv2, ranks)
    coll = make_collective("allreduce", ranks, 1e6)
    timeline = simulate(synthesize(ndv2, coll, algorithm))
    assert timeline.verified, timeline.violations[:1]


@pytest.mark.parametrize("name", ["allgather", "reducescatter", "allreduce"])
def test_forestcoll_runs_a_group_over_the_whole_fabric(name):
    torus = ccviz.load_topology("torus2d:dims=4x4")
    schedule = synthesize(torus, make_collective(name, [0, 1, 2, 3], 1e6), "forestcoll")
    assert schedule.collective.ranks == (0, 1, 2, 3)  # re-chunked over the group, not the whole fabric
    timeline = simulate(schedule)
    assert timeline.verified, timeline.violations[:1]
    assert {n for t in schedule.transfers for n in (t.src, t.dst)} - {0, 1, 2, 3}  # other GPUs relay


def test_group_limit_counts_only_the_group_and_lets_others_relay():
    torus = ccviz.load_topology("torus2d:dims=4x4,bw=50")
    row = relay_fabric(torus, [0, 1, 2, 3])
    assert row.gpus == [0, 1, 2, 3]
    limit = bandwidth_limit(row, "allgather", 1e6)
    # each GPU must receive 3 shards of 250 kB over its 4 links of 50 GB/s (two of them from relays)
    assert limit.limit_s == pytest.approx(3 * 0.25e6 / 200e9)
    whole = relay_fabric(torus, torus.gpus)
    assert bandwidth_limit(whole, "allgather", 1e6).limit_s == pytest.approx(
        bandwidth_limit(torus, "allgather", 1e6).limit_s)
    result = run(torus, "allgather", "ring", 1e6, ranks=[0, 1, 2, 3])
    assert result.limit_s == pytest.approx(limit.limit_s)
    assert result.finish_time_s >= result.limit_s


def test_cli_limit_and_bad_ranks_are_one_line(capsys):
    assert main(["limit", "torus2d:dims=4x4", "-c", "allgather", "--ranks", "0-3", "-s", "1MB", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["ranks"] == [0, 1, 2, 3]
    for ranks in ("0,99", "0,x", "0,0"):
        assert main(["synth", "torus2d:dims=4x4", "--ranks", ranks]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("ccviz: error: ranks")


def test_compare_and_grid_take_a_group():
    from ccviz.runs.compare import compare
    from ccviz.runs.grid import Grid

    torus = ccviz.load_topology("torus2d:dims=4x4,bw=50")
    table = compare(torus, "allgather", ["ring", "direct"], [1e6], ranks="0-3")
    assert table["verified"].all()
    assert table["limit_s"].iloc[0] == pytest.approx(3 * 0.25e6 / 200e9)  # the group's limit, not the fabric's
    grid = Grid.make("torus2d:dims=4x4", "allgather", "ring", "1MB", ranks="0-3")
    assert dict(grid.points()[0].options)["ranks"] == "0,1,2,3"
    with pytest.raises(CcvizError, match="ranks: GPU 16 is not in"):
        Grid.make("torus2d:dims=4x4", "allgather", "ring", "1MB", ranks="0,16")
