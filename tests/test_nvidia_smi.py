"""`nvidia-smi topo -m` import: real published matrices become the fabrics of the boxes they came from."""

import re
from pathlib import Path

import pytest

from ccviz import make_collective, simulate, synthesize
from ccviz.bounds.limit import bandwidth_limit
from ccviz.builders.loading import load_topology
from ccviz.cli import main
from ccviz.errors import CcvizError
from ccviz.interop.nvidia_smi import parse_topo_matrix, topo_to_fabric
from ccviz.model.topology import Topology

FIXTURES = Path(__file__).parent / "fixtures" / "nvidia_smi"


def _text(name: str) -> str:
    return (FIXTURES / name).read_text()


def _allgather_limit(topology) -> float:
    return bandwidth_limit(topology, "allgather", 1e9).limit_s


@pytest.mark.parametrize(("fixture", "preset"), [("dgx1_v100.txt", "dgx1"), ("dgxh100.txt", "dgxh100"),
                                                ("hgx_a100_8nic.txt", "dgxa100")])
def test_published_matrix_has_the_presets_allgather_limit(fixture, preset):
    """Under the preset's hardware link model by default, and at spec rates with model alphabeta on both."""
    fabric = topo_to_fabric(_text(fixture))
    assert fabric.n_gpus == 8
    assert _allgather_limit(fabric) == _allgather_limit(load_topology(preset))
    textbook = topo_to_fabric(_text(fixture), model="alphabeta")
    assert "link_model" not in textbook.meta
    assert _allgather_limit(textbook) == _allgather_limit(load_topology(preset + ("" if preset == "dgx1" else
                                                                                  ":model=alphabeta")))


@pytest.mark.parametrize(("fixture", "preset"), [("dgxh100.txt", "dgxh100"), ("hgx_a100_8nic.txt", "dgxa100")])
def test_an_imported_box_runs_a_schedule_as_its_preset_does(fixture, preset):
    """The import declared no link model, so the box a user pasted was judged by the textbook rule while the
    preset of the same box was judged by the hardware model: the same ring took 28-35% longer on the import
    (its NVSwitch charged two serializations, a cut-through switch one)."""
    fabric, box = topo_to_fabric(_text(fixture)), load_topology(preset)
    assert fabric.meta["link_model"] == box.meta["link_model"]
    finish = [simulate(synthesize(t, make_collective("allgather", t, 64e6), "ring")).finish_time_s for t in (fabric, box)]
    assert finish[0] == finish[1]


def test_dgx1_reads_the_hybrid_cube_mesh_link_for_link():
    import networkx as nx

    fabric = topo_to_fabric(_text("dgx1_v100.txt"))
    dgx1 = load_topology("dgx1")

    def graph(t):
        g = nx.Graph()
        g.add_weighted_edges_from((u, v, link.bandwidth_GBps) for (u, v), link in t.links.items())
        return g

    # the same cube-mesh up to GPU numbering (this machine numbers its GPUs unlike TE-CCL's file)
    assert nx.is_isomorphic(graph(fabric), graph(dgx1), edge_match=lambda a, b: a["weight"] == b["weight"])
    assert fabric.meta["gpu"] == "v100"
    assert fabric.meta["nics"] == [{"nic": "mlx5_0", "name": "mlx5_0", "locality": "PIX", "gpus": [2, 3]}]
    assert any("PCIe" in a for a in fabric.meta["assumptions"])


def test_nvswitch_box_is_one_switch_and_its_generation_is_inferred_and_overridable():
    h100 = topo_to_fabric(_text("dgxh100.txt"))  # merged cells ('NODENODE') are split apart
    assert len(h100.switches) == 1 and h100.reducing_switches
    assert {link.bandwidth_GBps for link in h100.links.values()} == {450.0}
    assert len(h100.meta["nics"]) == 12
    b200 = topo_to_fabric(_text("dgxh100.txt"), gpu="b200")
    assert {link.bandwidth_GBps for link in b200.links.values()} == {900.0}
    a100_rates = topo_to_fabric(_text("dgxh100.txt").replace("NV18", "NV12"))
    assert a100_rates.meta["gpu"] == "a100" and not a100_rates.reducing_switches
    assert {link.bandwidth_GBps for link in a100_rates.links.values()} == {300.0}


