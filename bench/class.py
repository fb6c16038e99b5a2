"""A class at once: one app server, N students synthesizing with TE-CCL, one Stop, a lecturer stepping Learn.

    python bench/class.py [--students 3] [--repeats 1] [--idle 60] [--port 8613] [--out DIR]

Drives Debian's chromium through Playwright (one browser, one context per student). Phases, each on a
fresh server so the app's result cache cannot serve a solve twice:

1. solo: each student's solve alone (the yardstick: a class result should be within 2x solo + 10 s);
2. class (``--repeats`` times): every student presses Synthesize within a second while the lecturer
   steps through Learn (arrow keys, in the browser) and switches its algorithm (a server round trip);
3. stop: one student starts a long solve (5x5 torus, TE-CCL, about 17 s alone) beside another
   student's solve and presses Stop ``--stop-after`` seconds after the solver has offered a verified
   schedule: time from Stop to the best schedule on screen, and the other student's result;
4. idle: every tab closed, the server's memory sampled for ``--idle`` seconds.

Prints per student the time to result, verified or the error; the lecturer's step latencies; Stop's
latency; the server's RSS over time (the server process alone, and with its worker processes).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]
# (topology, size): distinct TE-CCL AllGather solves; the first three are the (two a100_2x8, one ndv2)
STUDENTS = [("a100_2x8", "1MB"), ("a100_2x8", "4MB"), ("ndv2_2chassis", "1MB"), ("a100_2x8", "16MB"),
            ("ndv2_2chassis", "4MB"), ("a100_2x8", "64MB"), ("ndv2_2chassis", "16MB"), ("a100_2x8", "256KB"),
            ("ndv2_2chassis", "64MB"), ("ndv2_2chassis", "256KB")]
LONG_SOLVE = "topology=torus2d:dims%3D5x5&collective=allgather&algorithm=teccl&size=4MB&chunks=2"


def rss_mb(pid: int) -> float:
    with contextlib.suppress(OSError), open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def children(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").glob("*/children"):
        with contextlib.suppress(OSError):
            out += [int(c) for c in task.read_text().split()]
    return out + [g for c in out for g in children(c)]


class Server:
    """`streamlit run app.py` on ``port``; its memory sampled every second (alone, and with its children)."""

    def __init__(self, port: int, log: Path) -> None:
        self.url = f"http://127.0.0.1:{port}"
        self.log = log.open("w")
        cmd = [sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"), "--server.headless", "true",
               "--browser.gatherUsageStats", "false", "--server.address", "127.0.0.1", "--server.port", str(port)]
        self.proc = subprocess.Popen(cmd, cwd=ROOT, stdout=self.log, stderr=subprocess.STDOUT,
                                     env={"MALLOC_ARENA_MAX": "2", **os.environ, "PYTHONUNBUFFERED": "1",
                                          "PYTHONPATH": str(ROOT)})  # as `make app` runs it
        self.started = time.monotonic()
        self.samples: list[tuple[float, float, float]] = []  # (s since start, server MB, server + workers MB)
        self._done = threading.Event()
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"streamlit exited with code {self.proc.returncode}; see {log}")
            try:
                with urllib.request.urlopen(self.url + "/_stcore/health", timeout=2):
                    break
            except OSError:
                time.sleep(0.3)
        threading.Thread(target=self._sample, daemon=True).start()

    def _sample(self) -> None:
        while not self._done.is_set():
            own = rss_mb(self.proc.pid)
            total = own + sum(rss_mb(c) for c in children(self.proc.pid))
            self.samples.append((time.monotonic() - self.started, own, total))
            self._done.wait(1.0)

    def rss(self) -> float:
        return rss_mb(self.proc.pid)

    def stop(self) -> None:
        self._done.set()
        self.proc.terminate()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


def main_of(page):
    return page.locator("[data-testid=stMain]")


async def open_student(context, url: str, topology: str, size: str, shots: Path | None = None,
                     name: str = "", stop_after_s: float | None = None) -> dict:
    """Open Synthesize for ``topology``/``size`` (TE-CCL AllGather), press Synthesize, wait for the verdict."""
    page = await context.new_page()
    page.set_default_timeout(300_000)
    query = LONG_SOLVE if stop_after_s is not None else \
        f"topology={topology}&collective=allgather&algorithm=teccl&size={size}"
    await page.goto(f"{url}/?{query}")
    main = main_of(page)
    await main.get_by_text("Topology", exact=False).first.wait_for()
    await main.get_by_role("button", name="Synthesize", exact=True).wait_for()
    await page.wait_for_timeout(500)
    return {"page": page, "name": name, "query": query, "stop_after_s": stop_after_s, "shots": shots}


async def press_and_wait(student: dict) -> dict:
    page, main = student["page"], main_of(student["page"])
    out = {"student": student["name"]}
    await main.get_by_role("button", name="Synthesize", exact=True).click()
    pressed = time.monotonic()
    busy: set[str] = set()
    if student["stop_after_s"] is not None:  # Stop once the solver has offered a schedule Stop would keep
        stop = main.get_by_role("button", name="Stop", exact=True)
        await stop.wait_for()
        await main.get_by_text("Stop now keeps a verified schedule").first.wait_for(timeout=120_000)
        await page.wait_for_timeout(student["stop_after_s"] * 1000)
        try:
            await stop.click(timeout=5_000)
        except Exception:  # the solve ended on its own first: no Stop to measure
            out["error"] = "the solve ended before Stop was pressed (try a smaller --stop-after)"
            return {**out, "time_s": float("nan"), "stopped": False, "busy_lines": []}
        pressed = time.monotonic()
    verdict = main.locator("[data-testid=stMetric]").filter(has_text="verified by simulator")
    error = main.locator("[data-testid=stAlertContentError]")
    while True:
        if await verdict.count():
            out["verified"] = (await verdict.locator("[data-testid=stMetricValue]").inner_text()).strip() == "yes"
            break
        if await error.count():
            out["error"] = (await error.first.inner_text()).strip()[:300]
            break
        status = main.locator("[data-testid=stProgress], [data-testid=stAlertContentInfo]")
        with contextlib.suppress(Exception):
            for text in await status.all_inner_texts():
                if "running on" in text or "sharing" in text:
                    busy.add(text.split(" · ")[-1].strip())
        await page.wait_for_timeout(100)
    out["time_s"] = time.monotonic() - pressed
    out["stopped"] = bool(await main.get_by_text("Stopped early").count())
    out["busy_lines"] = sorted(busy)[:3]
    if student["shots"] is not None:
        await page.screenshot(path=str(student["shots"] / f"{student['name']}.png"), full_page=True)
    return out


async def lecturer(context, url: str, until: asyncio.Event) -> dict:
    """Learn: arrow steps through rhd's rounds (in the browser) and algorithm switches (server round trips)."""
    page = await context.new_page()
    page.set_default_timeout(120_000)
    await page.goto(url + "/learn")
    await page.get_by_role("heading", name="Learn: how collective algorithms move data").wait_for()
    steps, switches, errors = [], [], []
    names = ["rhd", "ring"]
    title = page.frame_locator("iframe").first.locator("#title")
    k = 0
    while not until.is_set():
        name = names[k % 2]
        k += 1
        try:
            await title.wait_for(timeout=60_000)
            before = await title.inner_text()
            t0 = time.monotonic()
            await page.get_by_role("combobox", name="algorithm").click()
            await page.get_by_role("option", name=name, exact=True).click()
            while await title.inner_text(timeout=60_000) == before and time.monotonic() - t0 < 60:
                await page.wait_for_timeout(20)  # the page reran and drew the other algorithm's rounds
            switches.append(time.monotonic() - t0)
            await page.locator("h1").first.click()
            for _ in range(4):
                t0 = time.monotonic()
                before = await title.inner_text()
                await page.keyboard.press("ArrowRight")
                for _ in range(300):
                    if await title.inner_text() != before:
                        break
                    await page.wait_for_timeout(10)
                steps.append(time.monotonic() - t0)
        except Exception as exc:  # a slow page is a measurement, not a crash of the bench
            errors.append(f"{type(exc).__name__}: {str(exc).splitlines()[0][:120]}")
    await page.close()
    return {"steps": steps, "switches": switches, "errors": errors}


