"""Learn's lessons for the Collectives Explainer's sections: each a preset run, its words, and a side panel.

A lesson fixes Learn's fabric, collective, algorithm, size and chunks (so a link ``?page=learn&topic=KEY`` opens
it, and the rounds step with the keys as any Learn run does) and adds what the section teaches beside the run's
formula, simulation and the fabric's limit: the port budget's two cases, the two switch models, the pipeline's
fill and drain over P, an oversubscribed Clos, the bisection cut drawn, Bruck's rotations, the decomposed torus
AllToAll. Every number is computed here by the formulas (``ccviz.bounds``) and the simulator, as ``ccviz cost`` and
``ccviz synth`` print them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pandas as pd
import plotly.graph_objects as go

from ccviz.model.topology import Topology


@dataclass(frozen=True)
class Lesson:
    key: str
    title: str
    fabric: str  # a builder spec among Learn's teaching fabrics
    collective: str
    algorithm: str
    size: float
    chunks: int
    text: str
    panel: str  # which side panel: ports | switch | pipeline | oversub | bisection | rounds


LESSONS: dict[str, Lesson] = {lesson.key: lesson for lesson in (
    Lesson("ports", "Port budgets: DBT on a one-port star (Case A) and on a fully connected box (Case B)",
           "star:n=8,switch_hop=free", "allreduce", "dbt", 16e6, 8,
           "Pipelined DBT's M/BW floor assumes each rank drives its two trees' links at once: an interior node of "
           "one tree (two children) is a leaf of the other (its parent). **Case A**, a star, gives each GPU one "
           "port: the rank's 2 M each way go through it, so the formula is priced at 2 M/BW and the simulated "
           "DBT is slower than ring. **Case B**, eight GPUs fully connected, gives 7 ports: the floor holds.",
           "ports"),
    Lesson("switch", "The star's switch hop: one α per traversal or store-and-forward",
           "star:n=8,switch_hop=free", "allreduce", "ring", 16e6, 1,
           "The Collectives Explainer's star charges one α per endpoint-to-endpoint traversal (the switch forwards "
           "cut-through): ring AllReduce at 16 MB is 2(N-1)α + 2(N-1)/N·M/BW = 567 µs. A store-and-forward "
           "switch charges both hops of each crossing and doubles it.", "switch"),
    Lesson("pipeline", "Pipelining: fill, steady state and drain over P segments",
           "ring:n=8", "broadcast", "ring", 16e6, 4,
           "A chain of d hops moving M in P segments costs (d + P - 1)(α + M/(P·BW)): d - 1 steps fill the "
           "pipe, P steps stream, the last segment drains. More segments shrink the bandwidth term toward M/BW "
           "but add α per step; the best P is about √((d-1)·M/(α·BW)). Move *chunks per GPU* (P) and watch "
           "the rounds overlap.", "pipeline"),
    Lesson("oversub", "A Clos with oversubscription: what thinner uplinks cost",
           "leafspine:oversub=2", "allgather", "ring", 16e6, 1,
           "Four leaves of four GPUs under two spines; at s:1 a leaf's uplinks carry 1/s of what its GPUs can send "
           "(each of its two uplinks: 4 x 50 / (2 s) GB/s). The ring's hops between leaves cross a spine, so the "
           "simulated time grows with s. The formula prices the slowest link the schedule uses: at 2:1 an uplink "
           "still runs at 50 GB/s, so only 4:1 moves it. The fabric's limit stays 300 µs: the switches multicast, "
           "so a chunk crosses an uplink once, well inside even the 4:1 uplinks. `ccviz cost -a hierarchical "
           "--oversub S` (or S1/S2 per tier) prices the same thing in a formula.", "oversub"),
    Lesson("bisection", "The bisection cut: AllToAll on a 4x4 torus",
           "torus2d:dims=4x4", "alltoall", "dimdecomp", 16e6, 1,
           "AllToAll must move half of every rank's data across the middle of the torus. The cut drawn red is "
           "the one the fabric's limit found; its links carry everything that crosses. dimdecomp runs one "
           "dimension at a time, Σ d_i/8·M/BW, twice the flat bound d_max/8·M/BW that uses both dimensions at "
           "once.", "bisection"),
    Lesson("bruck", "Bruck's AllToAll: ⌈log2 N⌉ rotations instead of N-1 sends",
           "ring:n=8", "alltoall", "bruck", 1e6, 1,
           "Bruck rotates each rank's blocks so that round k sends every block whose distance has bit k set, "
           "2^k ranks on: ⌈log2 N⌉ rounds, each moving about half of the buffer. Few α, but log2(N)/2·M/BW "
           "where pairwise moves (N-1)/N·M/BW: it wins only for small messages. Step the rounds: the blocks "
           "hop 1, 2, then 4 ranks on.", "rounds"),
    Lesson("crossover", "Crossovers: the size where ring overtakes DBT (and why it needs c_real)",
           "star:n=8,switch_hop=free", "allreduce", "dbt", 1e6, 4,
           "In the pure α-β model pipelined DBT (2⌈log2 N⌉α + M/BW) beats ring (2(N-1)α + 2(N-1)/N·M/BW) at "
           "every size. NCCL still switches to ring for big buffers: DBT's real bandwidth coefficient is "
           "c_real ≥ 1 times its floor. The crossover M* = 2(N-1-⌈log2 N⌉)α·BW / (c_real - 2(N-1)/N) exists only "
           "for c_real > 2(N-1)/N: about 2 GB at N = 72 and 116 GB at N = 512 with c_real = 2 (α = 0.5 µs, "
           "BW = 900 GB/s). The simulated schedules below cross where this fabric makes them.", "crossover"),
    Lesson("dbt", "DBT's two trees and each rank's role in them",
           "fully_connected:n=8", "allreduce", "dbt", 16e6, 8,
           "NCCL's double binary tree runs two trees at once, each carrying half the chunks: reduce up to the "
           "root, then broadcast down. The second tree makes the first one's leaves its interior nodes, so a "
           "rank forwards (two children) in at most one tree and is a leaf in the other: the role table shows "
           "it. That is why each rank drives 2 links each way at once (see *Port budgets*).", "dbt"),
    Lesson("eta", "Contention η: measured by a workload beside the assumed profile",
           "torus2d:dims=4x4", "allreduce", "ring", 16e6, 1,
           "The Explainer prices contention with coefficients: η_α ≥ 1 inflates α, η_β ≤ 1 scales bandwidth, "
           "and assumes a torus profile (1.2, 0.60) for off-prefix layouts with concurrent groups. Here two "
           "groups of 8 GPUs run ring AllReduce at the same time on the 4x4 torus; the simulator times each "
           "group alone and together, and alone / together is the η_β this layout really gives.", "eta"),
    Lesson("rd", "Recursive doubling stepped: log2 N rounds of the whole buffer",
           "hypercube:n=8", "allreduce", "rd", 1e6, 1,
           "Simple recursive doubling (Appendix B.1): round k swaps whole partial sums with the GPU 2^k away, so "
           "after log2 N rounds everyone has the total: log2(N)(α + M/BW). On the hypercube every partner is a "
           "neighbour on its own link, so a chunk goes on to the next partner as soon as it lands and the rounds "
           "overlap; on the one-port star they cannot, and it runs at the formula (Appendix B.3's port budget).",
           "rd"),
    Lesson("rhd", "Recursive halving-doubling stepped: partners at N/2, N/4, … 1",
           "hypercube:n=8", "allreduce", "rhd", 1e6, 1,
           "On a hypercube every rhd partner is a neighbour: halving at distances 4, 2, 1, then doubling back. "
           "2·log2 N rounds carry the ring's bytes, 2(N-1)/N·M/BW. Its partner changes every round, which is why "
           "it cannot pipeline on a fabric with few ports (see *Port budgets*).", "rounds"),
)}


def lesson_rows(lesson: Lesson, chunks: int) -> pd.DataFrame:
    """The lesson's side table: formula, simulation and limit for each case it compares."""
    cases = _cases(lesson, chunks)
    rows = []
    for label, spec, algorithm, n_chunks, ports in cases:
        rows.append(_row(label, spec, lesson.collective, algorithm, lesson.size, n_chunks, ports))
    return pd.DataFrame(rows)


