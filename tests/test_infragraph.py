"""InfraGraph both ways: every builder's fabric survives ccviz -> InfraGraph -> ccviz with its limit exactly,
InfraGraph's own validation accepts what ccviz writes, a hand-written InfraGraph loads wherever a topology
file does, and a malformed one is refused in one line."""

import dataclasses
import json
from pathlib import Path

import pytest

pytest.importorskip("infragraph")

from infragraph.infragraph_service import InfraGraphService  # noqa: E402

from ccviz import make_collective, simulate, synthesize  # noqa: E402
from ccviz.bounds.limit import bandwidth_limit  # noqa: E402
from ccviz.builders import BUILDERS  # noqa: E402
from ccviz.builders.infragraph import infragraph_text, write_infragraph  # noqa: E402
from ccviz.builders.loading import load_topology  # noqa: E402
from ccviz.cli import main  # noqa: E402
from ccviz.errors import CcvizError  # noqa: E402

FIXTURES = Path(__file__).parent / "fixtures" / "infragraph"


def _limit(topology, collective="allgather"):
    return bandwidth_limit(topology, collective, 1e9).limit_s


def _links(topology):
    """The fabric's links as a multiset keyed by GPU/switch kind order (ids may be renumbered)."""
    order = {n: i for i, n in enumerate(topology.gpus + topology.switches)}
    return sorted((order[u], order[v], link.bandwidth_GBps, link.alpha_us, link.lanes)
                  for (u, v), link in topology.links.items())


def _round_trip(spec, tmp_path, suffix=".yaml"):
    topology = load_topology(spec)
    path = tmp_path / f"fabric{suffix}"
    write_infragraph(topology, path)
    return topology, load_topology(path)


@pytest.mark.parametrize("spec", ["dgx1", "dgx2:chassis=1", "ndv2", "a100:boxes=1", "dgxh100:boxes=2",
                                  "torus2d:dims=3x3", "fattree"])
def test_round_trip_keeps_links_and_limit_exactly(spec, tmp_path):
    before, after = _round_trip(spec, tmp_path)
    assert _links(after) == _links(before)
    assert [after.nodes[s].reduce for s in after.switches] == [before.nodes[s].reduce for s in before.switches]
    assert after.switch_hop == before.switch_hop
    for collective in ("allgather", "reducescatter"):
        assert _limit(after, collective) == _limit(before, collective)


@pytest.mark.parametrize(("spec", "algorithm"), [("dgxh100:boxes=2", "ring"), ("nvl72", "direct"),
                                                 ("mi300x", "nccl")])
def test_round_trip_keeps_the_hardware_model_and_the_finish_time(spec, algorithm, tmp_path):
    """The presets' hardware link model tells a NIC's hop by its switch's group and a box by its GPUs' group:
    the groups were lost on the way, so a 2-box DGX H100 schedule finished 20 us later after the round trip."""
    before, after = _round_trip(spec, tmp_path, ".json")
    assert after.meta == before.meta and "link_model" in after.meta and after.layout == before.layout
    assert [(n.id, n.kind, n.label, n.group, n.pos) for n in after.nodes.values()] == \
        [(n.id, n.kind, n.label, n.group, n.pos) for n in before.nodes.values()]
    schedule = synthesize(before, make_collective("allgather", before, 1e6), algorithm)
    moved = dataclasses.replace(schedule, topology=after)  # the same transfers on the read-back fabric
    assert simulate(moved).finish_time_s == simulate(schedule).finish_time_s


@pytest.mark.slow
def test_round_trip_of_every_builder(tmp_path):
    for name in sorted(BUILDERS):
        before, after = _round_trip(name, tmp_path, ".json")
        assert _limit(after) == _limit(before), name
        assert _links(after) == _links(before), name


def test_infragraphs_own_validation_accepts_what_ccviz_writes():
    service = InfraGraphService()
    service.set_graph(infragraph_text(load_topology("dgxh100:boxes=2")))
    graph = service.get_networkx_graph()
    assert sum(1 for _, d in graph.nodes(data=True) if d["type"] == "xpu") == 16
    assert {d["type"] for _, d in graph.nodes(data=True)} == {"xpu", "switch"}


