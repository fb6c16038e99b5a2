"""Collectives as chunk pre/postconditions, with nccl-tests sizes."""

from __future__ import annotations

import pytest

from ccviz import CcvizError, custom_collective, load_topology, make_collective
from ccviz.model.collectives import COLLECTIVES, normalize_name
from ccviz.model.units import format_size, parse_size, size_sweep
from tests.paths import REFERENCE

RANKS = [0, 1, 2, 3]


def test_allgather_chunks_start_at_their_source_and_go_everywhere():
    coll = make_collective("allgather", RANKS, 8e6, chunks_per_rank=2)
    assert len(coll.chunks) == 8 and coll.chunk_bytes == 1e6
    for c in coll.chunks:
        assert c.pre == {c.source} and c.post == set(RANKS) and not c.reduce
    assert len(list(coll.demands())) == 8 * 3


@pytest.mark.parametrize(
    "name, n_chunks, chunk_bytes, busbw",
    [
        ("allgather", 4, 1e6, 0.75), ("reducescatter", 4, 1e6, 0.75), ("allreduce", 4, 1e6, 1.5),
        ("alltoall", 12, 1e6, 0.75), ("broadcast", 1, 4e6, 1.0), ("reduce", 1, 4e6, 1.0),
        ("gather", 3, 1e6, 0.75), ("scatter", 3, 1e6, 0.75),
    ],
)
def test_sizes_and_busbw_follow_nccl_tests(name, n_chunks, chunk_bytes, busbw):
    coll = make_collective(name, RANKS, 4e6)
    assert len(coll.chunks) == n_chunks
    assert coll.chunk_bytes == pytest.approx(chunk_bytes)
    assert coll.busbw_factor == pytest.approx(busbw)


def test_reductions_name_every_contributor():
    rs = make_collective("reducescatter", RANKS, 4e6)
    assert all(c.reduce and c.pre == set(RANKS) and c.post == {c.source} for c in rs.chunks)
    ar = make_collective("allreduce", RANKS, 4e6)
    assert all(c.post == set(RANKS) for c in ar.chunks)
    red = make_collective("reduce", RANKS, 4e6, root=2)
    assert red.root == 2 and red.chunks[0].post == {2}


def test_rooted_collectives_check_the_root():
    assert make_collective("broadcast", RANKS, 1e6).root == 0
    with pytest.raises(CcvizError, match="root"):
        make_collective("broadcast", RANKS, 1e6, root=9)


def test_ranks_are_gpu_ids_and_as_run_buffers_split_over_all_nodes():
    topo = load_topology(REFERENCE / "ndv2_2chassis_teccl_as_run.json")
    coll = make_collective("allgather", topo, 1e9)
    assert coll.ranks == tuple(range(1, 16))
    assert coll.chunk_bytes == pytest.approx(1e9 / 16)


def test_custom_demand_matrix():
    coll = custom_collective(RANKS, [[0, 2, 0, 0], [0, 0, 1, 0], [0, 0, 0, 0], [1, 0, 0, 0]], 1e6)
    assert len(coll.chunks) == 4
    assert sorted((min(c.pre), min(c.post)) for c in coll.chunks) == [(0, 1), (0, 1), (1, 2), (3, 0)]
    with pytest.raises(CcvizError, match="demand"):
        custom_collective(RANKS, [[0, 1], [1, 0]], 1e6)


@pytest.mark.parametrize("bad, field", [("allsmash", "collective"), ("", "collective")])
def test_bad_collective_names(bad, field):
    with pytest.raises(CcvizError) as err:
        normalize_name(bad)
    assert err.value.field == field


def test_aliases_and_every_name_builds():
    assert normalize_name("All-Reduce") == "allreduce"
    for name in COLLECTIVES:
        assert make_collective(name, RANKS, 1e6).name == name
    with pytest.raises(CcvizError, match="chunks"):
        make_collective("allgather", RANKS, 1e6, chunks_per_rank=0)


def test_units():
    assert parse_size("1GB") == 1e9 and parse_size("64KiB") == 65536 and parse_size("1.5MB") == 1.5e6
    assert parse_size(4096) == 4096
    for bad in ("lots", "-1MB", "0"):
        with pytest.raises(CcvizError, match="size"):
            parse_size(bad)
    assert format_size(1e9) == "1GB" and format_size(256e3) == "256KB" and format_size(2**20) == "1MiB"
    sweep = size_sweep(1e3, 1e9)
    assert sweep[0] == 1e3 and sweep[-1] == 1e9 and len(sweep) == 11
