"""Fuzz suite (hypothesis, bounded, deterministic): hostile files, specs, sizes and schedules.

Every case must end in one clear line with exit 2, a correct INVALID report, or a result that
verifies; a tampered schedule that verifies must also pass the independent checker. The counts
are printed at the end of the session ("fuzz figures: ...") and quoted in the README.
"""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ccviz
from ccviz.builders import BUILDERS
from ccviz.model.schedule import Schedule
from tests.hostile import FIGURES, record, run_cli
from tests.independent_checker import check

FUZZ = settings(max_examples=40, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

BAD_VALUES = st.sampled_from([
    True, False, None, "x", "", -1, 0, 0.5, 1.5, -0.0, 1e300, -1e300, [], [1], {}, {"a": 1}, 2**63, "1e400",
])
GOOD_FILE = {
    "name": "fz", "nodes": [{"id": 0}, {"id": 1}, {"id": 2, "kind": "switch"}],
    "links": [{"src": s, "dst": d, "bandwidth_GBps": 50.0, "alpha_us": 0.5}
              for s, d in ((0, 2), (2, 0), (1, 2), (2, 1))],
}
# Fields that are wrong for every value in BAD_VALUES except the listed acceptable ones.
FILE_FIELDS = {
    ("links", 0, "bandwidth_GBps"): (0.5, 1.5, 1e300), ("links", 0, "alpha_us"): (0, -0.0, 0.5, 1.5, 1e300),
    ("links", 1, "lanes"): (), ("links", 0, "src"): (0,), ("links", 1, "dst"): (0,),
    ("nodes", 2, "kind"): (), ("nodes", 2, "copy"): (True, False), ("nodes", 0, "pos"): (None,),
    ("nodes", 1, "id"): (), ("links",): (), ("nodes",): (), ("nodes", 2, "buffer"): (True, False),
}


def _set(data: dict, path: tuple, value) -> dict:
    data = json.loads(json.dumps(data))
    where = data
    for key in path[:-1]:
        where = where[key]
    where[path[-1]] = value
    return data


@FUZZ
@given(field=st.sampled_from(sorted(FILE_FIELDS, key=str)), value=BAD_VALUES, yaml=st.booleans())
def test_fuzz_topology_files(tmp_path_factory, field, value, yaml):
    acceptable = value in FILE_FIELDS[field] and type(value) is not bool or (
        isinstance(value, bool) and any(a is value for a in FILE_FIELDS[field]))
    if field == ("links", 1, "lanes") and value in (1e300, 2**63):
        acceptable = False
    data = _set(GOOD_FILE, field, value)
    path = tmp_path_factory.mktemp("fz") / ("t.yaml" if yaml else "t.json")
    if yaml:
        import yaml as pyyaml

        path.write_text(pyyaml.safe_dump(data))
    else:
        path.write_text(json.dumps(data))
    outcome = run_cli(["synth", str(path), "--size", "1KB", "--json"])
    record(outcome, bad_input=not acceptable)
    assert outcome.kind in ("clear", "ok"), (field, value, outcome)
    if outcome.kind == "ok":
        assert acceptable, (field, value, outcome.stdout[:200])
        assert json.loads(outcome.stdout)["verified"]


SPEC_VALUES = st.one_of(
    st.integers(-3, 6).map(str), st.sampled_from(["inf", "nan", "-1", "1.5", "x", "", "1e9", "4x4", "2/3", "true",
                                                  "100000", "2x2x2", "50/25"]),
)


@FUZZ
@given(name=st.sampled_from(sorted(BUILDERS)), pairs=st.lists(st.tuples(st.integers(0, 8), SPEC_VALUES), max_size=3),
       junk=st.booleans())
def test_fuzz_builder_specs(name, pairs, junk):
    params = list(BUILDERS[name].parameters) + ["bogus"]
    items = [f"{params[i % len(params)]}={value}" for i, value in pairs]
    spec = name + (":" + ",".join(items) if items else "") + (",=" if junk else "")
    outcome = run_cli(["synth", spec, "--size", "64KB", "--json"])
    record(outcome, bad_input=junk)
    assert outcome.kind in ("clear", "ok"), (spec, outcome)
    if outcome.kind == "ok":
        assert not junk and json.loads(outcome.stdout)["verified"], spec


SIZES = st.one_of(
    st.sampled_from(["0", "-1", "1e400", "nan", "inf", "1e-300", "0.0001", "1KB", "1GiB", "3MB", "1e15", "2e15",
                     "1.5", "KB", "1 MB", "64kib", "1e3B", "0x10"]),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
)


@FUZZ
@given(size=SIZES, chunks=st.sampled_from(["1", "2", "0", "-1", "1.5", "1000000000", "x"]),
       collective=st.sampled_from(["allgather", "reducescatter", "broadcast", "custom", "nope"]),
       algorithm=st.sampled_from(["ring", "direct", "tacos", "nope"]))
def test_fuzz_sizes_and_counts(size, chunks, collective, algorithm):
    outcome = run_cli(["synth", "ring:n=4", "--size", size, "--chunks", chunks, "--collective", collective,
                       "--algorithm", algorithm, "--json"])
    try:
        value = ccviz.parse_size(size)
        good_size = 1 <= value / 4 / max(int(chunks) if chunks.isdigit() else 1, 1) and math.isfinite(value)
    except (ccviz.CcvizError, ValueError):
        good_size = False
    bad = not good_size or chunks not in ("1", "2") or collective in ("custom", "nope") or algorithm == "nope"
    record(outcome, bad_input=bad)
    assert outcome.kind in ("clear", "ok"), (size, chunks, collective, algorithm, outcome)
    if outcome.kind == "ok":
        assert not bad and json.loads(outcome.stdout)["verified"], (size, chunks, collective, algorithm)


@pytest.fixture(scope="module")
def switched_schedule(tmp_path_factory) -> dict:
    path = tmp_path_factory.mktemp("fz") / "s.json"
    assert run_cli(["synth", "leafspine:leaves=2,hosts=2,spines=1", "--algorithm", "tacos", "--size", "4KB",
                    "--chunks", "2", "--out", str(path)]).kind == "ok"
    return json.loads(path.read_text())


TRANSFER_EDITS = st.sampled_from(["chunk", "src", "dst", "start_s", "end_s", "op", "step", "drop", "dup"])


@FUZZ
@given(edits=st.lists(st.tuples(TRANSFER_EDITS, st.integers(0, 10_000), BAD_VALUES | st.integers(-2, 12)
                                | st.floats(-1e-5, 1e-4)), min_size=1, max_size=3))
def test_fuzz_tampered_schedules(tmp_path_factory, switched_schedule, edits):
    data = json.loads(json.dumps(switched_schedule))
    rows = data["transfers"]
    for field, where, value in edits:
        k = where % len(rows)
        if field == "drop":
            rows.pop(k)
        elif field == "dup":
            rows.append(list(rows[k]))
        else:
            rows[k][data["transfer_fields"].index(field)] = value
    path = tmp_path_factory.mktemp("fz") / "t.json"
    path.write_text(json.dumps(data))
    outcome = run_cli(["verify", str(path), "--json"])
    independent = None
    if outcome.kind in ("ok", "invalid"):
        loaded = ccviz.simulate(Schedule.load(path))
        independent, _, problems = check(loaded.schedule)
        assert independent == loaded.verified, (edits, problems, [v.message for v in loaded.violations[:3]])
    unchanged = data["transfers"] == switched_schedule["transfers"]
    record(outcome, bad_input=False, independent_valid=independent)
    assert outcome.kind in ("clear", "invalid", "ok"), (edits, outcome)
    if unchanged:
        assert outcome.kind == "ok"


def test_fuzz_figures_are_clean():
    """Runs after the fuzz cases above (file order): nothing crashed, hung or slipped through."""
    if not FIGURES["cases tried"]:
        pytest.skip("run with the fuzz cases above to collect figures")
    assert FIGURES["tracebacks"] == FIGURES["hangs"] == 0
    assert FIGURES["silently accepted"] == FIGURES["invalid-but-verified"] == 0
