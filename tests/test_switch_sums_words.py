"""What the app and the CLI say about sums made in reducing switches (found walking the app on dgxh100 / nvl72
with forestcoll's ``switch_sums``): the limit without switch sums, the notes, the tie with inc, the option error."""

from __future__ import annotations

import itertools
from pathlib import Path

import pandas as pd
from streamlit.testing.v1 import AppTest

import ccviz
from ccviz.app.state import for_app
from ccviz.bounds.limit import switch_sums_sentence
from ccviz.synth.registry import SynthOptions
from ccviz.viz.comparison import fastest_by_size, handover_sentence

APP = str(Path(__file__).resolve().parent.parent / "app.py")
SIZE = 1 << 20


def test_the_sentence_says_how_far_a_schedule_summing_at_gpus_is_from_that_limit():
    # ring on dgxh100 read "the limit is 3.889 ms: 13.9% of it" (13.9% of what?)
    text = switch_sums_sentence(28e-3, 3.889e-3, sums_in_switches=False)
    assert text.startswith("that limit counts sums made in the fabric's switches (NVLS, SHARP); without them "
                           "(ReduceScatter then AllGather, summed at GPUs) the limit is 3.889 ms; ")
    assert "ends at 7.200 x it (13.9% of its speed), summing at GPUs" in text
    assert text.endswith("`-a inc` sums in the switches")


def test_the_sentence_never_sends_a_schedule_that_sums_in_the_switches_to_inc():
    # a schedule summing in the switches yet slower than that limit was told "`-a inc` sums in the switches"
    text = switch_sums_sentence(5e-3, 4e-3, sums_in_switches=True)
    assert "though it sums in the switches" in text and "-a inc" not in text
    beats = switch_sums_sentence(2.266e-3, 3.889e-3, sums_in_switches=True)
    assert "this schedule sums in the switches and beats it: it ends in 58.3% of that time" in beats


def test_forestcoll_told_to_sum_at_gpus_says_so_in_one_note():
    # switch_sums=false gave "its trees ... ended sooner than the in-switch schedule ..., or that schedule does
    # not fit this fabric, or --opt switch_sums=false": three guesses where the option says which
    topology = ccviz.load_topology("star:n=4,reduce=true")
    result = ccviz.run(topology, "reducescatter", "forestcoll", SIZE, options=SynthOptions(extra={"switch_sums": False}))
    notes = [n for n in result.summary()["notes"] if "reducing switches" in n or "in-network" in n]
    assert not result.schedule.sums_in_switches
    assert notes == ["forestcoll sums at GPUs only, as --opt switch_sums=false asks; `-a inc`, or --opt "
                     "switch_sums=auto, sums in the fabric's reducing switches"], notes
    assert for_app(notes[0]) == ("forestcoll sums at GPUs only, as the option 'switch sums' set to false (algorithm "
                                 "options) asks; the algorithm inc, or the option 'switch sums' set to auto "
                                 "(algorithm options), sums in the fabric's reducing switches")


def test_the_fastest_names_every_algorithm_that_ties():
    # forestcoll keeps inc's schedule on dgxh100: Compare said "Fastest ...: forestcoll" with inc at the same time
    table = pd.DataFrame({"algorithm": ["ring", "forestcoll", "inc"] * 2, "size_bytes": [1e6] * 3 + [1e9] * 3,
                          "finish_time_s": [3e-5, 2.466e-6, 2.466e-6, 2.8e-2, 2.266e-3, 2.266e-3],
                          "verified": [True] * 6, "error": [None] * 6})
    assert fastest_by_size(table) == [(1e6, 1e9, "forestcoll and inc")]
    assert "**forestcoll and inc**" in handover_sentence(table)


def test_switch_sums_true_without_reducing_switches_is_one_error_in_the_apps_words_and_keeps_the_inputs():
    at = AppTest.from_file(APP, default_timeout=300)
    at.query_params.update({"topology": "star:n=4", "collective": "reducescatter", "algorithm": "forestcoll",
                            "size": "1MB"})
    at.run()
    assert at.selectbox(key="syn_opt_forestcoll_switch_sums").options == ["auto", "true", "false"]
    at.selectbox(key="syn_opt_forestcoll_switch_sums").select("true").run()
    at.button(key="syn_run").click().run()
    assert not at.exception
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and "\n" not in errors[0], errors
    assert "set 'switch sums' (algorithm options) to auto or false" in errors[0], errors
    assert "Node.reduce" not in errors[0] and "tick 'reduce' on a switch in the Topology designer" in errors[0]
    assert at.selectbox(key="syn_opt_forestcoll_switch_sums").value == "true"
    assert at.selectbox(key="syn_algorithm").value == "forestcoll"
    assert at.selectbox(key="syn_collective").value == "reducescatter"


def test_step_by_step_shows_sums_made_in_the_switches():
    # Playback's steps drew a contribution into a switch's sum (op "combine") as a copy, and no sum filling
    from ccviz.viz.steps import OP_COLORS, steps_figure

    result = ccviz.run(ccviz.load_topology("star:n=4,reduce=true"), "allreduce", "forestcoll", SIZE)
    assert result.schedule.sums_in_switches and result.timeline.verified
    fig = steps_figure(result.timeline)

    def reducing_segments(frame) -> int:
        trace = next(t for t in frame.data if t.line and t.line.color == OP_COLORS["reduce"])
        return sum(1 for x in trace.x if x is None or x != x)

    assert max(reducing_segments(f) for f in fig.frames) > 1
    sums = [t for f in fig.frames for t in f.data if t.name == "partial sums in switches"]
    assert len(sums) == len(fig.frames) and any(any(sums_text) for sums_text in (t.text for t in sums))


def test_the_bar_charts_line_labels_never_face_each_other_on_one_side():
    # dgxh100 AllReduce at 1 GB: "fabric's limit" (above its line, right) sat under "without switch sums"
    # (below its line 1.7 ms higher, right) and could not be read
    from ccviz.viz.comparison import finish_bars

    table = pd.DataFrame({"algorithm": ["ring", "forestcoll"], "size_bytes": [1e9, 1e9],
                          "finish_time_s": [2.8e-2, 2.266e-3], "lower_bound_s": [2.227e-3, 2.227e-3],
                          "limit_s": [2.222e-3] * 2, "limit_without_switch_sums_s": [3.889e-3] * 2,
                          "error": [None, None]})
    labels = [(a.xanchor, a.y, a.yanchor) for a in finish_bars(table, 1e9).layout.annotations]
    assert len(labels) == 3, labels
    for side in ("left", "right"):
        on_side = sorted((y, anchor) for x, y, anchor in labels if x == side)
        for (_, lower), (_, higher) in itertools.pairwise(on_side):
            assert (lower, higher) == ("top", "bottom"), labels  # the lower line's label below it, the higher's above
