"""The array fast path of the judge against the reference replay: identical verdicts, violations, times.

Random schedules come from the classic algorithms on random small fabrics (valid, untimed and timed)
and from planted faults (late holdings, overlaps near the tolerance, wrong links, missing transfers,
reductions, non-finite values). ``simulate`` (fast where it applies) and ``reference_simulate`` must
agree on everything a Timeline reports.
"""

from __future__ import annotations

import copy
import gc
import pickle
from unittest.mock import patch

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ccviz
from ccviz.builders import ring, torus2d
from ccviz.errors import CcvizError
from ccviz.judge import simulate_fast
from ccviz.judge.simulate import Timeline, assign_times, reference_assign_times, reference_simulate, simulate
from ccviz.model.schedule import PROMOTE_AT, JudgedTransfers, Schedule, Transfer, gc_paused
from tests.test_properties import small_fabrics

ALGORITHMS = ["ring", "ring-bidir", "direct", "dbt", "rhd", "tree", "bruck"]
COLLECTIVES = ["allgather", "broadcast", "alltoall", "gather", "scatter", "reducescatter", "allreduce"]


def assert_same(fast: Timeline, ref: Timeline) -> None:
    assert fast.verified == ref.verified
    # repr() makes a planted nan equal to itself
    assert repr([v.to_dict() for v in fast.violations]) == repr([v.to_dict() for v in ref.violations])
    assert repr(fast.finish_time_s) == repr(ref.finish_time_s)
    assert repr(sorted(fast.completion_s.items())) == repr(sorted(ref.completion_s.items()))
    for name in ("start_s", "arrival_s", "busy_until_s", "held_fraction"):
        assert np.array_equal(getattr(fast, name), getattr(ref, name), equal_nan=True), name
    assert repr(fast.schedule.transfers) == repr(ref.schedule.transfers)


def judge_both(schedule: Schedule) -> None:
    """Time and verify with the fast dispatch and with the reference; everything must match."""
    with patch.object(simulate_fast, "MIN_GROUP", 1):  # small schedules take the fast timing path too
        try:
            fast = simulate(schedule)
        except CcvizError as exc:
            fast = exc
    try:
        ref = reference_simulate(schedule)
    except CcvizError as exc:
        assert isinstance(fast, CcvizError) and str(fast) == str(exc)
        return
    assert not isinstance(fast, CcvizError), fast
    assert_same(fast, ref)


