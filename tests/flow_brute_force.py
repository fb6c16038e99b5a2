"""The maximum concurrent flow by brute force (one commodity per ordered pair), for tests of the LPs."""

from __future__ import annotations

import numpy as np

from ccviz.model.topology import Topology


def per_pair_seconds(topology: Topology, demand_GB: np.ndarray) -> float:
    """The limit by brute force: one commodity per ordered pair with demand, flows on every link, scipy's LP."""
    from scipy.optimize import linprog
    from scipy.sparse import lil_matrix

    nodes, links, gpus = list(topology.nodes), list(topology.links), topology.gpus
    pairs = [(i, j) for i in range(len(gpus)) for j in range(len(gpus)) if i != j and demand_GB[i, j] > 0]
    n_vars = len(pairs) * len(links) + 1
    eq = lil_matrix((len(pairs) * len(nodes), n_vars))
    b_eq = np.zeros(len(pairs) * len(nodes))
    for p, (i, j) in enumerate(pairs):
        for e, (u, v) in enumerate(links):
            eq[p * len(nodes) + nodes.index(u), p * len(links) + e] += 1.0
            eq[p * len(nodes) + nodes.index(v), p * len(links) + e] -= 1.0
        b_eq[p * len(nodes) + nodes.index(gpus[i])] = demand_GB[i, j]
        b_eq[p * len(nodes) + nodes.index(gpus[j])] = -demand_GB[i, j]
    ub = lil_matrix((len(links), n_vars))
    for e, key in enumerate(links):
        for p in range(len(pairs)):
            ub[e, p * len(links) + e] = 1.0
        ub[e, n_vars - 1] = -topology.links[key].bandwidth_GBps * topology.links[key].lanes
    cost = np.zeros(n_vars)
    cost[-1] = 1.0
    result = linprog(cost, A_ub=ub.tocsr(), b_ub=np.zeros(len(links)), A_eq=eq.tocsr(), b_eq=b_eq, method="highs")
    assert result.status == 0
    return float(result.fun)
