"""A schedule replayed packet by packet on ns-3 (the ``ns3`` extra: ``pip install -e ".[ns3]"``).

The only module of ccviz that imports ``ns``. The fabric becomes ns-3 nodes joined by point-to-point
channels (one per directed link and lane: the link's rate, its alpha as the channel delay); every
transfer becomes a stream of raw frames of at most ``mtu`` bytes on its link, started when its chunk has
fully arrived at its source (the transfers the judge saw land there before it started), links serving
their transfers in the judge's order. Bufferless switches forward each frame as it arrives (copy
switches onto every out-link they feed: multicast) into port queues that never drop by default (a lossless
fabric; ``switch_queue_frames`` makes them drop-tail); switches with ``buffer``
store the whole chunk first. The engine itself is C++ (``ns3_engine.cpp``, compiled once per process
by cppyy), so nothing runs in Python per frame. Why this transport: docs/replay.md.
"""

from __future__ import annotations

import bisect
import math
import os
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from threading import Event
from typing import TYPE_CHECKING, Any

from ccviz.errors import CcvizError
from ccviz.judge.replay_result import Replay

if TYPE_CHECKING:
    from ccviz.model.progress import Progress
    from ccviz.model.schedule import Schedule

INSTALL_HINT = "install the ns-3 Python bindings with `pip install \"ccviz[ns3]\"` (or `pip install ns3`)"
MAX_MTU = 65535  # PointToPointNetDevice's largest frame
DEFAULT_MTU = 65000
UNBOUNDED_FRAMES = 2**31 - 1  # a switch port queue that never drops: a lossless fabric
SENDER_WINDOW = 2  # frames a sender keeps queued on its device: the link never idles between frames
# docs/replay.md measured 61,500 frames (4 hops x 1 GB / 65 KB) in 0.70 s; a schedule needing more frames than
# MAX_FRAMES would take many minutes with no way to know up front (a 1e15-byte one ran past 300 s): refused
FRAMES_PER_S = 90_000
MAX_FRAMES = 20_000_000
SLICE_S = 0.25     # wall-clock seconds the simulator runs between progress reports and stop checks
PS = 1e-12

_ENGINE_SOURCE = Path(__file__).with_name("ns3_engine.cpp")
_lock = threading.Lock()  # ns-3's simulator is process-wide: one replay at a time
_loaded: dict[str, Any] = {}


def available() -> bool:
    """Whether the ns-3 bindings can be imported (without importing them: that takes ~20 s)."""
    import importlib.util

    try:
        return importlib.util.find_spec("ns") is not None
    except (ImportError, ValueError):  # a broken or blocked installation
        return False


def engine_module(progress: Callable[[Progress], None] | None = None) -> Any:
    """The compiled engine (``cppyy.gbl.ccviz_ns3``), importing ns-3 and compiling it on the first call only."""
    if "gbl" in _loaded:
        return _loaded["gbl"]
    from ccviz.model.progress import Progress

    t0 = time.perf_counter()
    if progress:
        progress(Progress(0.0, "loading ns-3 (the first import takes about 20 s)"))
    if not available():
        raise CcvizError(f"engine ns3: the ns-3 Python bindings are not installed; {INSTALL_HINT}", "engine")
    try:
        with _quiet_stderr():
            from ns import ns  # noqa: PLC0415  (the one import of ns-3 in ccviz)

            ns.cppyy.cppdef(_ENGINE_SOURCE.read_text())
            gbl = ns.cppyy.gbl.ccviz_ns3
            if not gbl.UsePicoseconds():
                raise CcvizError("engine ns3: could not set ns-3's time resolution to picoseconds", "engine")
    except ImportError as exc:
        raise CcvizError(f"engine ns3: the ns-3 Python bindings failed to import ({exc}); {INSTALL_HINT}",
                         "engine") from exc
    except SystemExit as exc:  # the bindings call exit() when a library is missing, after printing to stderr
        raise CcvizError(f"engine ns3: the ns-3 Python bindings quit while loading (exit {exc.code}); "
                         f"{INSTALL_HINT}", "engine") from None
    _loaded["gbl"] = gbl
    _loaded["import_s"] = time.perf_counter() - t0
    if progress:
        progress(Progress(_loaded["import_s"], f"ns-3 loaded in {_loaded['import_s']:.0f} s"))
    return gbl


