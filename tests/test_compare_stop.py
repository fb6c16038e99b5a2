"""Compare's Stop returns at once and its charts stay readable after it (issue 40, item 3).

Stop took 13-19 s on dgx2 (teccl + forestcoll + ring, 1 KB-1 GB): the sweep's thread waited for the
embedded Dask cluster, whose workers were busy solving, to shut down. Then "Finish time at 1GB" drew
empty axes: every row at the largest size was skipped.
"""

from __future__ import annotations

import contextlib
import threading

import ccviz
from ccviz.app import runs as app_runs
from ccviz.runs.compare import compare, skipped_rest, table
from ccviz.viz.comparison import finish_bars, largest_finished_size


def test_leaving_the_embedded_cluster_does_not_wait_for_it_to_close(monkeypatch) -> None:
    """No wall clock (a loaded machine may pause any thread): the cluster's shutdown is held until the sweep
    has left, so a sweep that waited for it would find it closed (after the 30 s fallback) and fail."""
    leave, closed = threading.Event(), threading.Event()

    @contextlib.contextmanager
    def slow_cluster(**_kwargs):
        yield object()
        leave.wait(30.0)  # busy workers take seconds to shut down: here, until the sweep has returned
        closed.set()

    monkeypatch.setattr(app_runs, "dask_client", slow_cluster)
    with app_runs.engine_client("local cluster"):
        pass
    assert not closed.is_set()  # the sweep returned before its cluster closed
    leave.set()
    assert "local cluster" not in app_runs._CLIENTS  # the next sweep starts a fresh one
    assert closed.wait(30.0)  # and the old one is still closed, in the background


def test_the_bars_after_a_stop_show_the_largest_size_that_ran_and_say_when_none_did() -> None:
    topology = ccviz.load_topology("ring:n=4")
    done = compare(topology, "allgather", ["ring", "direct"], [1e3])
    rows = list(done.to_dict("records")) + skipped_rest(topology, "allgather", ["ring", "direct"], [1e3, 1e9],
                                                        done.to_dict("records"), "the sweep was stopped")
    shown = table(rows, ["ring", "direct"], [1e3, 1e9])
    assert largest_finished_size(shown) == 1e3
    empty = finish_bars(shown, 1e9)
    assert any("no run finished at 1GB" in (a.text or "") for a in empty.layout.annotations)
    assert len(finish_bars(shown, 1e3).data[0].x) == 2
