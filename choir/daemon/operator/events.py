"""`session.events`: a session's committed events, read once or followed as they arrive (§13.1).

Events reach the store only through heartbeats, which advance the session's `ack_rev` in
choird's memory. A follower therefore watches that number — a dictionary lookup, no query —
every `poll_s` and reads the store only when it moved; nothing runs while nobody follows. The
stream ends once the session has ended and its last events were sent.

An answer carries at most `PAGE_MAX_BYTES` of events (at least one), so it always fits in a frame
whatever the events weigh; `next_rev` says where to read on. An event committed as a preview
names its artifact, which `session.artifact` reads back in chunks (`choir.protocol.wire.artifacts`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Final

from choir.daemon.agents.handover import record_size
from choir.daemon.operator.context import OperatorContext
from choir.daemon.operator.views import event_view
from choir.errors import ChoirError, NotFoundError
from choir.protocol.operator.answers import ArtifactChunk
from choir.protocol.operator.answers import SessionEvents as SessionEventsAnswer
from choir.protocol.operator.requests import MAX_EVENTS, SessionArtifact, SessionEvents
from choir.protocol.operator.views import EventView
from choir.protocol.wire.artifacts import ARTIFACT_CHUNK_BYTES, PAGE_MAX_BYTES, encode_chunk
from choir.store.artifacts import read_chunk
from choir.store.events import EventRecord, head, read_events
from choir.store.sessions import SessionStatus, get_session

FOLLOW_POLL_S: Final = 0.25
"""How often a follower looks at the session's acknowledged revision."""


async def read_window(ctx: OperatorContext, request: SessionEvents) -> list[EventRecord]:
    """The events asked for: `limit` from `from_rev`, or the last `limit` when it is None —
    at most PAGE_MAX_BYTES of them, the first ones (from `from_rev`) or the newest."""
    async with ctx.pool.acquire() as conn:
        if await get_session(conn, request.session_id) is None:
            raise NotFoundError(f"no session {request.session_id!r} (see choirctl session list)")
        first = request.from_rev
        if first is None:
            newest = await head(conn, request.session_id)
            first = max((newest.rev if newest else 0) - request.limit + 1, 1)
        records = await read_events(conn, request.session_id, first, request.limit)
    return bounded(records, newest=request.from_rev is None)


def bounded(records: list[EventRecord], *, newest: bool) -> list[EventRecord]:
    """The leading (or, with `newest`, trailing) `records` within PAGE_MAX_BYTES, at least one."""
    ordered = reversed(records) if newest else iter(records)
    kept: list[EventRecord] = []
    used = 0
    for record in ordered:
        used += record_size(record)
        if kept and used > PAGE_MAX_BYTES:
            break
        kept.append(record)
    return kept[::-1] if newest else kept


async def session_artifact(ctx: OperatorContext, request: SessionArtifact) -> ArtifactChunk:
    """A chunk of the whole event behind a preview: `{…, size, offset, data, next_offset}`,
    `data` base64, `next_offset` None once the end is reached."""
    async with ctx.pool.acquire() as conn:
        records = await read_events(conn, request.session_id, request.rev, 1)
        record = records[0] if records and records[0].rev == request.rev else None
        if record is None or record.artifact is None:
            what = "no event" if record is None else "an event stored whole (no artifact)"
            raise NotFoundError(
                f"session {request.session_id} has {what} at rev {request.rev} "
                "(see choirctl session events)"
            )
        sha256 = str(record.artifact["sha256"])
        found = await read_chunk(
            conn, request.session_id, sha256, request.offset, ARTIFACT_CHUNK_BYTES
        )
    if found is None:
        raise NotFoundError(f"the artifact of rev {request.rev} is not stored")
    size, data = found
    end = request.offset + len(data)
    return ArtifactChunk(
        session_id=request.session_id,
        rev=request.rev,
        sha256=sha256,
        size=size,
        offset=request.offset,
        data=encode_chunk(data),
        next_offset=end if data and end < size else None,
    )


async def session_events(ctx: OperatorContext, request: SessionEvents) -> SessionEventsAnswer:
    """`{session_id, events, next_rev}`; read again from `next_rev` for what came after."""
    events = await read_window(ctx, request)
    next_rev = events[-1].rev + 1 if events else (request.from_rev or 1)
    return SessionEventsAnswer(
        session_id=request.session_id,
        events=[event_view(record) for record in events],
        next_rev=next_rev,
    )


async def follow_events(
    ctx: OperatorContext, request: SessionEvents, *, poll_s: float = FOLLOW_POLL_S
) -> AsyncIterator[EventView]:
    """Each event as an item: the snapshot, then new ones until the session has ended.

    The snapshot is read before this returns, so an unknown session is refused as a call.
    """
    window = await read_window(ctx, request)
    start = window[-1].rev + 1 if window else (request.from_rev or 1)
    return _follow(ctx, request.session_id, window, start, poll_s)


async def _follow(
    ctx: OperatorContext,
    session_id: str,
    window: list[EventRecord],
    next_rev: int,
    poll_s: float,
) -> AsyncIterator[EventView]:
    for record in window:
        yield event_view(record)
    while True:
        ended = not await _active(ctx, session_id)
        async for record in _read_from(ctx, session_id, next_rev):
            yield event_view(record)
            next_rev = record.rev + 1
        if ended:
            return
        await _wait_for_rev(ctx, session_id, next_rev, poll_s)


async def _read_from(ctx: OperatorContext, session_id: str, rev: int) -> AsyncIterator[EventRecord]:
    """Every stored event from `rev` on, a page at a time."""
    while True:
        async with ctx.pool.acquire() as conn:
            page = await read_events(conn, session_id, rev, MAX_EVENTS)
        for record in page:
            yield record
        if len(page) < MAX_EVENTS:
            return
        rev = page[-1].rev + 1


async def _active(ctx: OperatorContext, session_id: str) -> bool:
    async with ctx.pool.acquire() as conn:
        row = await get_session(conn, session_id)
    return row is not None and row.status == SessionStatus.ACTIVE


async def _wait_for_rev(ctx: OperatorContext, session_id: str, rev: int, poll_s: float) -> None:
    """Return once the session acknowledged revision `rev` or is no longer active."""
    while True:
        try:
            live = await ctx.sessions.live(session_id)
        except ChoirError:  # not active any more: the caller reads what is left and stops
            return
        if live.ack_rev >= rev:
            return
        await asyncio.sleep(poll_s)
