"""AllToAllv schedules: ``mcf`` along the matrix's own concurrent flow, and ``twophase`` (FAST's idea).

``mcf`` for a matrix: the LP of ``ccviz.bounds.demand_flow`` (the matrix's exact limit) is split into paths per
pair (``mcf.decompose`` with each pair's bytes as its need), every chunk of a pair takes the path whose
busiest link is least loaded (a path kept near its LP share), and the chunks are booked hop by hop on the
link calendars of ``ccviz.synth.mcf`` (first-fit, and the binding links first where that ends above 1.05 x
the limit; the faster is kept). Chunks go in the order of their pair's progress ((k + 1/2) / chunks of the
pair), so a heavy pair and a light one finish together instead of the light ones first. A uniform matrix
is AllToAll: its ``mcf`` schedule, relabeled.

``twophase`` (FAST, arXiv 2505.09764): within each box, the bytes bound for another box are first spread so
that every GPU of the box holds the same share for that box (over the box's fast links), then every GPU
sends its share to the GPU of the same local index in the other box (one balanced exchange over the rails),
which delivers each chunk to its destination inside its box. A chunk keeps the source's rail where quota
allows (no first hop), else the destination's (no last hop). Its three hops are one route booked like
``mcf``'s, so the phases overlap chunk by chunk.
"""

from __future__ import annotations

import time

import numpy as np

from ccviz.errors import CcvizError
from ccviz.model.collectives import Collective, alltoallv_collective, make_collective
from ccviz.model.physics import link_costs
from ccviz.model.schedule import Schedule, Transfer
from ccviz.model.topology import Topology
from ccviz.model.units import format_time
from ccviz.synth.registry import Progress, SynthOptions

BINDING_ABOVE = 1.05


def _check(topology: Topology, collective: Collective, algorithm: str) -> None:
    if "matrix" not in collective.meta:
        raise CcvizError(f"collective: {algorithm} here needs an alltoallv collective (a traffic matrix)", "collective")
    if tuple(collective.ranks) != tuple(topology.gpus):
        raise CcvizError(f"ranks: {algorithm} runs AllToAllv over every GPU of the fabric; drop --ranks or use "
                         "direct", "ranks")


def progress_order(collective: Collective) -> list[int]:
    """Chunk ids ordered by their pair's progress ((k + 1/2) / the pair's chunks), ties by chunk id."""
    counts: dict[tuple[int, int], int] = {}
    for c in collective.chunks:
        key = (c.source, next(iter(c.post)))
        counts[key] = counts.get(key, 0) + 1
    key = [((c.index + 0.5) / counts[(c.source, next(iter(c.post)))], c.id) for c in collective.chunks]
    return [cid for _, cid in sorted(key)]


def _book(topology: Topology, fabric, routes: list[tuple[int, list[int]]], chunk_bytes: float, order: list[int],
          limit_s: float, options: SynthOptions, t0: float) -> tuple[list[Transfer], float, str]:
    """First-fit on the link calendars; where that ends above 1.05 x the limit, the binding links first too;
    the faster kept."""
    from ccviz.synth.mcf import _ranks, book_binding_first, book_chunks

    rank = _ranks(order)
    transfers, finish = book_chunks(topology, fabric, routes, chunk_bytes, rank, options.stop)
    how = "booked hop by hop on link calendars"
    deadline = None if options.time_limit is None else t0 + options.time_limit

    def give_up() -> bool:
        return bool(options.stopped() or (deadline is not None and time.perf_counter() > deadline))

    if finish > BINDING_ABOVE * limit_s and not give_up():
        options.report(Progress(time.perf_counter() - t0, "booking again, the binding links first"))
        binding = book_binding_first(topology, fabric, routes, chunk_bytes, rank, give_up)
        if binding is not None and binding[1] < finish:
            transfers, finish = binding
            how = "booked binding links first (it beat first-fit on the link calendars)"
    return transfers, finish, how


# ------------------------------------------------------------------------------ mcf for a matrix
def synthesize_mcf_any(topology: Topology, collective: Collective, options: SynthOptions) -> Schedule:
    """Registry entry of ``mcf``: AllToAll by ``ccviz.synth.mcf``, a traffic matrix by its own LP here."""
    from ccviz.synth.mcf import synthesize_mcf

    if collective.name == "alltoallv":
        return synthesize_mcf_matrix(topology, collective, options)
    return synthesize_mcf(topology, collective, options)


