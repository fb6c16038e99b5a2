"""A second, minimal judge written from the link model in docs/ARCHITECTURE.md and README.

It shares no code with ``ccviz.judge.simulate``: plain dictionaries and sets, one event loop, no numpy.
It only reads the schedule's plain data (nodes, links, chunks, timed transfers). Tests run it next
to the simulator on random and faulty schedules and require the same verdict.

The model, as documented:
- a transfer of n bytes on (i, j) starting at t occupies the link for n/bw and arrives at
  t + alpha + n/bw; a hop out of a switch under switch_hop="free" arrives at t (still occupies n/bw);
- a link with k lanes carries at most k transfers at once;
- a GPU sends only what it holds when the send starts; ``copy`` overwrites the receiver's value,
  ``reduce`` adds the sender's contributions, each contribution counted once;
- a switch stores nothing: it forwards an arrival at the instant it arrives (unless it declares a
  buffer), any number of times if it can copy, else once;
- at the end every post rank of a chunk holds all its contributions.
"""

from __future__ import annotations

EPS_REL = 1e-9
EPS_ABS = 1e-13


def _le(a: float, b: float) -> bool:
    return a <= b + EPS_ABS + EPS_REL * abs(b)


def check(schedule) -> tuple[bool, float | None, list[str]]:
    """(valid, finish time, problems) for a timed schedule."""
    topo, coll = schedule.topology, schedule.collective
    nbytes = coll.chunk_bytes
    kinds = {n: node.kind for n, node in topo.nodes.items()}
    can_copy = {n: node.copy for n, node in topo.nodes.items()}
    buffered = {n: getattr(node, "buffer", False) for n, node in topo.nodes.items()}
    links = {(lk.src, lk.dst): (lk.bandwidth_GBps * 1e9, lk.alpha_us * 1e-6, lk.lanes) for lk in topo.links.values()}
    chunks = list(coll.chunks)
    problems: list[str] = []
    trs = list(schedule.transfers)
    timing: list[tuple[float, float, float] | None] = []  # start, arrival, link free
    for k, t in enumerate(trs):
        ok = (t.src, t.dst) in links and 0 <= t.chunk < len(chunks) and t.op in ("copy", "reduce")
        ok = ok and t.start_s is not None and t.start_s == t.start_s and abs(t.start_s) != float("inf")
        if ok and t.op == "reduce" and not chunks[t.chunk].reduce:
            ok = False
        if not ok:
            problems.append(f"#{k}: malformed (link, chunk, op or time)")
            timing.append(None)
            continue
        bw, alpha, _ = links[(t.src, t.dst)]
        busy = nbytes / bw
        free_hop = topo.switch_hop == "free" and kinds[t.src] == "switch"
        arrival = t.start_s if free_hop else t.start_s + alpha + busy
        if t.start_s < -EPS_ABS:
            problems.append(f"#{k}: starts before 0")
        if t.end_s is not None and not _le(arrival, t.end_s):
            problems.append(f"#{k}: claims to arrive before physics allows")
        timing.append((t.start_s, arrival, t.start_s + busy))
    # Lanes: at no instant more transfers on a link than it has lanes.
    per_link: dict[tuple[int, int], list[tuple[float, float]]] = {}
    for t, tm in zip(trs, timing, strict=True):
        if tm is not None:
            per_link.setdefault((t.src, t.dst), []).append((tm[0], tm[2]))
    for key, spans in per_link.items():
        lanes = links[key][2]
        for s, _ in spans:
            at_once = sum(1 for s2, e2 in spans if _le(s2, s) and not _le(e2, s))
            if at_once > lanes:
                problems.append(f"link {key}: {at_once} transfers at once on {lanes} lane(s)")
                break
    # Holdings: departures in time order, arrivals applied once their time has come.
    held: dict[tuple[int, int], frozenset] = {}
    for c in chunks:
        for r in c.pre:
            held[(r, c.id)] = frozenset([r]) if c.reduce else frozenset(["all"])
    full = {c.id: frozenset(c.pre) if c.reduce else frozenset(["all"]) for c in chunks}
    done_at: dict[tuple[int, int], float] = {(c.id, r): 0.0 for c in chunks for r in c.post
                                             if held.get((r, c.id)) == full[c.id]}
    switch_arrivals: dict[tuple[int, int], list[list]] = {}  # (switch, chunk) -> [value, time, used]
    carried: dict[int, frozenset] = {}
    order = sorted((k for k, tm in enumerate(timing) if tm is not None),
                   key=lambda k: (timing[k][0], kinds[trs[k].src] != "switch", k))
    landed: set[int] = set()

    def land(k: int) -> None:
        landed.add(k)
        t, value = trs[k], carried.get(k)
        if not value:
            return
        arrival = timing[k][1]
        if kinds[t.dst] == "switch":
            switch_arrivals.setdefault((t.dst, t.chunk), []).append([value, arrival, False])
            return
        before = held.get((t.dst, t.chunk), frozenset())
        if t.op == "reduce":
            if before & value:
                problems.append(f"#{k}: a contribution counted twice")
            after = before | value
        else:
            after = value
        held[(t.dst, t.chunk)] = after
        if t.dst in chunks[t.chunk].post:
            if after == full[t.chunk]:
                if before != after:
                    done_at[(t.chunk, t.dst)] = arrival
            else:
                done_at.pop((t.chunk, t.dst), None)

    def land_due(now: float) -> None:
        due = sorted((k for k in carried if k not in landed and _le(timing[k][1], now)),
                     key=lambda k: (timing[k][1], k))
        for k in due:
            land(k)

    for k in order:
        t = trs[k]
        start = timing[k][0]
        land_due(start)
        if kinds[t.src] == "switch":
            tokens = [tok for tok in switch_arrivals.get((t.src, t.chunk), []) if _le(tok[1], start)]
            if not can_copy[t.src]:
                tokens = [tok for tok in tokens if not tok[2]]
                token = tokens[0] if tokens else None
            else:  # the latest arrival; at one instant, one not yet forwarded (reductions carry partials)
                now = [tok for tok in tokens if _le(start, tok[1])]
                token = next((tok for tok in now if not tok[2]), now[-1] if now else tokens[-1] if tokens else None)
            if token is None:
                problems.append(f"#{k}: switch {t.src} forwards chunk {t.chunk} it has not received")
                carried[k] = frozenset()
            else:
                token[2] = True
                if not buffered[t.src] and not _le(start, token[1]):
                    problems.append(f"#{k}: switch {t.src} holds chunk {t.chunk}")
                carried[k] = token[0]
        else:
            value = held.get((t.src, t.chunk), frozenset())
            if not value:
                problems.append(f"#{k}: node {t.src} sends chunk {t.chunk} before holding it")
            carried[k] = value
        if timing[k][1] == start:  # a zero-delay hop lands as it leaves
            land(k)
    land_due(float("inf"))
    for c in chunks:
        for r in c.post:
            if (c.id, r) not in done_at:
                problems.append(f"chunk {c.id} never completes at rank {r}")
    finish = max(done_at.values(), default=0.0) if not problems else None
    return not problems, finish, problems
