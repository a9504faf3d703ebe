"""The console's event stream under a flood, measured under Textual's pilot (headless).

- events_per_s: events the Events tab took in per second while `--rate` events/s were offered
  the way the follower delivers them (one `EventsArrived` batch per 1/30 s, through the app's
  forwarding). `backlog_max` is the most messages ever waiting in the view's queue: it must not
  grow with time (the run is split in halves; `backlog_growth` compares them).
- keypress_p95_ms: under that flood, `down`/`up` pressed on the timeline; time from posting the
  key to the first repaint of the timeline showing the moved cursor, 95th percentile.
- rss_mb_200k_lines: resident memory of the whole process (Python, Textual, the console) after
  200,000 events were taken in by the timeline's ring.
- first_paint_ms: a fresh `choir tui` process (headless, no choird: the console paints before it
  connects) from spawn to its first refresh, median of runs; `first_paint_cpu_ms` is the CPU
  time it used until then, which a busy machine does not inflate.
- cpu_per_event_us: process CPU time per event during the flood (rendering included), and
  `load_average` the machine's 1-minute load: on a shared machine the wall-clock figures above
  shrink with the CPU share the bench gets.

    python -m bench.tui_stream [--json] [--quick]
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import psutil
from textual import events

from bench.common import median, parse_args, percentile, report
from choir.protocol.operator.views import AgentSummary, EventView
from tui.app import ChoirApp
from tui.messages import AgentsUpdated, EventsArrived
from tui.views.events import EventsView
from tui.widgets.timeline import Timeline

GOALS = {
    "events_per_s": "goal >= 10000",
    "keypress_p95_ms": "goal <= 100",
    "rss_mb_200k_lines": "goal <= 150",
    "first_paint_ms": "goal <= 600",
}
SESSION = "s-bench"
SIZE = (160, 50)
FLUSH_HZ = 30

FIRST_PAINT = """
import sys, time
from choir.home import ChoirHome
from tui.app import ChoirApp

import tui.app

class Timed(ChoirApp):
    CSS_PATH = tui.app.__file__.replace("app.py", "app.tcss")

    def on_mount(self) -> None:
        super().on_mount()
        self.call_after_refresh(self.painted)

    def painted(self) -> None:
        sys.stdout.write(f"{time.time()!r} {time.process_time()!r}")
        self.exit()