def synthesize_mcf_matrix(topology: Topology, collective: Collective, options: SynthOptions) -> Schedule:
    """``mcf`` for an AllToAllv (see the module's docstring)."""
    from ccviz.bounds.demand_flow import alltoallv_flow, uniform_over_fabric
    from ccviz.synth.mcf import _top, decompose, synthesize_mcf

    t0 = time.perf_counter()
    _check(topology, collective, "mcf")
    if uniform_over_fabric(topology, collective):
        return _as_alltoallv(synthesize_mcf(topology, _uniform_alltoall(topology, collective), options), collective)
    options.report(Progress(time.perf_counter() - t0, "solving the matrix's maximum concurrent flow LP"))
    flow = alltoallv_flow(topology, collective, need_flows=True)
    fabric = flow.fabric
    position = [fabric.index[r] for r in collective.ranks]
    rank_index = {r: i for i, r in enumerate(collective.ranks)}
    counts = collective.meta["counts"]
    options.report(Progress(time.perf_counter() - t0, f"LP solved in {flow.solve_s:.2f} s; splitting flows into paths"))
    paths: dict[tuple[int, int], list[tuple[float, list[int]]]] = {}
    for row, i in zip(flow.flows, flow.sources, strict=True):
        dests = [position[j] for j in range(len(position)) if counts[i, j] > 0]
        needs = {position[j]: flow.demand_GB[i, j] for j in range(len(position)) if counts[i, j] > 0}
        for t, found in decompose(fabric, row, position[i], dests, needs).items():
            paths[(position[i], t)] = _top(found)
    order = progress_order(collective)
    by_id = {c.id: c for c in collective.chunks}
    load = np.zeros(len(fabric.links))
    inverse = 1.0 / flow.fabric.capacity
    used: dict[tuple[int, int, int], int] = {}
    routes: list[tuple[int, list[int]]] = []
    for cid in order:
        c = by_id[cid]
        i, j = rank_index[c.source], rank_index[next(iter(c.post))]
        pair = (position[i], position[j])
        candidates = paths[pair]
        best, best_score, chosen = candidates[0][1], np.inf, 0
        for p, (fraction, links) in enumerate(candidates):
            score = float(((load[links] + 1.0) * inverse[links]).max())
            if used.get((*pair, p), 0) >= fraction * counts[i, j] + 1e-9:
                score += 1e6  # beyond its LP share: a fallback only
            if score < best_score:
                best, best_score, chosen = links, score, p
        used[(*pair, chosen)] = used.get((*pair, chosen), 0) + 1
        load[best] += 1.0
        routes.append((cid, best))
    limit_s = flow.seconds
    options.report(Progress(time.perf_counter() - t0, f"booking {len(routes)} chunks on the link calendars"))
    transfers, finish, how = _book(topology, fabric, routes, collective.chunk_bytes, list(range(len(routes))),
                                   limit_s, options, t0)
    notes = [
        f"maximum concurrent flow LP of the matrix ({len(flow.sources)} commodities) solved in {flow.solve_s:.2f} s: "
        f"limit {format_time(limit_s)} (bandwidth only, alpha ignored)",
        f"{sum(len(p) for p in paths.values())} paths over {len(paths)} pairs; {len(routes)} chunks, each on its "
        "pair's least loaded path, in the order of their pair's progress",
        f"{how}: estimated finish {finish / limit_s:.3f} x the limit",
    ]
    return Schedule(topology, collective, transfers, "mcf", options={"chunks": len(routes)}, status="heuristic",
                    synth_time_s=time.perf_counter() - t0, estimated_finish_s=finish, notes=_with_rounding(notes,
                                                                                                  collective))


def _uniform_alltoall(topology: Topology, collective: Collective) -> Collective:
    slots = int(topology.meta.get("buffer_ranks", topology.n_gpus))
    return make_collective("alltoall", topology, float(collective.meta["matrix"][0, 1]) * slots)


def _as_alltoallv(schedule: Schedule, collective: Collective) -> Schedule:
    """An AllToAll schedule of a uniform matrix as the AllToAllv's: the same chunks (ids in the same order),
    cut as finely as the AllToAll's were."""
    refined = schedule.collective
    if refined.chunk_bytes != collective.chunk_bytes:
        collective = alltoallv_collective(collective.ranks, collective.meta["matrix"], refined.chunk_bytes,
                                          collective.name)
    if [(c.pre, c.post) for c in refined.chunks] != [(c.pre, c.post) for c in collective.chunks]:
        raise CcvizError("collective: the uniform matrix's chunks differ from AllToAll's", "collective")
    out = schedule.with_transfers(schedule.transfers)
    out.collective = collective
    out.notes = ["the matrix is uniform: AllToAll's schedule", *out.notes]
    return out


