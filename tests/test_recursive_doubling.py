"""Simple recursive-doubling AllReduce: verified, log2 N rounds, and the port budget decides whether it pipelines."""

import pytest

from ccviz.builders.loading import load_topology
from ccviz.errors import CcvizError
from ccviz.runs.pipeline import run


@pytest.mark.parametrize("spec", ["hypercube:n=8", "ring:n=8", "star:n=8,switch_hop=free", "fully_connected:n=4"])
def test_rd_allreduce_verifies(spec):
    r = run(load_topology(spec), "allreduce", "rd", 1e6)
    assert r.timeline.verified
    assert r.schedule.n_rounds == r.collective.n_ranks.bit_length() - 1


def test_one_port_runs_at_the_formula_and_a_hypercube_overlaps_rounds():
    star = run(load_topology("star:n=8,switch_hop=free"), "allreduce", "rd", 1e6).summary()
    cube = run(load_topology("hypercube:n=8"), "allreduce", "rd", 1e6).summary()
    assert star["finish_time_s"] == pytest.approx(star["formula_s"], rel=0.03)  # 3 (a + M/BW)
    assert cube["finish_time_s"] < 0.5 * cube["formula_s"]  # a link to each partner: rounds pipeline


def test_rd_needs_a_power_of_two():
    with pytest.raises(CcvizError, match="power-of-two"):
        run(load_topology("torus2d:dims=3x3"), "allreduce", "rd", 1e6)