Timed(ChoirHome.resolve(sys.argv[1])).run(headless=True, size=(120, 40))
"""

TEMPLATES: list[dict[str, Any]] = [
    {"lane": "edge", "event_type": "model_output", "payload": {"text": "Looking at the tests."}},
    {
        "lane": "core:refactor-auth",
        "event_type": "tool_call_committed",
        "payload": {"tool": "choir.fs.write", "side_effect": "write", "locks": []},
    },
    {
        "lane": "core:write-tests",
        "event_type": "tool_result_committed",
        "payload": {"tool": "choir.exec", "result": {"status": "success", "output": "ok " * 40}},
    },
    {
        "lane": "core:refactor-auth",
        "event_type": "core_event_emitted",
        "payload": {"job_name": "refactor-auth", "event": {"kind": "progress", "phase": "edit"}},
    },
]


def make_events(first_rev: int, count: int) -> list[EventView]:
    """Events as the follower posts them: each parsed once from its JSON object (the parse is
    part of the per-event cost measured)."""
    return [
        EventView.model_validate(
            {
                **TEMPLATES[rev % len(TEMPLATES)],
                "rev": rev,
                "created_at": "2026-03-14T09:26:53.123000+00:00",
                "hash": f"{rev:064x}",
                "artifact": None,
            }
        )
        for rev in range(first_rev, first_rev + count)
    ]


BENCH_AGENT: dict[str, Any] = {
    "agent_id": "bench",
    "state": "running",
    "session_id": SESSION,
    "session_status": "active",
    "started_at": None,
    "uptime_s": None,
    "config_version": None,
    "bindings": {},
    "held_jobs": [],
    "interrupted": None,
    "runtime": None,
    "sandboxed": None,
    "pid": None,
    "container": None,
    "verified": None,
}


async def console(pilot_body: Callable[[ChoirApp, Any], Any]) -> Any:
    """Run `pilot_body(app, pilot)` on a console showing the Events tab of `SESSION`."""
    app = ChoirApp(connect=False)
    async with app.run_test(size=SIZE) as pilot:
        app.post_message(AgentsUpdated([AgentSummary.model_validate(BENCH_AGENT)]))
        await pilot.pause()
        await pilot.press("5")
        await pilot.pause()
        return await pilot_body(app, pilot)


async def flood(
    app: ChoirApp, rate: int, seconds: float, keys: list[float] | None
) -> dict[str, float]:
    """Offer `rate` events/s for `seconds`; press keys meanwhile when `keys` collects latencies."""
    view = app.query_one(EventsView)
    line = app.query_one(Timeline)
    per_batch = max(rate // FLUSH_HZ, 1)
    rev, backlog = 1, [0, 0]
    began = time.perf_counter()
    start_rows = len(line.rows)
    presser = asyncio.create_task(press_keys(app, line, keys)) if keys is not None else None
    cpu_began = time.process_time()
    next_at = began
    while (elapsed := time.perf_counter() - began) < seconds:
        app.post_message(EventsArrived(SESSION, make_events(rev, per_batch)))
        rev += per_batch
        half = 0 if elapsed < seconds / 2 else 1
        backlog[half] = max(backlog[half], view._message_queue.qsize(), app._message_queue.qsize())
        next_at += 1 / FLUSH_HZ
        await asyncio.sleep(max(next_at - time.perf_counter(), 0))
    offered = rev - 1
    drained = time.perf_counter() + seconds * 2
    while len(line.rows) - start_rows < offered and time.perf_counter() < drained:  # noqa: ASYNC110
        await asyncio.sleep(0.005)  # let the last batches drain (polling: nothing to await)
    took = time.perf_counter() - began
    cpu = time.process_time() - cpu_began
    if presser is not None:
        presser.cancel()
        await asyncio.gather(presser, return_exceptions=True)
        await asyncio.sleep(0.1)  # the last key is handled before the console closes
    return {
        "events_per_s": (len(line.rows) - start_rows) / took,
        "offered_per_s": offered / seconds,
        "backlog_max": max(backlog),
        "backlog_growth": backlog[1] - backlog[0],
        "cpu_per_event_us": cpu / max(len(line.rows) - start_rows, 1) * 1e6,
    }


async def press_keys(app: ChoirApp, line: Timeline, latencies: list[float] | None) -> None:
    """Alternate up/down on the timeline; each latency is key posted -> repaint showing it."""
    assert latencies is not None
    painted: list[float] = []
    original = line.render_line

    def timed_render(y: int) -> Any:
        painted.append(time.perf_counter())
        return original(y)

    line.render_line = timed_render  # type: ignore[method-assign]
    line.focus()
    key = "up"
    while True:
        await asyncio.sleep(0.02)
        before = line.cursor
        painted.clear()
        sent = time.perf_counter()
        app.post_message(events.Key(key, None))
        while line.cursor == before or not [t for t in painted if t > sent]:
            await asyncio.sleep(0.001)
            if time.perf_counter() - sent > 2:
                break
        shown = [t for t in painted if t > sent]
        latencies.append(((shown[0] if shown else time.perf_counter()) - sent) * 1000)
        key = "down" if key == "up" else "up"


FILL_BATCH = 1000


async def rss_after(lines: int) -> float:
    async def fill(app: ChoirApp, pilot: Any) -> float:
        line = app.query_one(Timeline)
        # batches the size the follower posts under a flood (what 1/30 s of 20k events/s
        # and a snapshot page add up to), not more events at once than the console ever gets
        for first in range(1, lines + 1, FILL_BATCH):
            app.post_message(
                EventsArrived(SESSION, make_events(first, min(FILL_BATCH, lines - first + 1)))
            )
            await pilot.pause()
        while len(line.rows) < lines:
            await pilot.pause(0.01)
        await pilot.pause(0.2)
        return psutil.Process().memory_info().rss / 1e6

    result: float = await console(fill)
    return result


def first_paint_ms(runs: int) -> tuple[float, float]:
    """Median wall and CPU milliseconds from spawn to the first paint (CPU: the process's own,
    which a busy machine does not inflate)."""
    samples, cpu = [], []
    with tempfile.TemporaryDirectory() as home:
        script = os.path.join(home, "first_paint.py")  # a file: Textual resolves CSS_PATH by it
        with open(script, "w") as file:
            file.write(FIRST_PAINT)
        env = {**os.environ, "PYTHONPATH": os.getcwd()}
        for _ in range(runs):
            began = time.time()
            done = subprocess.run(
                [sys.executable, script, os.path.join(home, "h")],
                capture_output=True,
                text=True,
                env=env,
                check=True,
            )
            painted_at, cpu_s = (float(part) for part in done.stdout.split())
            samples.append((painted_at - began) * 1000)
            cpu.append(cpu_s * 1000)
    return median(samples), median(cpu)


def measure(quick: bool, rate: int) -> dict[str, float]:
    seconds = 2.0 if quick else 10.0
    latencies: list[float] = []

    async def run_flood(app: ChoirApp, pilot: Any) -> dict[str, float]:
        return await flood(app, rate, seconds, latencies)

    figures = asyncio.run(console(run_flood))
    rss = asyncio.run(rss_after(200_000))
    paint_ms, paint_cpu_ms = first_paint_ms(3 if quick else 7)
    return {
        "events_per_s": figures["events_per_s"],
        "keypress_p95_ms": percentile(latencies, 95),
        "rss_mb_200k_lines": rss,
        "first_paint_ms": paint_ms,
        "first_paint_cpu_ms": paint_cpu_ms,
        "offered_per_s": figures["offered_per_s"],
        "backlog_max": figures["backlog_max"],
        "backlog_growth": figures["backlog_growth"],
        "keypresses": len(latencies),
        "cpu_per_event_us": figures["cpu_per_event_us"],
        "load_average": os.getloadavg()[0],
    }


def main() -> None:
    args = parse_args(__doc__ or "")
    rate = int(os.environ.get("BENCH_TUI_RATE", "20000"))
    report("choir tui event stream", measure(args.quick, rate), GOALS, args.json)


if __name__ == "__main__":
    main()
