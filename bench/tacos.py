"""TACOS synthesis time and collective time per instance, next to lower bounds.

Targets (issue 4, 2-core machine): AllGather on a 32x32 2D mesh (1,024 NPUs,
1 chunk each) synthesized in < 5 s, on an 8x8x8 3D torus (512 NPUs) in < 1 s,
with collective time equal to the store-and-forward bound on meshes.

Columns: ``synth s`` is TACOS alone (building routes, matching, making the
Schedule), wall clock; ``cpu s`` is the same in process CPU time, which is
what to read on a shared machine where other jobs take the cores; simulation is timed separately (``sim s``) and only run when the
schedule is small or ``--verify-all`` is given. ``sf bound`` is the
store-and-forward bound of TACOS's link model (a link carries one chunk until
it lands, alpha + bytes/bw): the larger of every rank's in-link capacity bound
and the farthest source's path time. ``cost bound`` is
``ccviz.bounds.cost.lower_bound`` (the simulator's own rules, where a link is free
again after bytes/bw; can be lower). Ratios are bound / ours (1.000 = optimal).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import networkx as nx

from ccviz import SynthOptions, load_topology, make_collective, simulate, synthesize
from ccviz.model.collectives import Collective
from ccviz.model.topology import Topology

REFERENCE = str(Path(__file__).resolve().parents[1] / "sample_topologies") + "/"
GIB = 2**30
UNIFORM = "bw=53.687091712,alpha=0.5"  # TACOS defaults: 50 GiB/s, 0.5 us
INSTANCES = [
    # (topology spec, collective, restarts)
    (f"mesh2d:dims=3x3,{UNIFORM}", "allgather", 10),
    (f"mesh2d:dims=4x4,{UNIFORM}", "allgather", 1),
    (f"mesh2d:dims=4x4,{UNIFORM}", "allreduce", 1),
    (f"mesh2d:dims=16x16,{UNIFORM}", "allgather", 1),
    (f"mesh2d:dims=32x32,{UNIFORM}", "allgather", 1),
    (f"mesh3d:dims=8x8x8,{UNIFORM}", "allgather", 1),
    (f"torus2d:dims=16x16,{UNIFORM}", "allgather", 1),
    (f"torus3d:dims=8x8x8,{UNIFORM}", "allgather", 1),
    (f"torus3d:dims=8x8x8,{UNIFORM}", "allreduce", 1),  # issue 14: <= 2 s synthesis at 512 NPUs
    (REFERENCE + "dgx1.json", "allgather", 10),
    (REFERENCE + "dgx1.json", "allreduce", 10),
    (REFERENCE + "ndv2_4chassis.json", "allgather", 10),
    (REFERENCE + "dgx2_2chassis.json", "allgather", 2),
    (REFERENCE + "amd_2chassis.json", "allreduce", 2),
]


def store_and_forward_bound(topology: Topology, collective: Collective) -> float:
    """No copy schedule beats this when a link is held until its chunk lands (TACOS's model).

    Per rank: its in-links together deliver one chunk per (alpha + bytes/bw) each. Per demand: the
    fastest path from a source. For AllReduce this bounds its AllGather half only (a weak bound).
    """
    if any(c.reduce and len(c.post) == 1 for c in collective.chunks):
        raise ValueError("bench the copy collectives and allreduce; reducescatter/reduce mirror allgather/broadcast")
    nbytes = collective.chunk_bytes
    hold = {key: max(topology.arrival_delay(*key, nbytes), topology.occupancy(*key, nbytes))
            for key in topology.links}
    need: dict[int, int] = {}
    sources: set[int] = set()
    for c in collective.chunks:
        receivers = c.post - {c.source} if c.reduce else c.post - c.pre
        for r in receivers:
            need[r] = need.get(r, 0) + 1
        sources.add(c.source)
    capacity = 0.0
    for rank, count in need.items():
        per_chunk = sorted(hold[(lk.src, rank)] for lk in topology.in_links[rank])
        capacity = max(capacity, _time_to_receive(count, per_chunk))
    g = nx.DiGraph()
    g.add_weighted_edges_from((u, v, topology.arrival_delay(u, v, nbytes)) for u, v in topology.links)
    gpus = set(topology.gpus)
    farthest = 0.0
    for s in sources:
        lengths = nx.single_source_dijkstra_path_length(g, s)
        farthest = max(farthest, max(d for n, d in lengths.items() if n in gpus))
    return max(capacity, farthest)


def _time_to_receive(count: int, per_chunk: list[float]) -> float:
    """Smallest T with sum(floor(T / h)) >= count over in-links taking h per chunk."""
    lo, hi = 0.0, per_chunk[0] * count
    for _ in range(100):
        mid = (lo + hi) / 2
        if sum(int(mid / h + 1e-9) for h in per_chunk) >= count:
            hi = mid
        else:
            lo = mid
    return hi


def cost_bound(topology: Topology, collective: Collective) -> float | None:
    try:
        from ccviz.bounds.cost import lower_bound
    except ImportError:
        return None
    return lower_bound(topology, collective).time_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--verify-all", action="store_true", help="simulate every schedule (slow past 1M transfers)")
    parser.add_argument("--sim-limit", type=int, default=300_000, help="simulate schedules up to this many transfers")
    parser.add_argument("--only", default="", help="run instances whose spec contains this text")
    args = parser.parse_args()
    print(f"{'instance':<34}{'coll':<10}{'R':>3}{'transfers':>10}{'synth s':>9}{'cpu s':>7}{'ours us':>12}"
          f"{'sf bound':>12}{'ratio':>7}{'cost bound':>12}{'ratio':>7}{'sim s':>7}  verified")
    for spec, name, restarts in INSTANCES:
        if args.only not in spec:
            continue
        topology = load_topology(spec)
        collective = make_collective(name, topology, GIB)
        t0, c0 = time.perf_counter(), time.process_time()
        schedule = synthesize(topology, collective, "tacos", SynthOptions(seed=0, restarts=restarts))
        synth_s, cpu_s = time.perf_counter() - t0, time.process_time() - c0
        ours = schedule.estimated_finish_s
        verdict, sim_s = "skipped", float("nan")
        if args.verify_all or len(schedule.transfers) <= args.sim_limit:
            t1 = time.perf_counter()
            timeline = simulate(schedule)
            sim_s = time.perf_counter() - t1
            ours = timeline.finish_time_s
            verdict = "yes" if timeline.verified else f"NO: {timeline.violations[0].message}"
        sf = store_and_forward_bound(topology, collective)
        cb = cost_bound(topology, collective)
        label = spec.replace(REFERENCE, "").replace("," + UNIFORM, "")
        cb_text = f"{cb * 1e6:>12.2f}{cb / ours:>7.3f}" if cb else f"{'-':>12}{'-':>7}"
        print(f"{label:<34}{name:<10}{restarts:>3}{len(schedule.transfers):>10}{synth_s:>9.2f}{cpu_s:>7.2f}{ours * 1e6:>12.2f}"
              f"{sf * 1e6:>12.2f}{sf / ours:>7.3f}{cb_text}{sim_s:>7.2f}  {verdict}")


if __name__ == "__main__":
    main()
