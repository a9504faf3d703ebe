"""Compaction archives under faults: the archive an event names is stored even when choird was
not there when the event became durable, and a choird killed right after storing it (its close
not recorded) stores it once, not twice, when the close is resumed."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest

from choir import failpoints
from choir.protocol.log.events import CompactionArchive, Event, MemoryWriteCommitted
from choir.protocol.tooling.memory import MemoryDelta
from choir.store.agent_schema import run_as_agent
from choir.store.postgres.ddl import apply_control_schema
from choir.store.postgres.pool import Pool, connect, open_pool
from choir.store.postgres.target import ConnectParams
from tests.faults.support import spawn_choird, teardown
from tests.harness.daemons import poll_until, pool_of, running_daemon
from tests.harness.homes import external_postgres, make_home
from tests.memory.close.support import (
    close_state,
    conversation,
    run_session,
    store_ended_session,
    wait_closed,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

SESSION = "s-00aa11bb22cc33dd"
NAME = "archive/00aa11bb22cc33dd/8"


def compacted() -> list[Event]:
    """A conversation whose edge lane folded revs 1-8 into an archive at rev 9."""
    events = conversation(0, turns=6, summary=False)
    write = MemoryWriteCommitted(
        summary_lane="edge",
        delta=MemoryDelta(
            mode="append",
            summary_update=f"The user asked how the deploy script works. [archived as {NAME}]",
        ),
        window_start_rev=9,
        archive=CompactionArchive(name=NAME, folded_from_rev=1, archived_at="2026-11-27T13:52Z"),
    )
    return [*events[:8], write, *events[8:]]


async def archives(pool: Pool) -> list[tuple[str, str]]:
    async with pool.acquire() as conn, run_as_agent(conn, "agent-1") as agent:
        rows = await agent.fetch(
            "SELECT name, text FROM knowledge_documents WHERE metadata ? 'compaction_archive'"
        )
    return [(row["name"], row["text"]) for row in rows]


async def test_choird_killed_after_storing_an_archive_stores_it_once_at_the_resumed_close(
    root: Path, pg_params: ConnectParams
) -> None:
    home = make_home(root, postgres=external_postgres(pg_params))
    conn = await connect(pg_params)
    try:
        await apply_control_schema(conn)
        await store_ended_session(conn, SESSION, compacted())  # durable, no archive stored
    finally:
        await conn.close()
    choird = None
    try:
        choird = await asyncio.to_thread(
            spawn_choird,
            home,
            "--runtime",
            "process",
            CHOIR_FAILPOINTS="memory.close.after_chunks=exit",
        )
        process = choird.process
        await poll_until(lambda: process.poll() is not None, within=60)
        assert process.returncode == 137  # killed after the archive and chunks were stored
        async with open_pool(pg_params, min_size=1, max_size=2) as pool:
            assert await close_state(pool, SESSION) == "closing"
            first = await archives(pool)
            assert [name for name, _ in first] == [NAME]
            assert "The user asked how the deploy script works." in first[0][1]
            assert "[archived as" not in first[0][1]

            choird = await asyncio.to_thread(spawn_choird, home, "--runtime", "process")
            await wait_closed(pool, SESSION, within=60)
            assert await archives(pool) == first  # stored once, the same text
    finally:
        await asyncio.to_thread(teardown, home, choird)


@pytest.fixture
def armed(monkeypatch: pytest.MonkeyPatch) -> Callable[[str], None]:
    monkeypatch.setattr(failpoints, "_armed", None)

    def arm(spec: str) -> None:
        failpoints.arm_from_env({failpoints.ENV_VAR: spec})

    return arm


async def test_an_archive_whose_eager_store_failed_is_stored_at_the_sessions_close(
    root: Path, pg_params: ConnectParams, armed: Callable[[str], None]
) -> None:
    armed("memory.archive.before_store=panic")
    home = make_home(root, postgres=external_postgres(pg_params))
    async with running_daemon(home) as daemon:
        await daemon.memory_started()
        session_id = await run_session(daemon, compacted())
        await wait_closed(pool_of(daemon), session_id, within=60)
        assert daemon.archive_writer is not None
        await daemon.archive_writer.settled()
        stored = await archives(pool_of(daemon))
    assert [n for n, _ in stored] == [NAME]  # the name the event gave, stored once
