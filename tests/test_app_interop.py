"""The app's doors to the field's tools: paste `nvidia-smi topo -m` in the designer, download Chakra ETs
beside MSCCL XML on Synthesize and Playback."""

from pathlib import Path

from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "app.py")
DGX1_MATRIX = (ROOT / "tests" / "fixtures" / "nvidia_smi" / "dgx1_v100.txt").read_text()
A100_MATRIX = (ROOT / "tests" / "fixtures" / "nvidia_smi" / "hgx_a100_8nic.txt").read_text()


def _app() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=300).run()
    assert not at.exception
    return at


def _downloads(at: AppTest) -> list[str]:
    return [d.proto.label for d in at.get("download_button")]


def test_designer_builds_the_fabric_from_a_pasted_matrix_and_refuses_a_bad_one():
    at = _app()
    at.switch_page("pages/topology.py").run()
    at.radio(key="topo_source").set_value("nvidia-smi topo -m").run()
    at.text_area(key="topo_smi_text").input(DGX1_MATRIX).run()
    at.button(key="topo_smi_build").click().run()
    assert not at.exception and not at.error
    fabric = at.session_state["ccviz_topology"]
    assert fabric.n_gpus == 8 and fabric.meta["gpu"] == "v100"
    assert any(c.value.startswith("assumed: GPU generation inferred as v100") for c in at.caption)
    at.text_area(key="topo_smi_text").input(DGX1_MATRIX.replace("GPU7    SYS", "GPU7    XYZ")).run()
    at.button(key="topo_smi_build").click().run()
    assert not at.exception
    assert any("'XYZ' is not a topo -m entry" in e.value for e in at.error)
    assert at.session_state["ccviz_topology"] is fabric  # a bad paste keeps the fabric on screen
    at.text_area(key="topo_smi_text").input(A100_MATRIX).run()
    at.button(key="topo_smi_build").click().run()
    assert at.session_state["ccviz_topology"].meta["link_model"]["name"] == "hardware"  # as the dgxa100 preset
    at.radio(key="topo_smi_model").set_value("alphabeta").run()
    at.button(key="topo_smi_build").click().run()
    assert not at.exception and "link_model" not in at.session_state["ccviz_topology"].meta


def test_synthesize_and_playback_offer_the_chakra_download_beside_msccl():
    at = _app()
    at.button(key="syn_run").click().run()
    assert not at.exception and not at.error
    labels = _downloads(at)
    assert labels.index("Chakra ET (zip)") == labels.index("MSCCL XML") + 1
    at.switch_page("pages/playback.py").run()
    assert not at.exception
    assert "Chakra ET (zip)" in _downloads(at) and "MSCCL XML" in _downloads(at)


def test_playbacks_upload_replays_the_chakra_zip_synthesize_offers():
    """The zip of the Chakra download imports on Playback exactly, with the fabric's limit beside it (an
    imported run said 'no fabric limit is defined' for an AllGather)."""
    from ccviz import load_topology, make_collective, simulate, synthesize
    from ccviz.app.imports import Upload, imported_run
    from ccviz.interop.chakra import chakra_zip

    topo = load_topology("dgxh100")
    timeline = simulate(synthesize(topo, make_collective("allgather", topo, 1e6), "ring"))
    data, _ = chakra_zip(timeline, "box")
    run = imported_run(Upload("box.zip", "", False, 1e6, "", False, data), None)
    assert run.result.timeline.finish_time_s == timeline.finish_time_s
    assert run.result.limit is not None and run.result.limit.limit_s > 0