class _quiet_stderr:
    """Cling prints a harmless 'Failed to materialize symbols' line per compiled unit that includes
    ns-3's time header (its static initializer already ran in the ns-3 library); keep it off the CLI."""

    def __enter__(self) -> None:
        self.saved = os.dup(2)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 2)
        os.close(devnull)

    def __exit__(self, *exc: object) -> None:
        os.dup2(self.saved, 2)
        os.close(self.saved)


def replay_ns3(schedule: Schedule, *, mtu: int | None = None, switch_queue_frames: int | None = None,
               progress: Callable[[Progress], None] | None = None, stop: Event | None = None,
               time_limit_s: float | None = None) -> Replay:
    """Replay ``schedule`` on ns-3 (see the module docstring); the alpha-beta judge runs first."""
    from ccviz.judge.simulate import simulate
    from ccviz.model.progress import Progress

    t0 = time.perf_counter()
    mtu = DEFAULT_MTU if mtu is None else mtu
    if isinstance(mtu, bool) or not isinstance(mtu, int) or not 64 <= mtu <= MAX_MTU:
        raise CcvizError(f"mtu: must be a whole number of bytes from 64 to {MAX_MTU}, got {mtu!r}", "mtu")
    queue = UNBOUNDED_FRAMES if switch_queue_frames is None else switch_queue_frames
    if isinstance(queue, bool) or not isinstance(queue, int) or not 1 <= queue <= UNBOUNDED_FRAMES:
        raise CcvizError(f"switch_queue_frames: must be a whole number of frames >= 1 (omit it for a lossless "
                         f"fabric), got {queue!r}", "switch_queue_frames")
    frames = _frames(schedule, mtu)
    if frames > MAX_FRAMES:
        raise CcvizError(f"schedule: replaying it means {frames:.3g} frames of {mtu} B, more than the {MAX_FRAMES:,} "
                         f"a replay takes (~{MAX_FRAMES / FRAMES_PER_S / 60:.0f} min at ns-3's ~{FRAMES_PER_S:,} frames "
                         "a second here); replay a smaller size", "schedule")
    timeline = simulate(schedule)
    if not timeline.verified:
        first = timeline.violations[0]
        raise CcvizError(f"schedule: the alpha-beta judge finds {len(timeline.violations)} violation(s) "
                         f"(first: [{first.rule}] {first.message}); replay a valid schedule", "schedule")
    plan = _Plan(timeline)
    loading = time.perf_counter()
    gbl = engine_module(progress)
    t0 += time.perf_counter() - loading  # the one-off import is reported on its own (settings.import_s)
    with _lock:
        return _run(gbl, plan, timeline, mtu, queue, progress, stop, time_limit_s, Progress, t0)


def _frames(schedule: Schedule, mtu: int) -> float:
    """Frames the engine would send: every transfer's chunk cut into frames of at most ``mtu`` bytes."""
    return len(schedule.transfers) * math.ceil(schedule.chunk_bytes / mtu)


