"""Topology builders: defaults, overrides, reference equality, spec parsing and the sample files."""

from __future__ import annotations

import importlib.util
import itertools
import json
import math
from pathlib import Path

import pytest

from ccviz import CcvizError, load_topology
from ccviz.builders import BUILDERS, build, get_builder
from ccviz.model.topology import Topology
from tests.paths import REFERENCE

REPO = Path(__file__).resolve().parents[1]
REFERENCE_DIR = REFERENCE
SAMPLES_DIR = REPO / "sample_topologies"


def link_set(topo: Topology) -> set[tuple[int, int, float, float]]:
    return {(lk.src, lk.dst, lk.bandwidth_GBps, lk.alpha_us) for lk in topo.links.values()}


def kinds(topo: Topology) -> dict[int, str]:
    return {n: node.kind for n, node in topo.nodes.items()}


def neighbours(topo: Topology, node: int) -> dict[int, float]:
    return {lk.dst: lk.bandwidth_GBps for lk in topo.out_links[node]}


def is_cable_symmetric(topo: Topology) -> bool:
    return all(
        (v, u) in topo.links and topo.links[(v, u)].bandwidth_GBps == lk.bandwidth_GBps
        for (u, v), lk in topo.links.items()
    )


# ------------------------------------------------------------------ defaults
@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_every_builder_builds_with_defaults_and_is_drawable(name: str) -> None:
    topo = build(name)
    assert topo.n_gpus >= 2
    assert topo.layout, f"{name} sets no layout hint"
    positions = [node.pos for node in topo.nodes.values()]
    assert all(p is not None for p in positions), f"{name} leaves nodes without a drawing position"
    assert len(set(positions)) == len(positions), f"{name} draws two nodes on the same spot"
    assert get_builder(name).summary != name and get_builder(name).summary.endswith((".", ")"))
    copy_default = get_builder(name).parameters.get("copy")
    expected = True if copy_default is None else copy_default.default  # a100 declares copy=false (ForestColl's)
    assert all(topo.nodes[s].copy == expected for s in topo.switches), "switches copy as the builder declares"


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_signature_text_is_a_valid_spec(name: str) -> None:
    """`ccviz list` prints name:signature; feeding it back must build the same topology as the defaults."""
    b = get_builder(name)
    assert link_set(build(f"{name}:{b.signature_text()}")) == link_set(build(name))


# ------------------------------------------------------- reference equality
REFERENCE_SPECS = {
    "dgx1": "dgx1",
    "ndv2_1chassis": "ndv2:chassis=1",
    "ndv2_2chassis": "ndv2:chassis=2",
    "ndv2_4chassis": "ndv2:chassis=4",
    "dgx2_2chassis": "dgx2",
    "amd_1chassis": "amd:chassis=1",
    "amd_2chassis": "amd:chassis=2",
}


@pytest.mark.parametrize(("stem", "spec"), sorted(REFERENCE_SPECS.items()))
def test_builder_equals_reference_file_link_for_link(stem: str, spec: str) -> None:
    built = build(spec)
    reference = load_topology(REFERENCE_DIR / f"{stem}.json")
    assert built.name == stem
    assert kinds(built) == kinds(reference)
    assert link_set(built) == link_set(reference)
    assert len(built.links) == len(reference.links)


def test_ndv2_general_rule_for_other_chassis_counts() -> None:
    for chassis in (3, 8):
        topo = build(f"ndv2:chassis={chassis}")
        assert topo.n_gpus == 8 * chassis and topo.switches == [0]
        senders = sorted(lk.src for lk in topo.in_links[0])
        receivers = sorted(lk.dst for lk in topo.out_links[0])
        assert senders == [1 + 8 * c for c in range(chassis)]  # GPU 0 of each chassis
        assert receivers == [2 + 8 * c for c in range(chassis)]  # GPU 1 of each chassis
        assert {lk.bandwidth_GBps for lk in topo.in_links[0]} == {12.5}
    with pytest.raises(CcvizError, match="chassis"):
        build("ndv2:chassis=0")