def test_a_hand_written_infragraph_loads_as_a_topology():
    fabric = load_topology(FIXTURES / "two_hosts.yaml")
    assert fabric.n_gpus == 8 and len(fabric.switches) == 2
    assert sorted({(link.bandwidth_GBps, link.alpha_us) for link in fabric.links.values()}) == [(50.0, 0.5),
                                                                                                (100.0, 1.0)]
    assert _limit(fabric) == pytest.approx(7 / 8 * 1e9 / 50e9)  # each GPU takes in 7/8 GB over 50 GB/s
    assert any("undirected" in a for a in fabric.meta["assumptions"])


def test_cli_writes_infragraph_and_reads_it_back(tmp_path, capsys):
    out = tmp_path / "dgx1.yaml"
    assert main(["fabric", "dgx1", "--format", "infragraph", "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["limit", str(out), "-c", "allgather", "-s", "1GB", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["limit_s"] == _limit(load_topology("dgx1"))


def _infragraph_dgx_blueprint(tmp_path) -> Path:
    """InfraGraph's own DGX H100 blueprint, whose links name no bandwidth."""
    import infragraph as ig
    from infragraph.blueprints.devices.nvidia.dgx import NvidiaDGX

    device = NvidiaDGX()
    infra = ig.Infrastructure(name="dgx")
    infra.devices.append(device)
    infra.instances.add(name="dgx", device=device.name, count=1)
    path = tmp_path / "dgx.json"
    path.write_text(infra.serialize(encoding=infra.JSON))
    return path


@pytest.mark.parametrize(("make", "words"), [
    (_infragraph_dgx_blueprint, "link 'cpu_fabric' (infinity_fabric) has no bandwidth"),
    (lambda tmp: _edit(tmp, lambda d: d["instances"][0].update(device="nope")),
     "is not a valid InfraGraph (it refers to 'nope', which it does not define)"),
    (lambda tmp: _edit(tmp, lambda d: d["edges"][0].update(link="nope")), "names link 'nope', which is not defined"),
    (lambda tmp: _edit(tmp, lambda d: d["devices"][0]["edges"][0]["ep2"].update(component="nothere[0]")),
     "GPU 0 cannot reach GPU 1"),
    (lambda tmp: _edit(tmp, lambda d: d["devices"][0]["components"][0].update(count="four")),
     "does not follow the InfraGraph schema"),
    (lambda tmp: _edit(tmp, lambda d: d["devices"][0]["components"][0].update(choice="switch")),
     "has no xpu component"),
    (lambda tmp: _edit_written(tmp, "dgx1", lambda d: d["devices"][0]["components"][0].update(
        description='ccviz: {"nodes": [[0, "g", null, "left"]]}')), "is not [id, label, group, [x, y] or null]"),
    (lambda tmp: _edit_written(tmp, "dgx1", lambda d: d["devices"][0]["components"][0].update(
        description='ccviz: {"nodes": [[1, "", null, null], [1, "", null, null]]}')), "one id to several nodes"),
    (lambda tmp: _edit_written(tmp, "dgxh100", lambda d: d["instances"][0].update(description=d["instances"][0][
        "description"].replace('"launch_us"', '"lunch_us"'))), "unknown key(s) lunch_us"),
])
def test_malformed_infragraph_is_refused_in_one_line(tmp_path, make, words):
    with pytest.raises(CcvizError) as err:
        load_topology(make(tmp_path))
    assert words in str(err.value) and "\n" not in str(err.value)


def _edit(tmp_path, change) -> Path:
    import yaml

    data = yaml.safe_load((FIXTURES / "two_hosts.yaml").read_text())
    change(data)
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(data))
    return path


def _edit_written(tmp_path, spec: str, change) -> Path:
    """An InfraGraph ccviz wrote, edited by hand."""
    path = tmp_path / "written.json"
    write_infragraph(load_topology(spec), path)
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))
    return path


def test_lstopo_xml_goes_through_infragraphs_translator(tmp_path):
    bad = tmp_path / "machine.xml"
    bad.write_text("<topology><object type='Machine'")
    with pytest.raises(CcvizError, match="lstopo translator refused it"):
        load_topology(bad)
