"""Issue 40, item 18: inputs that once raised internal errors now give one line naming the field."""

from __future__ import annotations

import json

import pytest
import yaml

import ccviz
from ccviz.bounds.cost import lower_bound
from ccviz.cli import main

BASE = {"topology": "ring:n=4", "parallel": "tp=2,dp=2", "run": "tp:allreduce:1MB,dp:allreduce:1MB"}


def _clear(capsys, args: list[str], *expect: str) -> str:
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "internal error" not in err, err
    for text in expect:
        assert text in err, err
    return err


@pytest.mark.parametrize("index", [0, 1, 2])
@pytest.mark.parametrize("value", [2**63, 1e30, -1])
def test_verify_refuses_ids_beyond_what_arrays_hold(tmp_path, capsys, index, value):
    path = tmp_path / "s.json"
    assert main(["synth", "ring:n=4", "-c", "allgather", "-a", "ring", "-s", "1MB", "--out", str(path)]) == 0
    capsys.readouterr()
    data = json.loads(path.read_text())
    data["transfers"][0][index] = value
    path.write_text(json.dumps(data))
    field = ("chunk", "src", "dst")[index]
    _clear(capsys, ["verify", str(path)], f"transfers[0].{field}")


@pytest.mark.parametrize("text, expect", [
    ("- a\n- b\n", "should hold a mapping"), ("5\n", "got int"), ("hello\n", "got str"),
    (yaml.safe_dump({**BASE, "groups": [[0, 1], [2, 3]]}), "config: groups should be a mapping of kind"),
    (yaml.safe_dump({**BASE, "groups": 5}), "config: groups should be"),
    (yaml.safe_dump({**BASE, "groups": {"tp": "0,1"}}), "groups.tp: expected a list of groups"),
    (yaml.safe_dump({**BASE, "groups": {"tp": [[0.5, 1], [2, 3]]}}), "groups.tp[0][0]: expected a whole number"),
    (yaml.safe_dump({**BASE, "groups": {"tp": [[0, 1], [2, 3]], "dp": None}}), "groups.dp: expected a list"),
    (yaml.safe_dump({**BASE, "opt": [1, 2]}), "config: opt should be a mapping"),
    (yaml.safe_dump({**BASE, "opt": "abc"}), "config: opt should be a mapping"),
    (yaml.safe_dump({**BASE, "run": 5}), "config: run should be"),
    (yaml.safe_dump({**BASE, "seed": "abc"}), "config: seed should be a whole number"),
    (yaml.safe_dump({**BASE, "time_limit": "abc"}), "config: time_limit should be seconds"),
    (yaml.safe_dump({**BASE, "chunks": 0}), "config: chunks should be a whole number >= 1"),
])
def test_workload_files_of_the_wrong_shape_are_one_line(tmp_path, capsys, text, expect):
    path = tmp_path / "job.yaml"
    path.write_text(text)
    _clear(capsys, ["workload", "--config", str(path), "--json"], expect)


def test_workload_file_in_latin1_or_a_folder_is_named(tmp_path, capsys):
    path = tmp_path / "job.yaml"
    path.write_bytes(yaml.safe_dump(BASE).encode() + "# caf\xe9\n".encode("latin-1"))
    _clear(capsys, ["workload", "--config", str(path)], "config: job.yaml is not UTF-8")
    _clear(capsys, ["workload", "--config", str(tmp_path)], "is a directory")


def test_library_entry_points_name_a_missing_argument():
    topo = ccviz.load_topology("ring:n=4")
    coll = ccviz.make_collective("allgather", topo, 1e6)
    with pytest.raises(ccviz.CcvizError, match="collective: expected a ccviz Collective"):
        lower_bound(topo, None)
    with pytest.raises(ccviz.CcvizError, match="topology: expected a ccviz Topology"):
        lower_bound(None, coll)
    with pytest.raises(ccviz.CcvizError, match="topology: expected"):
        ccviz.bandwidth_limit(None, "allgather", 1e6)
    with pytest.raises(ccviz.CcvizError, match="collective: expected"):
        ccviz.run(topo, None, "ring", size_bytes=1e6)
    with pytest.raises(ccviz.CcvizError, match="size: run"):
        ccviz.run(topo, "allgather", "ring")
    with pytest.raises(ccviz.CcvizError, match="ranks: expected a Topology or a list"):
        ccviz.make_collective("allgather", None, 1e6)
    from ccviz.runs.workload import run_workload

    with pytest.raises(ccviz.CcvizError, match="groups: expected a mapping of kind to its groups"):
        run_workload(topo, "tp=2,dp=2", "tp:allreduce:1MB", "ring", groups=[[0, 1], [2, 3]])
