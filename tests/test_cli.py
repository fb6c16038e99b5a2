"""The command-line contracts (flags, --json keys, exit codes), called as users and the landing checks call them."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from ccviz.cli import main
from tests.paths import REFERENCE_FILES, ROOT

CONTRACT_KEYS = {
    "algorithm", "topology", "collective", "size_bytes", "chunk_bytes", "n_gpus", "finish_time_s", "algbw_GBps",
    "busbw_GBps", "lower_bound_s", "synth_time_s", "status", "mip_gap", "epochs", "epoch_s", "transfers",
    "verified", "violations",
}
BUILDER_SPECS = [
    "ring:n=8", "torus2d:dims=4x4,bw=50,alpha=0.5", "mesh2d:dims=4x4", "mesh3d:dims=4x4x4", "torus3d:dims=4x4x4",
    "hypercube:n=8", "ndv2:chassis=2", "dgx1", "dgx2", "hypercube3d:dims=2x2x2",
]


def run_cli(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def synth_json(capsys, *args: str) -> dict:
    code, out, err = run_cli(capsys, "synth", *args, "--json")
    assert code == 0, err
    lines = [line for line in out.splitlines() if line.strip()]
    assert len(lines) == 1, out
    data = json.loads(lines[0])
    assert CONTRACT_KEYS <= set(data)
    return data


@pytest.mark.parametrize("path", REFERENCE_FILES, ids=lambda p: p.stem)
def test_ring_allgather_verifies_on_every_reference_file(capsys, path):
    data = synth_json(capsys, str(path), "--collective", "allgather", "--algorithm", "ring", "--size", "1MB")
    assert data["verified"] is True and data["violations"] == []
    assert data["finish_time_s"] >= data["lower_bound_s"] * (1 - 1e-9)
    assert data["status"] == "heuristic"  # a textbook ring proves nothing about optimality


@pytest.mark.parametrize("spec", BUILDER_SPECS)
def test_ring_allgather_verifies_on_every_builder(capsys, spec):
    data = synth_json(capsys, spec, "--collective", "allgather", "--algorithm", "ring", "--size", "1MB")
    assert data["verified"] is True
    assert data["size_bytes"] == 1e6


def test_unused_options_are_accepted_and_ignored(capsys):
    data = synth_json(capsys, "ring:n=4", "--algorithm", "ring", "--seed", "3", "--epoch", "slowest", "--gap", "0.3",
                      "--time-limit", "5", "--epochs", "7")
    assert data["verified"]


def test_synth_out_then_verify_round_trip(capsys, tmp_path):
    out = tmp_path / "s.json"
    xml = tmp_path / "s.xml"
    code, _, err = run_cli(capsys, "synth", "dgx1", "--algorithm", "ring", "--size", "64MB", "--out", str(out),
                           "--msccl", str(xml))
    assert code == 0, err
    code, stdout, _ = run_cli(capsys, "verify", str(out), "--json")
    assert code == 0 and json.loads(stdout)["verified"] is True
    assert xml.read_text().startswith("<algo")


def test_verify_names_a_planted_fault(capsys, tmp_path):
    out = tmp_path / "s.json"
    assert main(["synth", "ring:n=4,bidirectional=false", "--algorithm", "ring", "--out", str(out)]) == 0
    capsys.readouterr()
    data = json.loads(out.read_text())
    data["transfers"] = [t for t in data["transfers"] if not (t[2] == 3 and t[0] == 1)]  # drop a delivery
    out.write_text(json.dumps(data))
    code, stdout, _ = run_cli(capsys, "verify", str(out))
    assert code == 1
    assert "missing" in stdout and "rank 3" in stdout


def test_switch_hop_option_and_the_epoch_model_figures_in_json(capsys):
    paid = synth_json(capsys, "star:n=4,alpha=0", "--algorithm", "teccl", "--size", "4MB")
    teccl = synth_json(capsys, "star:n=4,alpha=0", "--switch-hop", "teccl", "--algorithm", "teccl", "--size", "4MB")
    assert teccl["epochs"] < paid["epochs"]  # the switch->GPU hop no longer pays a second serialization
    assert teccl["model_finish_s"] == pytest.approx(teccl["epochs"] * teccl["epoch_s"])
    assert teccl["status"] == "optimal" and teccl["bound_epochs"] == teccl["epochs"]
    assert "optimal in TE-CCL's epoch model" in teccl["status_meaning"]
    with pytest.raises(SystemExit) as exc:
        main(["synth", "dgx2", "--switch-hop", "cheap"])
    assert exc.value.code == 2 and "--switch-hop" in capsys.readouterr().err


def test_list_and_cost(capsys):
    code, out, _ = run_cli(capsys, "list", "--json")
    assert code == 0
    listing = json.loads(out)
    names = {a["name"] for a in listing["algorithms"]}
    assert {"ring", "direct", "dbt", "rhd"} <= names
    assert "allgather" in listing["collectives"]
    assert any(b["name"] == "torus2d" for b in listing["topology_builders"])
    code, out, _ = run_cli(capsys, "cost", "--collective", "allreduce", "--algorithm", "ring", "--n", "8",
                           "--size", "1GB", "--alpha", "0.5", "--bw", "50", "--json")
    assert code == 0
    cost = json.loads(out)
    assert cost["time_s"] == pytest.approx(2 * 7 * 0.5e-6 + 2 * 7 / 8 * 1e9 / 50e9, rel=1e-12)
    assert cost["n_alpha"] == 14 and cost["n_beta"] == pytest.approx(2 * 7 / 8)


@pytest.mark.parametrize(
    "args, needle",
    [
        (["synth", "nosuchbuilder:n=3"], "unknown builder"),
        (["synth", "ring:n=8", "--collective", "allgather", "--algorithm", "rhd", "--size", "1MB"], None),
        (["synth", "ring:n=6", "--algorithm", "rhd"], "power"),
        (["synth", "ring:n=4", "--size", "lots"], "size"),
        (["synth", "ring:n=4", "--collective", "allsmash"], "collective"),
        (["synth", "ring:n=4", "--algorithm", "magic"], "algorithm"),
        (["synth", "ring:n=4", "--epoch", "soon"], "epoch"),
        (["synth", "/nonexistent/topo.json"], "does not exist"),
        (["verify", "/nonexistent/s.json"], "does not exist"),
        (["cost", "--collective", "allreduce", "--algorithm", "rhd", "--n", "6", "--size", "1MB"], "power"),
    ],
)
def test_bad_input_gives_one_clear_line(capsys, args, needle):
    code, out, err = run_cli(capsys, *args)
    if needle is None:  # a valid control case
        assert code == 0
        return
    assert code != 0
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and needle in lines[0].lower(), err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    "topology, needle",
    [
        ({"nodes": 3, "switches": [], "gpus": [0, 1, 2],
          "links": [{"src": 0, "dst": 1, "bandwidth_GBps": -5, "alpha_us": 1}]}, "bandwidth"),
        ({"nodes": 4, "switches": [], "gpus": [0, 1, 2, 3],
          "links": [{"src": 0, "dst": 1, "bandwidth_GBps": 5, "alpha_us": 1},
                    {"src": 1, "dst": 0, "bandwidth_GBps": 5, "alpha_us": 1},
                    {"src": 2, "dst": 3, "bandwidth_GBps": 5, "alpha_us": 1},
                    {"src": 3, "dst": 2, "bandwidth_GBps": 5, "alpha_us": 1}]}, "disconnected"),
    ],
)
def test_bad_topology_files(capsys, tmp_path, topology, needle):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(topology))
    code, _, err = run_cli(capsys, "synth", str(path))
    assert code != 0 and needle in err and len(err.strip().splitlines()) == 1


def test_console_script_entry_point_runs_in_a_subprocess():
    proc = subprocess.run([sys.executable, "-m", "ccviz.cli", "synth", "ring:n=4", "--json"], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["verified"] is True


def test_cost_answers_rhd_allgather_and_takes_the_segments(capsys):
    code, stdout, _ = run_cli(capsys, "cost", "--algorithm", "rhd", "--collective", "allgather", "--n", "8",
                              "--size", "1MB", "--json")
    assert code == 0 and json.loads(stdout)["n_alpha"] == 3
    code, stdout, _ = run_cli(capsys, "cost", "--algorithm", "ring", "--collective", "broadcast", "--n", "16",
                              "--size", "1GB", "--segments", "1", "--json")
    assert code == 0 and json.loads(stdout)["n_beta"] == 15
    code, _, err = run_cli(capsys, "cost", "--algorithm", "ring", "--collective", "broadcast", "--n", "16",
                           "--size", "1GB", "--segments", "0")
    assert code == 2 and "segments" in err


@pytest.mark.parametrize("algorithm", ["rhd", "tree", "direct"])
def test_textbook_allreduce_on_a_ring_of_8_verifies(capsys, algorithm):
    code, stdout, _ = run_cli(capsys, "synth", "ring:n=8", "--collective", "allreduce", "--algorithm", algorithm,
                              "--size", "1MB", "--json")
    assert code == 0 and json.loads(stdout)["verified"] is True


HEAVY = ("pyomo", "plotly", "pandas", "streamlit")


def _modules_after(code: str) -> set[str]:
    """Top-level packages loaded by running ``code`` in a fresh interpreter."""
    probe = f"{code}\nimport sys, json\nprint(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}})))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    return set(json.loads(out.splitlines()[-1]))


@pytest.mark.parametrize("code", [
    "import ccviz.cli",
    "import ccviz",
    "from ccviz.cli import main; main(['list'])",
    "from ccviz.cli import main; main(['cost', '--collective', 'allgather', '--algorithm', 'ring', '--n', '8', "
    "'--size', '1GB'])",
])
def test_the_command_line_starts_without_heavy_libraries(code):
    loaded = _modules_after(code)
    assert not loaded & set(HEAVY), f"{code!r} imported {sorted(loaded & set(HEAVY))}"


@pytest.mark.parametrize("code", [
    "from ccviz.cli import main; main(['list'])",
    "from ccviz.cli import main; main(['list', '--json'])",
])
def test_listing_algorithms_and_their_options_loads_no_array_or_graph_library(code):
    """The catalog names each synthesizer's code; only a synthesis imports it (and numpy, networkx)."""
    loaded = _modules_after(code)
    assert not loaded & {*HEAVY, "numpy", "networkx"}, f"{code!r} imported {sorted(loaded & {*HEAVY, 'numpy', 'networkx'})}"


