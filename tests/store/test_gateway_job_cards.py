"""The job cards' rows: a card is stored by its first write that takes, and dropped once."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

from choir.store.gateway.job_cards import (
    CardRow,
    add_card,
    card_cancelling,
    card_prompted,
    card_shown,
    drop_card,
    open_cards,
)
from choir.store.postgres.ddl import apply_control_schema
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
    await card_shown(conn, sent)
    edited = dataclasses.replace(sent, shown="Core job counter: thinking", state="thinking")
    await card_shown(conn, edited)  # its in-memory view of the presses is not written over them
    assert await open_cards(conn) == [dataclasses.replace(edited, cancelling=True, prompts=(55,))]
    await drop_card(conn, ROW.card_id)
    assert await open_cards(conn) == []


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
