"""Snapshots at choird against real Postgres: what is stored, and what a resume is handed.

A resume gets the newest snapshot that parses, matches its digest and links to the tail (or,
with no tail, to the session's head) — and the events after it only. A snapshot that fails is
passed over for an older one; with none usable, every event from rev 1.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

from choir.daemon.agents.handover import MAX_REFUSED
from choir.daemon.agents.services import AgentServices
from choir.protocol import Snapshot, Verb
from choir.store.postgres.pool import Pool
from choir.store.snapshots import latest_snapshot

from .agent import AgentClient, Chain, hello


@pytest.fixture
async def agent(services: AgentServices) -> AgentClient:
    return AgentClient(services, await services.sessions.start("agent-1", {}))


async def _snapshot_every(agent: AgentClient, chain: Chain, sizes: list[int]) -> None:
    """Heartbeats of `sizes` events each, every one carrying a snapshot at its head."""
    for size in sizes:
        base = chain.rev
        chain.commit(size)
        await agent.ok(Verb.HEARTBEAT, chain.heartbeat(base, snapshot=True))


async def _resume(services: AgentServices, agent: AgentClient) -> dict[str, Any]:
    await services.sessions.mark_crashed(agent.session_id, "container died")
    resumed = AgentClient(services, await services.sessions.start("agent-1", {}))
    return await resumed.ok(Verb.INIT_HELLO, hello(resumed.session_id))


async def _alter(pool: Pool, session_id: str, rev: int, sql_set: str, *args: Any) -> None:
    async with pool.acquire() as conn:
        await conn.execute(
            f"UPDATE choir_control.session_snapshots SET {sql_set} "
            "WHERE session_id = $1 AND rev = $2",
            session_id,
            rev,
            *args,
        )


async def test_a_resume_gets_the_newest_snapshot_and_only_the_events_after_it(
    agent, services, pool
):
    chain = Chain()
    await _snapshot_every(agent, chain, [4, 4])
    chain.commit(3)
    await agent.ok(Verb.HEARTBEAT, chain.heartbeat(8))

    reply = await _resume(services, agent)

    assert reply["snapshot"]["rev"] == 8
    assert [e["rev"] for e in reply["tail_events"]] == [9, 10, 11]


async def test_a_snapshot_at_the_head_comes_with_no_tail(agent, services):
    chain = Chain()
    await _snapshot_every(agent, chain, [5])

    reply = await _resume(services, agent)

    assert (reply["snapshot"]["rev"], reply["tail_events"]) == (5, [])


async def test_a_snapshot_altered_at_rest_is_passed_over_for_an_older_one(
    agent, services, pool, caplog
):
    chain = Chain()
    await _snapshot_every(agent, chain, [4, 4])
    await _alter(
        pool, agent.session_id, 8, "snapshot = jsonb_set(snapshot, '{awaiting_reply}', '\"x\"')"
    )

    with caplog.at_level(logging.WARNING, logger="choird.replication"):
        reply = await _resume(services, agent)

    assert reply["snapshot"]["rev"] == 4
    assert [e["rev"] for e in reply["tail_events"]] == [5, 6, 7, 8]
    [warning] = [r for r in caplog.records if r.message == "snapshot not used for the resume"]
    assert warning.__dict__["fields"]["why"] == "its content does not match its digest"


async def test_a_snapshot_that_does_not_link_to_its_tail_is_passed_over(agent, services, pool):
    chain = Chain()
    await _snapshot_every(agent, chain, [4, 4])
    chain.commit(2)
    await agent.ok(Verb.HEARTBEAT, chain.heartbeat(8))
    async with pool.acquire() as conn:
        stored = await latest_snapshot(conn, agent.session_id, 8)
    assert stored is not None
    forged = Snapshot.model_validate(stored.snapshot).model_copy(update={"hash": "e" * 64})
    await _alter(
        pool, agent.session_id, 8, "snapshot = $3", forged.sealed().model_dump(mode="json")
    )

    reply = await _resume(services, agent)

    assert reply["snapshot"]["rev"] == 4
    assert reply["tail_events"][0]["hash_prev"] == chain.hash_at(4)


async def test_with_no_usable_snapshot_every_event_is_handed_over(agent, services, pool):
    chain = Chain()
    await _snapshot_every(agent, chain, [2] * (MAX_REFUSED + 1))
    async with pool.acquire() as conn:
        await conn.execute(
            "UPDATE choir_control.session_snapshots SET snapshot = snapshot - 'digest' "
            "WHERE session_id = $1",
            agent.session_id,
        )

    reply = await _resume(services, agent)

    assert reply["snapshot"] is None
    assert [e["rev"] for e in reply["tail_events"]] == list(range(1, chain.rev + 1))


async def test_an_unsealed_snapshot_is_not_stored_but_its_events_are(agent, pool, caplog):
    chain = Chain()
    chain.commit(3)
    request = chain.heartbeat(0, snapshot=True)
    assert request.snapshot is not None
    unsealed = request.model_copy(
        update={"snapshot": request.snapshot.model_copy(update={"digest": None})}
    )

    with caplog.at_level(logging.WARNING, logger="choird.replication"):
        reply = await agent.ok(Verb.HEARTBEAT, unsealed)

    assert reply["ack_rev"] == 3
    async with pool.acquire() as conn:
        assert await latest_snapshot(conn, agent.session_id, 3) is None
    assert [r.message for r in caplog.records] == ["snapshot not stored"]
