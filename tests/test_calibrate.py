"""`ccviz calibrate`: nccl-tests logs are read as printed, and the fit recovers a fabric it was generated on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ccviz.builders.loading import load_topology
from ccviz.cli import main
from ccviz.errors import CcvizError
from ccviz.runs import calibrate as cal
from ccviz.runs.nccl_log import parse_log, read_log

LOGS = Path(__file__).parent / "fixtures" / "nccl_tests"


def test_a_published_log_is_read_whole():
    log = read_log(LOGS / "a3mega_h100_2x8_all_reduce.log")
    (section,) = log.sections
    assert section.collective == "allreduce"  # named by the mpirun line above the output
    assert section.ranks == 16 and len(section.hosts) == 2 and section.device == "NVIDIA H100 80GB HBM3"
    assert len(section.rows) == 31
    last = section.rows[-1]
    assert (last.size_bytes, last.time_oop_us, last.busbw_oop_GBps, last.time_ip_us, last.busbw_ip_GBps) == (
        8589934592, 47535.0, 338.82, 47743.0, 337.35)


def test_an_excerpt_knows_its_ranks_from_the_last_rank_and_asks_for_the_collective():
    with pytest.raises(CcvizError, match="--collective"):
        read_log(LOGS / "coreweave_gb200_nvl72_1rack_all_reduce.log")
    log = read_log(LOGS / "coreweave_gb200_nvl72_1rack_all_reduce.log", "allreduce")
    assert log.sections[0].ranks == 72 and log.sections[0].hosts == ()  # only rank 71's line was published
    rccl = read_log(LOGS / "mi300x_rccl_all_reduce_excerpt.log", "allreduce")
    assert rccl.version == "develop:83d38d9" and rccl.sections[0].ranks == 8
    assert rccl.sections[0].rows[0].busbw_ip_GBps == 154.63


def test_old_format_without_root_and_several_tests_in_one_log():
    text = "\n".join([
        "# Collective test starting: all_gather_perf",
        "#  size count type redop time algbw busbw error time algbw busbw error",
        "  1024   32   float  none   10.0  0.10  0.09  0e+00   11.0  0.09  0.08  0e+00",
        "# Collective test starting: reduce_scatter_perf",
        "  2048   16   float  sum   -1  20.5  0.10  0.09  N/A   21.5  0.10  0.09  N/A",
    ])
    log = parse_log(text, "two")
    assert [(s.collective, s.rows[0].size_bytes, s.rows[0].time_ip_us) for s in log.sections] == [
        ("allgather", 1024, 11.0), ("reducescatter", 2048, 21.5)]


def test_text_that_is_not_nccl_tests_output_says_what_was_expected():
    with pytest.raises(CcvizError, match="expected nccl-tests or rccl-tests output"):
        parse_log("epoch 1 loss 0.3\nepoch 2 loss 0.2", "train.log")


def _synthetic_log(truth, algorithm: str = "ring") -> str:
    lines = ["mpirun ./build/all_reduce_perf -b 1K -e 1G -f 4"]
    for i in range(0, 21, 4):
        size = 1024 * 4 ** (i // 2)
        us = cal.predict_s(truth, "allreduce", size, algorithm) * 1e6
        lines.append(f"{size:>12} {size // 4:>12} float sum -1 {us:10.3f} 0 0 0 {us:10.3f} 0 0 0")
    return "\n".join(lines)


def test_the_fit_recovers_the_fabric_a_log_was_made_on(tmp_path):
    fabric = load_topology("ring:n=4")
    knobs = cal.knobs_for(fabric)
    assert [k.name for k in knobs] == ["bw_factor[50 GB/s, 0.5 us]", "alpha_factor"]
    truth = cal.apply_knobs(fabric, knobs, [0.6, 4.0])
    log = parse_log(_synthetic_log(truth), "synthetic.log")
    result = cal.calibrate(log, fabric, algorithm="ring")
    assert result.knobs["bw_factor[50 GB/s, 0.5 us]"] == pytest.approx(0.6, rel=0.01)
    assert result.knobs["alpha_factor"] == pytest.approx(4.0, rel=0.02)
    assert result.worst_large_error() < 0.01
    out = tmp_path / "fitted.json"
    result.topology.save(out)
    again = load_topology(str(out))  # the fitted fabric loads wherever a fabric does
    assert again.meta["calibration"]["algorithm"] == "ring"
    assert cal.predict_s(again, "allreduce", 1 << 30, "ring") == pytest.approx(
        cal.predict_s(truth, "allreduce", 1 << 30, "ring"), rel=0.01)


def test_a_preset_with_the_hardware_model_fits_its_parameters():
    one = cal.knobs_for(load_topology("dgxh100"))
    assert [k.name for k in one] == ["efficiency.scaleup", "launch_us", "step_us_factor", "simple_base_factor",
                                     "reduce_factor"]
    two = load_topology("dgxh100:nodes=2")
    knobs = cal.knobs_for(two)
    assert [k.name for k in knobs][:3] == ["efficiency.scaleup", "efficiency.net", "launch_us"]
    assert knobs[0].bounds[1] == 1.0  # a share of the link rate never exceeds it
    moved = cal.apply_knobs(two, knobs, [0.7, 0.5, 30.0, 2.0, 3.0, 0.5])
    lm = moved.meta["link_model"]
    assert (lm["efficiency"], lm["launch_us"]) == ({"scaleup": 0.7, "net": 0.5}, 30.0)
    assert lm["step_us"]["net"]["simple"] == 2 * two.meta["link_model"]["step_us"]["net"]["simple"]
    assert lm["base_us"]["nvls"]["simple"] == 3 * two.meta["link_model"]["base_us"]["nvls"]["simple"]
    assert lm["base_us"]["ring"]["ll"] == two.meta["link_model"]["base_us"]["ring"]["ll"]
    rates = [(n.reduce_GBps, m.reduce_GBps) for n, m in zip(two.nodes.values(), moved.nodes.values(), strict=True)
             if n.reduce_GBps]
    assert rates and all(b == pytest.approx(a / 2) for a, b in rates)
    slower = cal.predict_s(moved, "allreduce", 1 << 30, "nccl", {"algo": "ring"})
    assert slower > cal.predict_s(two, "allreduce", 1 << 30, "nccl", {"algo": "ring"})  # the knobs reach the judge


def test_cli_writes_the_fitted_fabric_and_refuses_a_system_of_the_wrong_size(tmp_path, capsys):
    truth = cal.apply_knobs(load_topology("ring:n=4"), cal.knobs_for(load_topology("ring:n=4")), [0.5, 2.0])
    path = tmp_path / "mine.log"
    path.write_text(_synthetic_log(truth))
    out = tmp_path / "fabric.json"
    assert main(["calibrate", str(path), "--system", "ring:n=4", "-a", "ring", "--out", str(out), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["worst_error_at_64MiB_and_above"] < 0.01 and len(data["points"]) == 6
    assert main(["synth", str(out), "-c", "allreduce", "-a", "ring", "-s", "1GiB", "--json"]) == 0
    capsys.readouterr()
    assert main(["calibrate", str(LOGS / "a3mega_h100_2x8_all_reduce.log"), "--system", "ring:n=4"]) == 2
    assert "16 ranks" in capsys.readouterr().err


def test_a_fit_stopped_early_keeps_the_best_point_it_had():
    import threading

    fabric = load_topology("ring:n=4")
    truth = cal.apply_knobs(fabric, cal.knobs_for(fabric), [0.5, 1.0])
    log = parse_log(_synthetic_log(truth), "synthetic.log")
    stop = threading.Event()
    result = cal.calibrate(log, fabric, algorithm="ring", stop=stop,
                           progress=lambda i, rms: stop.set() if i >= 6 else None)
    assert result.stopped == "stopped"
    factor = result.knobs["bw_factor[50 GB/s, 0.5 us]"]
    assert abs(factor - 0.5) < abs(1.0 - 0.5)  # moved toward the truth, not left as built


def test_a_slow_simple_protocol_is_charged_but_nccls_choice_stays():
    # a transport whose Simple operations start slowly (the fitted simple_base_factor) costs time in the judge,
    # but NCCL's tuner chooses with its own constants, as NCCL does on such a machine (the A3 Mega log's jump at
    # 32 MiB: NCCL switched to Simple though its operations there cost about 0.9 ms)
    from ccviz.model.collectives import make_collective
    from ccviz.synth.nccl.synthesizer import nccl_choice
    from ccviz.synth.registry import SynthOptions

    two = load_topology("dgxh100:nodes=2")
    knob = next(k for k in cal.knobs_for(two) if k.name == "simple_base_factor")
    slow = knob.apply(two, 40.0)
    coll = make_collective("allreduce", two, 4 << 20)
    assert nccl_choice(slow, coll, SynthOptions()).pick == nccl_choice(two, coll, SynthOptions()).pick
    assert cal.predict_s(slow, "allreduce", 4 << 20) > cal.predict_s(two, "allreduce", 4 << 20) + 800e-6


def test_a_fitted_fabric_keeps_the_rates_nccls_tuner_chose_by(tmp_path):
    # a lower fitted NVLS rate made ccviz's tuner model turn 2x H100 at 8 GiB from NVLSTree to ring, where NCCL on
    # the machine chose by its constants: the fabric keeps the rates as built for the choice (meta nccl_tuner)
    from ccviz.model.collectives import make_collective
    from ccviz.synth.nccl.synthesizer import nccl_choice
    from ccviz.synth.registry import SynthOptions

    two = load_topology("dgxh100:nodes=2")
    values = [0.824, 0.97, 12.0, 1.0, 39.0, 0.67]
    bare = cal.apply_knobs(two, cal.knobs_for(two), values)
    kept = cal.apply_knobs(cal.with_tuner_view(two), cal.knobs_for(two), values)
    kept.save(tmp_path / "fitted.json")
    again = load_topology(str(tmp_path / "fitted.json"))
    coll = make_collective("allreduce", two, 8 << 30)
    assert nccl_choice(two, coll, SynthOptions()).pick.algo == "nvlstree"
    assert nccl_choice(bare, coll, SynthOptions()).pick.algo == "ring"
    assert nccl_choice(again, coll, SynthOptions()).pick.algo == "nvlstree"


def _log_from(truth, sizes) -> str:
    """An all_reduce_perf log of the times the judge gives on ``truth`` (nccl) at these sizes."""
    lines = ["mpirun ./build/all_reduce_perf -b 4K -e 1G -f 2"]
    for size in sizes:
        us = cal.predict_s(truth, "allreduce", size) * 1e6
        lines.append(f"{size:>12} {size // 4:>12} float sum -1 {us:10.3f} 0 0 0 {us:10.3f} 0 0 0")
    return "\n".join(lines)


def test_a_simple_base_latency_40x_the_built_one_is_found_and_the_cli_fabric_reproduces_the_log(tmp_path, capsys):
    # the A3 Mega log's shape: large sizes carry a Simple-protocol intercept ~40x NCCL's base latency and a lower
    # link rate; the search left that knob near 2x (a local minimum, the knob badly scaled against the rates);
    # solved as the additive latency it is, calibrate -> synth reproduces every row >= 64 MiB within 5 %
    one = cal.with_tuner_view(load_topology("dgxh100"))
    knobs = {k.name: k for k in cal.knobs_for(one)}
    truth = knobs["simple_base_factor"].apply(knobs["efficiency.scaleup"].apply(one, 0.6), 40.0)
    truth = knobs["launch_us"].apply(truth, 60.0)
    sizes = [4096, 65536, 1 << 20, 64 << 20, 256 << 20, 1 << 30]
    path = tmp_path / "box.log"
    path.write_text(_log_from(truth, sizes))
    out = tmp_path / "fitted.json"
    assert main(["calibrate", str(path), "--system", "dgxh100", "--out", str(out), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["worst_error_at_64MiB_and_above"] < cal.LARGE_TOLERANCE
    assert data["knobs"]["simple_base_factor"] == pytest.approx(40.0, rel=0.1)
    assert data["evaluations"] <= 20  # solved, not searched: the search ran into its 300 s limit here
    measured = {p["size_bytes"]: p["measured_s"] for p in data["points"]}
    for size in (64 << 20, 1 << 30):  # the path a user runs: the fitted fabric file through `ccviz synth`
        assert main(["synth", str(out), "-c", "allreduce", "-a", "nccl", "-s", str(size), "--json"]) == 0
        finish = json.loads(capsys.readouterr().out)["finish_time_s"]
        assert finish == pytest.approx(measured[size], rel=cal.LARGE_TOLERANCE)


@pytest.mark.slow
def test_the_a3_mega_log_calibrated_reproduces_its_large_sizes(tmp_path):
    # the published 2x8 H100 log (tests/fixtures/nccl_tests): calibrate was 38 % off at >= 64 MiB with the
    # Simple intercept searched; fitted on a subset of its rows (one small, two large), with no time limit so that
    # a loaded machine does not cut the fit short
    keep = {4096, 64 << 20, 8 << 30}
    lines = (LOGS / "a3mega_h100_2x8_all_reduce.log").read_text().splitlines()
    rows = [line for line in lines if line.split() and line.split()[0].isdigit()]
    text = "\n".join([line for line in lines if line not in rows] + [r for r in rows if int(r.split()[0]) in keep])
    log = parse_log(text, "a3mega subset")
    result = cal.calibrate(log, load_topology("dgxh100:nodes=2"), time_limit=1e9)
    assert len(result.points) == 3 and result.stopped is None
    assert result.worst_large_error() < cal.LARGE_TOLERANCE
    assert result.knobs["simple_base_factor"] > 20  # the slow transport's intercept, about 0.9 ms
    out = tmp_path / "a3.json"
    result.topology.save(out)
    again = load_topology(str(out))
    assert cal.predict_s(again, "allreduce", 64 << 20) == pytest.approx(1.2659e-3, rel=cal.LARGE_TOLERANCE)