def _cases(lesson: Lesson, chunks: int) -> list[tuple[str, str, str, int, int | None]]:
    if lesson.panel == "ports":
        return [("Case A: star, 1 port per GPU", lesson.fabric, "dbt", chunks, None),
                ("Case A: ring on the same star", lesson.fabric, "ring", 1, None),
                ("Case B: fully connected, 7 ports per GPU", "fully_connected:n=8", "dbt", chunks, None)]
    if lesson.panel == "switch":
        return [("one α per traversal (switch_hop=free)", "star:n=8,switch_hop=free", "ring", chunks, None),
                ("store-and-forward (switch_hop=paid)", "star:n=8", "ring", chunks, None)]
    if lesson.panel == "pipeline":
        return [(f"P = {p}", lesson.fabric, lesson.algorithm, p, None) for p in (1, 2, 4, 8, 16)]
    if lesson.panel == "rd":
        return [("hypercube: a link to each partner", "hypercube:n=8", "rd", chunks, None),
                ("star: one port per GPU", "star:n=8,switch_hop=free", "rd", chunks, None),
                ("ring on the same star", "star:n=8,switch_hop=free", "ring", chunks, None)]
    if lesson.panel == "oversub":
        return [(f"oversubscription {s}:1", f"leafspine:oversub={s}", lesson.algorithm, chunks, None)
                for s in (1, 2, 4)]
    return [("this run", lesson.fabric, lesson.algorithm, chunks, None)]


