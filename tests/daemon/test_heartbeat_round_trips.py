"""A plain heartbeat is one round trip to Postgres (issue 13 point 7: the link's cost per call).

A heartbeat carrying only new events used to take five: BEGIN, the insert, the head's update,
COMMIT and the pool's reset query on release — each one a send and a wake-up of choird and of
a Postgres backend. Now the events and the new head go in one statement
(`choir.store.heartbeats`); heartbeats that carry more keep their transaction.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest

from choir.daemon.agents.ingest import committed_of
from choir.daemon.agents.services import AgentServices
from choir.protocol import GENESIS_HASH, LlmCallRecorded, UserMsg, Verb
from choir.protocol.log.committed import chain_break
from choir.store import inbox
from choir.store.events import read_events
from choir.store.postgres.ddl import apply_control_schema
from choir.store.postgres.pool import Pool, open_pool
from choir.store.postgres.target import ConnectParams

from .agent import AgentClient, Chain

QUERIES: list[BaseException | None] = []


@pytest.fixture
async def pool(pg_params: ConnectParams) -> AsyncIterator[Pool]:
    """The daemon tests' pool, with every query it runs counted in `QUERIES`."""
    QUERIES.clear()
    async with open_pool(pg_params, min_size=1, max_size=4, observe=QUERIES.append) as pool:
        async with pool.acquire() as conn:
            await apply_control_schema(conn)
        yield pool


async def test_a_heartbeat_of_new_events_is_one_statement(services: AgentServices) -> None:
    agent = AgentClient(services, await services.sessions.start("agent-1", {}))
    chain = Chain()
    chain.commit(5)
    # the first one prepares the statement (asyncpg looks its types up once per connection)
    assert (await agent.ok(Verb.HEARTBEAT, chain.heartbeat(0)))["ack_rev"] == 5
    QUERIES.clear()

    chain.commit(3)
    assert (await agent.ok(Verb.HEARTBEAT, chain.heartbeat(5)))["ack_rev"] == 8

    assert QUERIES == [None]
    chain.commit(1)
    assert (await agent.ok(Verb.HEARTBEAT, chain.heartbeat(8)))["ack_rev"] == 9
    assert QUERIES == [None, None]


async def test_events_stored_in_one_statement_read_back_exactly(
    services: AgentServices, pool: Pool
) -> None:
    """The batch travels as one jsonb document: NUL, U+0001, an escaped-looking backslash and
    non-ASCII text in an event, and the commit times, come back as the agent hashed them."""
    agent = AgentClient(services, await services.sessions.start("agent-1", {}))
    chain = Chain()
    sent = chain.commit(3, text='nul\x00 soh\x01 \\u0000 "quoted" ünï 🎵')

    assert (await agent.ok(Verb.HEARTBEAT, chain.heartbeat(0)))["ack_rev"] == 3

    async with pool.acquire() as conn:
        stored = [committed_of(record) for record in await read_events(conn, agent.session_id)]
    assert stored == sent
    assert chain_break(stored, base_rev=0, hash_prev=GENESIS_HASH, check_hashes=True) is None


async def test_a_heartbeat_of_model_calls_stores_their_usage_in_the_same_statement(
    services: AgentServices, pool: Pool
) -> None:
    """Every model call's `llm_call` event has its usage row: stored by the one statement that
    stores the event (a plain heartbeat), exactly once even when the heartbeat is sent again."""
    agent = AgentClient(services, await services.sessions.start("agent-1", {}))
    chain = Chain()
    chain.commit(2)
    assert (await agent.ok(Verb.HEARTBEAT, chain.heartbeat(0)))["ack_rev"] == 2
    call = LlmCallRecorded(
        lane="edge", model="demo", prompt_tokens=120, cost_usd=0.25, cost_source="price"
    )
    chain.commit_events([call, UserMsg(text="no usage"), call.model_copy(update={"job_id": None})])
    QUERIES.clear()

    assert (await agent.ok(Verb.HEARTBEAT, chain.heartbeat(2)))["ack_rev"] == 5
    assert QUERIES == [None]
    # a resend overlapping the ack stores nothing twice
    assert (await agent.ok(Verb.HEARTBEAT, chain.heartbeat(2)))["ack_rev"] == 5

    async with pool.acquire() as conn:
        rows = await conn.fetch(
            "SELECT rev, agent_id, lane, model, prompt_tokens, cost_usd, kind "
            "FROM choir_control.llm_usage WHERE session_id = $1 ORDER BY rev",
            agent.session_id,
        )
    assert [tuple(row) for row in rows] == [
        (3, "agent-1", "edge", "demo", 120, 0.25, "llm"),
        (5, "agent-1", "edge", "demo", 120, 0.25, "llm"),
    ]


