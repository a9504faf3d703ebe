"""The DMs' reply cursors: where a DM's sent replies end, and what a restart owes after it."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

from choir.store.events import insert_events
from choir.store.gateway.reply_cursors import (
    REPLIED,
    ReplyCursor,
    load_cursor,
    replies_after,
    save_cursor,
    start_cursor,
)
from choir.store.postgres.ddl import apply_control_schema
from choir.store.postgres.pool import Connection

from .records import make_events


async def test_a_cursor_never_moves_back_within_a_session_and_follows_a_new_one(
    conn: Connection,
) -> None:
    await apply_control_schema(conn)
    assert await load_cursor(conn, "tg", 42) is None
    await start_cursor(conn, "tg", 42, None, 0)
    assert await load_cursor(conn, "tg", 42) == ReplyCursor(None, 0)

    await save_cursor(conn, "tg", 42, "s1", 7)
    await save_cursor(conn, "tg", 42, "s1", 5)  # a late write of an earlier reply
    await start_cursor(conn, "tg", 42, "s1", 1)  # a cursor there is left as it is
    assert await load_cursor(conn, "tg", 42) == ReplyCursor("s1", 7)
    await save_cursor(conn, "tg", 42, "s2", 3)  # the DM's next session
    assert await load_cursor(conn, "tg", 42) == ReplyCursor("s2", 3)
    assert await load_cursor(conn, "tg", 43) is None  # another chat of the bot
    assert await load_cursor(conn, "other", 42) is None  # another bot's chat


async def test_replies_after_are_the_newest_recent_ones_in_rev_order(conn: Connection) -> None:
    await apply_control_schema(conn)
    await conn.execute("INSERT INTO choir_control.agents (agent_id, name) VALUES ('main', 'M')")
    await conn.execute(
        "INSERT INTO choir_control.sessions (session_id, agent_id, status) "
        "VALUES ('s1', 'main', 'active')"
    )
    now = datetime.now(UTC)
    events = make_events(1, 10)
    events = [  # even revs are replies; rev 2 is two days old
        dataclasses.replace(
            e,
            event_type=REPLIED if e.rev % 2 == 0 else e.event_type,
            created_at=now - timedelta(days=2) if e.rev == 2 else e.created_at,
        )
        for e in events
    ]
    await insert_events(conn, "s1", events)
    day_ago = now - timedelta(days=1)

    assert [e.rev for e in await replies_after(conn, "s1", 0, day_ago, 10)] == [4, 6, 8, 10]
    assert [e.rev for e in await replies_after(conn, "s1", 4, day_ago, 10)] == [6, 8, 10]
    assert [e.rev for e in await replies_after(conn, "s1", 0, day_ago, 2)] == [8, 10]
    assert await replies_after(conn, "s1", 10, day_ago, 10) == []