def _row(label: str, spec: str, collective: str, algorithm: str, size: float, chunks: int,
         ports: int | None) -> dict[str, Any]:
    from ccviz.builders.loading import load_topology
    from ccviz.model.units import format_time
    from ccviz.runs.pipeline import run

    result = run(load_topology(spec), collective, algorithm, size, chunks)
    s = result.summary()
    formula = s["formula_s"]
    limit = s["limit_s"]
    return {"case": label, "fabric": spec, "algorithm": algorithm, "chunks": chunks,
            "formula": format_time(formula) if formula else "n/a", "simulated": format_time(s["finish_time_s"]),
            "limit": format_time(limit) if limit else "n/a", "verified": s["verified"],
            "formula_s": formula, "simulated_s": s["finish_time_s"], "limit_s": limit,
            "how": (s["formula"] or "")[:160]}


def cut_figure(topology: Topology, collective: str, size: float) -> tuple[go.Figure, str]:
    """The fabric drawn from its node positions, the limit's cut links red; and the cut in words."""
    from ccviz.bounds.limit import bandwidth_limit

    limit = bandwidth_limit(topology, collective, size)
    cut = {tuple(x) for x in limit.to_dict().get("cut_links", [])}
    pos = {n.id: n.pos or (0.0, 0.0) for n in topology.nodes.values()}
    fig = go.Figure()
    pairs = [(u, v) for (u, v) in topology.links if u < v or (v, u) not in topology.links]
    length = {key: math.dist(pos[key[0]], pos[key[1]]) for key in pairs}
    shortest = min(length.values(), default=1.0) or 1.0
    for (u, v) in pairs:
        red = (u, v) in cut or (v, u) in cut
        xs, ys = _arc(pos[u], pos[v], bend=0.35 * shortest if length[(u, v)] > 1.5 * shortest else 0.0)
        fig.add_scatter(x=xs, y=ys, mode="lines", hoverinfo="skip", showlegend=False,
                        line={"color": "#d62728" if red else "#bbbbbb", "width": 4 if red else 1.5})
    gpus = topology.gpus
    fig.add_scatter(x=[pos[g][0] for g in gpus], y=[pos[g][1] for g in gpus], mode="markers+text",
                    text=[str(g) for g in gpus], textposition="middle center", textfont={"color": "#08306b"},
                    marker={"size": 22, "color": "#c6dbef", "line": {"color": "#08306b", "width": 1}},
                    showlegend=False, hovertemplate="GPU %{text}<extra></extra>")
    fig.update_layout(height=360, margin={"l": 10, "r": 10, "t": 10, "b": 10}, xaxis={"visible": False},
                      yaxis={"visible": False, "scaleanchor": "x"})
    return fig, limit.cut.words