def test_dgx2_more_chassis_form_a_ring_of_chassis() -> None:
    topo = build("dgx2:chassis=3")
    assert topo.n_gpus == 48 and topo.switches == [0, 17, 34]
    inter = [lk for lk in topo.links.values() if lk.bandwidth_GBps == 12.5]
    assert len(inter) == 3 * 8
    # chassis 2 (GPUs 35..50) sends to chassis 0 (GPUs 1..16): odd local GPU k -> local k-1
    assert (36, 1, 12.5, 2.6) in link_set(topo)
    assert build("dgx2:chassis=1").n_gpus == 16


def test_amd_as_published_false_labels_the_real_nics() -> None:
    published, corrected = build("amd:chassis=2"), build("amd:chassis=2,as_published=false")
    assert published.switches == [0, *range(16, 24), *range(40, 48)]
    assert corrected.switches == [0, *range(17, 25), *range(41, 49)]
    assert corrected.gpus == [*range(1, 17), *range(25, 41)]
    assert {lk.dst for lk in corrected.out_links[0]} == set(range(17, 25)) | set(range(41, 49))
    for nic in corrected.switches[1:]:
        assert all(corrected.nodes[lk.dst].kind == "gpu" for lk in corrected.out_links[nic] if lk.dst != 0)


# ----------------------------------------------------------------- overrides
def test_ring_and_line_overrides() -> None:
    topo = build("ring:n=5,bw=10,alpha=2")
    assert topo.n_gpus == 5 and len(topo.links) == 10
    assert link_set(topo) >= {(4, 0, 10.0, 2.0), (0, 4, 10.0, 2.0)}
    one_way = build("ring:n=4,bidirectional=false")
    assert sorted(one_way.links) == [(0, 1), (1, 2), (2, 3), (3, 0)]
    assert len(build("line:n=3").links) == 4


def test_fully_connected_and_star() -> None:
    fc = build("fully_connected:n=5,bw=20,alpha=1")
    assert len(fc.links) == 20 and {lk.bandwidth_GBps for lk in fc.links.values()} == {20.0}
    assert link_set(build("fc:n=5,bw=20,alpha=1")) == link_set(fc)
    star = build("star:n=6,copy=false,bw=25")
    assert star.switches == [6] and not star.nodes[6].copy
    assert set(star.links) == {(g, 6) for g in range(6)} | {(6, g) for g in range(6)}
    assert build("star:copy=yes").nodes[8].copy


def test_hypercube_links_differ_in_one_bit_with_per_bit_bandwidth() -> None:
    topo = build("hypercube:n=16,bw=100/50/25/10")
    assert all(len(topo.out_links[n]) == 4 for n in topo.gpus)
    for (u, v), lk in topo.links.items():
        diff = u ^ v
        assert diff & (diff - 1) == 0
        assert lk.bandwidth_GBps == {1: 100, 2: 50, 4: 25, 8: 10}[diff]
    for bad in ("hypercube:n=6", "hypercube:n=1"):
        with pytest.raises(CcvizError, match=r"2\^k") as err:
            build(bad)
        assert err.value.field == "n"
    with pytest.raises(CcvizError, match="bw has 2 values for 3 dimensions"):
        build("hypercube:n=8,bw=1/2")


def test_fattree_k_ary_counts_and_tiers() -> None:
    topo = build("fattree:k=6,bw=10/20/40")
    assert topo.n_gpus == 54 and len(topo.switches) == 6 * 3 + 6 * 3 + 9
    assert is_cable_symmetric(topo)
    gpu_links = {lk.bandwidth_GBps for g in topo.gpus for lk in topo.out_links[g]}
    assert gpu_links == {10.0} and all(len(topo.out_links[g]) == 1 for g in topo.gpus)
    cores = [s for s in topo.switches if topo.nodes[s].group == "core"]
    assert len(cores) == 9
    assert all(len(topo.out_links[c]) == 6 and {lk.bandwidth_GBps for lk in topo.out_links[c]} == {40.0}
               for c in cores)  # one cable to every pod
    with pytest.raises(CcvizError, match="even k"):
        build("fattree:k=3")
    with pytest.raises(CcvizError, match="link classes"):
        build("fattree:bw=1/2")


