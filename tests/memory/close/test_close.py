"""Session close in a real choird (test Postgres, local embedder): a session's agent replicates
its events and stops; choird stores them as mid-term chunks with vectors, promotes the oldest
session past `mid_term_sessions`, closes a crashed session once a newer one aged it out, and a
second close of a session changes nothing."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from choir.agent.kernel.commitlog import CommitLog
from choir.daemon.app import ChoirDaemon
from choir.daemon.memory.closing.close import SessionCloser
from choir.daemon.memory.search.query import MemoryQuery
from choir.daemon.sessions.state import StartedSession
from choir.protocol import TerminateSelfRequest
from choir.protocol.log.events import AgentReplied, Event, UserMsg
from choir.store.memory.closes import PendingClose
from choir.store.postgres.ddl import apply_control_schema
from choir.store.postgres.pool import connect
from choir.store.postgres.target import ConnectParams
from tests.e2e.agent_side import heartbeat
from tests.harness.daemons import (
    agent_control_plane,
    pool_of,
    running_daemon,
    session_row,
)
from tests.harness.homes import external_postgres, make_home
from tests.harness.log_lines import log_lines
from tests.harness.waits import poll_until
from tests.memory.close.support import (
    TOPICS,
    close_state,
    conversation,
    memory_rows,
    run_session,
    store_ended_session,
    wait_closed,
)

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
async def daemon(root: Path, pg_params: ConnectParams) -> AsyncIterator[ChoirDaemon]:
    home = make_home(root, postgres=external_postgres(pg_params), mid_term_sessions=2)
    async with running_daemon(home) as daemon:
        await daemon.memory_started()
        yield daemon


def parts(daemon: ChoirDaemon):  # type: ignore[no-untyped-def]
    assert daemon.memory_store is not None
    assert daemon.memory_index is not None
    assert daemon.memory_closer is not None
    return daemon.memory_store, daemon.memory_index, daemon.memory_closer


async def test_a_stopped_session_becomes_mid_term_memory_with_vectors(daemon: ChoirDaemon):
    store, index, _ = parts(daemon)
    session_id = await run_session(daemon, conversation(0))
    await wait_closed(pool_of(daemon), session_id)
    await index.settled()

    rows = await memory_rows(pool_of(daemon))
    assert len(rows) > 1
    assert {(r.session_id, r.tier) for r in rows} == {(session_id, "mid_term")}
    assert all(r.vector and r.dims == 256 for r in rows)  # the local model's vectors
    assert sorted(r.index for r in rows) == list(range(len(rows)))
    stats = await store.stats("agent-1")
    assert stats.vectors_missing == 0

    assert daemon.memory is not None
    vector = await daemon.memory.embed_query("how are postgres backups kept", timeout_s=30)
    hits = await store.search("agent-1", MemoryQuery(mode="semantic", vector=vector, limit=3))
    assert hits[0].source.session_id == session_id
    assert "backups" in hits[0].text


async def test_past_n_sessions_the_oldest_is_promoted(daemon: ChoirDaemon):
    store, index, _ = parts(daemon)
    first = await run_session(daemon, conversation(1))
    await wait_closed(pool_of(daemon), first)
    detail = {r.id for r in await memory_rows(pool_of(daemon))}
    second = await run_session(daemon, conversation(2))
    third = await run_session(daemon, conversation(3))
    await wait_closed(pool_of(daemon), second, third)
    await index.settled()

    rows = await memory_rows(pool_of(daemon))
    tiers = {(r.session_id, r.tier) for r in rows}
    assert tiers == {
        (first, "long_term_detail"),
        (first, "long_term_summary"),
        (second, "mid_term"),
        (third, "mid_term"),
    }
    assert {r.id for r in rows if r.tier == "long_term_detail"} == detail  # the same rows
    assert not any(r.vector for r in rows if r.tier == "long_term_detail")
    assert all(r.vector for r in rows if r.tier != "long_term_detail")
    [summary] = [r for r in rows if r.tier == "long_term_summary"]
    assert TOPICS[1] in summary.text

    assert daemon.memory is not None
    vector = await daemon.memory.embed_query(TOPICS[1], timeout_s=30)
    hits = await store.search("agent-1", MemoryQuery(mode="semantic", vector=vector, limit=50))
    assert summary.text in [hit.text for hit in hits]
    assert not {hit.source.session_id for hit in hits if hit.source.tier == "long_term_detail"}


async def test_a_crashed_session_is_closed_once_a_newer_one_ages_it_out(daemon: ChoirDaemon):
    _, index, closer = parts(daemon)
    crashed = await run_session(daemon, conversation(4, summary=False), end="crash")
    await closer.idle()
    assert await close_state(pool_of(daemon), crashed) is None  # the next start resumes it

    newer = await run_session(daemon, conversation(5))
    await wait_closed(pool_of(daemon), crashed, newer)
    await index.settled()
    rows = await memory_rows(pool_of(daemon))
    assert {(r.session_id, r.tier) for r in rows} == {(crashed, "mid_term"), (newer, "mid_term")}


async def test_closing_a_session_twice_changes_nothing(daemon: ChoirDaemon):
    _, index, closer = parts(daemon)
    sessions = [await run_session(daemon, conversation(n)) for n in range(3)]
    await wait_closed(pool_of(daemon), *sessions)
    await index.settled()
    before = await memory_rows(pool_of(daemon))

    for session_id in sessions:  # closed: a second close finds the mark
        ack_rev = (await session_row(daemon, session_id)).ack_rev
        assert await closer.close_one(PendingClose(session_id, "agent-1", ack_rev)) == 0
    async with pool_of(daemon).acquire() as conn:  # as if each close had been cut short
        await conn.execute(
            "UPDATE choir_control.memory_closes SET state = 'closing', closed_at = NULL"
        )
    assert await closer.close_pending() == 3
    await index.settled()

    assert await memory_rows(pool_of(daemon)) == before
    assert [await close_state(pool_of(daemon), s) for s in sessions] == ["closed"] * 3


async def test_a_resumed_close_cuts_with_the_size_it_began_with(daemon: ChoirDaemon):
    store, index, _ = parts(daemon)
    session_id = await run_session(daemon, conversation(6, turns=12))
    await wait_closed(pool_of(daemon), session_id)
    await index.settled()
    before = await memory_rows(pool_of(daemon))
    async with pool_of(daemon).acquire() as conn:  # cut short, then memory_chunk_chars changed
        await conn.execute(
            "UPDATE choir_control.memory_closes SET state = 'closing', closed_at = NULL"
        )
    assert daemon.services is not None
    changed = daemon.services.stage.running.config.model_copy(update={"memory_chunk_chars": 300})
    closer = SessionCloser(pool_of(daemon), store, index, lambda: changed)
    assert await closer.close_pending() == 1
    await index.settled()
    assert await memory_rows(pool_of(daemon)) == before  # not cut again at 300


async def test_sessions_ended_before_choird_started_are_worked_off_in_the_background(
    root: Path, pg_params: ConnectParams
):
    home = make_home(root, postgres=external_postgres(pg_params), mid_term_sessions=3)
    conn = await connect(pg_params)
    try:
        await apply_control_schema(conn)
        sessions = [f"s-old-{n:02d}" for n in range(12)]
        for n, session_id in enumerate(sessions):
            await store_ended_session(conn, session_id, conversation(n, turns=2))
    finally:
        await conn.close()

    with log_lines("choir.memory", "choird") as lines:
        async with running_daemon(home) as daemon:
            await wait_closed(pool_of(daemon), *sessions, within=120)
            assert daemon.memory_index is not None
            await daemon.memory_index.settled()
            rows = await memory_rows(pool_of(daemon))
    mid_term = sorted({r.session_id for r in rows if r.tier == "mid_term"})
    assert mid_term == sessions[-3:]  # the oldest were promoted, in order
    promoted = {r.session_id for r in rows if r.tier == "long_term_summary"}
    assert promoted == set(sessions[:-3])
    assert all(r.vector for r in rows if r.tier != "long_term_detail")
    said = [line["message"] for line in lines]
    assert "memory: closing 12 ended sessions in the background" in said
    assert "memory: 10 ended sessions closed so far" in said
    assert "memory: 12 ended sessions closed" in said


async def test_a_session_resumed_after_its_close_adds_its_newer_events(daemon: ChoirDaemon):
    _, index, _ = parts(daemon)
    assert daemon.services is not None
    log = CommitLog()  # the agent's log, kept across its stop and `agent start --resume`

    async def work(started: StartedSession, events: list[Event]) -> None:
        plane = await agent_control_plane(daemon, "uds", started.session_id, started.lease_token)
        try:
            base = log.head_rev
            for event in events:
                log.commit("edge", event)
            await plane.heartbeat(heartbeat(log, base_rev=base))
            await plane.terminate_self(TerminateSelfRequest(reason="stop"))
        finally:
            await plane.close()

    started = await daemon.services.sessions.start("agent-1", {}, new_session=True)
    session_id = started.session_id
    await work(started, conversation(7, turns=6, summary=False))
    await wait_closed(pool_of(daemon), session_id)
    await index.settled()
    before = await memory_rows(pool_of(daemon))

    resumed = await daemon.services.sessions.start("agent-1", {}, resume=session_id)
    more: list[Event] = [UserMsg(text="later: " + TOPICS[2]), AgentReplied(text="later, done.")]
    await work(resumed, more)

    async def reclosed() -> bool:
        return len(await memory_rows(pool_of(daemon))) > len(before)

    await poll_until(reclosed, within=30)
    await wait_closed(pool_of(daemon), session_id)
    await index.settled()
    after = await memory_rows(pool_of(daemon))
    assert after[: len(before)] == before  # the first close's chunks, untouched
    added = after[len(before) :]
    assert [r.index for r in added] == list(range(len(before), len(after)))
    assert all(r.vector for r in added)
    assert any("later:" in r.text for r in added)
    assert not any("later:" in r.text for r in before)
