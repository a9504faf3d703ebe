"""EXECUTE_HOST_TOOL (§8.7, §12.5): tools that run in choird, dispatched by name.

Services (memory, browser) register a handler per canonical tool name. A call is keyed by
(session, call_id): a resend while the call runs waits for the same execution, and a resend
after it finished gets the same result (§13.3) — a host tool never runs twice for one call.
Failures become structured error results, never exceptions on the wire.

With a pool, the key and the result are also kept in Postgres (`choir.store.host_tool_calls`),
so the rule outlives choird: a call is claimed there before its handler runs, a resend after a
restart gets the stored result, and a call a dead choird was running is answered
`outcome_unknown` — never run a second time (issue 12 point 11).
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Final

from choir.core.integrations import HOST_WORKER_TOOLS
from choir.daemon.agents.job_gate import JobGate
from choir.daemon.sessions.state import Clock, SessionContext, utc_now
from choir.errors import ChoirError
from choir.logs import get_logger
from choir.protocol import ExecuteHostToolRequest, ExecuteHostToolResponse, ToolResult
from choir.store.host_tool_calls import StoredCall, claim, finish
from choir.store.postgres.pool import Pool

log = get_logger("choird.host_tools")

REMEMBERED_CALLS: Final = 256
"""Finished calls remembered per session for de-duplicating resends."""
UNKNOWN_TOOL: Final = "unknown_host_tool"
OUTCOME_UNKNOWN: Final = "outcome_unknown"


@dataclass(frozen=True)
class HostToolCall:
    """One invocation, as a handler sees it."""

    context: SessionContext
    """The calling session: its agent (whose schema memory queries use) and bindings."""
    call_id: str
    input: dict[str, Any] = field(default_factory=dict)
    """Arguments, validated by the agent against the tool's schema."""
    job_id: str | None = None
    """The core job the call is for, from its checked job token; None for edge's calls."""


HostToolHandler = Callable[[HostToolCall], Awaitable[ToolResult]]
Availability = Callable[[], str | None]
"""Why a host tool cannot serve calls now (its worker is off or failed), or None."""
UNAVAILABLE: Final = "tool_unavailable"