FAULTS = ["none", "earlier", "near_tolerance", "duplicate", "drop", "other_chunk", "other_dst", "reduce_op",
          "too_fast", "negative", "nan", "inf_end", "bad_chunk", "untimed"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(topology=small_fabrics(), data=st.data())
def test_fast_and_reference_judges_agree(topology, data) -> None:
    name = data.draw(st.sampled_from(COLLECTIVES))
    algorithm = data.draw(st.sampled_from([a for a in ALGORITHMS if ccviz.get_algorithm(a).supports(name)]))
    chunks = data.draw(st.integers(1, 2))
    coll = ccviz.make_collective(name, topology, 1e6, chunks_per_rank=chunks,
                                 root=topology.gpus[0] if name in ("broadcast", "gather", "scatter") else None)
    try:
        untimed = ccviz.synthesize(topology, coll, algorithm)
    except CcvizError:
        return
    judge_both(untimed)
    if untimed.is_timed or not untimed.transfers:
        return
    with patch.object(simulate_fast, "MIN_GROUP", 1):
        assert assign_times(untimed).transfers == reference_assign_times(untimed).transfers
    timed = reference_assign_times(untimed)
    fault = data.draw(st.sampled_from(FAULTS))
    judge_both(plant(timed, fault, data))


def plant(schedule: Schedule, fault: str, data) -> Schedule:
    """One planted fault in a timed schedule (or none)."""
    transfers = list(schedule.transfers)
    i = data.draw(st.integers(0, len(transfers) - 1))
    t = transfers[i]
    scale = data.draw(st.sampled_from([0.5, 1e-3, 1e-9, 3e-9, 1e-12, 1e-13, 1e-15]))
    if fault == "earlier":
        transfers[i] = t._replace(start_s=t.start_s * (1 - scale), end_s=None)
    elif fault == "near_tolerance":  # start just inside / outside the tolerance of its link's previous use
        shift = data.draw(st.sampled_from([-1, 1])) * scale * max(t.start_s, 1e-6)
        transfers[i] = t._replace(start_s=max(0.0, t.start_s + shift), end_s=None)
    elif fault == "duplicate":
        transfers.insert(i, t)
    elif fault == "drop":
        del transfers[i]
    elif fault == "other_chunk":
        transfers[i] = t._replace(chunk=(t.chunk + 1) % len(schedule.collective.chunks))
    elif fault == "other_dst":
        transfers[i] = t._replace(dst=t.src)
    elif fault == "reduce_op":
        transfers[i] = t._replace(op="reduce")
    elif fault == "too_fast":
        transfers[i] = t._replace(end_s=t.start_s)
    elif fault == "negative":
        transfers[i] = t._replace(start_s=-scale)
    elif fault == "nan":
        transfers[i] = t._replace(start_s=float("nan"))
    elif fault == "inf_end":
        transfers[i] = t._replace(end_s=float("inf"))
    elif fault == "bad_chunk":
        transfers[i] = t._replace(chunk=len(schedule.collective.chunks))
    elif fault == "untimed":
        transfers[i] = t._replace(start_s=None, end_s=None)
    return schedule.with_transfers(transfers)


def test_the_fast_path_serves_plain_schedules() -> None:
    """Guard against a fast path that always defers: a ring AllGather is timed and judged by arrays."""
    topo = torus2d(dims=(4, 4))
    coll = ccviz.make_collective("allgather", topo, 1e6)
    untimed = ccviz.synthesize(topo, coll, "ring")
    with patch.object(simulate_fast, "MIN_GROUP", 1):
        assert simulate_fast.assign_times(untimed) is not None
    timed = reference_assign_times(untimed)
    fast = simulate_fast.verify(timed)
    assert fast is not None and fast.verified
    assert_same(fast, reference_simulate(timed))


def test_a_fault_defers_to_the_reference_which_names_it() -> None:
    topo = ring(n=4, bidirectional=False)
    coll = ccviz.make_collective("allgather", topo, 1e6)
    transfers = [Transfer((i - k) % 4, i, (i + 1) % 4, None, None, "copy", k) for k in range(3) for i in range(4)]
    timed = reference_assign_times(Schedule(topo, coll, transfers, "ring"))
    late = timed.transfers[5]
    broken = timed.with_transfers([*timed.transfers[:5], late._replace(start_s=0.0, end_s=None),
                                   *timed.transfers[6:]])
    assert simulate_fast.verify(broken) is None
    assert {v.rule for v in simulate(broken).violations} == {v.rule for v in reference_simulate(broken).violations}
    assert "not_held" in {v.rule for v in simulate(broken).violations}


def test_timed_transfers_are_read_only_and_carry_their_arrays() -> None:
    """The simulator's timed transfers keep the arrays they came from; being read-only keeps them in step."""
    topo = ring(n=4, bidirectional=False)
    coll = ccviz.make_collective("allgather", topo, 1e6)
    transfers = [Transfer((i - k) % 4, i, (i + 1) % 4, None, None, "copy", k) for k in range(3) for i in range(4)]
    with patch.object(simulate_fast, "MIN_GROUP", 1):
        timed = assign_times(Schedule(topo, coll, transfers, "ring"))
    judged = timed.transfers
    assert isinstance(judged, JudgedTransfers) and timed.is_timed
    cols = judged.columns
    assert np.array_equal(cols.start, [t.start_s for t in judged]) and np.array_equal(cols.end, [t.end_s for t in judged])
    assert np.array_equal(cols.src, [t.src for t in judged]) and cols.ops == {"copy"}
    for mutate in (lambda x: x.append(judged[0]), lambda x: x.__setitem__(0, judged[1]), lambda x: x.sort(),
                   lambda x: x.__delitem__(0), lambda x: x.pop(), lambda x: x.extend([])):
        with pytest.raises(TypeError, match="read-only"):
            mutate(judged)
    copied = pickle.loads(pickle.dumps(judged))
    assert type(copied) is list and copied == judged and type(copy.deepcopy(judged)) is list
    # Judged from its arrays or from the tuples (a plain copy), the verdict is the same.
    assert_same(simulate(timed), simulate(timed.with_transfers(list(judged))))
    assert_same(simulate(timed), reference_simulate(timed))


def test_a_big_pause_leaves_its_objects_in_the_oldest_generation() -> None:
    """gc_paused: a million-tuple build is not rescanned by the young generations afterwards, and nothing
    stays frozen (a program's own gc.freeze() is left alone)."""
    with gc_paused():
        batch = [Transfer(i, 0, 1) for i in range(PROMOTE_AT + 1000)]
    assert gc.get_count()[0] < 1000 and gc.get_freeze_count() == 0
    assert gc.is_tracked(batch[-1])
