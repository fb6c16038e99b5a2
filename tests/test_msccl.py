"""The MSCCL executor: msccl-tools' own programs run clean; planted faults are caught at the exact step."""

from __future__ import annotations

from pathlib import Path
from xml.etree import ElementTree as ET

import pytest

from ccviz import CcvizError
from ccviz.interop.msccl import execute, parse_program

FIXTURES = Path(__file__).parent / "fixtures" / "msccl"
PROGRAMS = sorted(p.name for p in FIXTURES.glob("*.xml"))


def xml(name: str) -> ET.Element:
    return ET.fromstring((FIXTURES / name).read_text())


def text(algo: ET.Element) -> str:
    return ET.tostring(algo, encoding="unicode")


def refs(run) -> set[tuple[int, int, int]]:
    return {(s.gpu, s.tb, s.s) for p in run.problems for s in p.steps}


def test_there_are_nine_msccl_tools_programs():
    assert len(PROGRAMS) == 9  # the eight example programs and experiments_ar/ap_1.xml (allpairs AllReduce)


@pytest.mark.parametrize("name", PROGRAMS)
def test_msccl_tools_program_runs_race_free_and_meets_its_postcondition(name):
    run = execute(FIXTURES / name)
    assert run.ok, run.summary()
    assert run.completed and run.n_races == 0 and run.messages
    coll = parse_program((FIXTURES / name).read_text()).coll
    # The symbolic output really is the collective's result: every slot checked, not only the count.
    if coll == "allreduce":
        assert all(len(v) == 8 for outs in run.outputs.values() for v in outs.values())


@pytest.mark.parametrize("name", PROGRAMS)
def test_dropped_send_is_reported_at_the_receive_it_starves(name):
    algo = xml(name)
    gpu = algo.find("gpu")
    targets = {(s.get("depid"), s.get("deps")) for s in gpu.iter("step")}
    tb, step = next((t, s) for t in gpu.findall("tb") for s in t.findall("step")
                    if s.get("type") == "s" and (t.get("id"), s.get("s")) not in targets)
    dst = int(tb.get("send"))
    tb.remove(step)
    run = execute(text(algo))
    assert not run.ok
    # The peer's receiving thread block on that channel is named, at the receive that lost its partner.
    receiver = next(t for t in algo.findall("gpu")[dst].findall("tb")
                    if t.get("recv") == gpu.get("id") and t.get("chan") == tb.get("chan"))
    recv_steps = [int(s.get("s")) for s in receiver.findall("step") if s.get("type") in ("r", "rcs", "rrc", "rrs", "rrcs")]
    unmatched = [p for p in run.problems if p.kind == "unmatched"]
    assert unmatched and (dst, int(receiver.get("id")), recv_steps[-1]) in {(s.gpu, s.tb, s.s) for s in unmatched[0].steps}
    assert "sends but" in unmatched[0].message or "receives" in unmatched[0].message


@pytest.mark.parametrize("name", PROGRAMS)
def test_channel_moved_is_reported_at_the_first_step_using_it(name):
    algo = xml(name)
    gpu = algo.find("gpu")
    tb = next(t for t in gpu.findall("tb") if t.get("send") != "-1")
    new_chan = int(algo.get("nchannels"))
    algo.set("nchannels", str(new_chan + 1))
    tb.set("chan", str(new_chan))
    run = execute(text(algo))
    assert not run.ok and "unmatched" in run.kinds()
    first_send = next(s for s in tb.findall("step") if s.get("type") in ("s", "rcs", "rrs", "rrcs"))
    assert (0, int(tb.get("id")), int(first_send.get("s"))) in refs(run)
    assert "deadlock" in run.kinds() or "postcondition" in run.kinds() or "unmatched" in run.kinds()


@pytest.mark.parametrize("name", PROGRAMS)
def test_dependency_cycle_is_reported_as_a_waiting_cycle(name):
    algo = xml(name)
    gpu = algo.find("gpu")
    tbs = gpu.findall("tb")
    a, b = (tbs[0], tbs[1]) if len(tbs) > 1 else (tbs[0], tbs[0])
    first_a, last_b = a.findall("step")[0], b.findall("step")[-1]
    first_b, last_a = b.findall("step")[0], a.findall("step")[-1]
    first_a.set("depid", b.get("id"))
    first_a.set("deps", last_b.get("s"))
    last_b.set("hasdep", "1")
    if a is not b:
        first_b.set("depid", a.get("id"))
        first_b.set("deps", last_a.get("s"))
        last_a.set("hasdep", "1")
    run = execute(text(algo))
    deadlock = [p for p in run.problems if p.kind == "deadlock"]
    assert deadlock and "waiting cycle" in deadlock[0].message
    cycle = {(s.gpu, s.tb, s.s) for s in deadlock[0].steps}
    assert (0, int(a.get("id")), int(first_a.get("s"))) in cycle


# ------------------------------------------------------------------ races and data
TWO_WRITERS = """<algo name="lost_update" proto="Simple" nchannels="1" nchunksperloop="3" ngpus="3" coll="allreduce"
 inplace="1">
  <gpu id="0" i_chunks="3" o_chunks="0" s_chunks="0">
    <tb id="0" send="-1" recv="1" chan="0">
      <step s="0" type="rrc" srcbuf="i" srcoff="0" dstbuf="i" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>
    </tb>
    <tb id="1" send="-1" recv="2" chan="0">
      <step s="0" type="rrc" srcbuf="i" srcoff="0" dstbuf="i" dstoff="0" cnt="1" depid="{dep}" deps="0" hasdep="0"/>
    </tb>
  </gpu>
  <gpu id="1" i_chunks="3" o_chunks="0" s_chunks="0">
    <tb id="0" send="0" recv="-1" chan="0">
      <step s="0" type="s" srcbuf="i" srcoff="0" dstbuf="i" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>
    </tb>
  </gpu>
  <gpu id="2" i_chunks="3" o_chunks="0" s_chunks="0">
    <tb id="0" send="0" recv="-1" chan="0">
      <step s="0" type="s" srcbuf="i" srcoff="0" dstbuf="i" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>
    </tb>
  </gpu>
</algo>"""


