"""Per-agent schemas and roles (§23.0): `choir_<agent_id>` owns an agent's memory and knowledge.

choird connects as one admin role. Agent-initiated queries (memory and knowledge host tools) run
under the agent's NOLOGIN role via `run_as_agent`, which can use its own schema and nothing of
`choir_control` or another agent. Agents never hold Postgres credentials, so the role is a
second wall behind choird's own query building, not the only one.

Roles are cluster-wide while schemas live in one database, so role creation tolerates a role
that already exists (another database on the same server, or a rerun).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Final

import asyncpg

from choir.errors import ConfigError, NotFoundError
from choir.store.memory.embedding_model import EMBEDDING_TABLES, EmbeddingModel, fit_embedding_model
from choir.store.postgres.ddl import AGENT_MIGRATIONS, CONTROL_SCHEMA, apply_migrations
from choir.store.postgres.idents import agent_role, agent_schema, quote_ident
from choir.store.postgres.pool import Connection
from choir.store.postgres.ranking_ddl import RANKING_MIGRATIONS, RANKING_SCOPE

MAX_HNSW_DIMS: Final = 2000
"""pgvector's limit for an HNSW index on `vector`."""


async def ensure_agent_schema(
    conn: Connection, agent_id: str, embedding_dims: int, model: str = "local"
) -> EmbeddingModel:
    """Create (or upgrade) `agent_id`'s schema and role; idempotent. Returns the model of the
    agent's stored vectors: the configured one (`model`, `embedding_dims`), or another when
    vectors of another model are stored (the agent needs `memory reembed`; its memory is
    searched by text until then).

    Empty embedding tables simply take the configured dimensions (nothing is lost: a home made
    before the local embedder became the default has 1536-dim columns and no vectors);
    `choir.store.memory.embedding_model` keeps stored vectors from being mixed with another model's.
    """
    _check_dims(embedding_dims)
    schema = quote_ident(agent_schema(agent_id))
    role = quote_ident(agent_role(agent_id))
    async with conn.transaction():
        await _ensure_role(conn, role)
        await apply_migrations(
            conn, f"agent:{agent_id}", AGENT_MIGRATIONS, schema=schema, dims=embedding_dims
        )
        await apply_migrations(
            conn, f"{RANKING_SCOPE}:{agent_id}", RANKING_MIGRATIONS, schema=schema
        )
        await _grant(conn, schema, role)
        return await fit_embedding_model(conn, agent_id, EmbeddingModel(model, embedding_dims))


async def embedding_dims_of(conn: Connection, agent_id: str) -> int | None:
    """The dimensions of `agent_id`'s memory embeddings, or None when it has no schema yet."""
    dims: int | None = await conn.fetchval(
        "SELECT a.atttypmod FROM pg_attribute a "
        "JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = $1 AND c.relname = $2 AND a.attname = 'embedding'",
        agent_schema(agent_id),
        EMBEDDING_TABLES[0],
    )
    return dims


@asynccontextmanager
async def run_as_agent(
    conn: Connection, agent_id: str, *, ef_search: int | None = None
) -> AsyncIterator[Connection]:
    """A transaction on `conn` running as `agent_id`'s role, with its schema first on the path.

    `SET LOCAL` ends with the transaction, so the connection returns to the pool as admin. It
    must not be nested in an open transaction: a released savepoint would keep the role.
    `ef_search` sets the HNSW search breadth for the transaction's vector queries. The
    transaction opens in the same round trip as the settings (asyncpg's `transaction()` sends
    its BEGIN alone): a search is three round trips, not four, and each costs both processes a
    wake-up (~25% of a vector search's client CPU went to socket writes).
    """
    if conn.is_in_transaction():
        raise RuntimeError("run_as_agent needs a connection that is not inside a transaction")
    schema = quote_ident(agent_schema(agent_id))
    settings = f"; SET LOCAL hnsw.ef_search = {ef_search:d}" if ef_search is not None else ""
    try:
        await conn.execute(
            f"BEGIN; SET LOCAL ROLE {quote_ident(agent_role(agent_id))}; "
            f"SET LOCAL search_path TO {schema}, public{settings}"
        )
    except asyncpg.InvalidParameterValueError:  # the role does not exist
        await _rollback(conn)
        raise NotFoundError(
            f"agent {agent_id} has no memory schema: add it to config.json, then run "
            "`choirctl config load` and `choirctl config apply`"
        ) from None
    except BaseException:
        await _rollback(conn)
        raise
    try:
        yield conn
    except BaseException:
        await _rollback(conn)
        raise
    await conn.execute("COMMIT")


async def _rollback(conn: Connection) -> None:
    """End the transaction run_as_agent began, if the connection still has one; a connection
    that is gone has none left to end."""
    if conn.is_closed() or not conn.is_in_transaction():
        return
    with contextlib.suppress(asyncpg.PostgresConnectionError, asyncpg.InterfaceError, OSError):
        await conn.execute("ROLLBACK")


async def _ensure_role(conn: Connection, role: str) -> None:
    await conn.execute(
        f"DO $$ BEGIN CREATE ROLE {role} NOLOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$"
    )
    # choird's admin may be a non-superuser with CREATEROLE: membership lets it SET ROLE.
    await conn.execute(f"GRANT {role} TO CURRENT_USER")


async def _grant(conn: Connection, schema: str, role: str) -> None:
    control = quote_ident(CONTROL_SCHEMA)
    await conn.execute(
        f"REVOKE ALL ON SCHEMA public FROM {role}; "
        f"REVOKE ALL ON SCHEMA {control} FROM {role}; "
        f"REVOKE ALL ON ALL TABLES IN SCHEMA {control} FROM {role}; "
        f"GRANT USAGE, CREATE ON SCHEMA {schema} TO {role}; "
        f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {schema} TO {role}"
    )


def _check_dims(dims: int) -> None:
    if not 1 <= dims <= MAX_HNSW_DIMS:
        raise ConfigError(
            [
                f"embedding dimensions {dims} are out of range: memory search indexes support "
                f"1 to {MAX_HNSW_DIMS}; choose an embedding model with at most {MAX_HNSW_DIMS}"
            ]
        )