async def test_a_heartbeat_delivering_user_messages_is_one_statement(
    services: AgentServices, pool: Pool
) -> None:
    """The `user_msg` events of accepted messages mark them delivered in the statement that
    stores them — only the pending ones of this session — and a heartbeat whose head moved
    (its last answer was lost) delivers on its retry, once."""
    agent = AgentClient(services, await services.sessions.start("agent-1", {}))
    other = await services.sessions.start("agent-2", {})
    now = datetime.now(UTC)
    async with pool.acquire() as conn:
        for message_id, session_id in (("m-1", agent.session_id), ("m-2", agent.session_id)):
            await inbox.accept(
                conn,
                message_id=message_id,
                session_id=session_id,
                agent_id="agent-1",
                push={"text": message_id},
                now=now,
            )
        await inbox.accept(
            conn,
            message_id="m-other",
            session_id=other.session_id,
            agent_id="agent-2",
            push={"text": "other"},
            now=now,
        )
    chain = Chain()
    chain.commit(1)
    assert (await agent.ok(Verb.HEARTBEAT, chain.heartbeat(0)))["ack_rev"] == 1
    chain.commit_events(
        [
            UserMsg(text="first", message_id="m-1"),
            UserMsg(text="not this session's", message_id="m-other"),
            UserMsg(text="no id"),
        ]
    )
    QUERIES.clear()

    assert (await agent.ok(Verb.HEARTBEAT, chain.heartbeat(1)))["ack_rev"] == 4

    assert QUERIES == [None]
    async with pool.acquire() as conn:
        assert await inbox.status_of(conn, "m-1") == "delivered"
        assert await inbox.status_of(conn, "m-2") == "pending"
        assert await inbox.status_of(conn, "m-other") == "pending"
        revs = await conn.fetch(
            "SELECT message_id, delivered_rev FROM choir_control.session_inbox "
            "WHERE status = 'delivered'"
        )
    assert [tuple(row) for row in revs] == [("m-1", 2)]

    # stored behind choird's back: the next heartbeat's head moved, and its first try (which
    # would deliver m-2) stores nothing; the retry from the stored head delivers it once
    chain.commit_events([UserMsg(text="second", message_id="m-2")])
    async with pool.acquire() as conn:
        await conn.execute(
            "UPDATE choir_control.sessions SET ack_rev = 5 WHERE session_id = $1",
            agent.session_id,
        )
        await conn.execute(
            "INSERT INTO choir_control.session_events "
            "(session_id, rev, event_type, lane, payload, hash_prev, hash, created_at) "
            "VALUES ($1, 5, 'user_msg', 'edge', $2, $3, $4, $5)",
            agent.session_id,
            {"kind": "user_msg", "text": "second", "attachments": [], "message_id": "m-2"},
            chain.events[-1].hash_prev,
            chain.events[-1].hash,
            chain.events[-1].ts,
        )
        assert await inbox.status_of(conn, "m-2") == "pending"

    assert (await agent.ok(Verb.HEARTBEAT, chain.heartbeat(4)))["ack_rev"] == 5

    async with pool.acquire() as conn:
        row = await conn.fetchrow(
            "SELECT status, delivered_rev FROM choir_control.session_inbox WHERE message_id = $1",
            "m-2",
        )
    assert tuple(row) == ("delivered", 5)