def test_unordered_reductions_into_one_slot_are_a_race_even_if_this_run_sums_right():
    run = execute(TWO_WRITERS.replace("{dep}", "-1"))
    races = [p for p in run.problems if p.kind == "race"]
    assert races and "GPU 0 i/o[0]" in races[0].message
    assert {(0, 0, 0), (0, 1, 0)} <= refs(run)


def test_a_dependency_without_hasdep_never_signals_and_hangs():
    run = execute(TWO_WRITERS.replace("{dep}", "0"))  # tb 1 waits on tb 0 step 0, which has hasdep=0
    deadlock = [p for p in run.problems if p.kind == "deadlock"]
    assert deadlock and "never signals" in deadlock[0].message
    assert (0, 1, 0) in {(s.gpu, s.tb, s.s) for s in deadlock[0].steps}


def test_ordered_reductions_have_no_race():
    ordered = TWO_WRITERS.replace("{dep}", "0").replace(
        'dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>\n    </tb>\n    <tb id="1"',
        'dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="1"/>\n    </tb>\n    <tb id="1"', 1)
    run = execute(ordered)
    assert "race" not in run.kinds() and "deadlock" not in run.kinds()
    assert "postcondition" in run.kinds()  # chunks 1 and 2 are never reduced: the checker says so


def test_reducescatter_output_is_n_over_n_chunks_aliasing_the_input():
    bad = TWO_WRITERS.replace("{dep}", "-1").replace('coll="allreduce"', 'coll="reducescatter"').replace(
        '<step s="0" type="rrc" srcbuf="i" srcoff="0" dstbuf="i" dstoff="0" cnt="1" depid="-1"',
        '<step s="0" type="rrc" srcbuf="i" srcoff="0" dstbuf="o" dstoff="2" cnt="1" depid="-1"', 1).replace(
        'o_chunks="0"', 'o_chunks="3"')
    run = execute(bad)
    assert "bounds" in run.kinds() and "outside the inplace reducescatter output buffer of 1 chunks" in \
        next(p.message for p in run.problems if p.kind == "bounds")


def test_rccl_step_limit():
    run = execute(FIXTURES / "allreduce_ring_8.xml", max_steps=10)  # its thread blocks have 15 steps
    assert "limit" in run.kinds()
    assert any("15 steps; RCCL accepts at most 10" in p.message for p in run.problems)


def test_more_than_32_sending_thread_blocks_on_a_channel_is_over_the_runtime_limit():
    n = 35
    gpus = [f'<gpu id="0" i_chunks="1" o_chunks="{n}" s_chunks="0">' + "".join(
        f'<tb id="{p - 1}" send="{p}" recv="-1" chan="0"><step s="0" type="s" srcbuf="o" srcoff="0" dstbuf="o" '
        'dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/></tb>' for p in range(1, n)) + "</gpu>"]
    gpus += [f'<gpu id="{p}" i_chunks="1" o_chunks="{n}" s_chunks="0"><tb id="0" send="-1" recv="0" chan="0">'
             '<step s="0" type="r" srcbuf="o" srcoff="0" dstbuf="o" dstoff="0" cnt="1" depid="-1" deps="-1" '
             'hasdep="0"/></tb></gpu>' for p in range(1, n)]
    program = (f'<algo name="fan" proto="Simple" nchannels="1" nchunksperloop="{n}" ngpus="{n}" coll="allgather" '
               f'inplace="1">{"".join(gpus)}</algo>')
    run = execute(program)
    assert any("34 sending thread blocks on channel 0" in p.message for p in run.problems if p.kind == "limit")


# ------------------------------------------------------------------ malformed XML
@pytest.mark.parametrize(("mutate", "expected"), [
    (lambda t: t.replace('type="rcs"', 'type="rsc"', 1), ":5: <step> attribute 'type'='rsc' is not one of"),
    (lambda t: t.replace('srcbuf="o" srcoff="7"', 'srcbuf="x" srcoff="7"', 1), ":5: <step> attribute 'srcbuf'='x'"),
    (lambda t: t.replace(' cnt="1"', ' cnt="one"', 1), ":4: <step> attribute 'cnt'='one' is not a whole number"),
    (lambda t: t.replace(' chan="0"', '', 1), ":3: <tb> is missing attribute 'chan'"),
    (lambda t: t.replace('</tb>', '', 1), "not well-formed XML"),
    (lambda t: t.replace('coll="allgather"', 'coll="allsorts"'), ":1: <algo> attribute 'coll'='allsorts'"),
])
def test_malformed_xml_names_line_element_and_attribute(mutate, expected):
    source = (FIXTURES / "allgather_ring_8.xml").read_text()
    with pytest.raises(CcvizError, match="allgather_ring_8.xml:") as err:
        parse_program(mutate(source), "allgather_ring_8.xml")
    assert expected in str(err.value)


def test_v0_collective_name_is_accepted():
    source = (FIXTURES / "allreduce_ring_8.xml").read_text().replace('coll="allreduce"', 'coll="reduce_scatter"')
    assert parse_program(source).coll == "reducescatter"
