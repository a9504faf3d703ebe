from __future__ import annotations

import dataclasses

import asyncpg
import pytest

from choir.store.events import Head, InsertResult, check_conflicts, head, insert_events, read_events
from choir.store.postgres.ddl import apply_control_schema
from choir.store.postgres.pool import Connection

from .records import fake_hash, make_events

SESSION = "sess-1"


@pytest.fixture
async def session_conn(conn: Connection) -> Connection:
    """A connection to a database holding one agent with one active session."""
    await apply_control_schema(conn)
    await conn.execute("INSERT INTO choir_control.agents (agent_id, name) VALUES ('main', 'Main')")
    await conn.execute(
        "INSERT INTO choir_control.sessions (session_id, agent_id, status) "
        "VALUES ($1, 'main', 'active')",
        SESSION,
    )
    return conn


async def test_inserted_events_read_back_unchanged(session_conn: Connection) -> None:
    events = make_events(1, 5)

    result = await insert_events(session_conn, SESSION, events)

    assert result == InsertResult(inserted=5)
    assert await read_events(session_conn, SESSION) == events


async def test_read_events_pages_by_rev(session_conn: Connection) -> None:
    events = make_events(1, 10)
    await insert_events(session_conn, SESSION, events)

    page = await read_events(session_conn, SESSION, from_rev=4, limit=3)

    assert [e.rev for e in page] == [4, 5, 6]
    assert await read_events(session_conn, SESSION, from_rev=11) == []
    assert await read_events(session_conn, "other-session") == []


async def test_head_is_the_newest_rev_and_hash(session_conn: Connection) -> None:
    assert await head(session_conn, SESSION) is None

    await insert_events(session_conn, SESSION, make_events(1, 3))

    assert await head(session_conn, SESSION) == Head(3, fake_hash(3))


async def test_resending_committed_events_is_a_no_op(session_conn: Connection) -> None:
    await insert_events(session_conn, SESSION, make_events(1, 4))

    resent = await insert_events(session_conn, SESSION, make_events(1, 4))
    overlapping = await insert_events(session_conn, SESSION, make_events(3, 4))

    assert resent == InsertResult(inserted=0)
    assert overlapping == InsertResult(inserted=2)
    assert [e.rev for e in await read_events(session_conn, SESSION)] == [1, 2, 3, 4, 5, 6]


async def test_a_resent_rev_with_another_hash_is_reported_as_a_fork(
    session_conn: Connection,
) -> None:
    await insert_events(session_conn, SESSION, make_events(1, 4))
    forked = make_events(1, 2) + make_events(3, 3, salt="fork")

    result = await insert_events(session_conn, SESSION, forked)

    assert result == InsertResult(inserted=1, forked_revs=(3, 4))
    stored = await read_events(session_conn, SESSION)
    assert [e.hash for e in stored[:4]] == [fake_hash(rev) for rev in range(1, 5)]
    assert await check_conflicts(session_conn, SESSION, forked) == (3, 4)


async def test_a_fork_is_detected_even_when_only_the_hash_differs(
    session_conn: Connection,
) -> None:
    [event] = make_events(1, 1)
    await insert_events(session_conn, SESSION, [event])

    tampered = dataclasses.replace(event, hash="f" * 64)

    assert await check_conflicts(session_conn, SESSION, [event]) == ()
    assert await check_conflicts(session_conn, SESSION, [tampered]) == (1,)


async def test_an_empty_batch_touches_nothing(session_conn: Connection) -> None:
    assert await insert_events(session_conn, SESSION, []) == InsertResult(inserted=0)
    assert await check_conflicts(session_conn, SESSION, []) == ()


async def test_a_batch_is_atomic_inside_a_transaction(session_conn: Connection) -> None:
    bad = dataclasses.replace(make_events(3, 1)[0], lane="sideways")

    async def store_both_batches() -> None:
        async with session_conn.transaction():
            await insert_events(session_conn, SESSION, make_events(1, 2))
            await insert_events(session_conn, SESSION, [bad])

    with pytest.raises(asyncpg.CheckViolationError, match="session_events_lane_check"):
        await store_both_batches()

    assert await read_events(session_conn, SESSION) == []