def test_leafspine_oversubscription_and_uplink_bandwidth() -> None:
    def uplink(topo: Topology) -> float:
        leaf = topo.switches[0]
        return next(lk.bandwidth_GBps for lk in topo.out_links[leaf] if topo.is_switch(lk.dst))

    base = build("leafspine:leaves=3,hosts=4,spines=2,bw=50")
    assert base.n_gpus == 12 and len(base.switches) == 5
    assert uplink(base) == 100.0 and base.meta["oversubscription"] == 1.0  # 4*50 in, 2*100 up
    assert uplink(build("leafspine:leaves=3,hosts=4,spines=2,bw=50,oversub=4")) == 25.0
    explicit = build("leafspine:leaves=3,hosts=4,spines=2,bw=50,uplink_bw=20")
    assert uplink(explicit) == 20.0 and explicit.meta["oversubscription"] == 5.0
    with pytest.raises(CcvizError, match="not both"):
        build("leafspine:oversub=2,uplink_bw=10")
    with pytest.raises(CcvizError, match="oversub"):
        build("leafspine:oversub=0")
    with pytest.raises(CcvizError, match="uplink_bw must be positive"):
        build("leafspine:uplink_bw=-1")


def test_dragonfly_one_global_cable_per_group_pair() -> None:
    groups, routers, gpus = 9, 4, 1
    topo = build(f"dragonfly:groups={groups},routers={routers},gpus={gpus},bw=50/40/10")
    assert topo.n_gpus == 36 and len(topo.switches) == 36
    group_of = {n: topo.nodes[n].group for n in topo.nodes}
    global_links = [lk for lk in topo.links.values() if group_of[lk.src] != group_of[lk.dst]]
    assert all(lk.bandwidth_GBps == 10.0 for lk in global_links)
    pairs = {frozenset((group_of[lk.src], group_of[lk.dst])) for lk in global_links}
    assert len(global_links) == 2 * math.comb(groups, 2) and len(pairs) == math.comb(groups, 2)
    per_router = [sum(group_of[lk.dst] != group_of[r] for lk in topo.out_links[r]) for r in topo.switches]
    assert max(per_router) == math.ceil((groups - 1) / routers)  # round-robin balance
    local = [lk for lk in topo.links.values() if topo.is_switch(lk.src) and topo.is_switch(lk.dst)
             and group_of[lk.src] == group_of[lk.dst]]
    assert len(local) == groups * routers * (routers - 1) and {lk.bandwidth_GBps for lk in local} == {40.0}


def test_switch2d_has_a_switch_per_row_and_column() -> None:
    topo = build("switch2d:dims=3x5,bw=40/20")
    assert topo.n_gpus == 15 and len(topo.switches) == 5 + 3
    assert not any(not topo.is_switch(u) and not topo.is_switch(v) for u, v in topo.links)
    for gpu in topo.gpus:
        assert sorted(lk.bandwidth_GBps for lk in topo.out_links[gpu]) == [20.0, 40.0]
    sizes = sorted(len(topo.out_links[s]) for s in topo.switches)
    assert sizes == [3] * 5 + [5] * 3


