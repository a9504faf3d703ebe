"""A stored session's chunks: `session_events` rows on real Postgres → events → chunks, in pages,
with its summary, unreadable rows left out, and choird's secrets redacted."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest

from choir.core.memory.chunks import ChunkKind
from choir.daemon.agents.ingest import record_of
from choir.daemon.memory.closing.chunks import (
    StoredSession,
    event_chunks,
    read_session,
    summary_chunks_of,
)
from choir.logs import register_secrets
from choir.protocol.log.chain import GENESIS_HASH
from choir.protocol.log.committed import CommittedEvent
from choir.protocol.log.events import AgentReplied, Event, SessionSummary, UserMsg
from choir.store.events import EventRecord, insert_events
from choir.store.postgres.ddl import apply_control_schema
from choir.store.postgres.pool import Connection, connect
from choir.store.postgres.target import ConnectParams
from tests.memory.test_chunking import long_session

SESSION = "sess-memory-1"
SECRET = "choird-held-secret-4e1f9a"


@pytest.fixture
async def conn(pg_params: ConnectParams) -> AsyncIterator[Connection]:
    connection = await connect(pg_params)
    try:
        await apply_control_schema(connection)
        await connection.execute(
            "INSERT INTO choir_control.agents (agent_id, name) VALUES ('main', 'Main')"
        )
        await connection.execute(
            "INSERT INTO choir_control.sessions (session_id, agent_id, status) "
            "VALUES ($1, 'main', 'ended')",
            SESSION,
        )
        yield connection
    finally:
        await connection.close()


def records(events: list[tuple[str, Event]]) -> list[EventRecord]:
    """The rows choird stores for `events` (lane, event), chained from rev 1."""
    rows, previous, now = [], GENESIS_HASH, datetime.now(UTC)
    for rev, (lane, event) in enumerate(events, start=1):
        committed = CommittedEvent.seal(rev=rev, lane=lane, ts=now, hash_prev=previous, event=event)
        rows.append(record_of(committed))
        previous = committed.hash
    return rows


async def test_events_and_summary_are_read_back_and_chunked(conn: Connection):
    register_secrets([SECRET])  # as choird does for every value of secrets.json
    rows = records(
        [
            ("edge", UserMsg(text=f"the staging password is {SECRET}, remember it")),
            ("edge", AgentReplied(text="Noted.")),
            ("edge", SessionSummary(summary="The user shared credentials.", topics=["auth"])),
        ]
    )
    future = dataclasses.replace(rows[1], payload={"kind": "from_a_newer_version"})
    await insert_events(conn, SESSION, [rows[0], future, rows[2]])

    session = await read_session(conn, SESSION)

    assert [e.rev for e in session.events] == [1, 3]
    assert session.unreadable == 1
    assert session.summary is not None
    [chunk] = event_chunks(session, max_chars=2_000)
    assert chunk.text == "user: the staging password is [REDACTED], remember it"
    assert (chunk.first_rev, chunk.last_rev, chunk.kind) == (1, 1, ChunkKind.MESSAGES)
    [summary] = summary_chunks_of(session, max_chars=2_000)
    assert summary.text == "Session summary:\nThe user shared credentials.\nTopics:\nauth"


async def test_a_session_without_summary_has_no_long_term_chunks(conn: Connection):
    await insert_events(conn, SESSION, records([("edge", UserMsg(text="hello"))]))
    session = await read_session(conn, SESSION)
    assert session.summary is None
    assert summary_chunks_of(session, max_chars=2_000) == []
    assert await read_session(conn, "no-such-session") == StoredSession("no-such-session", [], None)


async def test_a_long_session_is_read_in_pages_and_chunks_the_same(conn: Connection):
    logged = long_session(5_000)
    await insert_events(conn, SESSION, records([(e.lane, e.event) for e in logged]))
    started = time.process_time()
    session = await read_session(conn, SESSION, page=1_500)
    chunks = event_chunks(session, max_chars=2_000)
    spent = time.process_time() - started
    assert [e.rev for e in session.events] == list(range(1, 5_001))
    assert chunks == event_chunks(await read_session(conn, SESSION), max_chars=2_000)
    assert chunks[-1].last_rev == 5_000
    assert spent < 5.0  # CPU of reading, parsing and chunking 5k events (~0.3 s measured)
