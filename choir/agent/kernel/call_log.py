"""The log lines of a tool call's lock wait, lock release and run (§22.1 "tool call traces").

Every call takes locks and runs, so one INFO line per call would make the agent's log a trace of
its hot path: these lines are DEBUG, and only what an operator must see without asking is INFO —
a wait of `NOTICE_WAIT_MS` or more (someone held what the call needed), the release of those
locks (so the wait and its end read as a pair), a hold of `NOTICE_HOLD_MS` or more, a call that
ran `NOTICE_RUN_MS` or more. The figures over many calls are `agent status`'s p50/p95 and the
metrics endpoint's histograms, which choird derives from the committed events (ARCHITECTURE).

A DEBUG line is built only when DEBUG is on: a disabled `log.debug` still costs an adapter call.
"""

from __future__ import annotations

import logging
from typing import Any, Final

from choir.core.locks.lockset import Lockset
from choir.logs import ChoirLogger, bind_context, get_logger

NOTICE_WAIT_MS: Final = 1_000
"""A lock wait this long is logged at INFO."""
NOTICE_HOLD_MS: Final = 10_000
"""A lockset held this long is logged at INFO when released."""
NOTICE_RUN_MS: Final = 10_000
"""A tool run this long is logged at INFO."""

log = get_logger("choir.agent.kernel.locks")
tool_log = get_logger("choir.agent.kernel.tools")


def _level(log: ChoirLogger, notable: bool) -> int | None:
    """INFO for what an operator must see; else DEBUG if enabled; else None (no line)."""
    if notable:
        return logging.INFO
    return logging.DEBUG if log.isEnabledFor(logging.DEBUG) else None


def _emit(log: ChoirLogger, level: int, lane: str, message: str, fields: dict[str, Any]) -> None:
    """One line in the lane's name (the line's standard `lane` key, §22.1 correlation)."""
    with bind_context(lane=lane):
        log.log(level, message, fields=fields)


def _locks(lockset: Lockset) -> list[str]:
    return [f"{resource}:{mode}" for resource, mode in lockset]


def lock_waited(lane: str, tool: str, lockset: Lockset, wait_ms: int) -> None:
    """The call waited `wait_ms` for its locks (0 when it had them at once: DEBUG only)."""
    level = _level(log, wait_ms >= NOTICE_WAIT_MS)
    if level is not None:
        fields = {"tool": tool, "locks": _locks(lockset), "wait_ms": wait_ms}
        _emit(log, level, lane, "lock wait", fields)


def lock_released(lane: str, tool: str, lockset: Lockset, *, wait_ms: int, held_ms: int) -> None:
    """The call gave its locks back after `held_ms`; INFO when its wait or its hold was long."""
    level = _level(log, held_ms >= NOTICE_HOLD_MS or wait_ms >= NOTICE_WAIT_MS)
    if level is not None:
        fields = {"tool": tool, "locks": _locks(lockset), "held_ms": held_ms}
        _emit(log, level, lane, "lock released", fields)


def tool_ran(lane: str, tool: str, status: str, duration_ms: int) -> None:
    """The call's tool ran `duration_ms` (after its locks were held) and ended with `status`."""
    level = _level(tool_log, duration_ms >= NOTICE_RUN_MS)
    if level is not None:
        fields = {"tool": tool, "status": status, "duration_ms": duration_ms}
        _emit(tool_log, level, lane, "tool call finished", fields)


__all__ = [
    "NOTICE_HOLD_MS",
    "NOTICE_RUN_MS",
    "NOTICE_WAIT_MS",
    "lock_released",
    "lock_waited",
    "tool_ran",
]
