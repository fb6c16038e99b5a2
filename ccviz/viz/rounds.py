"""A textbook schedule told round by round, and drawn as frames a browser steps through.

Textbook algorithms label each transfer with its logical round
(``Schedule.rounds``). Here those rounds become the Learn page's steps: what
the round does, which logical sends it makes (a relayed send is one path over
several links), how many ranks each GPU's partial sum covers afterwards, and
how many deliveries are done. Every number comes from the simulator's
``Timeline`` (held fractions, completion times), so the story matches the
verdict. ``rounds_html`` packs the frames into one self-contained HTML
snippet with its own buttons, Play and left/right arrow keys: stepping never
waits for the server.
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass

from ccviz.judge.simulate import Timeline
from ccviz.model.units import format_time
from ccviz.viz.layout import link_segments, node_positions


@dataclass(frozen=True)
class Send:
    """One logical send: a chunk along a path of nodes (more than two when it is relayed)."""

    chunk: int
    path: tuple[int, ...]
    op: str  # copy | reduce (the op of the last hop)


@dataclass(frozen=True)
class Round:
    """What one logical round does and what every GPU holds when it is over."""

    number: int  # 1-based
    label: str
    sends: tuple[Send, ...]
    end_s: float
    coverage: dict[int, dict[int, int]]  # GPU -> chunk -> contributions held (1 for a plain chunk)
    delivered: int
    sentence: str


def logical_sends(timeline: Timeline, indices: list[int]) -> list[Send]:
    """Join consecutive hops of one chunk (the way ``Layout`` emits a routed send) into paths."""
    transfers = timeline.schedule.transfers
    sends: list[Send] = []
    path: list[int] = []
    for pos, i in enumerate(indices):
        t = transfers[i]
        path = path or [t.src]
        path.append(t.dst)
        nxt = transfers[indices[pos + 1]] if pos + 1 < len(indices) else None
        continues = (nxt is not None and indices[pos + 1] == i + 1 and nxt.chunk == t.chunk and nxt.src == t.dst
                     and t.op != "combine")  # a contribution ends in the switch's sum
        if not continues:
            sends.append(Send(t.chunk, tuple(path), t.op))
            path = []
    return sends


def rounds(timeline: Timeline) -> list[Round]:
    """The schedule's logical rounds in order; empty when it carries no round labels."""
    schedule = timeline.schedule
    if not schedule.rounds:
        return []
    coll = timeline.collective
    chunks = coll.chunks
    # Logical replay, round by round (a round's sends read what their senders held when it began), so the
    # coverage is the algorithm's own even when the simulator lets fast later sends overtake slow ones.
    mask: dict[int, dict[int, frozenset[int]]] = {g: {} for g in coll.ranks}
    for c in chunks:
        for r in c.pre:
            mask.setdefault(r, {})[c.id] = frozenset({r})
    full = {c.id: frozenset(c.pre) for c in chunks}
    # a copy its GPU holds from the start is no delivery (a sum is: the GPU holds only its own part)
    needs = {c.id: frozenset(c.post) if c.reduce else frozenset(c.post) - frozenset(c.pre) for c in chunks}
    by_round: dict[int, list[int]] = {}
    for i, r in enumerate(schedule.rounds):
        by_round.setdefault(r, []).append(i)
    out = []
    for number in range(1, schedule.n_rounds + 1):
        indices = by_round.get(number, [])
        sends = logical_sends(timeline, indices)
        before = {g: dict(h) for g, h in mask.items()}
        passing: dict[tuple[int, int], frozenset[int]] = {}  # (node, chunk) -> value crossing it this round
        reached: list[int] = []
        picked: set[tuple[int, int]] = set()  # deliveries made at GPUs a relayed copy passed through
        for send in sends:
            src, dst = send.path[0], send.path[-1]
            if send.op == "combine":  # into a reducing switch's sum (ccviz.judge.in_network)
                value = before.get(src, {}).get(send.chunk) or passing.get((src, send.chunk), frozenset())
                passing[(dst, send.chunk)] = passing.get((dst, send.chunk), frozenset()) | value
                continue
            if src not in mask and (src, send.chunk) in passing:  # a sum (or copy) leaving a switch
                value = passing[(src, send.chunk)]
            elif send.op == "reduce":  # partial sums read the round's starting state
                value = before.get(src, {}).get(send.chunk, frozenset())
            else:  # a multicast's later branches start where an earlier branch passed (switch or GPU)
                value = passing.get((src, send.chunk)) or mask.get(src, {}).get(send.chunk, frozenset())
            for node in send.path[1:]:
                passing[(node, send.chunk)] = value
            if dst not in mask:
                continue
            if send.op == "reduce":
                mask[dst][send.chunk] = mask[dst].get(send.chunk, frozenset()) | value
                reached.append(len(mask[dst][send.chunk]))
            else:  # a copy lands in every GPU it crosses, as in the simulator
                for node in send.path[1:]:
                    if node in mask:
                        if (node != dst and value == full[send.chunk] and node in needs[send.chunk]
                                and before.get(node, {}).get(send.chunk) != value):
                            picked.add((node, send.chunk))
                        mask[node][send.chunk] = value
        coverage = {g: {c: len(v) for c, v in held.items()} for g, held in mask.items()}
        delivered = sum(1 for c in chunks for r in needs[c.id] if mask.get(r, {}).get(c.id) == full[c.id])
        end = float(timeline.arrival_s[indices].max()) if indices else (out[-1].end_s if out else 0.0)
        label = schedule.round_labels[number - 1] if number <= len(schedule.round_labels) else ""
        demands = sum(len(v) for v in needs.values())
        late = sum(1 for i in indices if timeline.arrival_s[i] > timeline.finish_time_s * (1 + 1e-9))
        sentence = _sentence(timeline, label, sends, reached, delivered, demands, end, late, len(picked))
        out.append(Round(number, label, tuple(sends), end, coverage, delivered, sentence))
    return out


