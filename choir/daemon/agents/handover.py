"""What INIT_HELLO hands a resuming agent (§13.2): the newest usable snapshot and the tail.

The tail is every acknowledged event after the snapshot, so recovery never reads an event at or
before it (they stay stored: history is never deleted). A snapshot is used only if it parses,
its content matches its digest, it fits in an answer, and its chain hash is the one the tail
continues from (or, with no tail, the session's head hash). One that fails is skipped with a
warning — recovery then tries the next older snapshot, and after `MAX_REFUSED` refusals, or when
none is left, hands over every event from rev 1: slower, never wrong.

The tail travels in pages bounded by bytes (`choir.protocol.wire.artifacts`): INIT_HELLO carries the
snapshot and as much of the tail as fits beside it, FETCH_EVENTS the rest, a page at a time. A
session with any number of large events therefore always resumes.
"""

from __future__ import annotations

from typing import Final, NamedTuple

import orjson
from pydantic import ValidationError

from choir.daemon.agents.ingest import committed_of
from choir.daemon.sessions.state import LiveSession
from choir.logs import get_logger
from choir.protocol import CommittedEvent, Snapshot
from choir.protocol.wire.artifacts import PAGE_MAX_BYTES
from choir.store.events import EventRecord, read_events
from choir.store.postgres.pool import Connection, Pool
from choir.store.snapshots import StoredSnapshot, latest_snapshot

log = get_logger("choird.replication")

ROWS: Final = 1000
"""Events read per query when assembling a page."""
MAX_REFUSED: Final = 3
"""Unusable snapshots tried before falling back to every event."""
ANSWER_MAX_BYTES: Final = 896 * 1024
"""What an INIT_HELLO answer may hold of snapshot and tail: a frame, less room for the rest."""
RECORD_OVERHEAD: Final = 256
"""Bytes a committed event adds around its payload (rev, lane, ts, hashes, artifact)."""


class Page(NamedTuple):
    """Acknowledged events after some revision, at most a byte budget of them."""

    events: list[CommittedEvent]
    complete: bool
    """True when `events` reaches the session's acknowledged revision."""


class Handover(NamedTuple):
    snapshot: Snapshot | None
    first: Page
    """The tail's first page (INIT_HELLO carries it)."""


async def handover(pool: Pool, live: LiveSession) -> Handover:
    """The newest usable snapshot of `live` and the first page of the events after it."""
    if live.ack_rev == 0:
        return Handover(None, Page([], complete=True))
    async with pool.acquire() as conn:
        max_rev = live.ack_rev
        for _ in range(MAX_REFUSED):
            stored = await latest_snapshot(conn, live.session_id, max_rev)
            if stored is None:
                break
            snapshot, problem, size = _parsed(stored)
            budget = min(PAGE_MAX_BYTES, ANSWER_MAX_BYTES - size)
            first = await read_page(conn, live, after=stored.rev, budget=budget, at_least_one=False)
            if snapshot is not None and problem is None:
                follows = await _next_hash_prev(conn, live, first, stored.rev)
                problem = _link_problem(snapshot, follows, live.head_hash)
            if problem is None and snapshot is not None:
                return Handover(snapshot, first)
            log.warning(
                "snapshot not used for the resume",
                fields={"session": live.session_id, "rev": stored.rev, "why": problem},
            )
            max_rev = stored.rev - 1
        first = await read_page(conn, live, after=0, budget=PAGE_MAX_BYTES, at_least_one=False)
        return Handover(None, first)


async def read_page(
    conn: Connection, live: LiveSession, *, after: int, budget: int, at_least_one: bool = True
) -> Page:
    """The acknowledged events of `live` after rev `after`, in order, at most `budget` bytes of
    them — but at least one with `at_least_one` (a FETCH_EVENTS page, whose frame holds any one
    event: none is committed larger than `EVENT_INLINE_MAX`, and none larger than a frame was
    ever accepted). INIT_HELLO's page may be empty: it shares its frame with the snapshot."""
    events: list[CommittedEvent] = []
    used, next_rev = 0, after + 1
    while next_rev <= live.ack_rev:
        rows = await read_events(conn, live.session_id, next_rev, ROWS)
        for record in rows:
            if record.rev > live.ack_rev:
                return Page(events, complete=True)
            used += record_size(record)
            if used > budget and (events or not at_least_one):
                return Page(events, complete=False)
            events.append(committed_of(record))
        if len(rows) < ROWS:
            break
        next_rev = rows[-1].rev + 1
    return Page(events, complete=True)


def record_size(record: EventRecord) -> int:
    """About how many bytes `record` takes on the wire."""
    return len(orjson.dumps(record.payload)) + RECORD_OVERHEAD


async def _next_hash_prev(
    conn: Connection, live: LiveSession, first: Page, after: int
) -> str | None:
    """The hash_prev of the first event after `after` (None when there is none)."""
    if first.events:
        return first.events[0].hash_prev
    if after >= live.ack_rev:
        return None
    rows = await read_events(conn, live.session_id, after + 1, 1)
    return rows[0].hash_prev if rows else None


def _parsed(stored: StoredSnapshot) -> tuple[Snapshot | None, str | None, int]:
    """The stored snapshot, or why it cannot be used; and its size on the wire."""
    size = len(orjson.dumps(stored.snapshot))
    if size > ANSWER_MAX_BYTES // 2:
        return None, f"it is too large to hand over ({size} bytes)", 0
    try:
        snapshot = Snapshot.model_validate(stored.snapshot)
    except ValidationError as exc:
        return None, f"it does not parse ({exc.error_count()} problems)", size
    if snapshot.rev != stored.rev:
        return None, f"it says rev {snapshot.rev} but is stored at rev {stored.rev}", size
    return snapshot, snapshot.content_problem(), size


def _link_problem(snapshot: Snapshot, follows: str | None, head_hash: str) -> str | None:
    """Why the events after the snapshot do not continue its chain hash; None if they do."""
    expected = follows if follows is not None else head_hash
    if snapshot.hash != expected:
        where = "the next event's hash_prev" if follows is not None else "the session's head hash"
        return f"its hash does not match {where}"
    return None


__all__ = ["ANSWER_MAX_BYTES", "MAX_REFUSED", "Handover", "Page", "handover", "read_page"]
