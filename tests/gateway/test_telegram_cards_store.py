"""The job cards' writes on the test's Postgres, choird's `JobCards` driven in process: a card's
writes apply in the order they were made (an edit stores the card's live prompts, a lost
prompt's write again and an answered one never); a session whose cards show nowhere has its
card cursor moved past its starts; and a card whose first write waits for the database holds up
no other session's card.

Telegram is the local Bot API server; the database is the test's own, one of its rows locked by
the test to keep a write waiting.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Awaitable
from datetime import UTC, datetime

import pytest

from choir.daemon.agents.ingest import Durable
from choir.daemon.gateway.telegram.approvals import Chat
from choir.daemon.gateway.telegram.card_store import CardStore, unsent
from choir.daemon.gateway.telegram.cards import JobCards
from choir.daemon.gateway.telegram.client import BotClient
from choir.daemon.gateway.telegram.outbox import Outbox
from choir.protocol import CommittedEvent
from choir.protocol.log.core_jobs import CoreJobStart
from choir.protocol.log.events import CoreStarted
from choir.store.gateway.job_cards import (
    CardRow,
    card_answered,
    card_shown,
    open_cards,
    uncarded_starts,
)
from choir.store.postgres.ddl import apply_control_schema
from choir.store.postgres.pool import Connection, Pool, open_pool
from choir.store.postgres.target import ConnectParams
from tests.harness.botapi import BotApiServer
from tests.harness.waits import poll_until

from .conftest import PHONE, TOKEN
from .test_telegram_cards_restart import cards_of

STARTED = datetime(2026, 11, 28, 10, 0, tzinfo=UTC)
ROW = CardRow("card-1", "tg", PHONE, "phone", "agent-1", "s-1", "counter", 3, STARTED)


@pytest.fixture
async def pool(pg_params: ConnectParams) -> AsyncIterator[Pool]:
    async with open_pool(pg_params, min_size=1, max_size=4) as pool:
        async with pool.acquire() as conn:
            await apply_control_schema(conn)
        yield pool


@pytest.fixture
async def chat(api: BotApiServer) -> AsyncIterator[Chat]:
    """The DM `phone`'s chat on the bot `tg` (the local Bot API server)."""
    client = BotClient("tg", TOKEN, api.url, secret="tg-token")
    await client.connect()
    outbox = Outbox(client)
    try:
        yield Chat(client, outbox, "phone", "regular", PHONE)
    finally:
        await outbox.close()
        await client.close()


def start_of(job: str, rev: int) -> CommittedEvent:
    """The durable `core_started` of `job` at `rev`."""
    return CommittedEvent(
        rev=rev,
        lane=f"core:{job}",
        ts=datetime.now(UTC),
        hash_prev="0" * 64,
        hash=f"{rev:064x}",
        event=CoreStarted(job=CoreJobStart(job_id=f"{job}-1", job_name=job, task_spec="go")),
    )


async def logged(conn: Connection, session_id: str, *starts: CommittedEvent) -> None:
    """An active session of agent-1 whose log holds `starts` (and other events before)."""
    await conn.execute(
        "INSERT INTO choir_control.agents (agent_id, name) VALUES ('agent-1', 'A') "
        "ON CONFLICT DO NOTHING"
    )
    await conn.execute(
        "INSERT INTO choir_control.sessions (session_id, agent_id, status) "
        "VALUES ($1, 'agent-1', 'active')",
        session_id,
    )
    at = {start.rev: start for start in starts}
    for rev in range(1, max(at) + 1):
        start = at.get(rev)
        await conn.execute(
            "INSERT INTO choir_control.session_events "
            "(session_id, rev, event_type, lane, payload, hash_prev, hash, created_at) "
            "VALUES ($1, $2, $3, $4, $5, $6, $7, now())",
            session_id,
            rev,
            "core_started" if start else "T",
            start.lane if start else "edge",
            start.event.model_dump(mode="json") if start else {},
            f"{rev - 1:064x}",
            f"{rev:064x}",
        )


async def cursor_of(pool: Pool, session_id: str) -> int | None:
    async with pool.acquire() as conn:
        rev: int | None = await conn.fetchval(
            "SELECT rev FROM choir_control.gateway_card_cursors WHERE session_id = $1", session_id
        )
        return rev


async def refused(verb: str, request: dict[str, object]) -> dict[str, object]:
    raise AssertionError(f"no verb expected: {verb}")