class _Plan:
    """What the engine is told: per transfer whether a switch forwards it, what it waits for, link order."""

    def __init__(self, timeline: Any) -> None:
        """A hop out of a bufferless switch forwards the arrival the judge paired it with by its step rule
        (``switch_forwards``) when the judged times agree (the hop starts as that arrival lands); otherwise
        (timed schedules, whose steps say nothing) the arrival landing at its start, one not yet forwarded first."""
        from ccviz.judge.simulate import relay_continuations, switch_forwards
        from ccviz.model.physics import tol
        from ccviz.model.schedule import RELAY

        schedule = timeline.schedule
        transfers = schedule.transfers
        nodes = schedule.topology.nodes
        start = timeline.start_s.tolist()
        arrival = timeline.arrival_s.tolist()
        self.notes: list[str] = []
        bufferless = {n for n, node in nodes.items() if node.is_switch and not node.buffer}
        into: dict[tuple[int, int], list[tuple[float, int]]] = defaultdict(list)  # (node, chunk) -> arrivals
        for j, t in enumerate(transfers):
            into[(t.dst, t.chunk)].append((arrival[j], j))
        for arrivals in into.values():
            arrivals.sort()
        relayed = relay_continuations(transfers)
        self.feeder: dict[int, int] = {}       # transfer out of a bufferless switch -> the hop it forwards
        self.waits: dict[int, list[int]] = {}  # other transfers -> the arrivals they wait for
        used: set[int] = set()
        paired = ({child: j for j, children in switch_forwards(schedule).items() for child in children
                   if abs(arrival[j] - start[child]) <= tol(start[child])} if bufferless else {})
        for i, t in enumerate(transfers):
            arrivals = into.get((t.src, t.chunk), [])
            landed = bisect.bisect_right(arrivals, (start[i] + tol(start[i]), len(transfers)))
            if t.src in bufferless and i in paired:
                self.feeder[i] = paired[i]
            elif t.src in bufferless:
                # the judge starts a forwarded hop the instant its arrival lands: pair by that time, an
                # arrival not yet forwarded first (one arrival per departure; multicast only when none is left)
                candidates = [j for a, j in reversed(arrivals[:landed]) if abs(a - start[i]) <= tol(start[i])]
                candidates = [j for j in candidates if j not in used] or (
                    candidates if nodes[t.src].copy else []) or [j for _, j in reversed(arrivals[:landed])]
                if not candidates:
                    raise CcvizError(f"transfers[{i}]: chunk {t.chunk} leaves switch {t.src} before any arrival "
                                     "of it; the replay cannot forward it", "transfers")
                self.feeder[i] = candidates[0]
                used.add(candidates[0])
            elif i in relayed:
                self.waits[i] = [relayed[i]]
            else:
                self.waits[i] = [j for _, j in arrivals[:landed] if transfers[j].op != RELAY]
        # Links serve their own transfers in the judge's order (start time, then list order).
        self.order = sorted(range(len(transfers)), key=lambda i: (start[i], i))
        copies = [s for s in bufferless if nodes[s].copy]
        fed = Counter(self.feeder.values())
        multicast = sum(1 for j, n in fed.items() if n > 1 and transfers[j].dst in copies)
        if multicast:
            self.notes.append(f"{multicast} arrival(s) at copy switches multicast: the switch puts each frame "
                              "on every out-link it feeds")
        if any(op == "reduce" for op in (t.op for t in transfers)):
            self.notes.append("reductions: ns-3 moves the partial sums' bytes; adding them costs no time "
                              "(as in the alpha-beta judge)")


