"""Session close in a real choird (test Postgres, local embedder): a session's agent replicates
its events and stops; choird stores them as mid-term chunks with vectors, promotes the oldest
session past `mid_term_sessions`, closes a crashed session once a newer one aged it out, and a
second close of a session changes nothing."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from choir.daemon.app import ChoirDaemon
from choir.daemon.memory.search import MemoryQuery
from choir.store.memory_closes import PendingClose
from choir.store.postgres.target import ConnectParams
from tests.harness.daemons import pool_of, running_daemon
from tests.harness.homes import external_postgres, make_home
from tests.memory.close.support import (
    TOPICS,
    close_state,
    conversation,
    memory_rows,
    run_session,
    wait_closed,
)

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
async def daemon(root: Path, pg_params: ConnectParams) -> AsyncIterator[ChoirDaemon]:
    home = make_home(root, postgres=external_postgres(pg_params), mid_term_sessions=2)
    async with running_daemon(home) as daemon:
        await daemon.memory_ready.wait()
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
        assert await closer.close_one(PendingClose(session_id, "agent-1", None)) == 0
    async with pool_of(daemon).acquire() as conn:  # as if each close had been cut short
        await conn.execute(
            "UPDATE choir_control.memory_closes SET state = 'closing', closed_at = NULL"
        )
    assert await closer.close_pending() == 3
    await index.settled()

    assert await memory_rows(pool_of(daemon)) == before
    assert [await close_state(pool_of(daemon), s) for s in sessions] == ["closed"] * 3
