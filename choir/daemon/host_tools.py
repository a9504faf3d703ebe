"""EXECUTE_HOST_TOOL (§8.7, §12.5): tools that run in choird, dispatched by name.

Services (memory, browser) register a handler per canonical tool name. A call is keyed by
(session, call_id): a resend while the call runs waits for the same execution, and a resend
after it finished gets the same result (§13.3) — a host tool never runs twice for one call.
Failures become structured error results, never exceptions on the wire.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Final

from choir.daemon.session_state import SessionContext
from choir.errors import ChoirError
from choir.logs import get_logger
from choir.protocol import ExecuteHostToolRequest, ExecuteHostToolResponse, ToolResult

log = get_logger("choird.host_tools")

REMEMBERED_CALLS: Final = 256
"""Finished calls remembered per session for de-duplicating resends."""
UNKNOWN_TOOL: Final = "unknown_host_tool"


@dataclass(frozen=True)
class HostToolCall:
    """One invocation, as a handler sees it."""

    context: SessionContext
    """The calling session: its agent (whose schema memory queries use) and bindings."""
    call_id: str
    input: dict[str, Any] = field(default_factory=dict)
    """Arguments, validated by the agent against the tool's schema."""


HostToolHandler = Callable[[HostToolCall], Awaitable[ToolResult]]


class HostTools:
    """The dispatch table: tool name -> handler, plus per-session call de-duplication."""

    def __init__(self) -> None:
        self._handlers: dict[str, HostToolHandler] = {}
        self._calls: dict[str, OrderedDict[str, asyncio.Task[ToolResult]]] = {}
        self._running: set[asyncio.Task[ToolResult]] = set()
        """Strong references: the event loop keeps only weak ones to tasks."""

    def register(self, tool_name: str, handler: HostToolHandler) -> Callable[[], None]:
        """Serve `tool_name` with `handler`; returns the unregister callable."""
        if tool_name in self._handlers:
            raise ValueError(f"host tool {tool_name!r} already has a handler")
        self._handlers[tool_name] = handler

        def unregister() -> None:
            self._handlers.pop(tool_name, None)

        return unregister

    def names(self) -> list[str]:
        return sorted(self._handlers)

    async def execute(
        self, ctx: SessionContext, request: ExecuteHostToolRequest
    ) -> ExecuteHostToolResponse:
        calls = self._calls.setdefault(ctx.session_id, OrderedDict())
        task = calls.get(request.call_id)
        if task is None:
            call = HostToolCall(ctx, request.call_id, request.input)
            task = asyncio.create_task(self._run(request.tool_name, call))
            calls[request.call_id] = task
            self._running.add(task)
            task.add_done_callback(self._running.discard)
            while len(calls) > REMEMBERED_CALLS and next(iter(calls.values())).done():
                calls.popitem(last=False)
        result = await asyncio.shield(task)
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

    async def _run(self, tool_name: str, call: HostToolCall) -> ToolResult:
        handler = self._handlers.get(tool_name)
        if handler is None:
            return ToolResult.fail(
                UNKNOWN_TOOL,
                f"{tool_name} is not a host tool choird serves (known: "
                f"{', '.join(self.names()) or 'none'})",
            )
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