def test_rfs3d_defaults_follow_the_tacos_paper() -> None:
    topo = build("rfs3d")
    assert topo.n_gpus == 128 and len(topo.switches) == 8
    assert neighbours(topo, 0) == {1: 200.0, 2: 100.0, 4: 100.0, 6: 100.0, 128: 50.0}
    assert {lk.alpha_us for lk in topo.links.values()} == {0.5}
    switch = topo.switches[0]
    assert sorted(lk.dst for lk in topo.out_links[switch]) == list(range(0, 128, 8))
    custom = build("rfs3d:dims=2x2x4,bw=10/20/30,alpha=1/2/3")
    assert neighbours(custom, 0) == {1: 10.0, 2: 20.0, 16: 30.0}  # 16 NPUs, then the switches
    assert custom.link(0, 16).alpha_us == 3.0 and custom.link(0, 1).alpha_us == 1.0


def test_multidim_kinds_and_errors() -> None:
    topo = build("multidim:dims=4x3,kinds=mesh/fc")
    assert neighbours(topo, 0) == {1: 50.0, 4: 50.0, 8: 50.0}  # mesh: no wrap to 3; fc: 4 and 8
    ring = build("multidim:dims=4x4,kinds=ring")
    assert link_set(ring) == link_set(build("multidim:dims=4x4,kinds=ring/ring"))
    assert all(len(ring.out_links[g]) == 4 for g in ring.gpus)
    with pytest.raises(CcvizError, match="unknown dimension kind 'tree'"):
        build("multidim:dims=4x4,kinds=ring/tree")
    with pytest.raises(CcvizError, match="one kind per dimension"):
        build("multidim:dims=4x4x4,kinds=ring/fc")


def test_vendor_systems_take_link_class_overrides() -> None:
    topo = build("dgx1:bw=100/10,alpha=1")
    assert {(lk.bandwidth_GBps, lk.alpha_us) for lk in topo.links.values()} == {(100.0, 1.0), (10.0, 1.0)}
    assert topo.link(0, 1).bandwidth_GBps == 100.0 and topo.link(0, 2).bandwidth_GBps == 10.0
    ndv2 = build("ndv2:chassis=2,bw=60/30/5,alpha=0.1/0.2/3")
    assert ndv2.link(0, 9).bandwidth_GBps == 5.0 and ndv2.link(0, 9).alpha_us == 3.0
    assert ndv2.link(0, 2).alpha_us == 0.2
    assert build("dgx2:bw=100").link(2, 18).bandwidth_GBps == 100.0
    with pytest.raises(CcvizError, match=r"link classes \(double/single/nic\)"):
        build("ndv2:bw=1/2")


# -------------------------------------------------------------- spec parsing
def test_spec_with_per_dimension_values() -> None:
    topo = build("torus2d:dims=4x4,bw=50,alpha=0.5")
    assert topo.n_gpus == 16 and link_set(topo) == link_set(build("torus2d"))
    per_dim = build("torus2d:dims=4x4,bw=50/25,alpha=1/2")
    assert per_dim.link(0, 4).bandwidth_GBps == 50.0 and per_dim.link(0, 4).alpha_us == 1.0  # axis 1
    assert per_dim.link(0, 1).bandwidth_GBps == 25.0 and per_dim.link(0, 1).alpha_us == 2.0  # axis 2
    assert build("mesh3d:dims=2/3/4").n_gpus == 24


@pytest.mark.parametrize(("value", "expected"), [("true", True), ("YES", True), ("1", True), ("on", True),
                                                 ("false", False), ("no", False), ("0", False), ("Off", False)])
def test_bool_parameters(value: str, expected: bool) -> None:
    assert build(f"star:n=3,copy={value}").nodes[3].copy is expected


@pytest.mark.parametrize(("spec", "fragment"), [
    ("ring:nodes=8", "builder 'ring' has no parameter 'nodes'; it takes n=8,bw=50,alpha=0.5,bidirectional=true"),
    ("torus2d:dims=4x4,colour=red", "no parameter 'colour'"),
    ("warpdrive:n=8", "unknown builder 'warpdrive'"),
    ("ring:n=eight", "cannot read n='eight'"),
    ("star:copy=maybe", "cannot read copy='maybe'"),
    ("ring:n", "should be key=value"),
    ("ring:n=1", "ring needs n >= 2"),
    ("torus2d:dims=4x4x4", "needs dims with 2 sizes"),
    ("mesh2d:dims=0x4", "dims must be positive"),
])
def test_bad_specs_raise_clear_errors(spec: str, fragment: str) -> None:
    with pytest.raises(CcvizError) as err:
        build(spec)
    assert fragment in str(err.value)


