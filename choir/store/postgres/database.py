"""choird's database from start to stop: steps 3 and 5 of its startup (§6.2).

`open_database` starts the embedded server when configured (creating choir's database on first
run), or checks that the external one answers; then opens the pool and brings `choir_control`
up to date. Step 4 — per-agent schemas — is `ensure_agent_schema`, run by the daemon for each
configured agent. Everything opened is closed in reverse order, also when a later step fails.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass

import asyncpg

from choir.store.postgres.ddl import apply_control_schema
from choir.store.postgres.embedded import EmbeddedPostgres
from choir.store.postgres.idents import quote_ident
from choir.store.postgres.pool import Pool, QueryObserver, connect_plain, open_pool
from choir.store.postgres.target import ConnectParams, EmbeddedTarget, PostgresTarget


@dataclass(frozen=True, slots=True)
class Database:
    """choird's open database: the pool, and the embedded server when choird runs one."""

    pool: Pool
    params: ConnectParams
    """Where the pool connects (the password is kept out of reprs)."""
    embedded: EmbeddedPostgres | None = None
    """The server choird runs itself, or None for an external Postgres."""


@asynccontextmanager
async def open_database(
    target: PostgresTarget,
    *,
    min_size: int = 2,
    max_size: int = 10,
    observe: QueryObserver | None = None,
    server: EmbeddedPostgres | None = None,
    idle_close_s: float = 300.0,
) -> AsyncIterator[Database]:
    """Postgres ready for choird: server up, pool open, control schema current. `observe`
    hears the outcome of every query on the pool (choird's fault detection); `server` is the
    embedded target's server when the caller began its start already (`start_soon`); a
    connection above `min_size` idle for `idle_close_s` is closed."""
    async with AsyncExitStack() as stack:
        if isinstance(target, EmbeddedTarget):
            server = server if server is not None else EmbeddedPostgres(target.datadir)
            server = await stack.enter_async_context(server)
            params = server.params.with_database(target.database)
            await create_database_if_missing(server.params, target.database)
        else:
            server, params = None, target.params()
        pool = await stack.enter_async_context(
            open_pool(
                params,
                min_size=min_size,
                max_size=max_size,
                observe=observe,
                idle_close_s=idle_close_s,
            )
        )
        async with pool.acquire() as conn:
            await apply_control_schema(conn)
        yield Database(pool=pool, params=params, embedded=server)


async def create_database_if_missing(admin: ConnectParams, database: str) -> bool:
    """Create `database` through the `admin` connection's server; True when it was created."""
    conn = await connect_plain(admin)
    try:
        exists = await conn.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", database)
        if exists:
            return False
        try:
            await conn.execute(f"CREATE DATABASE {quote_ident(database)}")
        except asyncpg.DuplicateDatabaseError:
            return False
        return True
    finally:
        await conn.close()