def test_fabric_file_round_trips(tmp_path):
    out = tmp_path / "box.json"
    assert main(["fabric", "--from-nvidia-smi", str(FIXTURES / "dgx1_v100.txt"), "--out", str(out)]) == 0
    again = load_topology(out)
    assert isinstance(again, Topology) and _allgather_limit(again) == _allgather_limit(load_topology("dgx1"))


@pytest.mark.parametrize(("text", "words"), [
    (_text("dgxa100_truncated.txt"), "GPU5, GPU6, GPU7 but their rows are missing"),
    ("", "empty"),
    ("hello world\n", "no header line"),
    (_text("dgx1_v100.txt").replace("GPU1    NV1      X      NV2     NV1", "GPU1    NV2      X      NV2     NV1"),
     "GPU0->GPU1 reads NV1 but GPU1->GPU0 reads NV2"),
    (_text("dgx1_v100.txt").replace("GPU3    NV2     NV1     NV2", "GPU3    NV2     NV1     XYZ"),
     "'XYZ' is not a topo -m entry"),
    (_text("dgx1_v100.txt").replace("NV1", "SYS").replace("NV2", "SYS"), "no GPU pair is joined by NVLink"),
])
def test_malformed_matrix_is_refused_in_one_line(text, words):
    with pytest.raises(CcvizError) as err:
        topo_to_fabric(text)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_unknown_gpu_and_cli_errors(tmp_path, capsys):
    with pytest.raises(CcvizError, match="unknown GPU generation"):
        topo_to_fabric(_text("dgx1_v100.txt"), gpu="p100")
    with pytest.raises(CcvizError, match="'roofline' is not one of hardware, alphabeta"):
        topo_to_fabric(_text("dgx1_v100.txt"), model="roofline")
    assert main(["fabric", "dgx1", "--model", "alphabeta", "--out", str(tmp_path / "y.json")]) == 2
    assert "applies to --from-nvidia-smi only" in capsys.readouterr().err
    assert main(["fabric", "--from-nvidia-smi", str(FIXTURES / "dgxa100_truncated.txt"),
                 "--out", str(tmp_path / "x.json")]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_parse_keeps_affinity():
    matrix = parse_topo_matrix(_text("dgx1_v100.txt"))
    assert matrix.affinity["GPU4"] == "12-23,36-47"
    assert matrix.nics == ["mlx5_0"]


def test_a100_box_reads_nv12_nics_and_numa():
    """A complete published 8 x A100-SXM4 matrix (DeepEP issue 13): NV12 through NVSwitch at A100 rates,
    each of the 8 ConnectX NICs beside its GPU pair (PXB), and the two NUMA nodes."""
    fabric = topo_to_fabric(_text("hgx_a100_8nic.txt"))
    assert fabric.meta["gpu"] == "a100" and len(fabric.switches) == 1 and not fabric.reducing_switches
    assert {link.bandwidth_GBps for link in fabric.links.values()} == {300.0}
    assert [(nic["name"], nic["locality"], nic["gpus"]) for nic in fabric.meta["nics"]] == \
        [(f"mlx5_{k}", "PXB", [k // 2 * 2, k // 2 * 2 + 1]) for k in range(8)]
    assert fabric.meta["numa"] == {f"GPU{g}": str(g // 4) for g in range(8)}
    assert fabric.meta["affinity"]["GPU5"] == "32-63,96-127 1"
    assert any("meta.numa: 2 node set(s)" in a for a in fabric.meta["assumptions"])


def test_numa_is_left_out_where_a_tracker_ran_its_columns_together():
    """'0N/A' (NUMA Affinity run into GPU NUMA ID, as some trackers print it) names no NUMA node: none is guessed."""
    text = _text("dgxh100.txt")
    assert parse_topo_matrix(text).numa == {f"GPU{g}": str(g // 4) for g in range(8)}
    merged = re.sub(r"\t(\d)\t\tN/A", r"\t\1N/A", text)
    assert merged != text and parse_topo_matrix(merged).numa == {}


def test_cli_writes_the_box_with_or_without_the_hardware_model(tmp_path, capsys):
    source = str(FIXTURES / "hgx_a100_8nic.txt")
    for flags, declared in (([], True), (["--model", "alphabeta"], False)):
        out = tmp_path / f"box{len(flags)}.json"
        assert main(["fabric", "--from-nvidia-smi", source, *flags, "--out", str(out)]) == 0
        assert ("link_model" in load_topology(out).meta) is declared
    assert "judged with the dgxa100 preset's hardware link model" in capsys.readouterr().err
