"""Session close under faults: choird killed between storing a session's chunks and recording
its close (a real choird process), Postgres killed and restarted in the middle of a close, and
the embedding endpoint down while a session closes. Each time the close is resumed — nothing
stored twice — and vectors missing are added once the embedder is back."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from choir import failpoints
from choir.daemon.memory.embedding.backoff import Backoff
from choir.daemon.memory.embedding.breaker import CircuitBreaker
from choir.home import ChoirHome
from choir.store.postgres.ddl import apply_control_schema
from choir.store.postgres.pool import connect, open_pool
from choir.store.postgres.postmaster import postmaster_pid
from choir.store.postgres.target import ConnectParams
from tests.faults.support import spawn_choird, teardown
from tests.harness.daemons import poll_until, pool_of, running_daemon
from tests.harness.homes import external_postgres, make_home, read_config, write_config
from tests.memory.close.support import (
    close_state,
    conversation,
    memory_rows,
    run_session,
    store_ended_session,
    wait_closed,
)
from tests.memory.embeddings_server import EmbeddingsServer

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


@pytest.fixture
def armed(monkeypatch: pytest.MonkeyPatch) -> Callable[[str], None]:
    monkeypatch.setattr(failpoints, "_armed", None)

    def arm(spec: str) -> None:
        failpoints.arm_from_env({failpoints.ENV_VAR: spec})

    return arm


def log_text(home: ChoirHome) -> str:
    return home.choird_log.read_text(errors="replace")


async def test_choird_killed_mid_close_resumes_it_at_the_next_start(
    root: Path, pg_params: ConnectParams
) -> None:
    home = make_home(root, postgres=external_postgres(pg_params))
    conn = await connect(pg_params)
    try:
        await apply_control_schema(conn)
        await store_ended_session(conn, "s-killed-mid-close", conversation(0, turns=20))
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
        assert process.returncode == 137  # killed right after the chunks were stored
        async with open_pool(pg_params, min_size=1, max_size=2) as pool:
            assert await close_state(pool, "s-killed-mid-close") == "closing"
            stored = await memory_rows(pool)
            assert stored
            assert {r.tier for r in stored} == {"mid_term"}

            choird = await asyncio.to_thread(spawn_choird, home, "--runtime", "process")
            await wait_closed(pool, "s-killed-mid-close", within=60)
            await poll_until(lambda: "session memory closed" in log_text(home), within=30)

            async def embedded() -> bool:
                return all(r.vector for r in await memory_rows(pool))

            await poll_until(embedded, within=60, every=0.2)
            again = await memory_rows(pool)
        assert [(r.id, r.index, r.text) for r in again] == [
            (r.id, r.index, r.text) for r in stored
        ]  # the same rows: nothing stored twice
        log = log_text(home)
        assert "resuming the interrupted close of a session" in log
        assert "s-killed-mid-close" in log
    finally:
        await asyncio.to_thread(teardown, home, choird)


async def test_postgres_restarted_during_a_close_is_waited_for_and_the_close_resumed(
    root: Path, armed: Callable[[str], None]
) -> None:
    home = make_home(root)  # the embedded server, which choird restarts when it dies
    armed("memory.close.after_chunks=sleep(1500)")
    async with running_daemon(home) as daemon:
        await daemon.memory_started()
        assert daemon.database is not None
        assert daemon.database.embedded is not None
        session_id = await run_session(daemon, conversation(1, turns=10))

        async def chunks_stored() -> bool:
            return bool(await memory_rows(pool_of(daemon)))

        await poll_until(chunks_stored, within=30)
        stored = await memory_rows(pool_of(daemon))
        pid = postmaster_pid(home.pgdata)
        assert pid is not None
        os.kill(pid, signal.SIGKILL)  # while the close sleeps past its chunks

        await wait_closed(pool_of(daemon), session_id, within=90)
        assert daemon.memory_index is not None
        await daemon.memory_index.settled()

        async def embedded() -> bool:
            try:
                return all(r.vector for r in await memory_rows(pool_of(daemon)))
            except Exception:  # the server restarts (any connection error): ask again
                return False

        await poll_until(embedded, within=60, every=0.2)
        again = await memory_rows(pool_of(daemon))
        assert [(r.id, r.index, r.text) for r in again] == [(r.id, r.index, r.text) for r in stored]
        assert postmaster_pid(home.pgdata) not in (None, pid)  # a new server


async def test_choirds_stop_cuts_a_slow_close_short_and_the_next_start_finishes_it(
    root: Path, pg_params: ConnectParams, armed: Callable[[str], None]
) -> None:
    home = make_home(root, postgres=external_postgres(pg_params))
    armed("memory.close.after_chunks=sleep(60000)")
    async with running_daemon(home) as daemon:
        await daemon.memory_started()
        pool = pool_of(daemon)
        session_id = await run_session(daemon, conversation(3))

        async def chunks_stored() -> bool:
            return bool(await memory_rows(pool))

        await poll_until(chunks_stored, within=30)
        stopping = time.monotonic()
    assert time.monotonic() - stopping < 15  # the close's grace (2 s), not its minute
    armed("")
    async with running_daemon(home) as daemon:
        assert await close_state(pool_of(daemon), session_id) == "closing"
        await wait_closed(pool_of(daemon), session_id)


def embedding_home(root: Path, pg_params: ConnectParams, url: str) -> ChoirHome:
    home = make_home(root, postgres=external_postgres(pg_params))
    data: dict[str, Any] = read_config(home)
    data["embedding"] = {"provider": "test-server", "endpoint": url, "dimensions": 8}
    write_config(home, data)
    return home


async def test_an_embedder_down_during_a_close_leaves_chunks_for_the_backfill(
    root: Path, pg_params: ConnectParams
) -> None:
    server = EmbeddingsServer(dimensions=8)
    async with server:
        port = server.port
    home = embedding_home(root, pg_params, f"http://127.0.0.1:{port}/v1")  # nothing listens
    async with running_daemon(home) as daemon:
        assert daemon.memory is not None
        # §11.9's timings (1/2/4 s retries, a 30 s pause) at a test's scale
        daemon.memory._backoff = Backoff(base_s=0.01)
        daemon.memory._breaker = CircuitBreaker(threshold=3, cooldown_s=0.3)
        await daemon.memory_started()
        assert daemon.memory_index is not None
        daemon.memory_index.retry_s = (0.5,)
        session_id = await run_session(daemon, conversation(2, turns=12))
        await wait_closed(pool_of(daemon), session_id)
        await daemon.memory_index.settled()
        stored = await memory_rows(pool_of(daemon))
        assert stored
        assert not any(r.vector for r in stored)  # kept, found by text

        back = EmbeddingsServer(dimensions=8, port=port)
        async with back:

            async def embedded() -> bool:
                return all(r.vector for r in await memory_rows(pool_of(daemon)))

            await poll_until(embedded, within=60, every=0.1)
        again = await memory_rows(pool_of(daemon))
        assert [(r.id, r.text) for r in again] == [(r.id, r.text) for r in stored]
        assert {r.dims for r in again} == {8}
        assert back.batches  # the backfill's
