"""`choir.memory.query` store `session` mode `browse`: a session's messages, a page at a time.

    page = await browse_page(pool, "ada", session_id, after_rev=0, limit=20)
    page.next_offset        # pass as `offset` for the next page; None after the last

Pages are cut by revision (`offset` is the last revision already seen), so a page is read
from `session_events` from there on, not from the session's start: a page of a 10k-event session
costs a few hundred events. Events a little before the page are read too, so a tool result on
the page finds the call that asked for it (its arguments make the sentence). Every line passes
choird's secret redaction; tool calls are sentences (`core.memory.browse`), never a masked
result's data. Works on any session of the agent, open or closed — unlike `session_detail`, which
reads a promoted session's stored chunks. A session of a user is that user's: another reader
(`viewer`: a session of another user, or of none, or another agent) finds no such session; the
operator reads every one.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Final

from pydantic import ValidationError

from choir.core.memory.access import EVERYONE, Viewer
from choir.core.memory.browse import MessageLine, message_lines
from choir.daemon.memory.closing.chunks import StoredEvent
from choir.daemon.memory.closing.tool_rows import masked_tools
from choir.errors import NotFoundError
from choir.logs import redact
from choir.protocol.log.events import EVENT_ADAPTER
from choir.store.events import read_events
from choir.store.postgres.pool import Pool
from choir.store.sessions import get_session

READ: Final = 500
"""Events read per query."""
LOOKBACK: Final = 50
"""Events before the page read for the calls of results on it."""
SETTLE: Final = 200
"""Events read past a full page, so a call on it finds its result (not "no result")."""


@dataclass(frozen=True, slots=True)
class BrowsePage:
    session_id: str
    lines: list[MessageLine]
    next_offset: int | None
    """The revision to pass as `offset` for the next page; None when this page is the last."""


async def browse_page(
    pool: Pool,
    agent_id: str,
    session_id: str,
    *,
    after_rev: int,
    limit: int,
    viewer: Viewer = EVERYONE,
) -> BrowsePage:
    """Up to `limit` messages of `agent_id`'s session after revision `after_rev`, in order (a
    page never splits the lines of one revision), if `viewer` sees the session's user's
    messages."""
    events: list[StoredEvent] = []
    async with pool.acquire() as conn:
        session = await get_session(conn, session_id)
        owner = session.resource_bindings.get("dm") if session is not None else None
        if (
            session is None
            or session.agent_id != agent_id
            or not viewer.sees(owner if isinstance(owner, str) else "")
        ):
            raise NotFoundError(
                f"agent {agent_id} has no session {session_id!r}; search its session memory "
                "to find a session id"
            )
        next_rev = max(after_rev + 1 - LOOKBACK, 1)
        extra: int | None = None
        while records := await read_events(conn, session_id, next_rev, READ):
            for record in records:
                try:
                    event = EVENT_ADAPTER.validate_python(record.payload)
                except ValidationError:  # written by another version: left out
                    continue
                events.append(StoredEvent(record.rev, record.lane, event))
            next_rev = records[-1].rev + 1
            if extra is not None and next_rev > extra:
                break
            if extra is None and _lines_after(events, after_rev) > limit:
                extra = next_rev + SETTLE
    lines = [line for line in message_lines(events, masked=masked_tools()) if line.rev > after_rev]
    page = lines[:limit]
    while page and len(page) < len(lines) and lines[len(page)].rev == page[-1].rev:
        page.append(lines[len(page)])
    more = len(page) < len(lines)
    return BrowsePage(
        session_id,
        [_redacted(line) for line in page],
        page[-1].rev if more and page else None,
    )


def _lines_after(events: list[StoredEvent], after_rev: int) -> int:
    return sum(1 for line in message_lines(events) if line.rev > after_rev)


def _redacted(line: MessageLine) -> MessageLine:
    text = redact(line.text)
    return line if text == line.text else replace(line, text=text)