def _arc(a: tuple[float, float], b: tuple[float, float], bend: float, steps: int = 24
         ) -> tuple[list[float], list[float]]:
    """A straight segment, or (bend > 0) a curve bulging sideways so a wrap-around link does not hide the
    links it spans."""
    if bend <= 0:
        return [a[0], b[0]], [a[1], b[1]]
    mx, my = (a[0] + b[0]) / 2, (a[1] + b[1]) / 2
    dx, dy = b[0] - a[0], b[1] - a[1]
    norm = math.hypot(dx, dy) or 1.0
    cx, cy = mx - dy / norm * bend * 2, my + dx / norm * bend * 2  # the control point, off to one side
    ts = [k / steps for k in range(steps + 1)]
    xs = [(1 - t) ** 2 * a[0] + 2 * (1 - t) * t * cx + t * t * b[0] for t in ts]
    ys = [(1 - t) ** 2 * a[1] + 2 * (1 - t) * t * cy + t * t * b[1] for t in ts]
    return xs, ys


TOPIC_KEY = "learn_topic"  # Learn's lesson choice (a key of LESSONS, or FREE)
EXERCISE_KEY = "learn_exercise"
FREE = "free"


def restore_topic(state: Any, topic: str, exercise: bool = False) -> None:
    """A link's ``topic=`` (and ``exercise=1``) into Learn's session state; an unknown topic is one clear line."""
    from ccviz.errors import CcvizError

    if topic != FREE and topic not in LESSONS:
        raise CcvizError(f"topic: the link asks for the lesson {topic!r}; choose one of {', '.join(LESSONS)}", "topic")
    state[TOPIC_KEY] = topic
    state[EXERCISE_KEY] = exercise


def apply_preset(state: Any, topic: str) -> None:
    """Set Learn's widgets to the lesson's run (called when the lesson box changes, before the widgets exist)."""
    from ccviz.viz.lesson import TEACHING_TOPOLOGIES

    lesson = LESSONS.get(topic)
    if lesson is None:
        return
    labels = {spec: label for label, spec in TEACHING_TOPOLOGIES.items()}
    state["learn_topology"] = labels[lesson.fabric]
    state["learn_collective"] = lesson.collective
    state["learn_algorithm"] = lesson.algorithm
    state["learn_size"] = lesson.size
    state["learn_chunks"] = lesson.chunks


@dataclass(frozen=True)
class Grade:
    """A student's guess against the simulated time: the error and the formula's terms that explain it."""

    guess_s: float
    simulated_s: float
    error: float  # (guess - simulated) / simulated
    verdict: str


def grade(guess_us: float, simulated_s: float, tolerance: float = 0.10) -> Grade:
    """Within ``tolerance`` (10 %) is right; otherwise how far off, and which way."""
    guess_s = guess_us * 1e-6
    error = (guess_s - simulated_s) / simulated_s
    if abs(error) <= tolerance:
        verdict = f"Right: within {abs(error):.0%} of the simulation."
    else:
        verdict = f"{'Too high' if error > 0 else 'Too low'} by {abs(error):.0%}."
    return Grade(guess_s, simulated_s, error, verdict)


def crossover_figure(collective: str, algorithms: list[str], n: int, alpha_us: float, bw_GBps: float,
                     c_real: float) -> tuple[go.Figure, Any]:
    """Both algorithms' straight lines over M (log-log) with M* marked, and the ``Crossover`` answer."""
    from ccviz.runs.crossover import formula_crossover

    c = formula_crossover(collective, algorithms, n, alpha_us, bw_GBps, c_real=c_real)
    sizes = [10 ** (k / 8) for k in range(24, 8 * 13 + 1)]  # 1 KB .. 10 TB
    fig = go.Figure()
    for line in c.lines:
        times = [line["n_alpha"] * alpha_us * 1e-6 + line["n_beta"] * m / (bw_GBps * 1e9) for m in sizes]
        fig.add_scatter(x=sizes, y=times, mode="lines", name=f"{line['algorithm']}: {line['n_alpha']:g} α + "
                        f"{line['n_beta']:.3g} M/BW")
    if c.crossover_bytes:
        fig.add_vline(x=c.crossover_bytes, line_dash="dot", annotation_text="M*")
    fig.update_layout(height=340, xaxis={"type": "log", "title": "buffer M (bytes)"},
                      yaxis={"type": "log", "title": "time (s)"}, margin={"l": 10, "r": 10, "t": 30, "b": 10},
                      legend={"orientation": "h", "y": 1.12})
    return fig, c


