"""forestcoll's closed forms as reduction halves: the rails' AllGather mirrored into a ReduceScatter, and an
AllReduce's AllGather half handed over when its links and data are ready (``reversal.handover_s``), not when every
link of the ReduceScatter is over (``schedule_end``: a chunk late under cut-through switches)."""

from __future__ import annotations

import time

import pytest

import ccviz
from ccviz.judge.simulate import simulate
from ccviz.model.collectives import make_collective
from ccviz.model.link_model import effective_topology
from ccviz.model.schedule import Schedule
from ccviz.synth.forestcoll.crossbar import crossbar_allgather, crossbar_planes
from ccviz.synth.registry import SynthOptions
from ccviz.synth.reversal import concatenate, handover_s, schedule_end, split_allreduce

SIZE = 1e9
AT_GPUS = SynthOptions(extra={"switch_sums": False})  # the trees' own reductions, not the switches' sums


def _at_gpus_limit(result: ccviz.RunResult) -> float:
    return result.limit.without_switch_sums_s or result.limit.limit_s


@pytest.mark.parametrize("spec", ["dgxh100:boxes=2", "dgxh100:boxes=3"])
def test_boxes_on_rails_reducescatter_is_the_rails_allgather_mirrored(spec: str) -> None:
    # before: the hardware model's hops cost other than their reverses, so the rails' closed form (an AllGather's
    # only) was not mirrored and partial sums ran up packed trees: dgxh100:boxes=2 1.054 x in 18-28 CPU s;
    # mirrored and replayed: 1.013 x (boxes=3: 1.018 x) in about a second
    topology = ccviz.load_topology(spec)
    cpu = time.process_time()
    result = ccviz.run(topology, "reducescatter", "forestcoll", SIZE, options=AT_GPUS)
    cpu = time.process_time() - cpu
    assert result.timeline.verified and result.schedule.options["crossbar"] and cpu < 15.0
    assert result.finish_time_s <= 1.03 * result.limit.limit_s
    assert any(note.startswith("plan 'boxes on rails'") for note in result.schedule.notes)
    assert "reduce" in {t.op for t in result.schedule.transfers}


@pytest.mark.parametrize("spec, within", [("dgxa100", 1.015), ("dgxh100:boxes=2", 1.02)])
def test_allreduce_takes_the_closed_form_both_halves(spec: str, within: float) -> None:
    # dgxa100 AllReduce by trees: 1.055 x in 20 CPU s; the closed form's halves handed over at schedule_end 1.075 x,
    # at handover_s 1.004 x (dgxh100:boxes=2: 1.055 by trees, 1.014 at schedule_end, 1.009 at handover_s)
    topology = ccviz.load_topology(spec)
    result = ccviz.run(topology, "allreduce", "forestcoll", SIZE, options=AT_GPUS)
    assert result.timeline.verified and result.schedule.options["crossbar"]
    assert result.finish_time_s <= within * _at_gpus_limit(result)


def test_the_allgather_half_need_not_wait_for_a_down_link_still_busy() -> None:
    """Under cut-through switches a hop out of a switch lands alpha after it starts but holds its link for the
    chunk's bytes: the ReduceScatter's last down-links are busy after its last partial landed, and the AllGather
    half, whose first sends are up-links, may start at the last landing."""
    topology = effective_topology(ccviz.load_topology("dgxa100"))
    planes = crossbar_planes(topology)
    assert planes is not None and topology.switch_hop == "teccl"
    whole = make_collective("allreduce", topology, SIZE, 6)
    rs_part, ag_part = split_allreduce(whole)
    rs_transfers, _ = crossbar_allgather(topology, planes, rs_part)
    ag_transfers, ag_end = crossbar_allgather(topology, planes, ag_part)
    rs = Schedule(topology, rs_part, rs_transfers, "forestcoll", {}, "heuristic")
    ag = Schedule(topology, ag_part, ag_transfers, "forestcoll", {}, "heuristic")
    landed = max(t.end_s for t in rs_transfers)
    chunk_time = rs_part.chunk_bytes / (topology.links[(planes.planes[0], planes.gpus[0])].bandwidth_GBps * 1e9)
    assert schedule_end(rs) >= landed + 0.5 * chunk_time  # the old hand-over: down-links still serializing
    assert handover_s(rs, ag) == pytest.approx(landed, rel=1e-12)
    tight, late = simulate(concatenate(rs, ag, whole, tight=True)), simulate(concatenate(rs, ag, whole))
    assert tight.verified and late.verified, tight.violations[:3]
    assert tight.finish_time_s == pytest.approx(landed + ag_end, rel=1e-9)
    assert tight.finish_time_s < late.finish_time_s - 0.5 * chunk_time
