"""The port budget of a formula (ccviz.bounds.ports): never below the one-port bound without saying so."""

import json
import subprocess
import sys

import pytest

from ccviz.bounds.explained import explained_cost
from ccviz.bounds.ports import apply_ports, check_ports, fabric_ports
from ccviz.errors import CcvizError


def test_dbt_one_port_is_not_below_the_one_port_bound():
    c = explained_cost("allreduce", "dbt", 16e6, 0.5, 50, n=8, ports=1)
    floor = 2 * 7 / 8
    assert c.n_beta >= floor
    assert c.time_s >= floor * 16e6 / 50e9  # the star's limit, 560 us
    assert c.port_budget["ports"] == 1 and c.n_beta == pytest.approx(2.0, rel=1e-4)  # 2 M each way through one port


def test_default_names_the_port_assumption():
    c = explained_cost("allreduce", "dbt", 16e6, 0.5, 50, n=8)
    assert c.port_budget["ports_assumed"] and c.port_budget["ports_needed"] == 2
    assert "2 ports per rank assumed" in c.assumptions and "below the one-port bound" in c.assumptions


def test_one_partner_formulas_are_unchanged_by_one_port():
    assert explained_cost("allreduce", "ring", 16e6, 0.5, 50, n=8, ports=1).time_s == pytest.approx(
        explained_cost("allreduce", "ring", 16e6, 0.5, 50, n=8).time_s)


@pytest.mark.parametrize("bad", [0, -1, 8, True])
def test_ports_validated_in_one_place(bad):
    with pytest.raises(CcvizError, match="ports"):
        check_ports(bad, 8)
    with pytest.raises(CcvizError, match="ports"):
        apply_ports("allreduce", "dbt", 8, 1.0, bad)


def test_fabric_ports_of_a_star_is_one():
    from ccviz.builders.loading import load_topology

    assert fabric_ports(load_topology("star:n=8")) == 1
    assert fabric_ports(load_topology("fully_connected:n=8")) == 7


def test_schedule_formula_on_a_star_prices_one_port():
    """Learn's DBT formula on the star sat below the fabric's 560 us limit (372.6 us); priced at one port now."""
    from ccviz.bounds.schedule_formula import schedule_formula
    from ccviz.builders.loading import load_topology
    from ccviz.runs.pipeline import run

    r = run(load_topology("star:n=8"), "allreduce", "dbt", 16e6, 4)
    used = {(t.src, t.dst) for t in r.schedule.transfers}
    f = schedule_formula(r.topology, r.collective, "dbt", used)
    assert f.time_s >= r.limit_s
    assert "port" in f.text


def test_cli_ports_json():
    out = subprocess.run([sys.executable, "-m", "ccviz.cli", "cost", "-c", "allreduce", "-a", "dbt", "--n", "8",
                          "-s", "16MB", "--ports", "1", "--json"], capture_output=True, text=True, check=True)
    data = json.loads(out.stdout)
    assert data["time_s"] >= 560e-6 and data["port_budget"]["ports"] == 1


def test_pipelined_tree_one_port_carries_four_m():
    """A binary tree's node receives M from each of two children per phase: 4 M each way through one port."""
    c = explained_cost("allreduce", "pipelined-tree", 16e6, 0.5, 50, n=8, ports=1)
    assert c.n_beta == pytest.approx(4.0, rel=1e-4)