def dbt_roles(topology: Topology, size: float, chunks: int) -> tuple[pd.DataFrame, go.Figure]:
    """The two trees DBT builds on this fabric (the synthesizer's own), each rank's role in each, and a drawing."""
    from ccviz.model.collectives import make_collective
    from ccviz.synth.classic import DoubleBinaryTree

    coll = make_collective("allreduce", topology, size, chunks)
    pairs = DoubleBinaryTree.physical_trees(topology, coll)
    trees = [down for _, down in pairs] if pairs else DoubleBinaryTree.trees(list(coll.ranks), coll.root)

    def role(tree: Any, r: int) -> str:
        kids = tree.children.get(r, [])
        kind = "root" if r == tree.root else ("interior" if kids else "leaf")
        up = "" if r == tree.root else f", parent {tree.parent[r]}"
        return f"{kind}{up}" + (f", children {', '.join(map(str, kids))}" if kids else "")

    rows = [{"rank": r, "tree 1": role(trees[0], r), "tree 2": role(trees[1], r),
             "receives from at once (reduce)": sum(len(t.children.get(r, [])) for t in trees),
             "sends to at once (reduce)": sum(r != t.root for t in trees)} for r in coll.ranks]
    fig = go.Figure()
    for k, tree in enumerate(trees):
        order = tree.top_down()
        by_depth: dict[int, list[int]] = {}
        for v in order:
            by_depth.setdefault(tree.depth[v], []).append(v)
        pos = {v: (k * 10 + (i + 1) * 8 / (len(level) + 1), -d) for d, level in by_depth.items()
               for i, v in enumerate(level)}
        for v, p in tree.parent.items():
            fig.add_scatter(x=[pos[v][0], pos[p][0]], y=[pos[v][1], pos[p][1]], mode="lines", showlegend=False,
                            hoverinfo="skip", line={"color": "#1f77b4" if k == 0 else "#ff7f0e", "width": 2})
        fig.add_scatter(x=[pos[v][0] for v in order], y=[pos[v][1] for v in order], mode="markers+text",
                        text=[str(v) for v in order], textfont={"color": "#08306b"}, name=f"tree {k + 1}",
                        marker={"size": 22, "color": "#c6dbef",
                                "line": {"color": "#1f77b4" if k == 0 else "#ff7f0e", "width": 3}})
    fig.update_layout(height=300, margin={"l": 10, "r": 10, "t": 30, "b": 10}, xaxis={"visible": False},
                      yaxis={"visible": False}, legend={"orientation": "h", "y": 1.12})
    return pd.DataFrame(rows), fig


def eta_rows(topology: Topology, size: float) -> pd.DataFrame:
    """Two groups of 8 running ring AllReduce at once (consecutive and shuffled layouts): each group's finish
    alone and together and the measured eta_beta, beside the assumed torus profile's formula."""
    from ccviz.bounds.explained import ETA_PROFILES, explained_cost
    from ccviz.model.units import format_time
    from ccviz.runs.workload import run_workload

    alpha = max(lk.alpha_us for lk in topology.links.values())
    bw = min(lk.bandwidth_GBps for lk in topology.links.values())
    ideal = explained_cost("allreduce", "ring", size, alpha, bw, n=8)
    assumed = explained_cost("allreduce", "ring", size, alpha, bw, n=8, eta="torus")
    rows = []
    for order, words in (("tp-dp", "consecutive GPUs"), ("random", "shuffled GPUs (off-prefix)")):
        result = run_workload(topology, "tp=8,dp=2", f"tp:allreduce:{size:g}", "ring", order=order)
        for g in result.groups:
            rows.append({"layout": words, "group": g.label, "alone": format_time(g.finish_alone_s),
                         "together": format_time(g.finish_together_s), "measured η_β": round(g.eta_beta or 0, 3),
                         "assumed η_β (torus profile)": ETA_PROFILES["torus"][1],
                         "formula ideal": format_time(ideal.time_s), "formula with torus η": format_time(assumed.time_s)})
    return pd.DataFrame(rows)
