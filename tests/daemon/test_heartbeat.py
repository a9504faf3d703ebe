"""HEARTBEAT against real Postgres: contiguity, resends, broken chains, forks, snapshots."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import pytest

from choir.daemon.agents.ingest import record_of
from choir.daemon.agents.services import AgentServices
from choir.protocol import BaseRevConflict, ChainForked, ErrorCode, UserMsg, Verb
from choir.store.events import insert_events, read_events
from choir.store.leases import all_leases
from choir.store.postgres.pool import Pool
from choir.store.sessions import SessionStatus, record_heartbeat
from choir.store.snapshots import latest_snapshot

from .agent import AgentClient, Chain, hello


@pytest.fixture
async def agent(services: AgentServices) -> AgentClient:
    return AgentClient(services, await services.sessions.start("agent-1", {}))


async def stored_revs(pool: Pool, session_id: str) -> list[int]:
    async with pool.acquire() as conn:
        return [record.rev for record in await read_events(conn, session_id)]


async def test_patches_become_durable_and_acknowledged(agent, pool, services):
    chain = Chain()
    chain.commit(5)

    reply = await agent.ok(Verb.HEARTBEAT, chain.heartbeat(0))

    assert reply == {"ack_rev": 5, "config_version_latest": 1}
    assert await stored_revs(pool, agent.session_id) == [1, 2, 3, 4, 5]
    row = await services.sessions.get(agent.session_id)
    assert (row.ack_rev, row.head_hash, row.config_version) == (5, chain.head, 1)
    async with pool.acquire() as conn:
        first = (await read_events(conn, agent.session_id))[0]
    assert (first.event_type, first.lane, first.payload["text"]) == ("user_msg", "edge", "hello 1")

    chain.commit(3)
    assert (await agent.ok(Verb.HEARTBEAT, chain.heartbeat(5)))["ack_rev"] == 8


async def test_an_empty_heartbeat_is_a_sign_of_life(agent, services, clock):
    clock.advance(9_000)

    assert (await agent.ok(Verb.HEARTBEAT, Chain().heartbeat(0)))["ack_rev"] == 0

    clock.advance(9_000)
    assert await services.sessions.reap() == []


async def test_a_base_rev_ahead_of_the_ack_is_refused_with_nothing_stored(agent, pool):
    chain = Chain()
    chain.commit(8)

    error = await agent.refused(Verb.HEARTBEAT, chain.heartbeat(5))

    assert error.code == ErrorCode.CONFLICT
    assert error.message.startswith("expected base_rev 0, got 5")
    assert error.details == BaseRevConflict(expected_base_rev=0, got_base_rev=5)
    assert await stored_revs(pool, agent.session_id) == []


async def test_a_resend_of_acknowledged_revisions_is_a_no_op(agent, pool):
    chain = Chain()
    chain.commit(4)
    first = chain.heartbeat(0)
    await agent.ok(Verb.HEARTBEAT, first)

    assert (await agent.ok(Verb.HEARTBEAT, first))["ack_rev"] == 4
    assert await stored_revs(pool, agent.session_id) == [1, 2, 3, 4]

    # The reply was lost: the agent resends from its last known ack, with newer commits.
    chain.commit(2)
    assert (await agent.ok(Verb.HEARTBEAT, chain.heartbeat(2)))["ack_rev"] == 6
    assert await stored_revs(pool, agent.session_id) == [1, 2, 3, 4, 5, 6]


async def test_a_heartbeat_stored_although_its_answer_was_lost_is_acknowledged_on_resend(
    agent, pool, services
):
    """Found killing the postmaster under load (tests/faults/test_random_daemon_kills.py): the
    commit landed, the connection broke before choird heard so, and the resend was refused as
    an unknown session — the agent stopped for good."""
    chain = Chain()
    chain.commit(2)
    await agent.ok(Verb.HEARTBEAT, chain.heartbeat(0))
    told: list[int] = []
    services.replicator.subscribe(lambda durable: told.extend(e.rev for e in durable.events))
    chain.commit(3)
    lost = chain.heartbeat(2)
    async with pool.acquire() as conn, conn.transaction():  # what choird committed, unheard
        await insert_events(conn, agent.session_id, [record_of(p) for p in lost.patches])
        assert await record_heartbeat(
            conn,
            agent.session_id,
            expected_ack_rev=2,
            ack_rev=5,
            head_hash=chain.head,
            config_version=1,
            now=datetime.now(UTC),
        )

    assert (await agent.ok(Verb.HEARTBEAT, lost))["ack_rev"] == 5  # the agent's resend
    assert told == [3, 4, 5]  # replies among them still reach the user, once
    chain.commit(1)
    assert (await agent.ok(Verb.HEARTBEAT, chain.heartbeat(5)))["ack_rev"] == 6
    assert told == [3, 4, 5, 6]
    assert await stored_revs(pool, agent.session_id) == [1, 2, 3, 4, 5, 6]


async def test_a_patch_whose_hash_does_not_match_its_content_stores_nothing(agent, pool):
    chain = Chain()
    chain.commit(3)
    tampered = chain.events[1].model_copy(update={"event": UserMsg(text="rewritten")})
    chain.events[1] = tampered

    error = await agent.refused(Verb.HEARTBEAT, chain.heartbeat(0))

    assert error.code == ErrorCode.INVALID_REQUEST
    assert error.message == (
        "broken chain: patches[1].hash: does not match the content of rev 2; nothing was stored"
    )
    assert await stored_revs(pool, agent.session_id) == []
    honest = Chain()
    honest.commit(3)
    assert (await agent.ok(Verb.HEARTBEAT, honest.heartbeat(0)))["ack_rev"] == 3


@pytest.mark.parametrize("resend_from", [0, 3])
async def test_a_fork_stops_the_session(agent, pool, services, caplog, resend_from):
    chain = Chain()
    chain.commit(3)
    await agent.ok(Verb.HEARTBEAT, chain.heartbeat(0))
    other = Chain()
    other.commit(5, text="another history")

    with caplog.at_level(logging.ERROR, logger="choird.sessions"):
        error = await agent.refused(Verb.HEARTBEAT, other.heartbeat(resend_from))

    assert error.code == ErrorCode.CONFLICT
    fork_rev = 1 if resend_from == 0 else 3
    assert error.message.startswith(f"fork detected at rev {fork_rev}: the agent's chain differs")
    assert f"session {agent.session_id} was stopped" in error.message
    assert error.details == ChainForked(rev=fork_rev)
    assert await stored_revs(pool, agent.session_id) == [1, 2, 3]
    row = await services.sessions.get(agent.session_id)
    assert (row.status, row.ack_rev, row.lease_id) == (SessionStatus.FORKED, 3, None)
    async with pool.acquire() as conn:
        assert await all_leases(conn) == []
    assert [r.message for r in caplog.records] == ["session stopped: fork detected"]
    assert (await agent.refused(Verb.HEARTBEAT, chain.heartbeat(3))).code == ErrorCode.UNAUTHORIZED


async def test_a_snapshot_and_the_tail_after_it_come_back_on_resume(agent, pool, services):
    chain = Chain()
    chain.commit(6)
    await agent.ok(Verb.HEARTBEAT, chain.heartbeat(0, snapshot=True))
    chain.commit(4)
    await agent.ok(Verb.HEARTBEAT, chain.heartbeat(6))
    async with pool.acquire() as conn:
        stored = await latest_snapshot(conn, agent.session_id, 10)
    assert stored is not None
    assert stored.rev == 6
    await services.sessions.mark_crashed(agent.session_id, "container died")

    resumed = AgentClient(services, await services.sessions.start("agent-1", {}))
    reply = await resumed.ok(Verb.INIT_HELLO, hello(resumed.session_id))

    assert reply["status"] == "resumed"
    assert reply["snapshot"]["rev"] == 6
    assert reply["snapshot"]["hash"] == chain.hash_at(6)
    assert [e["rev"] for e in reply["tail_events"]] == [7, 8, 9, 10]
    assert reply["tail_events"] == [e.model_dump(mode="json") for e in chain.events[6:]]
    assert reply["lease_token"] == resumed.token
    # The agent carries on from the acknowledged head.
    chain.commit(1)
    assert (await resumed.ok(Verb.HEARTBEAT, chain.heartbeat(10)))["ack_rev"] == 11


async def test_a_snapshot_that_does_not_match_hash_new_is_refused(agent):
    chain = Chain()
    chain.commit(2)
    request = chain.heartbeat(0, snapshot=True)
    assert request.snapshot is not None
    bad = request.model_copy(
        update={"snapshot": request.snapshot.model_copy(update={"hash": "c" * 64})}
    )

    error = await agent.refused(Verb.HEARTBEAT, bad)

    assert error.message == "snapshot.hash: does not match hash_new; nothing was stored"


async def test_the_reply_carries_the_latest_config_version(agent, services, home):
    await services.stage.load()
    services.stage.apply()
    chain = Chain()
    chain.commit(1)

    reply = await agent.ok(Verb.HEARTBEAT, chain.heartbeat(0, config_version=1))

    assert reply["config_version_latest"] == 2
    assert (await services.sessions.get(agent.session_id)).config_version == 1