def _sentence(timeline: Timeline, label: str, sends: list[Send], reached: list[int], delivered: int,
              demands: int, end_s: float, late: int = 0, picked: int = 0) -> str:
    n_ranks = timeline.collective.n_ranks
    topo = timeline.topology
    gpu_hops = [sum(1 for node in s.path[1:-1] if not topo.is_switch(node)) for s in sends]
    relayed = sum(1 for h in gpu_hops if h)
    messages = len({(s.path[0], s.path[-1]) for s in sends})
    parts = [f"{label[:1].upper()}{label[1:]}." if label else "",
             f"{messages} message{'s' if messages != 1 else ''} in this round"
             + (f" ({len(sends)} chunk sends)" if len(sends) != messages else "")]
    if relayed:
        parts[-1] += (f"; {relayed} chunk sends relayed through up to {max(gpu_hops)} other GPU"
                      f"{'s' if max(gpu_hops) > 1 else ''} on this fabric, because the partners are not neighbours")
        if any(s.op == "reduce" and h for s, h in zip(sends, gpu_hops, strict=True)):
            parts[-1] += " (a relay carries a partial sum on without touching the relaying GPU's own)"
    parts[-1] += "."
    if reached:
        lo, hi = min(reached), max(reached)
        span = f"{lo}" if lo == hi else f"{lo} to {hi}"
        parts.append(f"The partial sums just received now cover {span} of {n_ranks} ranks.")
    done = "every GPU holds its result" if delivered == demands else f"{delivered}/{demands} deliveries done"
    if late and delivered == demands:  # one finish: the simulator's, when the last demand is met
        parts.append(f"After this round every GPU holds its result, at {format_time(timeline.finish_time_s)} in the "
                     f"simulation (its finish); {late} of this round's hops still land after it, up to "
                     f"{format_time(end_s)}, carrying data the GPUs they reach already hold or do not need.")
    elif picked and delivered != demands:  # more deliveries than messages: copies dropped off on the way
        parts.append(f"After this round {done}, {picked} of them at GPUs a relayed message passed through (a copy "
                     f"lands in every GPU it crosses). In the simulation its last send lands at {format_time(end_s)}.")
    else:
        parts.append(f"After this round {done} (in the simulation its last send lands at {format_time(end_s)}).")
    return " ".join(p for p in parts if p)


