"""`ccviz reproduce measured`: the published rows are well formed and each is held against a simulation."""

from __future__ import annotations

import json

import pytest

from ccviz.cli import main
from ccviz.errors import CcvizError
from ccviz.runs import measured as m
from ccviz.runs.calibrate import predict_s

ROWS = m.measured_rows()


def test_every_published_row_is_complete_and_cites_its_source():
    assert len(ROWS) >= 150
    systems = {r.system for r in ROWS}
    assert {"dgxa100", "dgxh100", "hgxh200", "nvl72", "mi300x"} <= systems
    assert {r.collective for r in ROWS} >= {"allreduce", "allgather", "reducescatter"}
    for r in ROWS:
        assert r.source_url.startswith("https://github.com/"), r
        assert r.busbw_GBps > 0 and r.size_bytes > 0 and r.gpus >= 2 and r.nodes >= 1, r
        assert r.collective in ("allreduce", "allgather", "reducescatter", "alltoall"), r
    sizes = [r.size_bytes for r in ROWS]
    assert min(sizes) <= 1024 and max(sizes) >= 8 << 30  # 1 KiB .. 8 GiB and beyond


def test_row_to_preset_and_forced_algorithm():
    (ring,) = [r for r in ROWS if r.algo_env == "NCCL_NVLS_ENABLE=0"]
    assert ring.spec == "hgxh200" and ring.options == {"algo": "ring"} and ring.label == "hgxh200 1x8"
    racks = [r for r in ROWS if r.system == "nvl72" and r.nodes == 2]
    assert racks and racks[0].spec == "nvl72:nodes=2"
    azure_gb200 = [r for r in ROWS if r.system == "nvl72" and r.gpus == 4]
    assert azure_gb200 and azure_gb200[0].spec == "nvl72:gpus=4"


def test_bus_factor_and_size_classes_follow_nccl_tests():
    assert m.bus_factor("allreduce", 8) == pytest.approx(1.75)
    assert m.bus_factor("allgather", 8) == pytest.approx(0.875)
    assert [m.size_class(s) for s in (8, 64 << 10, 512 << 10, 1 << 20, 16 << 20, 32 << 20, 64 << 20)] == [
        "<=64KiB", "<=64KiB", "64KiB-1MiB", "1-16MiB", "1-16MiB", "16-64MiB", ">=64MiB"]


def test_a_prediction_is_the_simulated_time_and_the_ratio_its_busbw_over_the_measured():
    rows = m.select(ROWS, "dgxh100 1x8 1GiB")
    assert len(rows) == 1
    (comp,) = m.compare(rows, "ring")
    t = predict_s(__import__("ccviz").load_topology("dgxh100"), "allreduce", 1 << 30, "ring")
    assert comp.predicted_s == pytest.approx(t)
    assert comp.ratio == pytest.approx((1 << 30) / t / 1e9 * 1.75 / 466.35)
    assert comp.within is (abs(comp.ratio - 1) <= 0.10)


def test_error_table_takes_median_and_worst_per_machine_and_class():
    row = ROWS[0]
    comps = []
    for ratio in (0.5, 0.9, 1.2):
        c = m.Comparison(m.MeasuredRow(**{**row.__dict__, "size_bytes": 1 << 30}))
        c.predicted_busbw_GBps, c.predicted_s = row.busbw_GBps * ratio, 1.0
        comps.append(c)
    small = m.Comparison(m.MeasuredRow(**{**row.__dict__, "size_bytes": 4096}))
    small.predicted_busbw_GBps, small.predicted_s = row.busbw_GBps * 4, 1e-6  # 4x too fast: off by 4x
    (big, tiny) = sorted(m.error_table([*comps, small]), key=lambda e: e.size_class != ">=64MiB")
    assert (big.rows, big.median_error, big.worst_error, big.within) == (3, pytest.approx(0.2), pytest.approx(0.5), 1)
    assert tiny.worst_error == pytest.approx(4.0) and "| >=64MiB | 3 | 20% | 50% | 1/3" in m.error_markdown([big])


def test_rows_without_a_preset_say_why():
    for comp in m.compare(m.select(ROWS, "mi300x"), "ring"):
        assert (comp.ratio is None) == bool(comp.missing)  # a row is predicted, or says why not
    huge = [r for r in ROWS if r.gpus > m.MAX_PREDICT_GPUS][:1]
    (c,) = m.compare(huge, "ring")
    assert "not simulated" in c.missing


def test_a_broken_csv_names_the_field():
    with pytest.raises(CcvizError, match="busbw_GBps"):
        m.measured_rows("system,nodes,gpus,collective,size_bytes,busbw_GBps,time_us,in_place,nccl_version,"
                        "algo_env,source_url,note\ndgxh100,1,8,allreduce,1024,fast,,1,2.18,,https://x,\n")


def test_cli_reproduce_measured_json(capsys):
    assert main(["reproduce", "measured", "--filter", "dgxh100 1x8 8GiB", "-a", "ring", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    (row,) = data["rows"]
    assert row["measured_busbw_GBps"] == 478.87 and row["ratio"] > 0 and row["source_url"].startswith("https://")
    assert data["summary"][0]["size_class"] == ">=64MiB"


def test_sizes_of_one_schedule_shape_are_read_off_the_line_their_ends_and_middle_confirm():
    # 8x H200 NVLS at 1, 2, 4, 8 GiB: one shape (nvls/simple, NCCL's full 128 KiB chunk): 3 simulations, not 4
    rows = [r for r in m.select(ROWS, "hgxh200 1x8") if r.nccl_version == "2.20.5" and r.size_bytes >= 1 << 30]
    assert sorted(r.size_bytes for r in rows) == [1 << 30, 2 << 30, 4 << 30, 8 << 30]
    predictor = m.Predictor(rows)
    comps = m.compare(rows)
    fabric = __import__("ccviz").load_topology("hgxh200")
    (between,) = [c for c in comps if c.notes]
    assert "interpolated" in between.notes
    assert between.predicted_s == pytest.approx(predict_s(fabric, "allreduce", between.row.size_bytes), rel=0.004)
    assert [predictor.predict(r)[0] for r in rows] and predictor.simulations == 3
    # three sizes of one shape (64 KiB chunks) and one of another: fewer than four, each simulated
    mixed = [r for r in m.select(ROWS, "hgxh200 1x8") if r.nccl_version == "2.20.5"
             and (128 << 20) <= r.size_bytes <= (1 << 30)]
    assert not any(c.notes for c in m.compare(mixed))
