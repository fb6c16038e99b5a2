"""The designer's drawing canvas (streamlit-flow) and its translation to and from a Topology.

The canvas shows one edge per cable; drawing an edge adds a bidirectional
link (bandwidth and alpha of the fabric's most common link, edit them in
the table), deleting an edge removes both directions, and nodes added from
the canvas menu are GPUs. Only structural changes (nodes or edges added or
removed) produce a new topology, so dragging nodes around never rebuilds it.
"""

from __future__ import annotations

from streamlit_flow.elements import StreamlitFlowEdge, StreamlitFlowNode
from streamlit_flow.state import StreamlitFlowState

from ccviz.app.tables import fabric_defaults
from ccviz.model.topology import Link, Node, Topology
from ccviz.viz.layout import is_symmetric, node_positions
from ccviz.viz.style import GPU_COLOR, SWITCH_COLOR
from ccviz.viz.topology_fig import drawn_links

WIDTH, HEIGHT = 700.0, 460.0  # canvas pixels that the [0, 1] layout is scaled to


NODE_GAP_PX = 80.0  # centre to centre: a node box is 64 px wide
CANVAS_MAX_CABLES = 400  # drawn on request above this: NVL72's 1,296 cables took 8.9 s to draw (dragonfly's 62: 3.3 s)


def canvas_too_big(topology: Topology) -> str | None:
    """Why the canvas is not drawn at once (too many cables to draw quickly), or None."""
    cables = len(drawn_links(topology))
    if cables <= CANVAS_MAX_CABLES:
        return None
    return (f"{topology.name} has {cables} cables: the canvas draws each as an editable edge, which takes many "
            f"seconds above {CANVAS_MAX_CABLES}. Edit the fabric in the tables below, or draw the canvas anyway.")


def spread_apart(points, gap: float = NODE_GAP_PX, rounds: int = 400):
    """``points`` (pixels, an (n, 2) array) moved apart until no two are closer than ``gap``: each round every
    pair too close is pushed apart along its line by half what it lacks, so crowded spots open up where they
    are and the rest of the drawing keeps its place and size.

    Why not scale the whole layout: a dragonfly's GPUs sit close to their router, so spreading the layout
    until they cleared each other made the 32-GPU canvas 5,334 x 3,493 px, shown in a 700 px frame at
    13 % (nodes a few pixels wide)."""
    import numpy as np
    from scipy.spatial import cKDTree

    points = np.array(points, dtype=float)
    if len(points) < 2:
        return points
    rng = np.random.default_rng(0)  # coincident points part in a fixed direction
    for _ in range(rounds):
        pairs = cKDTree(points).query_pairs(gap * (1 - 1e-9), output_type="ndarray")
        if not len(pairs):
            break
        delta = points[pairs[:, 1]] - points[pairs[:, 0]]
        distance = np.hypot(delta[:, 0], delta[:, 1])
        same = distance < 1e-9
        if same.any():
            angle = rng.uniform(0, 2 * np.pi, same.sum())
            delta[same] = np.column_stack([np.cos(angle), np.sin(angle)])
            distance[same] = 1.0
        push = (delta / distance[:, None]) * ((gap - distance) / 2 * 1.01)[:, None]
        moved = np.zeros_like(points)
        np.add.at(moved, pairs[:, 0], -push)
        np.add.at(moved, pairs[:, 1], push)
        points += moved
    return points


def flow_state(topology: Topology) -> StreamlitFlowState:
    """Canvas nodes and edges for a topology (positions from the shared layout, moved apart where nodes would
    overlap)."""
    positions = node_positions(topology)
    order = sorted(topology.nodes)
    placed = dict(zip(order, spread_apart([(positions[n][0] * WIDTH, (1 - positions[n][1]) * HEIGHT)
                                           for n in order]).tolist(), strict=True))
    nodes = [
        StreamlitFlowNode(
            str(n), tuple(placed[n]),
            {"content": node.label}, draggable=True, connectable=True, deletable=True,
            style={"background": SWITCH_COLOR if node.is_switch else GPU_COLOR, "color": "white",
                   "width": 64, "fontSize": 11, "padding": 4,
                   "borderRadius": 2 if node.is_switch else 16},
        )
        for n, node in sorted(topology.nodes.items())
    ]
    edges = []
    for u, v in drawn_links(topology):
        link = topology.links[(u, v)]
        symmetric = is_symmetric(topology, u, v)
        edges.append(StreamlitFlowEdge(
            f"{u}-{v}", str(u), str(v), edge_type="straight", deletable=True,
            label=f"{link.bandwidth_GBps:g}", label_show_bg=True,
            marker_end={} if symmetric else {"type": "arrowclosed"},
        ))
    return StreamlitFlowState(nodes, edges)


def structure_changed(topology: Topology, state: StreamlitFlowState) -> bool:
    """True when the canvas has other nodes or other edges than the topology."""
    return _canvas_node_ids(state) != {str(n) for n in topology.nodes} or _canvas_cables(state) != {
        frozenset((str(u), str(v))) for u, v in topology.links
    }


def topology_from_flow(topology: Topology, state: StreamlitFlowState) -> Topology:
    """The topology the canvas now shows (validated; raises CcvizError with the fix)."""
    ids: dict[str, int] = {}
    next_id = max(topology.nodes, default=-1) + 1
    nodes = []
    for fnode in state.nodes:
        if fnode.id.isdigit() and int(fnode.id) in topology.nodes:
            old = topology.nodes[int(fnode.id)]
            ids[fnode.id] = old.id
            nodes.append(Node(old.id, old.kind, old.label, old.group, _pos(fnode), old.copy))
        else:
            ids[fnode.id] = next_id
            nodes.append(Node(next_id, "gpu", pos=_pos(fnode)))
            next_id += 1
    bw, alpha = fabric_defaults(topology)
    links: dict[tuple[int, int], Link] = {}
    for edge in state.edges:
        if edge.source not in ids or edge.target not in ids or edge.source == edge.target:
            continue
        u, v = ids[edge.source], ids[edge.target]
        for a, b in ((u, v), (v, u)):
            if (a, b) in topology.links:
                links[(a, b)] = topology.links[(a, b)]
        if (u, v) not in topology.links and (v, u) not in topology.links:  # a newly drawn cable
            links[(u, v)] = Link(u, v, bw, alpha)
            links[(v, u)] = Link(v, u, bw, alpha)
    return topology.with_changes(nodes=nodes, links=links.values())


def _pos(fnode: StreamlitFlowNode) -> tuple[float, float]:
    x, y = fnode.position["x"], fnode.position["y"]
    return (round(x / WIDTH, 4), round(1 - y / HEIGHT, 4))


def _canvas_node_ids(state: StreamlitFlowState) -> set[str]:
    return {n.id for n in state.nodes}


def _canvas_cables(state: StreamlitFlowState) -> set[frozenset[str]]:
    return {frozenset((e.source, e.target)) for e in state.edges if e.source != e.target}
