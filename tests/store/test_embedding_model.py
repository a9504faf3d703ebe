"""The model of an agent's stored vectors (agent migration 4): recorded at start, kept while
vectors of another model are stored (the agent is stale), switched by a re-embed — old vectors
dropped, columns and HNSW indexes re-dimensioned, the new model recorded, in one transaction."""

from __future__ import annotations

import pytest

from choir.store.agent_schema import embedding_dims_of, ensure_agent_schema, run_as_agent
from choir.store.memory.embedding_model import (
    UNKNOWN_MODEL,
    EmbeddingModel,
    stored_embedding_model,
    switch_embedding_model,
)
from choir.store.postgres.ddl import apply_control_schema
from choir.store.postgres.pool import Connection

LOCAL = EmbeddingModel("local", 3)


@pytest.fixture
async def agent(conn: Connection, agent_ids: tuple[str, str]) -> str:
    await apply_control_schema(conn)
    assert await ensure_agent_schema(conn, agent_ids[0], 3, "local") == LOCAL
    return agent_ids[0]


async def store_vectors(conn: Connection, agent_id: str, dims: int) -> None:
    async with run_as_agent(conn, agent_id) as agent:
        for n in range(3):
            doc = await agent.fetchval(
                "INSERT INTO knowledge_documents (name, text) VALUES ($1, $1) RETURNING id",
                f"note {n}",
            )
            await agent.execute(
                "INSERT INTO knowledge_embeddings VALUES ($1, $2)", doc, [float(n + 1)] * dims
            )
        chunk = await agent.fetchval(
            "INSERT INTO memory_documents (session_id, tier, chunk_index, text) "
            "VALUES ('s-1', 'mid_term', 0, 'a chunk') RETURNING id"
        )
        await agent.execute("INSERT INTO memory_embeddings VALUES ($1, $2)", chunk, [1.0] * dims)


async def vectors(conn: Connection, agent_id: str) -> int:
    async with run_as_agent(conn, agent_id) as agent:
        count: int = await agent.fetchval(
            "SELECT (SELECT count(*) FROM memory_embeddings) "
            "+ (SELECT count(*) FROM knowledge_embeddings)"
        )
    return count


async def test_a_start_records_the_configured_model(conn: Connection, agent: str) -> None:
    assert await stored_embedding_model(conn, agent) == LOCAL
    await store_vectors(conn, agent, 3)
    assert await ensure_agent_schema(conn, agent, 3, "local") == LOCAL  # unchanged: current


async def test_vectors_of_a_choir_before_the_marker_are_taken_as_the_configured_models(
    conn: Connection, agent: str
) -> None:
    await store_vectors(conn, agent, 3)
    schema = f'"choir_{agent}"'
    await conn.execute(f"DELETE FROM {schema}.embedding_model")  # as migration 4 left it
    assert await ensure_agent_schema(conn, agent, 3, "local") == LOCAL
    await conn.execute(f"DELETE FROM {schema}.embedding_model")
    # at another size they cannot be the configured model's: stale, of a model now unknown
    stale = await ensure_agent_schema(conn, agent, 8, "local")
    assert stale == EmbeddingModel(UNKNOWN_MODEL, 3)
    assert await vectors(conn, agent) == 4


async def test_another_model_at_the_same_size_is_seen_and_its_vectors_kept(
    conn: Connection, agent: str
) -> None:
    await store_vectors(conn, agent, 3)
    assert await ensure_agent_schema(conn, agent, 3, "other-model") == LOCAL  # stale
    assert await stored_embedding_model(conn, agent) == LOCAL
    assert await vectors(conn, agent) == 4


async def test_empty_tables_simply_take_another_model(conn: Connection, agent: str) -> None:
    wide = EmbeddingModel("text-embedding-3-small", 16)
    assert await ensure_agent_schema(conn, agent, 16, wide.name) == wide
    assert await stored_embedding_model(conn, agent) == wide
    assert await embedding_dims_of(conn, agent) == 16


async def test_a_switch_drops_old_vectors_and_resizes_columns_and_indexes(
    conn: Connection, agent: str
) -> None:
    await store_vectors(conn, agent, 3)
    wide = EmbeddingModel("text-embedding-3-small", 16)
    assert await ensure_agent_schema(conn, agent, 16, wide.name) == LOCAL

    assert await switch_embedding_model(conn, agent, wide) is True

    assert await stored_embedding_model(conn, agent) == wide
    assert await vectors(conn, agent) == 0  # the rows stay, found by text
    types = await conn.fetch(
        "SELECT format_type(a.atttypid, a.atttypmod) AS type FROM pg_attribute a "
        "JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = $1 AND a.attname = 'embedding' AND c.relkind = 'r'",
        f"choir_{agent}",
    )
    assert [r["type"] for r in types] == ["vector(16)", "vector(16)"]
    async with run_as_agent(conn, agent) as role:
        assert await role.fetchval("SELECT count(*) FROM knowledge_documents") == 3
        indexes = await role.fetch(
            "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema() "
            "AND indexdef LIKE '%USING hnsw%'"
        )
        doc = await role.fetchval("SELECT id FROM knowledge_documents LIMIT 1")
        await role.execute("INSERT INTO knowledge_embeddings VALUES ($1, $2)", doc, [0.5] * 16)
        nearest = await role.fetchval(
            "SELECT document_id FROM knowledge_embeddings ORDER BY embedding <=> $1 LIMIT 1",
            [0.5] * 16,
        )
    assert nearest == doc
    assert {r["indexname"] for r in indexes} == {
        "memory_embeddings_hnsw_idx",
        "knowledge_embeddings_hnsw_idx",
    }
    # a second switch to the same model (a resumed re-embed) keeps what was embedded
    assert await switch_embedding_model(conn, agent, wide) is False
    assert await vectors(conn, agent) == 1
    assert await ensure_agent_schema(conn, agent, 16, wide.name) == wide  # current again
