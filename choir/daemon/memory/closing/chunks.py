"""A stored session as memory chunks: its events (mid-term, §11.4) and its summary (§11.5).

    session = await read_session(conn, session_id)
    mid_term = event_chunks(session, max_chars=config.memory_chunk_chars)
    long_term = summary_chunks_of(session, max_chars=config.memory_chunk_chars)  # [] if none

`session_events` rows are read in pages and parsed back into the protocol's events; a row that
no longer parses (written by another version) is left out and counted, never a failed close.
Every chunk's text passes choird's secret redaction (`choir.logs.redact`) as a backstop to the
agent's own: the registry only grows, so a later close can only redact more, never differ
otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import Final

from pydantic import ValidationError

from choir.core.memory.chunking import session_chunks, summary_chunks
from choir.core.memory.chunks import MemoryChunk
from choir.logs import get_logger, redact
from choir.protocol.log.events import EVENT_ADAPTER, Event, SessionSummary
from choir.store.events import read_events
from choir.store.postgres.pool import Connection
from choir.store.sessions import session_user

_SUMMARY: Final = """
SELECT payload FROM choir_control.session_events
WHERE session_id = $1 AND event_type = 'session_summary'
ORDER BY rev DESC LIMIT 1
"""

PAGE: Final = 2_000
"""Events read per query: a 10k-event session in five round trips, bounded memory per page."""

_log = get_logger("choir.memory")


@dataclass(frozen=True, slots=True)
class StoredEvent:
    """One event of the session log, as the chunker reads it."""

    rev: int
    lane: str
    event: Event
    ts: datetime | None = None
    """When it was committed (None where it is not known)."""


@dataclass(frozen=True, slots=True)
class StoredSession:
    """A session's events, parsed, and its latest summary."""

    session_id: str
    events: list[StoredEvent]
    summary: SessionSummary | None
    """The agent's summary of the session (§11.8); None when it made none (a crash, a timeout)."""
    unreadable: int = 0
    """Rows left out because they no longer parse."""
    user: str = ""
    """The session's user (its bound DM; "": none): what is derived from it is that user's."""


async def read_session(
    conn: Connection, session_id: str, *, page: int = PAGE, after_rev: int = 0
) -> StoredSession:
    """Every stored event of the session (after `after_rev`), in rev order, and its summary
    (the latest among them)."""
    events: list[StoredEvent] = []
    summary: SessionSummary | None = None
    unreadable = 0
    next_rev = after_rev + 1
    while records := await read_events(conn, session_id, next_rev, page):
        for record in records:
            try:
                event = EVENT_ADAPTER.validate_python(record.payload)
            except ValidationError:
                unreadable += 1
                continue
            if isinstance(event, SessionSummary):
                summary = event
            events.append(StoredEvent(record.rev, record.lane, event, record.created_at))
        next_rev = records[-1].rev + 1
    if unreadable:
        _log.warning(
            "session events left out of memory: they no longer parse",
            fields={"session_id": session_id, "events": unreadable},
        )
    user = await session_user(conn, session_id)
    return StoredSession(session_id, events, summary, unreadable, user)


async def read_summary(conn: Connection, session_id: str) -> SessionSummary | None:
    """The session's latest summary alone (a promotion needs no events); None without one."""
    payload = await conn.fetchval(_SUMMARY, session_id)
    if payload is None:
        return None
    try:
        event = EVENT_ADAPTER.validate_python(payload)
    except ValidationError:
        return None
    return event if isinstance(event, SessionSummary) else None


def event_chunks(session: StoredSession, *, max_chars: int) -> list[MemoryChunk]:
    """The session's mid-term chunks (deterministic for the same stored events)."""
    return _redacted(session_chunks(session.events, max_chars=max_chars))


def summary_chunks_of(session: StoredSession, *, max_chars: int) -> list[MemoryChunk]:
    """The long-term chunks of the session's summary; [] when it has none."""
    if session.summary is None:
        return []
    return _redacted(summary_chunks(session.summary, max_chars=max_chars))


def _redacted(chunks: list[MemoryChunk]) -> list[MemoryChunk]:
    return [
        chunk if (text := redact(chunk.text)) == chunk.text else replace(chunk, text=text)
        for chunk in chunks
    ]
