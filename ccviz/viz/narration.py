"""One sentence per step of a schedule: what moves where, and why it helps.

Used by the Learn page. It reads the animation's frames, the simulator's
link busy times and completion times, so the story always matches the
pictures and the verdict.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ccviz.bounds.cost import CostResult
from ccviz.judge.simulate import Timeline
from ccviz.model.units import format_time
from ccviz.viz.animation import FrameWindow, frame_windows
from ccviz.viz.utilization import busy_fraction


@dataclass(frozen=True)
class StepStory:
    window: FrameWindow
    sentence: str
    delivered: int  # (chunk, rank) demands complete by the end of the step
    demands: int


def narrate(timeline: Timeline, windows: list[FrameWindow] | None = None) -> list[StepStory]:
    """A plain-language account of each frame of the schedule."""
    windows = windows or frame_windows(timeline)
    demands = list(timeline.collective.demands())
    completion = np.sort([timeline.completion_s.get(key, np.inf) for key in demands])
    edges = np.array([w.start_s for w in windows] + [windows[-1].end_s])
    _, busy = busy_fraction(timeline, edges)
    n_links = max(1, busy.shape[0])
    stories = []
    previous = 0
    for k, w in enumerate(windows):
        delivered = int(np.searchsorted(completion, w.end_s * (1 + 1e-9) + 1e-15, side="right"))
        active = int((busy[:, k] > 1e-9).sum()) if busy.size else 0
        why = _why(delivered - previous, delivered, len(demands), active, n_links)
        sentence = f"**{format_time(w.start_s)} – {format_time(w.end_s)}.** {_what(timeline, w)} {why}"
        stories.append(StepStory(w, sentence, delivered, len(demands)))
        previous = delivered
    return stories


def _what(timeline: Timeline, w: FrameWindow) -> str:
    """Who sends what: own data, data received earlier (relaying), or partial sums (reducing)."""
    transfers = [timeline.schedule.transfers[i] for i in w.transfers]
    if not transfers:
        return "No new sends start; chunks already on the wire keep arriving."
    chunks = timeline.collective.chunks
    topo = timeline.topology
    reduce = sum(1 for t in transfers if t.op == "reduce")
    switched = sum(1 for t in transfers if topo.is_switch(t.src) or topo.is_switch(t.dst))
    own = sum(1 for t in transfers if t.op == "copy" and not chunks[t.chunk].reduce and t.src in chunks[t.chunk].pre)
    result = sum(1 for t in transfers if t.op == "copy" and chunks[t.chunk].reduce)
    relay = len(transfers) - reduce - own - result
    parts = []
    if own:
        parts.append(f"{own} send{'s' if own == 1 else ''} a GPU's own data")
    if result:
        parts.append(f"{result} pass{'es' if result == 1 else ''} on a reduced result")
    if relay:
        parts.append(f"{relay} forward{'s' if relay == 1 else ''} data received earlier")
    if reduce:
        parts.append(f"{reduce} add{'s' if reduce == 1 else ''} a partial sum into the receiver's")
    examples = "; ".join(
        f"{t.src}→{t.dst}: chunk {t.chunk} (from {chunks[t.chunk].source}{', reduce' if t.op == 'reduce' else ''})"
        for t in transfers[:3]
    ) + (f"; … {len(transfers) - 3} more" if len(transfers) > 3 else "")
    via = f", {switched} of them through a switch" if switched else ""
    return (f"{len(transfers)} transfer{'s' if len(transfers) != 1 else ''} start on "
            f"{len({(t.src, t.dst) for t in transfers})} links{via}: {', '.join(parts)} ({examples}).")


def _why(newly: int, delivered: int, total: int, active: int, n_links: int) -> str:
    use = f"{active} of {n_links} links are busy in this step"
    if delivered == total and newly:
        return f"Why: this completes the collective — every GPU now holds what it needs ({use})."
    if newly:
        return (f"Why: {newly} more chunk deliveries complete ({delivered}/{total} done); "
                f"{use}, and the more links work at once, the sooner it ends.")
    return f"Why: these sends set up later deliveries ({delivered}/{total} done so far); {use}."


def formula_gap(timeline: Timeline, formula: CostResult, lower_bound_s: float | None = None,
                tolerance: float = 0.05) -> str | None:
    """One computed sentence on why the simulated time and the textbook formula differ (None within 5%).

    The direction decides which causes may be named: relays, switch hops, links shared within a round and a
    formula below the fabric's bound make a schedule slower than its formula; links faster than the one the
    formula prices, GPUs driving several links at once (ports the formula does not count) and chunks that run
    ahead of lock-step rounds make it faster. Causes pulling the other way are named after, as the smaller pull.
    """
    from ccviz.bounds.cost import used_link_parameters
    from ccviz.viz.rounds import rounds

    sim, est = timeline.finish_time_s, formula.time_s
    below_bound = lower_bound_s is not None and est < lower_bound_s * (1 - 1e-9)
    if est <= 0 or (abs(sim / est - 1) <= tolerance and not below_bound):
        return None
    topo, schedule = timeline.topology, timeline.schedule
    slower: list[str] = []
    faster: list[str] = []
    story = rounds(timeline)
    sends = [s for r in story for s in r.sends]
    relayed = [h for h in (sum(1 for n in s.path[1:-1] if not topo.is_switch(n)) for s in sends) if h]
    if relayed:
        slower.append(f"{len(relayed)} of {len(sends)} sends are relayed through other GPUs (up to "
                      f"{max(relayed) + 1} links each) as the partners are not neighbours here, while the "
                      "formula counts one hop per send")
    switched = sum(1 for s in sends if any(topo.is_switch(n) for n in s.path[1:-1]))
    if switched and topo.switch_hop != "free":  # under "free" the hop out of a switch costs nothing
        slower.append(f"{switched} of {len(sends)} sends cross a switch and pay alpha and their bytes on the way in "
                      "and again on the way out, where the formula counts one hop")
    worst = (0, None, 0)
    most_ports = 0
    for i_round, r in enumerate(story, start=1):
        pairs: dict[tuple[int, int], set[tuple[int, int]]] = {}  # link -> the (sender, receiver) pairs on it
        first_hops: dict[int, set[tuple[int, int]]] = {}
        for s in r.sends:
            for u, v in zip(s.path, s.path[1:], strict=False):
                pairs.setdefault((u, v), set()).add((s.path[0], s.path[-1]))
            first_hops.setdefault(s.path[0], set()).add((s.path[0], s.path[1]))
        most_ports = max([most_ports, *(len(h) for g, h in first_hops.items() if not topo.is_switch(g))])
        for link, users in pairs.items():
            if len(users) > worst[0]:
                worst = (len(users), link, i_round)
    if worst[1] is not None and worst[0] > 1:
        (u, v), r = worst[1], worst[2]
        slower.append(f"links are shared: in round {r}, link {u}→{v} carries {worst[0]} sender-receiver pairs, "
                      "whose messages queue one after another")
    if below_bound:
        slower.append(f"the formula ({format_time(est)}) is below this fabric's lower bound "
                      f"({format_time(lower_bound_s)}): it assumes every pair of ranks is directly linked, which "
                      "they are not here")
    used = {(t.src, t.dst) for t in schedule.transfers}
    _, slow = used_link_parameters(topo, used)
    fast = max((topo.links[k].bandwidth_GBps for k in used if k in topo.links), default=slow)
    if fast > slow * 1.05 and "hierarchical" not in formula.text:  # a per-tier formula prices each tier itself
        faster.append(f"the formula prices every send at the slowest link used ({slow:g} GB/s) but some links "
                      f"carry {fast:g} GB/s")
    from ccviz.bounds.ports import ports_needed

    if most_ports > ports_needed(timeline.collective.name, schedule.algorithm):  # beyond the formula's own ports
        faster.append(f"GPUs send on up to {most_ports} links at once, ports the formula (one partner at a time) "
                      "does not count")
    lockstep = any("lockstep" in note for note in schedule.notes)
    if not lockstep:
        faster.append("each chunk moves on as soon as it lands (a link is busy only for the bytes; alpha is a "
                      "delay that overlaps the next send), so rounds overlap where the formula waits for each "
                      "to finish")
    is_slower = sim > est
    reasons, others = (slower, faster) if is_slower else (faster, slower)
    if not reasons:
        reasons = (["sends wait for their data and their link, so the critical path holds more than the "
                    "formula's rounds"] if is_slower else
                   ["the sends of a round finish at different times and the next round starts on each link as "
                    "soon as its own data is there"])
    direction = "slower" if is_slower else "faster"
    pct = abs(sim / est - 1) * 100
    sentence = (f"Simulated {format_time(sim)} is {pct:.0f}% {direction} than the formula's {format_time(est)} "
                f"because " + "; ".join(reasons) + ".")
    if others:
        sentence += " Pulling the other way, by less: " + "; ".join(others) + "."
    return sentence