def _run(gbl: Any, plan: _Plan, timeline: Any, mtu: int, queue: int,
         progress: Callable[[Progress], None] | None, stop: Event | None, time_limit_s: float | None,
         Progress: type, t0: float) -> Replay:
    """Build the fabric and the flows in the engine, run it in slices, read the results back. ``wall_s``
    counts from ``t0`` (the judge's run and the plan included, ns-3's one-off import not)."""
    schedule = timeline.schedule
    topology = schedule.topology
    transfers = schedule.transfers
    nodes = topology.nodes
    notes = list(plan.notes)
    chunk_bytes = schedule.chunk_bytes
    nbytes = max(1, round(chunk_bytes))
    if abs(nbytes - chunk_bytes) > 1e-6:
        notes.append(f"chunks of {chunk_bytes:g} B are sent as {nbytes} whole bytes")
    engine = gbl.NewEngine(mtu, SENDER_WINDOW)
    try:
        index = {node: k for k, node in enumerate(nodes)}
        engine.AddNodes(len(index))
        link_index: dict[tuple[int, int], int] = {}
        lanes: dict[tuple[int, int], int] = {}
        lane_of_link: dict[tuple[int, int], list[int]] = {}
        n_lanes = 0
        for key, link in topology.links.items():
            src_switch = nodes[link.src].is_switch
            delay = 0.0 if (src_switch and topology.switch_hop == "free") else link.alpha_s
            frames = queue if src_switch else SENDER_WINDOW + 2
            link_index[key] = engine.AddLink(index[link.src], index[link.dst], link.bytes_per_s * 8, delay,
                                             link.lanes, frames)
            lanes[key] = link.lanes
            lane_of_link[key] = list(range(n_lanes, n_lanes + link.lanes))
            n_lanes += link.lanes
        if topology.switch_hop == "free" and any(n.is_switch for n in nodes.values()):
            notes.append("switch_hop=free: links out of switches get no propagation delay (their alpha is "
                         "folded into the link into the switch, TACCL's convention)")
        flow_of: dict[int, int] = {}
        for i in plan.order:
            t = transfers[i]
            flow_of[i] = engine.AddFlow(link_index[(t.src, t.dst)], nbytes, i in plan.feeder)
        for i, j in plan.feeder.items():
            engine.AddForward(flow_of[j], flow_of[i])
        for i, waits in plan.waits.items():
            for j in waits:
                engine.AddDependency(flow_of[i], flow_of[j])
        expected = nbytes * len(transfers)
        engine.Start()
        stopped = None
        started = time.perf_counter()
        while not engine.RunSlice(SLICE_S):
            elapsed = time.perf_counter() - started
            if progress:
                progress(Progress(elapsed, f"ns-3 at {engine.Now() * 1e6:.1f} us simulated, "
                                           f"{engine.delivered / expected:.0%} of the bytes delivered",
                                  fraction=engine.delivered / expected))
            if stop is not None and stop.is_set():
                stopped = "stop"
                break
            if time_limit_s is not None and elapsed >= time_limit_s:
                stopped = "time limit"
                break
        times = list(gbl.FlowTimes(engine))
        counts = list(gbl.FlowBytes(engine))
        busy = {key: [] for key in topology.links}
        peak: dict[tuple[int, int], int] = {}
        for key, lane_ids in lane_of_link.items():
            for lane in lane_ids:
                flat = list(gbl.LaneBusy(engine, lane))
                busy[key].extend((flat[k] * PS, flat[k + 1] * PS) for k in range(0, len(flat), 2))
            busy[key].sort()
            if nodes[key[0]].is_switch:
                peak[key] = max(int(gbl.LanePeakBytes(engine, lane)) for lane in lane_ids)
    finally:
        gbl.DeleteEngine(engine)
    wall = time.perf_counter() - t0
    start_s: list[float | None] = [None] * len(transfers)
    end_s: list[float | None] = [None] * len(transfers)
    delivered = lost = 0
    unfinished = 0
    for i, f in flow_of.items():
        _, start_ps, end_ps = times[3 * f: 3 * f + 3]
        received, dropped = counts[2 * f], counts[2 * f + 1]
        start_s[i] = start_ps * PS if start_ps >= 0 else None
        end_s[i] = end_ps * PS if end_ps >= 0 else None
        delivered += min(received, nbytes)
        lost += dropped
        unfinished += end_ps < 0
    complete = unfinished == 0 and delivered == expected
    last_arrival = max((e for e in end_s if e is not None), default=0.0) if complete else None
    finish = _finish(timeline, end_s) if complete else None
    if lost:
        notes.append(f"DATA LOST: {lost} B dropped at full switch port queues ({queue} frames); "
                     f"{unfinished} transfer(s) never completed")
    deepest = max(peak.items(), key=lambda kv: kv[1], default=None)
    if deepest and deepest[1] > 2 * mtu:
        notes.append(f"switch ports queued up to {deepest[1]} B (link {deepest[0][0]}->{deepest[0][1]}): flows "
                     "converged on them, which the alpha-beta judge's bufferless switches never let happen")
    elif unfinished and not stopped:
        notes.append(f"{unfinished} transfer(s) never completed")
    if stopped:
        notes.append(f"replay cut short by {stopped}: {delivered} of {expected} B delivered")
    return Replay(
        engine="ns3", timeline=timeline, finish_time_s=finish, complete=complete, bytes_expected=expected,
        bytes_delivered=delivered, bytes_lost=lost, start_s=start_s, end_s=end_s, link_busy=busy, lanes=lanes,
        wall_s=wall, notes=notes, stopped=stopped, last_arrival_s=last_arrival,
        switch_queue_peak_bytes=peak,
        settings={"mtu": mtu, "switch_queue_frames": None if queue == UNBOUNDED_FRAMES else queue,
                  "transport": "raw point-to-point frames",
                  "import_s": _loaded.get("import_s")},
    )


def _finish(timeline: Any, end_s: list[float | None]) -> float:
    """When the replay meets the collective's postcondition, by the judge's rule: a copied chunk is at a
    rank on its first arrival there, a reduced one on the last arrival the judge counted (arrivals after
    the judge's finish are redundant sends, which both runs carry out but neither waits for)."""
    from ccviz.model.physics import tol
    from ccviz.model.schedule import RELAY

    schedule = timeline.schedule
    judge_finish = timeline.finish_time_s
    landed: dict[tuple[int, int], list[tuple[float, float]]] = defaultdict(list)  # (rank, chunk) -> (judge, replay)
    for i, t in enumerate(schedule.transfers):
        if t.op != RELAY and end_s[i] is not None:
            landed[(t.dst, t.chunk)].append((float(timeline.arrival_s[i]), end_s[i]))
    finish = 0.0
    for chunk in schedule.collective.chunks:
        for rank in set(chunk.post) - set(chunk.pre if not chunk.reduce else ()):
            times = landed.get((rank, chunk.id), [])
            if chunk.reduce:
                counted = [e for a, e in times if a <= judge_finish + tol(judge_finish)]
                finish = max(finish, max(counted, default=0.0))
            elif times:
                finish = max(finish, min(e for _, e in times))
    return finish
