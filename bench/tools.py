"""The integration tools' own costs: the browser worker, and withholding tools from the model.

    python -m bench.tools [--json] [--quick]

- `browse_open_extract_p50_ms`: `choir.web.browse` `open` of a local page (served on loopback
  by this process) and its first text chunk, in a warm context (the session's tab exists), as
  choird's `HostTools` runs it — real Chromium through Playwright (the agent's RPC hop, ~0.2
  ms, is left out). Goal <= 300.
- `browser_context_create_ms`: the median time to give a new session its isolated context (a
  Playwright `BrowserContext` with the worker's settings) while Chromium runs. Goal <= 300.
- `tool_list_filtering_overhead_us`: what withholding unavailable tools adds to building a
  lane's tool list (`LaneKit.tools`: the session's `Integrations.withheld()` and
  `registry.llm_tools(withheld=…)`), median of warm calls minus the same list built with
  nothing withheld. Goal <= 50.
- `tool_list_filtering_cold_us`: the same after a config swap (the withheld set recomputed).
"""

from __future__ import annotations

import asyncio
import itertools
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Final

from aiohttp import web

from bench.agent_step import choir_root
from bench.common import parse_args, percentile, report
from choir.config.browser import BrowserConfig
from choir.daemon.agents.host_tools import HostTools
from choir.daemon.sessions.state import LiveSession, SessionContext
from choir.daemon.workers.browser.chromium import BrowserWorker
from choir.daemon.workers.browser.tool import BrowseTool
from choir.protocol import ExecuteHostToolRequest, ResourceBindings

GOALS: Final = {
    "browse_open_extract_p50_ms": "goal <= 300",
    "browser_context_create_ms": "goal <= 300",
    "tool_list_filtering_overhead_us": "goal <= 50",
}
PAGE: Final = (
    "<!doctype html><html><head><title>Bench page</title></head><body><h1>Bench</h1>"
    + "".join(f"<p>Paragraph {n} with <a href='/p{n}'>a link</a>.</p>" for n in range(200))
    + "</body></html>"
)
_calls = itertools.count()


def _session(session_id: str) -> SessionContext:
    bindings = ResourceBindings(workspace="ws", llm="demo", dm="console")
    live = LiveSession(session_id, "agent-1", "hash", bindings, False, 0, "genesis", None)
    return live.context("token")


async def _page(_: web.Request) -> web.Response:
    return web.Response(text=PAGE, content_type="text/html")


async def browser_figures(opens: int, contexts: int) -> dict[str, float]:
    app = web.Application()
    app.router.add_get("/", _page)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    config = BrowserConfig(enabled=True, allow_private_networks=True)
    try:
        async with BrowserWorker(config) as worker:
            if not await worker.wait_ready(60):
                raise RuntimeError(f"Chromium did not start: {worker.failure}")
            host_tools = HostTools()
            with tempfile.TemporaryDirectory() as tmp:
                BrowseTool(worker, lambda call: Path(tmp)).register(host_tools)
                ctx = _session("bench")
                opened = await _timed_opens(host_tools, ctx, f"http://127.0.0.1:{port}/", opens)
            created = await _context_creations(worker, contexts)
    finally:
        await runner.cleanup()
    return {
        "browse_open_extract_p50_ms": percentile(opened, 50),
        "browse_open_extract_p95_ms": percentile(opened, 95),
        "browser_context_create_ms": statistics.median(created),
    }


async def _timed_opens(
    host_tools: HostTools, ctx: SessionContext, url: str, count: int
) -> list[float]:
    samples = []
    for n in range(count + 3):  # the first calls make the context and its tab: unmeasured
        request = ExecuteHostToolRequest(
            tool_name="choir.web.browse", call_id=f"b{next(_calls)}", input={"url": url}
        )
        began = time.perf_counter()
        answer = (await host_tools.execute(ctx, request)).tool_result()
        elapsed = (time.perf_counter() - began) * 1000
        if answer.status != "success" or "Paragraph 199" not in answer.data["text"]:
            raise RuntimeError(f"browse failed: {answer.summary}")
        if n >= 3:
            samples.append(elapsed)
    return samples


async def _context_creations(worker: BrowserWorker, count: int) -> list[float]:
    samples = []
    for n in range(count):
        session_id = f"ctx-{n}"
        began = time.perf_counter()
        await worker.session(session_id, "agent-1")
        samples.append((time.perf_counter() - began) * 1000)
        worker.session_ended(session_id)
    return samples


def filtering_figures(rounds: int) -> dict[str, float]:
    """The per-call cost of withholding, on the seed tools and a session whose integrations
    are unconfigured and whose browser worker is off (six tools withheld)."""
    from choir.agent.integrations.session import Integrations
    from choir.agent.kernel.registry import ToolRegistry
    from choir.agent.kernel.workspace import Workspace
    from choir.agent.replication.live_config import DynamicConfig, DynamicState
    from choir.agent.startup import runtime_tools
    from choir.agent.tools.builtin import BUILTIN_TOOLS

    with tempfile.TemporaryDirectory() as tmp:
        registry = ToolRegistry.load(
            choir_root(Path(tmp)), BUILTIN_TOOLS, runtime_tools=runtime_tools()
        )
        blob = {"host_unavailable": {"choir.web.browse": "the browser worker is not running"}}
        state = DynamicState(DynamicConfig.of(1, blob))
        (Path(tmp) / "ws").mkdir()
        integrations = Integrations(state, registry, Workspace(Path(tmp) / "ws"))

        def filtered() -> object:
            return registry.llm_tools("edge", None, frozenset(integrations.withheld()))

        def plain() -> object:
            return registry.llm_tools("edge", None)

        if len(integrations.withheld()) < 6:
            raise RuntimeError(f"expected tools withheld, got {dict(integrations.withheld())}")
        warm = _per_call_us(filtered, rounds) - _per_call_us(plain, rounds)
        versions = itertools.count(2)

        def cold() -> object:
            state.swap_config(DynamicConfig.of(next(versions), blob))
            return filtered()

        swap_only = _per_call_us(
            lambda: state.swap_config(DynamicConfig.of(next(versions), blob)), rounds // 10
        )
        cold_us = _per_call_us(cold, rounds // 10) - swap_only - _per_call_us(plain, rounds)
    return {"tool_list_filtering_overhead_us": warm, "tool_list_filtering_cold_us": cold_us}


def _per_call_us(job: Callable[[], object], rounds: int) -> float:
    """The median over batches of `job`'s time per call, in microseconds."""
    batches = []
    per_batch = max(rounds // 20, 1)
    for _ in range(20):
        began = time.perf_counter()
        for _ in range(per_batch):
            job()
        batches.append((time.perf_counter() - began) / per_batch * 1e6)
    return statistics.median(batches)


async def main_async(quick: bool) -> dict[str, float]:
    figures = await browser_figures(opens=20 if quick else 100, contexts=5 if quick else 20)
    figures.update(filtering_figures(2_000 if quick else 20_000))
    return figures


def main() -> None:
    args = parse_args(__doc__ or "")
    report("bench.tools", asyncio.run(main_async(args.quick)), GOALS, args.json)


if __name__ == "__main__":
    main()