# ---------------------------------------------------------------------------------- drawing
_W, _H, _PAD = 560, 440, 46
_COPY, _REDUCE, _LINK = "#1f77b4", "#d62728", "#d0d0d0"


def _svg(timeline: Timeline, positions: dict[int, tuple[float, float]], rnd: Round | None,
         coverage: dict[int, dict[int, int]]) -> str:
    """One frame: faint links, the round's sends as arrows along their paths, each GPU's coverage."""
    topo = timeline.topology
    coll = timeline.collective

    # the shared link geometry: a wrap-around cable (torus, ring drawn in a row) is an arc, never a line
    # through the GPUs between its ends; arcs bulge outside the nodes' square, so the frame fits them too
    segments = link_segments(topo, positions)
    every = [p for path in segments.values() for p in path] + list(positions.values())
    x0, x1 = min(p[0] for p in every), max(p[0] for p in every)
    y0, y1 = min(p[1] for p in every), max(p[1] for p in every)

    def page_xy(point: tuple[float, float]) -> tuple[float, float]:
        fx = (point[0] - x0) / (x1 - x0) if x1 > x0 else 0.5
        fy = (point[1] - y0) / (y1 - y0) if y1 > y0 else 0.5
        return _PAD + fx * (_W - 2 * _PAD), _PAD + (1 - fy) * (_H - 2 * _PAD)

    def xy(n: int) -> tuple[float, float]:
        return page_xy(positions[n])

    parts = [f'<svg viewBox="0 0 {_W} {_H}" width="100%" style="max-width:{_W}px" role="img">',
             '<defs>' + "".join(
                 f'<marker id="arrow-{name}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="6" markerHeight="6" '
                 f'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="{color}"/></marker>'
                 for name, color in (("copy", _COPY), ("reduce", _REDUCE))) + '</defs>']
    def path_points(path: tuple[int, ...]) -> list[tuple[float, float]]:
        points: list[tuple[float, float]] = [xy(path[0])]
        for a, b in zip(path, path[1:], strict=False):
            hop = segments.get((a, b)) or (positions[a], positions[b])
            points += [page_xy(p) for p in hop[1:]]
        return points

    seen = set()
    for u, v in topo.links:
        if (v, u) in seen:
            continue
        seen.add((u, v))
        line = " ".join(f"{x:.1f},{y:.1f}" for x, y in path_points((u, v)))
        parts.append(f'<polyline points="{line}" fill="none" stroke="{_LINK}" stroke-width="2"/>')
    for k, send in enumerate(rnd.sends if rnd else ()):
        kind = "reduce" if send.op in ("reduce", "combine") else "copy"
        color = _REDUCE if kind == "reduce" else _COPY
        shift = ((k % 5) - 2) * 2.5  # parallel sends on one link stay apart
        points = " ".join(f"{x + shift:.1f},{y + shift:.1f}" for x, y in path_points(send.path))
        dash = ' stroke-dasharray="7 4"' if len(send.path) > 2 else ""
        parts.append(f'<polyline points="{points}" fill="none" stroke="{color}" stroke-width="2.2" opacity="0.8"'
                     f'{dash} marker-end="url(#arrow-{kind})"><title>chunk {send.chunk}: '
                     f'{" → ".join(map(str, send.path))} ({send.op})</title></polyline>')
    reducing = coll.is_reducing
    for n in topo.nodes:
        x, y = xy(n)
        if topo.is_switch(n):
            parts.append(f'<rect x="{x - 13:.1f}" y="{y - 13:.1f}" width="26" height="26" fill="#888" rx="4"/>'
                         f'<text x="{x:.1f}" y="{y + 4:.1f}" font-size="11" text-anchor="middle" fill="white">S</text>')
            continue
        held = coverage.get(n, {})
        best = max(held.values(), default=0)
        note = f"Σ{best}/{coll.n_ranks}" if reducing else f"{len(held)} chunk{'s' if len(held) != 1 else ''}"
        parts.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="15" fill="#fff" stroke="#333" stroke-width="1.5"/>'
                     f'<text x="{x:.1f}" y="{y + 4:.1f}" font-size="12" text-anchor="middle">{n}</text>'
                     f'<text x="{x:.1f}" y="{y + 29:.1f}" font-size="11" text-anchor="middle" fill="#555">'
                     f'{note}</text>')
    parts.append("</svg>")
    return "".join(parts)