async def test_a_cards_writes_apply_in_the_order_they_were_made(pool: Pool) -> None:
    store = CardStore(pool)
    await store.claim(ROW)
    slow = asyncio.Event()
    live = dataclasses.replace(ROW, message_id=12, shown="thinking", prompts=(55,))

    async def late(conn: Connection) -> None:  # an edit made before the reply, its write slow
        await slow.wait()
        await card_shown(conn, live)

    edit = asyncio.create_task(store.write("edit", ROW.card_id, ROW.job_name, late))
    await asyncio.sleep(0.1)
    reply = asyncio.create_task(
        store.write("reply", ROW.card_id, ROW.job_name, lambda c: card_answered(c, ROW.card_id, 55))
    )
    other = dataclasses.replace(ROW, card_id="card-2", message_id=13, shown="other")
    assert await store.write("edit", "card-2", "other", lambda c: card_shown(c, other))
    await asyncio.sleep(0.3)
    assert not reply.done()  # after the edit made first; another card's waited for neither
    slow.set()
    assert await edit
    assert await reply
    rows = {row.card_id: row for row in await _open(pool)}
    assert rows[ROW.card_id].prompts == ()  # answered: the older snapshot did not bring it back

    lost = dataclasses.replace(live, shown="still thinking", prompts=(56,))  # 56's write lost
    assert await store.write("edit", ROW.card_id, ROW.job_name, lambda c: card_shown(c, lost))
    assert [r.prompts for r in await _open(pool) if r.card_id == ROW.card_id] == [(56,)]


async def test_a_session_whose_cards_show_nowhere_has_its_cursor_moved_past_its_starts(
    pool: Pool,
) -> None:
    async with pool.acquire() as conn:
        await logged(conn, "s-console", start_of("alpha", 3), start_of("beta", 7))
        await logged(conn, "s-phone", start_of("gamma", 2))

    async def wanted(session_id: str) -> bool:
        return session_id == "s-phone"

    found = await unsent(pool, wanted)
    assert [(d.session_id, [e.rev for e in d.events]) for d in found] == [("s-phone", [2])]
    async with pool.acquire() as conn:  # the console's starts are not read again; the DM's are
        assert [u.session_id for u in await uncarded_starts(conn)] == ["s-phone"]
    assert await cursor_of(pool, "s-console") == 7

    async def nowhere(session_id: str) -> Chat | None:
        return None

    cards = JobCards(refused, b"k" * 32, nowhere, pool=pool)
    cards.start()
    try:  # a job the console session starts now: passed as it is handled
        cards.replicated(Durable("s-console", "agent-1", [start_of("delta", 9)]))
        await poll_until(lambda: _at(pool, "s-console", 9), within=10, every=0.05)
    finally:
        await cards.close()
    assert await _open(pool) == []


async def test_a_card_waiting_for_its_first_write_holds_up_no_other_sessions_card(
    pool: Pool, chat: Chat, api: BotApiServer
) -> None:
    async def phone(session_id: str) -> Chat | None:
        return chat

    async with pool.acquire() as conn:
        await conn.execute(
            "INSERT INTO choir_control.gateway_card_cursors (session_id, rev) VALUES ('s-a', 0)"
        )
    cards = JobCards(refused, b"k" * 32, phone, pool=pool)
    cards.start()
    try:
        async with pool.acquire() as locker, locker.transaction():
            # s-a's cursor row locked: its card's first write waits (as for a database away)
            await locker.execute(
                "SELECT rev FROM choir_control.gateway_card_cursors "
                "WHERE session_id = 's-a' FOR UPDATE"
            )
            cards.replicated(Durable("s-a", "agent-1", [start_of("alpha", 3)]))
            cards.replicated(Durable("s-b", "agent-1", [start_of("beta", 4)]))
            await api.wait_for(lambda: bool(cards_of(api, "beta")), within=4)
            assert cards_of(api, "alpha") == []  # not sent before its row is stored
        await api.wait_for(lambda: bool(cards_of(api, "alpha")), within=30)  # tried again
        assert [len(cards_of(api, job)) for job in ("alpha", "beta")] == [1, 1]
        assert await cursor_of(pool, "s-a") == 3
        assert await cursor_of(pool, "s-b") == 4
    finally:
        await cards.close()


async def _open(pool: Pool) -> list[CardRow]:
    async with pool.acquire() as conn:
        return await open_cards(conn)


def _at(pool: Pool, session_id: str, rev: int) -> Awaitable[bool]:
    async def at() -> bool:
        return await cursor_of(pool, session_id) == rev

    return at()
