"""Graceful stop (§17.2, §11.8): the lanes finish their safe point, then the agent winds down.

    shutdown push / SIGTERM -> Drain.begin: no new work is admitted
      -> each lane finishes what it is doing (the LLM call or tool call in flight completes and
         commits) and starts no next step: edge ends its cycle with a notice, a core job stops
         before its next LLM call
      -> within `stop_timeout_ms`, or it is cancelled (a tool in flight gets its committed
         `cancelled` result, locks are released)
      -> the session summary (its own timeout) -> final flush -> TERMINATE_SELF

A second stop request (choird escalating with SIGTERM after its grace, or a second Ctrl-C)
*hurries* the stop: what is still waiting is cancelled at once and the summary is skipped.

A stop for `restart` or `update` resumes the session (§17.4), so the jobs still running are left
open — no `CoreStopped` — and the resumed agent continues them (`CoreJobRecovery`); any
other stop ends them with a report to the user.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Mapping
from typing import TYPE_CHECKING, Any, Final, TypeVar

from choir.logs import get_logger

if TYPE_CHECKING:  # choir-agent builds a Drain before INIT_HELLO, the kernel loads after it
    from choir.agent.kernel.registry import RegisteredTool
    from choir.agent.replication.live_config import DynamicState
    from choir.agent.wiring import Kernel
    from choir.protocol import ToolResult

log = get_logger("choir.agent.stopping")

T = TypeVar("T")

STOP_TIMEOUT_MS: Final = 10_000
"""How long lanes may take to reach their safe point when config gives no `stop_timeout_ms`."""
RESUMING_REASONS: Final = frozenset({"restart", "update"})
"""Shutdown reasons after which the session resumes (its open jobs go on)."""
STOPPING: Final = "agent_stopping"
"""error_code of what a graceful stop did not let run."""


class Drain:
    """The lanes' view of a graceful stop: set once; after it no lane starts new work."""

    def __init__(self) -> None:
        self._event = asyncio.Event()
        self._hurry = asyncio.Event()
        self.reason = ""
        """Why the agent stops (for logs and the user's notices)."""
        self.resumes = False
        """The session resumes after this stop (restart/update): open jobs stay open."""

    @property
    def draining(self) -> bool:
        return self._event.is_set()

    @property
    def hurried(self) -> bool:
        return self._hurry.is_set()

    def begin(self, reason: str, *, resumes: bool = False) -> None:
        """Start the stop; a second call hurries it instead."""
        if self._event.is_set():
            if not self._hurry.is_set():
                log.info("stop hurried: cancelling what is still running")
            self._hurry.set()
            return
        self.reason, self.resumes = reason, resumes
        self._event.set()

    async def wait(self) -> None:
        await self._event.wait()

    async def wait_hurried(self) -> None:
        await self._hurry.wait()

    def gate(
        self, lane: str, tool: RegisteredTool, arguments: Mapping[str, Any]
    ) -> ToolResult | None:
        """The arbiter gate: once stopping, a new tool call is answered, never run."""
        if not self.draining:
            return None
        from choir.protocol import ToolResult  # loaded by then: the wire models load at start

        return ToolResult.fail(
            STOPPING, f"{tool.name} was not run: the agent is stopping ({self.reason})"
        )


def stop_timeout_s(state: DynamicState) -> float:
    """The current config's `stop_timeout_ms`, in seconds."""
    configured = state.current().data.get("stop_timeout_ms")
    return (configured if isinstance(configured, int) else STOP_TIMEOUT_MS) / 1000


def lanes_stopped(kernel: Kernel) -> None:
    """Log what the lanes left behind: nothing, after a stop graceful or cancelled."""
    fields = {
        "locks_held": len(kernel.locks.snapshot()),
        "open_intents": len(kernel.arbiter.unresolved_intents()),
        "head_rev": kernel.log.head_rev,
    }
    log.info("lanes stopped", fields=fields)


async def settle(lanes: asyncio.Task[None], drain: Drain, state: DynamicState) -> bool:
    """Wait for `lanes` to end at their safe points; cancel them after the config's
    `stop_timeout_ms` or when the stop is hurried. True when they ended by themselves."""
    timeout_s = stop_timeout_s(state)
    hurried = asyncio.create_task(drain.wait_hurried(), name="stop-hurried")
    try:
        await asyncio.wait({lanes, hurried}, timeout=timeout_s, return_when="FIRST_COMPLETED")
    finally:
        hurried.cancel()
    if lanes.done():
        return True
    why = "the stop was hurried" if drain.hurried else f"not within {timeout_s:g} s"
    log.warning("lanes did not reach a safe point; cancelling them", fields={"why": why})
    lanes.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await lanes
    return False


async def unless_hurried(work: Awaitable[T], drain: Drain) -> T | None:
    """`work`'s result, or None when the stop is hurried first (the work is cancelled)."""
    task = asyncio.ensure_future(work)
    hurried = asyncio.create_task(drain.wait_hurried(), name="stop-hurried")
    try:
        await asyncio.wait({task, hurried}, return_when="FIRST_COMPLETED")
    finally:
        hurried.cancel()
    if task.done():
        return task.result()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    return None


__all__ = [
    "RESUMING_REASONS",
    "STOPPING",
    "STOP_TIMEOUT_MS",
    "Drain",
    "lanes_stopped",
    "settle",
    "stop_timeout_s",
    "unless_hurried",
]