# Streamlit and streamlit-flow made unimportable (a None entry in sys.modules makes `import` raise).
WITHOUT_APP = "import sys\nfor name in ('streamlit', 'streamlit_flow'):\n    sys.modules[name] = None\n"


def test_the_library_and_the_cli_run_without_the_app_extra():
    probe = WITHOUT_APP + (
        "import ccviz\n"
        "topology = ccviz.load_topology('ring:n=4')\n"
        "assert ccviz.run(topology, 'allgather', 'tacos', size_bytes=1e6).timeline.verified\n"
        "from ccviz.cli import main\n"
        "code = main(['synth', 'ring:n=4', '--collective', 'allreduce', '--algorithm', 'ring', '--size', '1MB', "
        "'--json'])\n"
        "assert code == 0, code\n"
        "try:\n"
        "    import streamlit  # noqa: F401\n"
        "except ImportError:\n"
        "    print('blocked')\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert json.loads("\n".join(lines[:-1]))["verified"] is True and lines[-1] == "blocked"


def test_only_the_app_package_imports_streamlit_and_the_library_never_imports_the_app():
    library = [p for p in (ROOT / "ccviz").rglob("*.py") if "app" not in p.relative_to(ROOT / "ccviz").parts[:1]]
    app_imports = re.compile(r"^\s*(import|from)\s+(streamlit|ccviz\.app\b|ccviz import app\b)", re.MULTILINE)
    importing = [str(p.relative_to(ROOT)) for p in library if app_imports.search(p.read_text())]
    assert library and not importing, importing


def test_lazy_package_keeps_its_public_api():
    import ccviz

    for name in ccviz.__all__:
        assert getattr(ccviz, name) is not None, name
    assert set(ccviz.__all__) <= set(dir(ccviz))
    with pytest.raises(AttributeError):
        ccviz.no_such_name  # noqa: B018
    assert set(ccviz.__all__) == set(ccviz._HOME)


def test_a_submodule_import_does_not_shadow_the_function_of_the_same_name():
    probe = "import ccviz.simulate, ccviz; assert callable(ccviz.simulate), ccviz.simulate; print('ok')"
    assert subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True).stdout.strip() == "ok"


def test_a_reader_that_leaves_early_gets_no_error_line():
    """`ccviz list | head -1`: the pipe closes before the listing ends; ccviz stops without a word on stderr."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader has already left: every write meets a closed pipe
    try:
        done = subprocess.run([sys.executable, "-m", "ccviz.cli", "list"], stdout=write_end,
                              capture_output=False, stderr=subprocess.PIPE, cwd=ROOT, timeout=60)
    finally:
        os.close(write_end)
    assert done.stderr == b"", done.stderr.decode()
    assert done.returncode == 1


def test_short_flags_name_the_same_choices(capsys):
    """-a/-c/-s are --algorithm/--collective/--size (what a user types first)."""
    assert main(["synth", "ring:n=4", "-a", "tacos", "-c", "allreduce", "-s", "1MB", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["algorithm"], out["collective"], out["size_bytes"]) == ("tacos", "allreduce", 1e6)
