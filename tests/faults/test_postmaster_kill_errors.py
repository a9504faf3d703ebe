"""What queries see when the postmaster is killed under load: every failure reads as `down`.

choird answers a failed query by its cause (`choir.store.postgres.failures.classify`): a database
that is away is `unavailable` — exit 6 for a command, a refused heartbeat an agent resends — and
anything else is a bug, answered "internal error". Killing the postmaster while connections run
transactions brings the whole range of asyncpg's failures: refused connections, a connection closed
in the middle of an operation, a transaction whose connection is gone, and now and then a connection
left half-way through the server's last error (`InternalClientError`, "cannot switch to state 15;
another operation (2) is in progress"). That last one was classified as a bug:
`test_random_daemon_kills` saw `chat.send` and `agent status` answer "internal error" and heartbeats
refused as internal errors right after a kill. Each must read as `down`.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections import Counter
from pathlib import Path

import asyncpg
import pytest

from choir.store.postgres.embedded import EmbeddedPostgres
from choir.store.postgres.failures import classify
from choir.store.postgres.postmaster import postmaster_pid

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

KILLS = 3
WORKERS = 8
AFTER_KILL_S = 1.0
"""How long the workers keep trying after each kill."""


def test_the_error_of_a_connection_caught_mid_error_is_the_database_being_down() -> None:
    seen = asyncpg.exceptions.InternalClientError(
        "cannot switch to state 15; another operation (2) is in progress"
    )
    assert classify(seen) == "down"


async def test_every_failure_of_queries_under_a_killed_postmaster_is_the_database_being_down(
    scratch_dir: Path,
) -> None:
    failures: Counter[tuple[str, str | None]] = Counter()
    datadir = scratch_dir / "pgdata"
    async with EmbeddedPostgres(datadir) as server:
        for _ in range(KILLS):
            await asyncio.to_thread(server.start)  # again after each kill
            failures += await kill_under_load(server, datadir)
    print(f"failures seen: {dict(failures)}")
    misread = [kind for kind, verdict in failures if verdict != "down"]
    assert misread == []
    assert failures  # the kills were felt


async def kill_under_load(
    server: EmbeddedPostgres, datadir: Path
) -> Counter[tuple[str, str | None]]:
    """Kill the postmaster while `WORKERS` tasks run short transactions; their failures, each
    as (exception type, how `classify` reads it)."""
    pool = await asyncpg.create_pool(
        **server.params.connect_kwargs(), min_size=WORKERS, max_size=WORKERS
    )
    failures: Counter[tuple[str, str | None]] = Counter()
    stopping = asyncio.Event()

    async def worker() -> None:
        while not stopping.is_set():
            try:
                async with pool.acquire() as conn, conn.transaction():
                    await conn.fetchval("SELECT count(*) FROM pg_class")
            except Exception as error:
                failures[(type(error).__name__, classify(error))] += 1
                await asyncio.sleep(0.01)

    workers = [asyncio.create_task(worker()) for _ in range(WORKERS)]
    try:
        await asyncio.sleep(0.3)
        pid = postmaster_pid(datadir)
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        await asyncio.sleep(AFTER_KILL_S)
    finally:
        stopping.set()
        await asyncio.gather(*workers)
        pool.terminate()
    return failures