def _with_rounding(notes: list[str], collective: Collective) -> list[str]:
    from ccviz.model.traffic import rounding_note

    extra = rounding_note(collective)
    return notes + ([extra] if extra else [])


# ------------------------------------------------------------------------------ twophase (FAST)
def boxes_of(topology: Topology) -> list[list[int]]:
    """The fabric's boxes: GPUs grouped by their node group (a DGX, a leaf), each in id order; all one size."""
    groups: dict[str, list[int]] = {}
    for g in topology.gpus:
        groups.setdefault(str(topology.nodes[g].group), []).append(g)
    boxes = [sorted(members) for members in groups.values()]
    if len(boxes) == 1:
        what = (f"is one box of {len(boxes[0])} GPUs" if topology.nodes[boxes[0][0]].group
                else "has no boxes (its GPUs are not grouped as servers or leaves)")
        raise CcvizError(f"topology: twophase balances the traffic between boxes, and {topology.name} {what}: "
                         "nothing between boxes to balance; use direct or mcf here, or a fabric of several boxes "
                         "(e.g. dgxh100:nodes=2)", "topology")
    if len({len(b) for b in boxes}) != 1 or len(boxes[0]) < 2:
        raise CcvizError(f"topology: twophase needs boxes of equal size (GPUs grouped as servers or leaves); "
                         f"{topology.name} has {len(boxes)} group(s) of sizes {sorted({len(b) for b in boxes})}",
                         "topology")
    return boxes


