"""The job cards' rows: a card is stored by its first write that takes, and dropped once; its
session's card cursor passes its job's start with it."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

from choir.store.gateway.job_cards import (
    CardRow,
    Uncarded,
    add_card,
    advance_cursor,
    card_answered,
    card_cancelling,
    card_prompted,
    card_shown,
    drop_card,
    job_events,
    open_cards,
    uncarded_starts,
)
from choir.store.postgres.ddl import (
    CONTROL_MIGRATIONS,
    CONTROL_SCOPE,
    GATEWAY_MIGRATIONS,
    GATEWAY_SCOPE,
    apply_control_schema,
    apply_migrations,
)
from choir.store.postgres.pool import Connection

STARTED = datetime(2026, 11, 28, 10, 0, tzinfo=UTC)
ROW = CardRow("card-1", "tg", 4242, "phone", "agent-1", "s-1", "counter", 7, STARTED)


async def test_a_card_sent_then_edited_keeps_what_it_showed_and_what_was_pressed(
    conn: Connection,
) -> None:
    await apply_control_schema(conn)
    await add_card(conn, ROW)
    assert await open_cards(conn) == [ROW]
    await card_cancelling(conn, ROW.card_id)
    await card_prompted(conn, ROW.card_id, 55, 8)
    sent = dataclasses.replace(ROW, message_id=12, shown="Core job counter: starting")
    await card_shown(conn, dataclasses.replace(sent, prompts=(55,)))
    await card_prompted(conn, ROW.card_id, 56, 8)
    await card_prompted(conn, ROW.card_id, 56, 8)  # an edit stored it before its own write
    edited = dataclasses.replace(
        sent, shown="Core job counter: thinking", state="thinking", prompts=(55, 56)
    )
    await card_shown(conn, edited)  # a [Cancel] it has not seen yet is not undone
    assert await open_cards(conn) == [dataclasses.replace(edited, cancelling=True)]
    await drop_card(conn, ROW.card_id)
    assert await open_cards(conn) == []


async def test_an_edit_stores_the_live_prompts_a_lost_prompt_again_an_answered_one_never(
    conn: Connection,
) -> None:
    """A card's writes apply in the order they were made: an edit's prompts are the card's."""
    await apply_control_schema(conn)
    await add_card(conn, ROW)
    await card_prompted(conn, ROW.card_id, 55, 8)  # 56's own write was lost
    live = dataclasses.replace(ROW, message_id=12, shown="thinking", prompts=(55, 56))
    await card_shown(conn, live)
    assert [r.prompts for r in await open_cards(conn)] == [(55, 56)]
    await card_answered(conn, ROW.card_id, 55)
    await card_shown(conn, dataclasses.replace(live, prompts=(56,)))
    assert [r.prompts for r in await open_cards(conn)] == [(56,)]


async def test_a_card_whose_first_writes_were_lost_is_stored_whole_by_a_later_one(
    conn: Connection,
) -> None:
    await apply_control_schema(conn)  # the add and the message id's write failed: no row
    later = dataclasses.replace(
        ROW, message_id=12, shown="Core job counter: thinking", state="thinking",
        cancelling=True, prompts=(55, 56),
    )  # fmt: skip
    await card_shown(conn, later)
    assert await open_cards(conn) == [later]


async def test_a_cancel_whose_write_failed_is_stored_by_the_next_edit(conn: Connection) -> None:
    await apply_control_schema(conn)
    await add_card(conn, ROW)
    pressed = dataclasses.replace(ROW, message_id=12, shown="cancelling…", cancelling=True)
    await card_shown(conn, pressed)
    assert await open_cards(conn) == [pressed]


async def started(conn: Connection, session_id: str, *revs: int, status: str = "active") -> None:
    """A session of agent-1 whose events at `revs` are job starts, a step's call after each."""
    await conn.execute(
        "INSERT INTO choir_control.agents (agent_id, name) VALUES ('agent-1', 'A') "
        "ON CONFLICT DO NOTHING"
    )
    await conn.execute(
        "INSERT INTO choir_control.sessions (session_id, agent_id, status) "
        "VALUES ($1, 'agent-1', $2)",
        session_id,
        status,
    )
    for rev in range(1, max(revs) + 2):
        kind = "core_started" if rev in revs else "model_output" if rev - 1 in revs else "T"
        await conn.execute(
            "INSERT INTO choir_control.session_events "
            "(session_id, rev, event_type, lane, payload, hash_prev, hash, created_at) "
            "VALUES ($1, $2, $3, 'core:j', '{}', 'p', $4, now())",
            session_id,
            rev,
            kind,
            f"h{rev}",
        )


async def test_a_stored_card_moves_its_sessions_cursor_past_its_start_and_never_back(
    conn: Connection,
) -> None:
    await apply_control_schema(conn)
    await started(conn, "s-1", 3, 9)
    assert await uncarded_starts(conn) == [Uncarded("s-1", "agent-1", 3, 9)]  # none stored yet
    await add_card(conn, dataclasses.replace(ROW, started_rev=3))
    assert await uncarded_starts(conn) == [Uncarded("s-1", "agent-1", 9, 9)]
    await add_card(conn, dataclasses.replace(ROW, card_id="card-2", started_rev=9))
    await add_card(conn, dataclasses.replace(ROW, started_rev=3))  # a write tried again
    await drop_card(conn, ROW.card_id)  # its final edit made: sent, never again
    assert await uncarded_starts(conn) == []


async def test_a_cursor_moved_past_starts_without_cards_never_goes_back(conn: Connection) -> None:
    """A session whose cards show nowhere: its cursor passes its starts, none stored."""
    await apply_control_schema(conn)
    await started(conn, "s-1", 3, 9)
    await advance_cursor(conn, "s-1", 9)
    assert await uncarded_starts(conn) == []
    await advance_cursor(conn, "s-1", 3)
    assert await uncarded_starts(conn) == []
    assert await open_cards(conn) == []


async def test_only_running_sessions_starts_are_read_and_only_their_jobs_events(
    conn: Connection,
) -> None:
    await apply_control_schema(conn)
    await started(conn, "s-1", 2)
    await started(conn, "s-gone", 2, status="stopped")
    assert await uncarded_starts(conn) == [Uncarded("s-1", "agent-1", 2, 2)]
    events = await job_events(conn, "s-1", 2, 10)
    assert [(e.rev, e.event_type) for e in events] == [(2, "core_started"), (3, "model_output")]


async def test_sessions_running_as_the_cursors_come_are_taken_as_carded_so_far(
    conn: Connection,
) -> None:
    """Upgraded: the cards of what the running sessions started were sent by the choir before."""
    await apply_migrations(conn, CONTROL_SCOPE, CONTROL_MIGRATIONS)
    await apply_migrations(conn, GATEWAY_SCOPE, GATEWAY_MIGRATIONS[:3])
    await started(conn, "s-1", 2)
    await apply_control_schema(conn)
    assert await uncarded_starts(conn) == []
    await conn.execute(
        "INSERT INTO choir_control.session_events "
        "(session_id, rev, event_type, lane, payload, hash_prev, hash, created_at) "
        "VALUES ('s-1', 4, 'core_started', 'core:k', '{}', 'p', 'h4', now())"
    )
    assert await uncarded_starts(conn) == [Uncarded("s-1", "agent-1", 4, 4)]
