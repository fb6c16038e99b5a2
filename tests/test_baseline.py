"""The NCCL baseline: on a system preset every schedule is held against what NCCL would run ("x NCCL")."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from ccviz import load_topology
from ccviz.runs import baseline
from ccviz.runs.pipeline import run

APP = str(Path(__file__).resolve().parent.parent / "app.py")


def test_baseline_only_on_fabrics_with_the_hardware_model():
    assert baseline.applies(load_topology("dgxh100"))
    assert not baseline.applies(load_topology("ring:n=8"))
    assert not baseline.applies(load_topology("dgxh100:model=alphabeta"))


def test_times_nccl_is_nccls_time_over_the_schedules():
    fabric = load_topology("dgxh100")
    ring = run(fabric, "allreduce", "ring", 64 << 20)
    nccl = baseline.nccl_result(fabric, ring.collective)
    assert nccl.schedule.algorithm == "nccl" and nccl.collective.size_bytes == 64 << 20
    x = baseline.times_nccl(ring.finish_time_s, nccl.finish_time_s)
    assert x == pytest.approx(nccl.finish_time_s / ring.finish_time_s)
    assert baseline.words(x) == f"{x:.2f}x NCCL" and baseline.words(None) == "-"
    assert baseline.times_nccl(None, 1.0) is None and baseline.times_nccl(1.0, math.inf) is None


def test_compare_column_matches_each_row_to_nccl_at_its_size():
    table = pd.DataFrame({"algorithm": ["nccl", "ring", "nccl", "ring", "tacos"],
                          "size_bytes": [1, 1, 2, 2, 2], "finish_time_s": [2.0, 4.0, 3.0, 1.5, None],
                          "error": [None, None, None, None, "failed"]})
    assert list(baseline.times_nccl_column(table).fillna(-1)) == [1.0, 0.5, 1.0, 2.0, -1]
    assert baseline.times_nccl_column(table[table["algorithm"] != "nccl"]).isna().all()


def test_synthesize_shows_the_nccl_baseline_on_a_preset():
    at = AppTest.from_file(APP, default_timeout=180)
    at.query_params.update({"topology": "dgxh100", "collective": "allreduce", "algorithm": "ring", "size": "16MB"})
    at.run()
    at.button(key="syn_run").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    (vs,) = [m for m in at.metric if m.label == "against NCCL"]
    assert vs.value.endswith("x NCCL") and float(vs.value.split("x")[0]) > 0
    assert any("NCCL here (" in md.value for md in at.markdown)


@pytest.mark.slow
def test_compare_on_a_preset_puts_nccl_first_and_shows_x_nccl():
    at = AppTest.from_file(APP, default_timeout=300)
    at.query_params.update({"page": "compare", "topology": "dgxh100", "collective": "allreduce"})
    at.run()
    select = at.multiselect(key="cmp_algorithms_allreduce")
    assert select.value[0] == "nccl"
    select.set_value(["nccl", "ring"]).run()
    at.select_slider(key="cmp_sizes").set_range(1e6, 1e6).run()
    at.button(key="cmp_run").click().run()
    assert not at.exception, [e.value for e in at.exception]
    table = at.dataframe[0].value
    by = dict(zip(table["algorithm"], table["x_nccl"], strict=True))
    assert by["nccl"] == pytest.approx(1.0)
    fin = dict(zip(table["algorithm"], table["finish_us"], strict=True))
    assert by["ring"] == pytest.approx(fin["nccl"] / fin["ring"])