def _fastest_paths(topology: Topology, fabric, chunk_bytes: float):
    """Predecessors of the time-shortest paths (one chunk's delay per link) from every GPU."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import dijkstra

    costs = link_costs(topology, chunk_bytes)
    weight = np.array([costs[key].delay for key in fabric.links])
    n = len(fabric.nodes)
    graph = csr_matrix((weight, (fabric.tail, fabric.head)), shape=(n, n))
    link_of = {(int(u), int(v)): e for e, (u, v) in enumerate(zip(fabric.tail, fabric.head, strict=True))}
    _, pred = dijkstra(graph, directed=True, indices=fabric.gpus, return_predecessors=True)
    row = {int(p): k for k, p in enumerate(fabric.gpus)}

    def path(u: int, v: int) -> list[int]:
        if u == v:
            return []
        links, node = [], v
        while node != u:
            before = int(pred[row[u], node])
            if before < 0:
                raise CcvizError(f"topology: no route from {fabric.nodes[u]} to {fabric.nodes[node]}", "topology")
            links.append(link_of[(before, node)])
            node = before
        return links[::-1]

    out_links: dict[int, dict[int, int]] = {}
    for (u, v), e in link_of.items():
        out_links.setdefault(u, {})[v] = e
    switch = ~fabric.is_gpu

    def candidates(u: int, v: int) -> list[list[int]]:
        """The fastest path, and where u and v share switches, the two-hop path through each of them (a box's
        NVSwitches: the load is spread over all of them)."""
        if u == v:
            return [[]]
        found = [path(u, v)]
        for w, e in out_links.get(u, {}).items():
            if switch[w] and v in out_links.get(w, {}):
                two = [e, out_links[w][v]]
                if two != found[0]:
                    found.append(two)
        return found

    return candidates


def fast_inside(topology: Topology, boxes: list[list[int]]) -> bool:
    """Whether a box has links faster than its way out: every GPU's bandwidth to switches (or GPUs) that reach
    only its own box exceeds its bandwidth to the rest (a DGX's NVSwitches against its NICs; a leaf of a
    leaf-spine, cabled to spines as well, is no inside link)."""
    box_of = {g: b for b, box in enumerate(boxes) for g in box}

    def inside(node: int, box: int) -> bool:
        if not topology.is_switch(node):
            return box_of.get(node) == box
        return all(box_of.get(v) == box for (u, v) in topology.links if u == node)

    for g, box in box_of.items():
        fast = sum(link.bandwidth_GBps * link.lanes for (u, v), link in topology.links.items()
                   if u == g and inside(v, box))
        out = sum(link.bandwidth_GBps * link.lanes for (u, v), link in topology.links.items()
                  if u == g and not inside(v, box))
        if fast <= out:
            return False
    return True


def relay_rails(collective: Collective, boxes: list[list[int]]) -> dict[int, int]:
    """Chunk id -> the local index (rail) of the GPU pair that carries it between boxes: every rail of a box
    pair gets the same number of chunks (give or take one); the source's rail first, then the destination's."""
    where = {g: (b, i) for b, box in enumerate(boxes) for i, g in enumerate(box)}
    width = len(boxes[0])
    by_pair: dict[tuple[int, int], list] = {}
    for c in collective.chunks:
        t = next(iter(c.post))
        if where[c.source][0] != where[t][0]:
            by_pair.setdefault((where[c.source][0], where[t][0]), []).append(c)
    rail: dict[int, int] = {}
    for chunks in by_pair.values():
        quota = [len(chunks) // width + (1 if i < len(chunks) % width else 0) for i in range(width)]
        left = []
        for c in chunks:
            i = where[c.source][1]
            if quota[i] > 0:
                rail[c.id], quota[i] = i, quota[i] - 1
            else:
                left.append(c)
        rest = []
        for c in left:
            i = where[next(iter(c.post))][1]
            if quota[i] > 0:
                rail[c.id], quota[i] = i, quota[i] - 1
            else:
                rest.append(c)
        for c in rest:
            i = int(np.argmax(quota))
            rail[c.id], quota[i] = i, quota[i] - 1
    return rail


def synthesize_twophase(topology: Topology, collective: Collective, options: SynthOptions) -> Schedule:
    """FAST's two-phase AllToAllv (see the module's docstring)."""
    from ccviz.bounds.concurrent_flow import fabric_arrays
    from ccviz.bounds.demand_flow import matrix_limit_s

    t0 = time.perf_counter()
    if collective.name == "alltoall":
        from ccviz.model.traffic import matrix_of

        collective = alltoallv_collective(collective.ranks, matrix_of(collective), collective.chunk_bytes)
    _check(topology, collective, "twophase")
    boxes = boxes_of(topology)
    fabric = fabric_arrays(topology)
    candidates = _fastest_paths(topology, fabric, collective.chunk_bytes)
    load = np.zeros(len(fabric.links))
    inverse = 1.0 / fabric.capacity

    def path(u: int, v: int) -> list[int]:
        """The least loaded of the candidate paths (busiest link after this chunk), booked into the load."""
        best = min(candidates(u, v), key=lambda links: float(((load[links] + 1.0) * inverse[links]).max(initial=0)))
        load[best] += 1.0
        return best

    where = {g: (b, i) for b, box in enumerate(boxes) for i, g in enumerate(box)}
    balance = fast_inside(topology, boxes)
    rail = relay_rails(collective, boxes) if balance else {}
    pos = fabric.index
    routes: list[tuple[int, list[int]]] = []
    for cid in progress_order(collective):
        c = collective.chunks[cid]
        s, t = c.source, next(iter(c.post))
        if cid not in rail:  # inside one box: straight there
            routes.append((cid, path(pos[s], pos[t])))
            continue
        r, q = boxes[where[s][0]][rail[cid]], boxes[where[t][0]][rail[cid]]
        routes.append((cid, path(pos[s], pos[r]) + path(pos[r], pos[q]) + path(pos[q], pos[t])))
    options.report(Progress(time.perf_counter() - t0, f"booking {len(routes)} chunks over {len(boxes)} boxes"))
    limit_s = matrix_limit_s(topology, collective)
    transfers, finish, how = _book(topology, fabric, routes, collective.chunk_bytes, list(range(len(routes))),
                                   limit_s, options, t0)
    moved = sum(1 for cid in rail if boxes[where[collective.chunks[cid].source][0]][rail[cid]]
                != collective.chunks[cid].source)
    notes = [
        f"{len(boxes)} boxes of {len(boxes[0])} GPUs; {len(rail)} chunks cross boxes, {moved} of them first move "
        "inside their box so that every rail carries the same share of each box pair" if balance else
        f"{len(boxes)} boxes of {len(boxes[0])} GPUs with no links inside a box faster than its way out: nothing "
        "to balance over, every chunk goes straight to its destination (FAST's phases need fast in-box links)",
        f"{how}: estimated finish {finish / limit_s:.3f} x the limit ({format_time(limit_s)})",
    ]
    return Schedule(topology, collective, transfers, "twophase", status="heuristic",
                    synth_time_s=time.perf_counter() - t0, estimated_finish_s=finish,
                    notes=_with_rounding(notes, collective))