class HostTools:
    """The dispatch table: tool name -> handler, plus per-session call de-duplication."""

    def __init__(self, pool: Pool | None = None, *, clock: Clock = utc_now) -> None:
        self._pool = pool
        """Where calls and results are kept across restarts; None keeps them in memory only."""
        self._clock = clock
        self.jobs = JobGate(pool, clock=clock)
        """Core job tokens (§7.5(3)): fed the replicated job ends by `AgentServices`."""
        self._handlers: dict[str, HostToolHandler] = {}
        self._availability: dict[str, Availability] = {}
        self._calls: dict[str, OrderedDict[str, asyncio.Task[ToolResult]]] = {}
        self._running: set[asyncio.Task[ToolResult]] = set()
        """Strong references: the event loop keeps only weak ones to tasks."""

    def register(
        self, tool_name: str, handler: HostToolHandler, *, available: Availability | None = None
    ) -> Callable[[], None]:
        """Serve `tool_name` with `handler` (while `available` gives no reason not to); returns
        the unregister callable."""
        if tool_name in self._handlers:
            raise ValueError(f"host tool {tool_name!r} already has a handler")
        self._handlers[tool_name] = handler
        if available is not None:
            self._availability[tool_name] = available

        def unregister() -> None:
            self._handlers.pop(tool_name, None)
            self._availability.pop(tool_name, None)

        return unregister

    def names(self) -> list[str]:
        return sorted(self._handlers)

    def unavailable(self) -> dict[str, str]:
        """The host tools that cannot serve calls now, with why: what agents withhold from
        their models (FETCH_DYNAMIC_CONFIG's `host_unavailable`) and `agent status` shows."""
        found = {name: check() for name, check in self._availability.items()}
        for name in HOST_WORKER_TOOLS - self._handlers.keys():  # no worker wired up at all
            found[name] = "this choird does not serve it"
        return {name: reason for name, reason in sorted(found.items()) if reason is not None}

    async def execute(
        self, ctx: SessionContext, request: ExecuteHostToolRequest
    ) -> ExecuteHostToolResponse:
        if request.job is not None:  # checked before the call is claimed: a refusal runs nothing
            refused = await self.jobs.refusal(ctx, request.job)
            if refused is not None:
                log.info(
                    "job token refused",
                    fields={"session": ctx.session_id, "job": request.job.job_id},
                )
                return ExecuteHostToolResponse.of(request.call_id, refused)
        calls = self._calls.setdefault(ctx.session_id, OrderedDict())
        task = calls.get(request.call_id)
        if task is None:
            job_id = request.job.job_id if request.job is not None else None
            call = HostToolCall(ctx, request.call_id, request.input, job_id)
            task = asyncio.create_task(self._execute_once(request.tool_name, call))
            calls[request.call_id] = task
            self._running.add(task)
            task.add_done_callback(self._running.discard)
            while len(calls) > REMEMBERED_CALLS and next(iter(calls.values())).done():
                calls.popitem(last=False)
        try:
            result = await asyncio.shield(task)
        except Exception:
            if task.done() and calls.get(request.call_id) is task:
                del calls[request.call_id]  # not claimed (database away): a resend tries again
            raise
        return ExecuteHostToolResponse.of(request.call_id, result)

    async def aclose(self) -> None:
        """Cancel calls still running (choird is shutting down) and wait for them."""
        running = list(self._running)
        for task in running:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)
        self._calls.clear()

    def forget(self, session_id: str) -> None:
        """Drop a session's remembered calls (it ended); running ones finish unobserved."""
        self._calls.pop(session_id, None)
        self.jobs.forget(session_id)

    async def _execute_once(self, tool_name: str, call: HostToolCall) -> ToolResult:
        """Claim the call, run it, store its result; or answer as it was stored before."""
        stored = await self._claim(tool_name, call)
        if stored is not None:
            return _answer(call.call_id, stored)
        result = await self._run(tool_name, call)
        await self._store(call, result)
        return result

    async def _claim(self, tool_name: str, call: HostToolCall) -> StoredCall | None:
        """None when this call is new (and now claimed), else how it was stored before."""
        if self._pool is None:
            return None
        async with self._pool.acquire() as conn:
            session_id = call.context.session_id
            return await claim(conn, session_id, call.call_id, tool_name, self._clock())

    async def _store(self, call: HostToolCall, result: ToolResult) -> None:
        if self._pool is None:
            return
        try:
            async with self._pool.acquire() as conn:
                session_id, payload = call.context.session_id, result.model_dump(mode="json")
                await finish(conn, session_id, call.call_id, payload, self._clock())
        except Exception:  # the caller still gets the result; a resend after a restart of
            # choird is told the outcome is unknown, and nothing runs twice
            if self._pool.is_closing():  # choird is stopping: expected, not an error
                log.info(
                    "host tool result not stored: choird is stopping", fields={"call": call.call_id}
                )
                return
            log.exception("could not store a host tool result", fields={"call": call.call_id})

    async def _run(self, tool_name: str, call: HostToolCall) -> ToolResult:
        handler = self._handlers.get(tool_name)
        if handler is None:
            return ToolResult.fail(
                UNKNOWN_TOOL,
                f"{tool_name} is not a host tool choird serves (known: "
                f"{', '.join(self.names()) or 'none'})",
            )
        reason = self._availability[tool_name]() if tool_name in self._availability else None
        if reason is not None:  # it became unavailable after the agent's model was offered it
            return ToolResult.fail(UNAVAILABLE, f"{tool_name} is not available: {reason}")
        try:
            return await handler(call)
        except ChoirError as err:
            return ToolResult.fail("host_tool_failed", f"{tool_name}: {err.message}")
        except Exception:
            log.exception(
                "host tool failed",
                fields={"tool": tool_name, "call_id": call.call_id, "agent": call.context.agent_id},
            )
            return ToolResult.fail("internal_error", f"{tool_name} failed inside choird")


def _answer(call_id: str, stored: StoredCall) -> ToolResult:
    """The answer to a resend of a call claimed before this choird knew of it."""
    if stored.state == "finished" and stored.result is not None:
        return ToolResult.model_validate(stored.result)
    return ToolResult.fail(
        OUTCOME_UNKNOWN,
        f"{stored.tool_name} call {call_id} was running when choird stopped; it is not "
        "run again, and whether it took effect is unknown: check before retrying it under a "
        "new call",
    )
