"""Topology model: validation errors, project JSON/YAML io, reference-format loading, reversed()."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from ccviz import CcvizError, Link, Node, Topology, load_topology
from ccviz.builders import build
from tests.paths import REFERENCE

REFERENCE_DIR = REFERENCE
REFERENCE_FILES = sorted(REFERENCE_DIR.glob("*.json"))


def gpus(*ids: int) -> list[Node]:
    return [Node(i, "gpu") for i in ids]


def cable(u: int, v: int, bw: float = 50.0, alpha: float = 0.5) -> list[Link]:
    return [Link(u, v, bw, alpha), Link(v, u, bw, alpha)]


# ---------------------------------------------------------------- validation
VALIDATION_CASES = {
    "unknown node": (gpus(0, 1), [*cable(0, 1), Link(1, 5, 50, 0.5)], "links", "unknown node 5"),
    "zero bandwidth": (gpus(0, 1), [Link(0, 1, 0.0, 0.5), Link(1, 0, 50, 0.5)], "bandwidth_GBps",
                       "link 0->1 has bandwidth 0.0; it must be a number of GB/s between"),
    "negative bandwidth": (gpus(0, 1), [Link(0, 1, -5.0, 0.5), Link(1, 0, 50, 0.5)], "bandwidth_GBps",
                           "bandwidth -5.0"),
    "negative alpha": (gpus(0, 1), [Link(0, 1, 50, -0.1), Link(1, 0, 50, 0.5)], "alpha_us", "alpha -0.1"),
    "self-loop": (gpus(0, 1), [*cable(0, 1), Link(1, 1, 50, 0.5)], "links", "link 1->1 is a self-loop"),
    "duplicate link": (gpus(0, 1), [*cable(0, 1), Link(0, 1, 25, 0.5)], "links", "duplicate link 0->1"),
    "duplicate node": ([*gpus(0, 1), Node(1, "switch")], cable(0, 1), "nodes", "node id 1 appears twice"),
    "disconnected": (gpus(0, 1, 2, 3), [*cable(0, 1), *cable(2, 3)], "links", "GPU 0 cannot reach GPU 2"),
    "one-way only": (gpus(0, 1), [Link(0, 1, 50, 0.5)], "links", "GPU 0 cannot be reached from GPU 1"),
    "empty": ([], [], "nodes", "the topology is empty"),
    "single GPU": ([Node(0, "gpu"), Node(1, "switch")], cable(0, 1), "nodes", "at least two GPUs"),
    "bad kind": ([*gpus(0, 1), Node(2, "router")], cable(0, 1), "nodes", "kind 'router'"),
    "zero lanes": (gpus(0, 1), [Link(0, 1, 50, 0.5, lanes=0), Link(1, 0, 50, 0.5)], "lanes", "lanes 0"),
}


@pytest.mark.parametrize("case", sorted(VALIDATION_CASES))
def test_validation_names_the_problem(case: str) -> None:
    nodes, links, field, fragment = VALIDATION_CASES[case]
    with pytest.raises(CcvizError) as err:
        Topology("bad", nodes, links)
    assert err.value.field == field
    assert fragment in str(err.value)


def test_gpus_connected_through_a_switch_are_valid() -> None:
    topo = Topology("via-switch", [*gpus(0, 1), Node(2, "switch")], [*cable(0, 2), *cable(1, 2)])
    assert topo.gpus == [0, 1] and topo.switches == [2]


def test_bad_switch_hop_is_rejected() -> None:
    with pytest.raises(CcvizError, match="switch_hop"):
        Topology("t", gpus(0, 1), cable(0, 1), switch_hop="cheap")


def test_with_changes_revalidates() -> None:
    topo = build("ring:n=4")
    with pytest.raises(CcvizError, match="cannot"):
        topo.with_changes(links=[lk for lk in topo.links.values() if lk.src != 0])
    renamed = topo.with_changes(name="r", description="d")
    assert renamed.name == "r" and renamed.links == topo.links and topo.name == "ring4"


def test_bad_file_reports_file_name_and_field(tmp_path: Path) -> None:
    data = build("ring:n=3").to_dict()
    data["links"][0]["bandwidth_GBps"] = -50
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(data))
    with pytest.raises(CcvizError) as err:
        load_topology(path)
    assert str(err.value).startswith("broken.json: links[0].bandwidth_GBps:") and err.value.field == "bandwidth_GBps"


@pytest.mark.parametrize(("text", "fragment"), [
    ("{not json", "is not valid JSON"),
    ('{"nodes": 3}', "needs both a 'nodes' and a 'links' entry"),
    ('{"nodes": [{"kind": "gpu"}], "links": []}', "each node needs an integer 'id'"),
    ('{"nodes": [0, 1], "links": [{"src": 0, "dst": 1}]}', "missing bandwidth_GBps"),
    ('{"nodes": [0, 1], "links": [{"src": 0, "dst": 1, "bandwidth_GBps": "fast"}]}', "links[0]"),
    ('{"nodes": 3, "switches": [7], "links": []}', "switch id 7 is outside 0..2"),
])
def test_malformed_files(tmp_path: Path, text: str, fragment: str) -> None:
    path = tmp_path / "t.json"
    path.write_text(text)
    with pytest.raises(CcvizError) as err:
        load_topology(path)
    assert fragment in str(err.value)


def test_missing_file() -> None:
    with pytest.raises(CcvizError, match="does not exist"):
        load_topology("no/such/topology.json")


# ------------------------------------------------------------- project io
@pytest.mark.parametrize("spec", ["ring:n=5,bidirectional=false", "star:n=4,copy=false", "amd:chassis=2",
                                  "rfs3d:dims=2x2x2", "dragonfly:groups=3,routers=2,gpus=1", "fattree:k=4"])
def test_json_round_trip_keeps_everything(tmp_path: Path, spec: str) -> None:
    topo = build(spec)
    path = tmp_path / "t.json"
    topo.save(path)
    loaded = load_topology(path)
    assert loaded.to_dict() == topo.to_dict()
    assert loaded.nodes == topo.nodes and loaded.links == topo.links
    assert (loaded.name, loaded.layout, loaded.switch_hop, loaded.meta) == (topo.name, topo.layout, topo.switch_hop,
                                                                             topo.meta)


def test_json_round_trip_of_lanes_and_free_switch_hop(tmp_path: Path) -> None:
    topo = Topology("custom", [*gpus(0, 1), Node(2, "switch", "spine", copy=False, group="net", pos=(0.5, 1.0))],
                    [Link(0, 2, 50, 0.5, lanes=2), Link(2, 0, 50, 0.5), *cable(1, 2, 25, 1.0)],
                    switch_hop="free", description="hand made", meta={"owner": "tests"})
    path = tmp_path / "custom.json"
    topo.save(path)
    loaded = load_topology(path)
    assert loaded.links[(0, 2)].lanes == 2 and loaded.switch_hop == "free"
    assert loaded.nodes[2] == topo.nodes[2] and loaded.meta == {"owner": "tests"}
    assert loaded.description == "hand made"
    assert loaded.nodes[0].label == "GPU0"  # an unlabelled node gets its default label


def test_yaml_load(tmp_path: Path) -> None:
    path = tmp_path / "tiny.yaml"
    path.write_text(
        "name: tiny\n"
        "nodes:\n"
        "  - {id: 0, kind: gpu}\n"
        "  - {id: 1, kind: gpu, group: box}\n"
        "  - {id: 2, kind: switch, copy: false}\n"
        "links:\n"
        "  - {src: 0, dst: 2, bandwidth_GBps: 50, alpha_us: 0.5}\n"
        "  - {src: 2, dst: 0, bandwidth_GBps: 50, alpha_us: 0.5}\n"
        "  - {src: 1, dst: 2, bandwidth_GBps: 25}\n"
        "  - {src: 2, dst: 1, bandwidth_GBps: 25}\n"
    )
    topo = load_topology(path)
    assert topo.name == "tiny" and topo.gpus == [0, 1] and topo.switches == [2]
    assert not topo.nodes[2].copy and topo.nodes[1].group == "box"
    assert topo.link(1, 2).alpha_us == 0.0 and topo.link(0, 2).bandwidth_GBps == 50.0


def test_yaml_round_trip_of_project_format(tmp_path: Path) -> None:
    topo = build("ndv2:chassis=1")
    path = tmp_path / "ndv2.yml"
    path.write_text(yaml.safe_dump(topo.to_dict()))
    assert load_topology(path).to_dict() == topo.to_dict()


# --------------------------------------------------------- reference format
def test_reference_directory_is_complete() -> None:
    assert {p.stem for p in REFERENCE_FILES} >= {
        "dgx1", "ndv2_1chassis", "ndv2_2chassis", "ndv2_4chassis", "ndv2_2chassis_teccl_as_run", "dgx2_2chassis",
        "amd_1chassis", "amd_2chassis",
    }


@pytest.mark.parametrize("path", REFERENCE_FILES, ids=[p.stem for p in REFERENCE_FILES])
def test_reference_files_load_as_they_are(path: Path) -> None:
    data = json.loads(path.read_text())
    topo = load_topology(path)
    assert topo.name == data["name"]
    assert sorted(topo.nodes) == list(range(data["nodes"]))
    assert topo.switches == sorted(data["switches"]) and topo.gpus == sorted(data["gpus"])
    assert {(lk["src"], lk["dst"], lk["bandwidth_GBps"], lk["alpha_us"]) for lk in data["links"]} == {
        (lk.src, lk.dst, lk.bandwidth_GBps, lk.alpha_us) for lk in topo.links.values()
    }
    assert topo.switch_hop == ("teccl" if path.stem.endswith("_teccl_as_run") else "paid")
    assert all(topo.nodes[s].copy for s in topo.switches)


def test_reference_file_loads_by_relative_and_absolute_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REFERENCE_DIR)
    assert load_topology("dgx1.json").links == load_topology(REFERENCE_DIR / "dgx1.json").links


# ----------------------------------------------------------------- reversed
def test_reversed_turns_every_link_around() -> None:
    topo = build("ring:n=4,bidirectional=false,bw=10")
    rev = topo.reversed()
    assert set(rev.links) == {(v, u) for u, v in topo.links}
    assert rev.name == "ring4-reversed" and rev.nodes == topo.nodes
    assert rev.link(1, 0).bandwidth_GBps == 10.0


def test_reversed_keeps_link_properties_and_is_an_involution() -> None:
    topo = load_topology(REFERENCE_DIR / "ndv2_2chassis_teccl_as_run.json")
    rev = topo.reversed()
    assert rev.switch_hop == topo.switch_hop and rev.switches == topo.switches
    for (u, v), lk in topo.links.items():
        back = rev.link(v, u)
        assert (back.bandwidth_GBps, back.alpha_us, back.lanes) == (lk.bandwidth_GBps, lk.alpha_us, lk.lanes)
    twice = rev.reversed()
    assert twice.links == topo.links


# ------------------------------------------------------------ link timing
def test_arrival_delay_is_alpha_plus_bytes_over_bandwidth() -> None:
    topo = Topology("t", [*gpus(0, 1), Node(2, "switch")], [*cable(0, 2, 50, 2.0), *cable(1, 2, 25, 1.0)])
    assert topo.arrival_delay(0, 2, 1e6) == pytest.approx(2e-6 + 1e6 / 50e9)
    assert topo.occupancy(2, 1, 1e6) == pytest.approx(1e6 / 25e9)
    free = topo.with_changes(switch_hop="free")
    assert free.arrival_delay(2, 1, 1e6) == 0.0  # out of a switch: no time of its own
    assert free.occupancy(2, 1, 1e6) == pytest.approx(1e6 / 25e9)  # but it still occupies the link
    assert free.arrival_delay(0, 2, 1e6) == topo.arrival_delay(0, 2, 1e6)