def rounds_frame_height(timeline: Timeline) -> int:
    """Pixels the rounds view needs in its frame: the buttons, title and a sentence of up to four lines, then the
    figure beside the coverage table, or above it where a wide table wraps (a height grown by 18 px per GPU
    whatever the table left 150-250 px blank below the figure)."""
    coll = timeline.collective
    table = 0 if len(coll.chunks) > 32 else 16 + 16 * (len(coll.ranks) + 1)
    wraps = len(coll.chunks) > 23  # wider than what fits beside the figure's smallest width
    return 36 + 36 + 100 + (_H + table if wraps else max(_H, table)) + 24


def _matrix(timeline: Timeline, coverage: dict[int, dict[int, int]]) -> str:
    """GPU x chunk table: contributions each GPU's copy of each chunk holds (reductions) or ✓ (plain data)."""
    coll = timeline.collective
    if len(coll.chunks) > 32:
        return ""
    reducing = coll.is_reducing
    head = "".join(f"<th>{c.id}</th>" for c in coll.chunks)
    rows = []
    for g in coll.ranks:
        cells = []
        for c in coll.chunks:
            k = coverage.get(g, {}).get(c.id, 0)
            full = len(c.pre) if c.reduce else 1
            shade = f"rgba(214,39,40,{0.12 + 0.7 * k / full:.2f})" if k else "transparent"
            text = (str(k) if reducing else "✓") if k else ""
            cells.append(f'<td style="background:{shade}">{text}</td>')
        rows.append(f"<tr><th>GPU {g}</th>{''.join(cells)}</tr>")
    what = ("contributions (ranks) each GPU's partial sum of each chunk covers" if reducing
            else "chunks each GPU holds")
    return (f'<div class="cap">{html.escape(what)}</div><table><tr><th>chunk →</th>{head}</tr>'
            f'{"".join(rows)}</table>')


def round_frames(timeline: Timeline) -> list[dict[str, str]]:
    """Frame 0 is the start; frame k (1-based) is the end of round k; the last frame is the finished state."""
    story = rounds(timeline)
    positions = node_positions(timeline.topology)
    coll = timeline.collective
    start: dict[int, dict[int, int]] = {g: {} for g in coll.ranks}
    for c in coll.chunks:
        for r in c.pre:
            start.setdefault(r, {})[c.id] = 1
    frames = [{"title": f"Before round 1 (of {len(story)})",
               "sentence": "Every GPU holds only its own data. Press → (or Next) to run round 1.",
               "svg": _svg(timeline, positions, None, start), "matrix": _matrix(timeline, start)}]
    for rnd in story:
        title = f"Round {rnd.number} of {len(story)}"
        sentence = rnd.sentence
        if rnd.number == len(story):
            title += " — finished"
            sentence += (" Finished: the simulator verified that every GPU holds what the collective promises."
                         if timeline.verified else " The simulator found violations; see the verdict above.")
        frames.append({"title": title, "sentence": sentence, "svg": _svg(timeline, positions, rnd, rnd.coverage),
                       "matrix": _matrix(timeline, rnd.coverage)})
    return frames


