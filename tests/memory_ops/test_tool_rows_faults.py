"""Tool rows under a kill. `memory backfill-tools`: choird (a real process) dies right after
the first session's rows are stored; `choirctl` reports choird gone in one line, and the next
run, on a restarted choird, fills the remaining session. A close: choird dies with a session's
chunks and tool rows stored, its close not recorded; the next start finishes it. Every row is
stored exactly once."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from choir.store.postgres.ddl import apply_control_schema
from choir.store.postgres.pool import connect, open_pool
from choir.store.postgres.target import ConnectParams
from tests.ctl.cli import choirctl
from tests.faults.support import spawn_choird, teardown
from tests.harness.homes import external_postgres, make_home
from tests.harness.waits import poll_until
from tests.memory.close.support import store_ended_session, wait_closed
from tests.memory_ops.test_tool_rows import forget_tool_rows, tool_rows, tool_session

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


async def test_a_backfill_killed_midway_is_completed_by_the_next_run_once(
    root: Path, pg_params: ConnectParams
) -> None:
    home = make_home(root, postgres=external_postgres(pg_params))
    sessions = ["s-tools-a", "s-tools-b"]
    conn = await connect(pg_params)
    try:
        await apply_control_schema(conn)
        for number, session_id in enumerate(sessions):
            await store_ended_session(conn, session_id, tool_session(number))
    finally:
        await conn.close()
    choird = None
    try:
        async with open_pool(pg_params, min_size=1, max_size=2) as pool:
            choird = await asyncio.to_thread(spawn_choird, home, "--runtime", "process")
            await wait_closed(pool, *sessions, within=60)
            closed = await tool_rows(pool)
            await forget_tool_rows(pool)  # as a choird before tool rows closed them
            await asyncio.to_thread(teardown, home, choird)

            choird = await asyncio.to_thread(
                spawn_choird,
                home,
                "--runtime",
                "process",
                CHOIR_FAILPOINTS="memory.backfill_tools.after_session=exit",
            )
            killed = await asyncio.to_thread(
                choirctl, home.root, "memory", "backfill-tools", "agent-1"
            )
            process = choird.process
            await poll_until(lambda: process.poll() is not None, within=30)
            halfway = await tool_rows(pool)

            choird = await asyncio.to_thread(spawn_choird, home, "--runtime", "process")
            started = time.monotonic()
            finished = await asyncio.to_thread(
                choirctl, home.root, "memory", "backfill-tools", "agent-1", "--json"
            )
            assert time.monotonic() - started < 120
            done = await tool_rows(pool)
    finally:
        await asyncio.to_thread(teardown, home, choird)

    assert process.returncode == 137  # killed right after the first session's rows
    assert killed.code != 0
    assert len(killed.err.strip().splitlines()) == 1
    assert {r["session_id"] for r in halfway} == {sessions[0]}
    assert finished.code == 0, finished.err
    assert finished.json()["agents"] == [
        {"agent_id": "agent-1", "sessions": 1, "rows": 3, "already": 1}
    ]
    key = ("session_id", "tier", "chunk_index", "text")
    assert [tuple(r[k] for k in key) for r in done] == [tuple(r[k] for k in key) for r in closed]
    assert len(done) == 6


async def test_choird_killed_mid_close_stores_each_tool_row_once(
    root: Path, pg_params: ConnectParams
) -> None:
    home = make_home(root, postgres=external_postgres(pg_params))
    conn = await connect(pg_params)
    try:
        await apply_control_schema(conn)
        await store_ended_session(conn, "s-tools-killed", tool_session(7))
    finally:
        await conn.close()
    choird = None
    try:
        async with open_pool(pg_params, min_size=1, max_size=2) as pool:
            choird = await asyncio.to_thread(
                spawn_choird,
                home,
                "--runtime",
                "process",
                CHOIR_FAILPOINTS="memory.close.after_chunks=exit",
            )
            process = choird.process
            await poll_until(lambda: process.poll() is not None, within=60)
            stored = await tool_rows(pool)
            choird = await asyncio.to_thread(spawn_choird, home, "--runtime", "process")
            await wait_closed(pool, "s-tools-killed", within=60)
            again = await tool_rows(pool)
    finally:
        await asyncio.to_thread(teardown, home, choird)

    assert process.returncode == 137  # killed with the chunks and tool rows stored
    key = ("session_id", "tier", "chunk_index", "text")
    assert [r["chunk_index"] for r in stored] == [-3, -4, -6]
    assert [tuple(r[k] for k in key) for r in again] == [tuple(r[k] for k in key) for r in stored]
