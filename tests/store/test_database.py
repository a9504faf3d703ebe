from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from pgvector import Vector

from choir.errors import ExitCode, UnavailableError
from choir.store.postgres.database import open_database
from choir.store.postgres.ddl import CONTROL_MIGRATIONS
from choir.store.postgres.embedded import EmbeddedPostgres
from choir.store.postgres.pool import connect, open_pool
from choir.store.postgres.target import ConnectParams, EmbeddedTarget, ExternalTarget

READY_GOAL_S = 3.0
"""choird must be ready within 3 s; the database is only part of that."""


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A loopback port with nothing listening (bound, never listened on)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


async def test_embedded_database_comes_up_migrated_and_restarts_fast(scratch_dir: Path) -> None:
    target = EmbeddedTarget(scratch_dir / "pgdata")
    async with open_database(target) as db:
        assert db.params.database == "choir"
        async with db.pool.acquire() as conn:
            await conn.execute(
                "INSERT INTO choir_control.agents (agent_id, name) VALUES ('a', 'A')"
            )

    started = time.perf_counter()
    async with open_database(target) as db:
        ready_s = time.perf_counter() - started
        async with db.pool.acquire() as conn:
            assert await conn.fetchval("SELECT name FROM choir_control.agents") == "A"
            versions = await conn.fetchval(
                "SELECT count(*) FROM choir_control.schema_version WHERE scope = 'control'"
            )
    assert versions == len(CONTROL_MIGRATIONS)
    assert ready_s < READY_GOAL_S


async def test_pool_connections_decode_jsonb_and_vectors(pg_params: ConnectParams) -> None:
    payload = {"text": "héllo", "nested": {"list": [1, 2.5, None, True]}, "empty": {}}
    async with open_pool(pg_params, min_size=1, max_size=2) as pool, pool.acquire() as conn:
        row = await conn.fetchrow(
            "SELECT $1::jsonb AS b, $1::json AS j, $2::vector AS v", payload, [0.5, -1.0, 2.0]
        )
    assert row is not None
    assert row["b"] == payload
    assert row["j"] == payload
    assert row["v"] == Vector([0.5, -1.0, 2.0])


async def test_unreachable_external_postgres_is_a_clear_error(closed_port: int) -> None:
    target = ExternalTarget("127.0.0.1", closed_port, "choir", "choir", password="s3cret")

    with pytest.raises(UnavailableError) as caught:
        async with open_database(target):
            pass

    assert str(caught.value) == (
        f"cannot connect to Postgres at 127.0.0.1:{closed_port}/choir: connection refused; "
        "check postgres in config.json"
    )
    assert caught.value.exit_code == ExitCode.UNAVAILABLE
    assert "s3cret" not in repr(target)


async def test_a_missing_database_is_named_in_the_error(pg_server: EmbeddedPostgres) -> None:
    params = pg_server.params.with_database("no_such_db")

    with pytest.raises(UnavailableError, match=r'/no_such_db: database "no_such_db" does not'):
        await connect(params)


async def test_a_missing_socket_directory_is_a_clear_error(scratch_dir: Path) -> None:
    params = ConnectParams(str(scratch_dir / "nowhere"), 5432, "choir", "choir")

    with pytest.raises(UnavailableError, match="nowhere:5432/choir: no server socket there"):
        await connect(params)


async def test_a_released_connection_costs_no_reset_round_trip(pg_params: ConnectParams) -> None:
    """Issue 13 point 7: asyncpg's reset query ran on every release — a round trip per
    acquire, one of a heartbeat's five. choir keeps no session state on a pooled connection,
    and an open transaction is still rolled back."""
    queries: list[BaseException | None] = []
    async with open_pool(pg_params, min_size=1, max_size=1, observe=queries.append) as pool:
        for _ in range(3):
            async with pool.acquire() as conn:
                assert await conn.fetchval("SELECT 1") == 1
        assert len(queries) == 3  # the three SELECTs, nothing on release
        async with pool.acquire() as conn:
            transaction = conn.transaction()
            await transaction.start()
            await conn.execute("SET LOCAL statement_timeout = 1234")
        async with pool.acquire() as conn:
            assert await conn.fetchval("SHOW statement_timeout") == "0"
            assert not conn.is_in_transaction()


async def test_a_connection_opened_for_overlapping_queries_closes_once_idle(pg_params):
    async with open_pool(pg_params, min_size=1, max_size=3, idle_close_s=0.3) as pool:

        async def busy() -> None:
            async with pool.acquire() as conn:
                await conn.execute("SELECT pg_sleep(0.1)")

        await asyncio.gather(busy(), busy())
        assert pool.get_size() == 2

        await asyncio.sleep(1.0)

        assert pool.get_size() == 1  # the floor stays, for the next query without a connect
        assert await pool.fetchval("SELECT 1") == 1
