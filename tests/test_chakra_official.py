"""MLCommons' own Chakra package (``mlc-chakra`` on PyPI, in the test extra) reads the ETs ccviz writes: its
published ``et_def_pb2`` and its stream reader (``protolib.decodeMessage``, what its jsonizer, visualizer and
converters use) decode every file, node for node, with and without the hardware link model."""

import sys

import pytest

pb = pytest.importorskip("chakra.schema.protobuf.et_def_pb2")
from chakra.src.jsonizer import jsonizer  # noqa: E402
from chakra.src.third_party.utils.protolib import decodeMessage, openFileRd  # noqa: E402

from ccviz import load_topology, make_collective, simulate, synthesize  # noqa: E402
from ccviz.interop.chakra import write_chakra  # noqa: E402
from ccviz.interop.chakra_schema import decode_stream  # noqa: E402


def _official_read(path):
    """GlobalMetadata and nodes as Chakra's own tools read a trace."""
    stream = openFileRd(str(path))
    try:
        meta = pb.GlobalMetadata()
        assert decodeMessage(stream, meta)
        nodes = []
        node = pb.Node()
        while decodeMessage(stream, node):
            nodes.append(node)
            node = pb.Node()
        return meta, nodes
    finally:
        stream.close()


@pytest.mark.parametrize("fabric", ["dgx1", "dgxh100"])  # alpha-beta; the hardware model's latency node
def test_mlcommons_reader_decodes_every_file_node_for_node(tmp_path, fabric):
    topo = load_topology(fabric)
    timeline = simulate(synthesize(topo, make_collective("allreduce", topo, 1e6), "ring"))
    paths, _ = write_chakra(timeline, tmp_path)
    sends = recvs = 0
    for path in paths:
        meta, nodes = _official_read(path)
        ours = decode_stream(path.read_bytes(), path.name)[1]
        assert meta.version == "0.0.4" and len(nodes) == len(ours) > 0
        assert [(n.id, n.type, list(n.data_deps)) for n in nodes] == [(n.id, n.type, list(n.data_deps)) for n in ours]
        ids = {n.id for n in nodes}
        for n in nodes:
            assert set(n.data_deps) <= ids
            attrs = {a.name: a for a in n.attr}
            if n.type in (pb.COMM_SEND_NODE, pb.COMM_RECV_NODE):
                assert attrs["comm_size"].int64_val == round(timeline.schedule.chunk_bytes)
                assert attrs["comm_src"].int32_val != attrs["comm_dst"].int32_val
        sends += sum(n.type == pb.COMM_SEND_NODE for n in nodes)
        recvs += sum(n.type == pb.COMM_RECV_NODE for n in nodes)
        if fabric == "dgxh100":
            assert nodes[0].type == pb.COMP_NODE and nodes[0].duration_micros == 20  # 12 us launch + 8.4 us base
    assert sends == recvs and sends % (2 * 7 * 8) == 0  # a ring AllReduce of 8 ranks per channel


def test_mlcommons_jsonizer_converts_a_trace(tmp_path, monkeypatch):
    topo = load_topology("ring:n=4")
    paths, _ = write_chakra(simulate(synthesize(topo, make_collective("allgather", topo, 1e6), "ring")), tmp_path)
    out = tmp_path / "rank0.json"
    monkeypatch.setattr(sys, "argv", ["chakra_jsonizer", "--input_filename", str(paths[0]),
                                      "--output_filename", str(out)])
    jsonizer.main()
    text = out.read_text()
    assert text.count('"COMM_SEND_NODE"') == 3 and text.count('"COMM_RECV_NODE"') == 3