def stats(values: list[float]) -> str:
    if not values:
        return "none"
    v = sorted(values)
    return (f"n={len(v)} median {v[len(v) // 2] * 1e3:.0f} ms, p90 {v[int(len(v) * 0.9)] * 1e3:.0f} ms, "
            f"max {v[-1] * 1e3:.0f} ms")


async def run(args: argparse.Namespace) -> int:
    from playwright.async_api import async_playwright

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    students = [(f"s{i}", *STUDENTS[i % len(STUDENTS)]) for i in range(args.students)]
    solo: dict[str, float] = {}
    failures = 0
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)

        async def fresh_contexts(n: int):
            return [await browser.new_context(viewport={"width": 1300, "height": 1000}) for _ in range(n)]

        # 1. solo
        server = Server(args.port, out / "server_solo.log")
        try:
            for name, topology, size in students:
                (ctx,) = await fresh_contexts(1)
                s = await open_student(ctx, server.url, topology, size, name=name)
                r = await press_and_wait(s)
                await ctx.close()
                solo[name] = r["time_s"]
                print(f"solo {name} {topology} {size}: {r['time_s']:.1f} s, verified={r.get('verified')} "
                      f"{r.get('error', '')}", flush=True)
        finally:
            server.stop()

        # 2. class, repeated
        for rep in range(args.repeats):
            server = Server(args.port, out / f"server_class{rep}.log")
            start_rss = server.rss()
            try:
                (warm,) = await fresh_contexts(1)  # the pages' imports (plotly, pandas, ...) load on a first view
                for path in ("/", "/learn", "/compare"):
                    page = await warm.new_page()
                    await page.goto(server.url + path)
                    await main_of(page).locator("h1").first.wait_for(timeout=120_000)
                    await page.wait_for_timeout(1500)
                await warm.close()
                warm_rss = server.rss()
                contexts = await fresh_contexts(len(students) + 1)
                opened = [await open_student(c, server.url, t, s, out, name=f"r{rep}_{n}")
                          for c, (n, t, s) in zip(contexts, students, strict=False)]
                until = asyncio.Event()
                teacher = asyncio.create_task(lecturer(contexts[-1], server.url, until))
                await asyncio.sleep(3)  # the lecturer is stepping before the students press
                results = await asyncio.gather(*(press_and_wait(s) for s in opened))
                until.set()
                taught = await teacher
                print(f"\nclass {rep + 1}/{args.repeats} on a fresh server (RSS at start {start_rss:.0f} MB, after a "
                      f"first view of Synthesize, Learn and Compare {warm_rss:.0f} MB)")
                for (name, topology, size), r in zip(students, results, strict=True):
                    bound = 2 * solo[name] + 10
                    ok = r.get("verified") and r["time_s"] <= bound
                    failures += not ok
                    print(f"  {name} {topology:14s} {size:5s}: {r['time_s']:6.1f} s (solo {solo[name]:.1f} s, bound "
                          f"{bound:.1f} s) verified={r.get('verified')} {'OK' if ok else 'FAIL'} "
                          f"{r.get('error', '')} {'; '.join(r['busy_lines'])}", flush=True)
                print(f"  lecturer arrow steps: {stats(taught['steps'])}")
                print(f"  lecturer algorithm switches (server round trip): {stats(taught['switches'])}")
                if taught["errors"]:
                    print(f"  lecturer errors: {len(taught['errors'])}, first: {taught['errors'][0]}")
                for c in contexts:
                    await c.close()

                # 3. stop (on the last repeat's server): a long solve stopped beside another student's solve
                if rep == args.repeats - 1:
                    a, b = await fresh_contexts(2)
                    long = await open_student(a, server.url, "", "", out, name="stopper", stop_after_s=args.stop_after)
                    other = await open_student(b, server.url, "ndv2_2chassis", "4MB", out, name="beside_stop")  # not solved before: no cache hit
                    stopped, beside = await asyncio.gather(press_and_wait(long), press_and_wait(other))
                    ok = stopped.get("verified") and stopped["stopped"] and stopped["time_s"] <= 2.0
                    failures += not ok
                    print(f"\nstop: Stop -> best schedule on screen in {stopped['time_s']:.2f} s, "
                          f"verified={stopped.get('verified')} stopped-early shown={stopped['stopped']} "
                          f"{stopped.get('error', '')} {'OK' if ok else 'FAIL'}")
                    print(f"  the student beside it: {beside['time_s']:.1f} s, verified={beside.get('verified')} "
                          f"{beside.get('error', '')}")
                    await a.close()
                    await b.close()
                    # 4. idle
                    print(f"\nidle: every tab closed; sampling the server for {args.idle:g} s", flush=True)
                    end_class = server.rss()
                    await asyncio.sleep(args.idle)
                    end = server.rss()
                    ok = end - start_rss <= 100
                    failures += not ok
                    print(f"  against the server warmed by a first page view ({warm_rss:.0f} MB): "
                          f"{end - warm_rss:+.0f} MB")
                    peak = max(s[1] for s in server.samples)
                    peak_all = max(s[2] for s in server.samples)
                    print(f"  server RSS: start {start_rss:.0f} MB, peak {peak:.0f} MB (with workers {peak_all:.0f} "
                          f"MB), at class end {end_class:.0f} MB, after {args.idle:g} s idle {end:.0f} MB "
                          f"({end - start_rss:+.0f} MB) {'OK' if ok else 'FAIL'}")
                    every = max(1, len(server.samples) // 20)
                    print("  RSS over time (s: server MB / with workers MB): " + ", ".join(
                        f"{t:.0f}: {own:.0f}/{total:.0f}" for t, own, total in server.samples[::every]))
                if "deadlock" in (out / f"server_class{rep}.log").read_text():
                    failures += 1
                    print("  the server's log mentions a deadlock")
            finally:
                server.stop()
        await browser.close()
    print(f"\n{failures} failed check(s)")
    return 1 if failures else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--idle", type=float, default=60.0)
    parser.add_argument("--stop-after", type=float, default=2.0,
                        help="seconds after the long solve's first verified schedule to press Stop")
    parser.add_argument("--port", type=int, default=8613)
    parser.add_argument("--out", default="/tmp/ccviz_class", help="screenshots and server logs")
    return asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