_SCRIPT = """
const frames = FRAMES; let k = 0; let timer = null;
const $ = (id) => document.getElementById(id);
function show(i) {
  k = Math.max(0, Math.min(frames.length - 1, i));
  $("title").textContent = frames[k].title; $("sentence").textContent = frames[k].sentence;
  $("figure").innerHTML = frames[k].svg; $("matrix").innerHTML = frames[k].matrix;
  $("slider").value = k; document.body.dataset.frame = k;
  if (k === frames.length - 1 && timer) { clearInterval(timer); timer = null; $("play").textContent = "▶ Play"; }
}
function play() {
  if (timer) { clearInterval(timer); timer = null; $("play").textContent = "▶ Play"; return; }
  if (k === frames.length - 1) show(0);
  $("play").textContent = "❚❚ Pause"; timer = setInterval(() => show(k + 1), PERIOD);
}
function key(e) {
  const t = e.target && e.target.tagName;
  if (t === "INPUT" && e.target.type !== "range" || t === "TEXTAREA") return;
  if (e.key === "ArrowRight") { show(k + 1); e.preventDefault(); }
  else if (e.key === "ArrowLeft") { show(k - 1); e.preventDefault(); }
}
$("prev").onclick = () => show(k - 1); $("next").onclick = () => show(k + 1); $("play").onclick = play;
$("slider").oninput = (e) => show(+e.target.value);
document.addEventListener("keydown", key);
try {  // the page around this frame: arrows work without clicking into the figure first
  const host = window.parent.document;
  if (host.__ccvizRounds) host.removeEventListener("keydown", host.__ccvizRounds);
  host.__ccvizRounds = key; host.addEventListener("keydown", key);
} catch (err) { /* another origin: arrows work once the figure has focus */ }
show(0);
"""

_STYLE = """
body { font-family: "Source Sans Pro", sans-serif; margin: 0; color: #262730; }
.bar { display: flex; gap: 8px; align-items: center; margin-bottom: 6px; }
button { padding: 4px 12px; border: 1px solid #ccc; border-radius: 6px; background: #fff; cursor: pointer; }
#title { font-size: 1.25rem; font-weight: 600; margin: 4px 0; }
#sentence { margin: 4px 0 8px; line-height: 1.4; }
.row { display: flex; gap: 16px; flex-wrap: wrap; align-items: flex-start; }
table { border-collapse: collapse; font-size: 11px; }
td, th { border: 1px solid #e3e3e3; padding: 1px 4px; text-align: center; min-width: 14px; }
.cap { font-size: 12px; color: #555; margin-bottom: 2px; }
.keys { font-size: 12px; color: #777; }
"""


def rounds_html(timeline: Timeline, period_ms: int = 1200) -> str:
    """Self-contained HTML: the round frames with Back/Next, Play/Pause, a slider and arrow keys."""
    frames = round_frames(timeline)
    script = _SCRIPT.replace("FRAMES", json.dumps(frames).replace("</", "<\\/")).replace("PERIOD", str(period_ms))
    return (f"<!doctype html><html><head><meta charset='utf-8'><style>{_STYLE}</style></head><body>"
            f'<div class="bar"><button id="prev">◀ Back</button><button id="next">Next ▶</button>'
            f'<button id="play">▶ Play</button><input id="slider" type="range" min="0" max="{len(frames) - 1}" '
            f'value="0" style="flex:1"><span class="keys">keys: ← →</span></div>'
            f'<div id="title"></div><div id="sentence"></div>'
            f'<div class="row"><div id="figure" style="flex:1;min-width:320px"></div><div id="matrix"></div></div>'
            f"<script>{script}</script></body></html>")