def test_unknown_builder_lists_the_choices() -> None:
    with pytest.raises(CcvizError) as err:
        load_topology("warpdrive")
    assert "dragonfly" in str(err.value) and "rfs3d" in str(err.value)


@pytest.mark.parametrize("spec", [
    "ring:n=8", "torus2d:dims=4x4,bw=50,alpha=0.5", "mesh2d:dims=4x4", "mesh3d:dims=4x4x4", "torus3d:dims=8x8x8",
    "hypercube:n=8", "ndv2:chassis=2", "dgx1", "dgx2", "hypercube3d",
])
def test_design_contract_specs_load(spec: str) -> None:
    topo = load_topology(spec)
    assert topo.n_gpus >= 8


def test_aliases_and_case() -> None:
    assert link_set(load_topology("hypercube3d")) == link_set(build("mesh3d"))
    assert link_set(load_topology("HyperCube3D:dims=2x2x2")) == link_set(build("mesh3d:dims=2x2x2"))
    assert link_set(load_topology("DGX1")) == link_set(build("dgx1"))
    assert get_builder("clique").name == "fully_connected"


# --------------------------------------------------------------- sample files
def _sample_generator():
    spec = importlib.util.spec_from_file_location("sample_generate", SAMPLES_DIR / "generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_sample_files_equal_the_builders_output() -> None:
    generator = _sample_generator()
    expected = {"dgx1", "ndv2_1chassis", "ndv2_2chassis", "ndv2_4chassis", "dgx2_2chassis", "amd_1chassis",
                "amd_2chassis", "ring4", "ring8", "torus2x2", "torus4x4", "a100_2x8"}
    assert set(generator.SAMPLES) == expected
    for stem, spec in generator.SAMPLES.items():
        on_disk = json.loads((SAMPLES_DIR / f"{stem}.json").read_text())
        assert on_disk == json.loads(build(spec).to_json()), f"{stem}.json is stale: run sample_topologies/generate.py"
        loaded = load_topology(SAMPLES_DIR / f"{stem}.json")
        assert link_set(loaded) == link_set(build(spec)) and kinds(loaded) == kinds(build(spec))


def test_sample_paper_files_equal_the_reference_files() -> None:
    for stem in REFERENCE_SPECS:
        sample, reference = load_topology(SAMPLES_DIR / f"{stem}.json"), load_topology(REFERENCE_DIR / f"{stem}.json")
        assert kinds(sample) == kinds(reference) and link_set(sample) == link_set(reference)
    stem = "ndv2_2chassis_teccl_as_run"
    assert (SAMPLES_DIR / f"{stem}.json").read_bytes() == (REFERENCE_DIR / f"{stem}.json").read_bytes()


def test_teccl_as_run_sample_loads_with_the_published_conventions() -> None:
    stem = "ndv2_2chassis_teccl_as_run"
    topo = load_topology(SAMPLES_DIR / f"{stem}.json")
    assert topo.switch_hop == "teccl" and topo.switches == [0] and topo.n_gpus == 15
    assert {(u, v) for u, v, _, _ in link_set(topo)} == set(build("ndv2:chassis=2").links)


def test_chassis_groups_and_side_by_side_positions() -> None:
    topo = build("ndv2:chassis=4")
    groups = {topo.nodes[g].group for g in topo.gpus}
    assert groups == {f"chassis{c}" for c in range(4)}
    centers = []
    for c in range(4):
        xs = [topo.nodes[g].pos[0] for g in topo.gpus if topo.nodes[g].group == f"chassis{c}"]
        centers.append(sum(xs) / len(xs))
    assert centers == sorted(centers) and all(b - a > 2 for a, b in itertools.pairwise(centers))


@pytest.mark.parametrize("hop", ["paid", "teccl", "free"])
def test_every_builder_takes_the_switch_hop_key(hop: str) -> None:
    for spec in ("dgx2:chassis=2", "star:n=4", "ring:n=4"):
        topo = build(f"{spec},switch_hop={hop}")
        assert topo.switch_hop == hop and Topology.from_dict(json.loads(topo.to_json())).switch_hop == hop
    assert build("dgx2").switch_hop == "paid"


def test_a_bad_switch_hop_in_a_spec_names_the_choices() -> None:
    with pytest.raises(CcvizError, match="paid, teccl, free"):
        build("dgx2:switch_hop=cheap")
    with pytest.raises(CcvizError, match="switch_hop=paid"):
        build("dgx2:nope=1")  # the unknown-key message lists the common key too


def test_ndv2_as_run_is_the_published_runs_file() -> None:
    built = build("ndv2:chassis=2,as_run=true")
    sample = load_topology(SAMPLES_DIR / "ndv2_2chassis_teccl_as_run.json")
    assert kinds(built) == kinds(sample) and link_set(built) == link_set(sample)
    assert built.switch_hop == sample.switch_hop == "teccl" and built.meta["buffer_ranks"] == 16
    with pytest.raises(CcvizError, match="as_run"):
        build("ndv2:chassis=4,as_run=true")


POSITIONS = json.loads((REPO / "tests" / "fixtures" / "builder_positions.json").read_text())


@pytest.mark.parametrize("spec", sorted(POSITIONS))
def test_layout_functions_draw_every_node_where_the_builders_did(spec: str) -> None:
    """Positions come from ``ccviz.builders.layout`` after construction; the snapshot (see
    tests/fixtures/README.md) was taken while the builders still placed nodes themselves."""
    got = {str(n.id): list(n.pos) for n in build(spec).nodes.values()}
    assert all(math.isfinite(v) for pos in got.values() for v in pos)
    assert got == POSITIONS[spec]


def test_the_snapshot_covers_every_builder() -> None:
    assert {spec.partition(":")[0] for spec in POSITIONS} == set(BUILDERS)


@pytest.mark.parametrize(("spec", "field"), [("dragonfly:groups=4,routers=2,gpus=10000", "gpus"),
                                             ("torus2d:dims=200x80", "dims"), ("fattree:k=40", "k")])
def test_a_spec_too_big_to_build_names_the_size_to_make_smaller(spec: str, field: str) -> None:
    # a designer typing gpus=10000 read "topology: this would create up to ~1.5e+05 nodes; the limit is 10000"
    with pytest.raises(CcvizError) as err:
        build(spec)
    assert err.value.field == field
    message = str(err.value)
    assert message.startswith(f"{field}: ") and f"make {field} smaller" in message and "10,000" in message
    assert "e+" not in message


@pytest.mark.parametrize("spec", ["nvl72", "nvl72:racks=2", "dgxh100:boxes=2", "hgxb200:nodes=4"])
def test_a_box_is_drawn_no_flatter_than_its_boxes_side_by_side_need(spec: str) -> None:
    # NVL72's 72 GPUs in one row drew the Synthesize page's playback as a strip 16 times wider than tall; as a
    # wheel (GPUs round the switches) one rack is as tall as wide, and boxes side by side stay within 5:1 per row
    topology = build(spec)
    xs = [n.pos[0] for n in topology.nodes.values()]
    ys = [n.pos[1] for n in topology.nodes.values()]
    boxes = topology.meta.get("boxes", 1)
    assert (max(xs) - min(xs)) / (max(ys) - min(ys)) <= 5.0 * boxes, spec
