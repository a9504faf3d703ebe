"""Which embedding model computed an agent's stored vectors (agent migration 4), and switching it.

    stored = await fit_embedding_model(conn, "ada", EmbeddingModel("local", 256))  # at start
    await switch_embedding_model(conn, "ada", EmbeddingModel("text-embedding-3-small", 1536))

Vectors of two models cannot be compared, even at equal sizes, so each agent schema records the
model and dimensions of its vectors in one row. At start (`fit_embedding_model`) an agent with
no vectors simply takes the configured model (its columns re-dimensioned); one whose vectors came
from another model keeps them and its marker: it is *stale* until `memory reembed` runs.
`switch_embedding_model` begins that re-embed in one transaction: the old vectors go (their rows
are then found by text until embedded again), the columns take the new size — which rebuilds
their HNSW indexes, empty — and the marker names the configured model. From then on every vector
stored is of the new model, so a re-embed stopped midway resumes by embedding the rows still
without one. Both run on choird's admin connection (they alter tables the agent's role cannot).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from choir.store.postgres.idents import agent_schema, quote_ident
from choir.store.postgres.pool import Connection

EMBEDDING_TABLES: Final = ("memory_embeddings", "knowledge_embeddings")
UNKNOWN_MODEL: Final = "unknown"
"""The marker of vectors stored before choir recorded models, at a size the configured model
does not have: what made them is not known, only that it was not this model."""


@dataclass(frozen=True, slots=True)
class EmbeddingModel:
    """A model as its vectors are known: its name (`local` or the model id) and their size."""

    name: str
    dims: int

    def __str__(self) -> str:
        return f"{self.name} ({self.dims} dimensions)"


async def fit_embedding_model(
    conn: Connection, agent_id: str, model: EmbeddingModel
) -> EmbeddingModel:
    """Record `model` as the agent's when it stores no vector of another; the model of its
    stored vectors (`model` itself unless they came from another one). In a transaction."""
    schema = quote_ident(agent_schema(agent_id))
    stored = await _marker(conn, schema)
    if stored is None:
        # vectors of a choir before the marker: the configured model's, if the sizes agree
        # (the embedding service never stored another model's), else a model now unknown
        column = await _column_dims(conn, agent_id)
        stored = model if column == model.dims else EmbeddingModel(UNKNOWN_MODEL, column)
        await _set_marker(conn, schema, stored)
    if stored == model:
        return model
    tables = _tables(schema)
    # the lock keeps a vector from arriving between the emptiness check and the change
    await conn.execute(f"LOCK TABLE {', '.join(tables)} IN ACCESS EXCLUSIVE MODE")
    vectors = " OR ".join(f"EXISTS (SELECT FROM {table})" for table in tables)
    if await conn.fetchval(f"SELECT {vectors}"):
        return stored
    await _resize(conn, tables, stored.dims, model.dims)
    await _set_marker(conn, schema, model)
    return model


async def switch_embedding_model(conn: Connection, agent_id: str, model: EmbeddingModel) -> bool:
    """Begin re-embedding the agent's memory with `model`: drop the vectors of another model,
    re-dimension the columns (indexes rebuilt) and record `model`, atomically. Whether anything
    changed (False: the vectors already are `model`'s)."""
    schema = quote_ident(agent_schema(agent_id))
    async with conn.transaction():
        tables = _tables(schema)
        await conn.execute(f"LOCK TABLE {', '.join(tables)} IN ACCESS EXCLUSIVE MODE")
        stored = await _marker(conn, schema)
        if stored == model:
            return False
        await conn.execute(f"TRUNCATE {', '.join(tables)}")
        await _resize(conn, tables, await _column_dims(conn, agent_id), model.dims)
        await _set_marker(conn, schema, model)
    return True


async def stored_embedding_model(conn: Connection, agent_id: str) -> EmbeddingModel | None:
    """The recorded model of the agent's vectors; None before any was recorded."""
    return await _marker(conn, quote_ident(agent_schema(agent_id)))


async def _marker(conn: Connection, schema: str) -> EmbeddingModel | None:
    row = await conn.fetchrow(f"SELECT model, dims FROM {schema}.embedding_model")
    return EmbeddingModel(row["model"], row["dims"]) if row is not None else None


async def _set_marker(conn: Connection, schema: str, model: EmbeddingModel) -> None:
    await conn.execute(
        f"INSERT INTO {schema}.embedding_model (model, dims) VALUES ($1, $2) "
        "ON CONFLICT (only_row) DO UPDATE SET model = EXCLUDED.model, dims = EXCLUDED.dims",
        model.name,
        model.dims,
    )


async def _resize(conn: Connection, tables: list[str], current: int, dims: int) -> None:
    if current == dims:
        return
    for table in tables:
        # changing the type rebuilds the column's HNSW index for the new dimensions
        await conn.execute(f"ALTER TABLE {table} ALTER COLUMN embedding TYPE vector({dims:d})")


async def _column_dims(conn: Connection, agent_id: str) -> int:
    dims: int = await conn.fetchval(
        "SELECT a.atttypmod FROM pg_attribute a "
        "JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = $1 AND c.relname = $2 AND a.attname = 'embedding'",
        agent_schema(agent_id),
        EMBEDDING_TABLES[0],
    )
    return dims


def _tables(schema: str) -> list[str]:
    return [f"{schema}.{table}" for table in EMBEDDING_TABLES]
