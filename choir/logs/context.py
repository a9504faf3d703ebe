"""Session, lane and extra fields bound to the current task, stamped on every log line.

A `ContextVar` rather than a logger attribute: each asyncio task runs in a copy of its creator's
context, so a lane task that binds its session and lane carries them through every await without
threading them through each call, and two sessions' tasks never see each other's binding.
`asyncio.to_thread` copies the context too, so blocking work logs with the same correlation.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any


@dataclass(frozen=True)
class LogContext:
    """What the current task's log lines are about (§22.1: session and lane for correlation)."""

    session_id: str | None = None
    lane: str | None = None
    """`edge`, `core`, or a core job's lane id; null outside a lane."""
    fields: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    """Extra fields written on every line, e.g. the `agent_id` choird is handling a request for."""

    def merged(
        self, session_id: str | None, lane: str | None, fields: Mapping[str, Any]
    ) -> LogContext:
        """This context with the given values on top; `None` keeps what is already bound."""
        return LogContext(
            session_id=session_id if session_id is not None else self.session_id,
            lane=lane if lane is not None else self.lane,
            fields=MappingProxyType({**self.fields, **fields}),
        )


EMPTY_CONTEXT = LogContext()
_current: ContextVar[LogContext] = ContextVar("choir_log_context", default=EMPTY_CONTEXT)


def current_context() -> LogContext:
    """The binding in effect for the running task or thread."""
    return _current.get()


def set_context(*, session_id: str | None = None, lane: str | None = None, **fields: Any) -> None:
    """Bind for the rest of the current task: for a task that serves one session for its life."""
    _current.set(_current.get().merged(session_id, lane, fields))


@contextmanager
def bind_context(
    *, session_id: str | None = None, lane: str | None = None, **fields: Any
) -> Iterator[LogContext]:
    """Bind within a `with` block and restore the previous binding after it."""
    token = _current.set(_current.get().merged(session_id, lane, fields))
    try:
        yield _current.get()
    finally:
        _current.reset(token)
