from __future__ import annotations

import asyncpg
import pytest

from choir.errors import ConfigError
from choir.store.agent_schema import embedding_dims_of, ensure_agent_schema, run_as_agent
from choir.store.memory.embedding_model import EmbeddingModel
from choir.store.postgres.ddl import AGENT_MIGRATIONS, apply_control_schema
from choir.store.postgres.pool import Connection

AGENT_TABLES = {
    "memory_documents",
    "memory_embeddings",
    "knowledge_documents",
    "knowledge_embeddings",
    "knowledge_forgotten",
    "knowledge_names",
    "knowledge_versions",
    "knowledge_edges",
    "knowledge_access",
    "knowledge_term_changes",
    "memory_key_checks",
    "embedding_model",
}


@pytest.fixture
async def two_agents(conn: Connection, agent_ids: tuple[str, str]) -> tuple[str, str]:
    await apply_control_schema(conn)
    for agent_id in agent_ids:
        await ensure_agent_schema(conn, agent_id, embedding_dims=3)
    return agent_ids


async def test_agent_schema_holds_memory_and_knowledge_tables(
    conn: Connection, two_agents: tuple[str, str]
) -> None:
    rows = await conn.fetch(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = $1",
        f"choir_{two_agents[0]}",
    )
    assert {row["table_name"] for row in rows} == AGENT_TABLES


async def test_embedding_columns_have_the_configured_dimensions(
    conn: Connection, agent_ids: tuple[str, str]
) -> None:
    await ensure_agent_schema(conn, agent_ids[0], embedding_dims=1536)
    types = await conn.fetch(
        "SELECT c.relname, format_type(a.atttypid, a.atttypmod) AS type FROM pg_attribute a "
        "JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = $1 AND a.attname = 'embedding' AND c.relkind = 'r'",
        f"choir_{agent_ids[0]}",
    )
    assert {(r["relname"], r["type"]) for r in types} == {
        ("memory_embeddings", "vector(1536)"),
        ("knowledge_embeddings", "vector(1536)"),
    }
    assert await embedding_dims_of(conn, agent_ids[0]) == 1536
    assert await embedding_dims_of(conn, agent_ids[1]) is None


async def test_embedding_indexes_are_hnsw_and_text_indexes_are_gin(
    conn: Connection, two_agents: tuple[str, str]
) -> None:
    rows = await conn.fetch(
        "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = $1", f"choir_{two_agents[0]}"
    )
    defs = {r["indexname"]: r["indexdef"] for r in rows}
    assert "USING hnsw (embedding vector_cosine_ops)" in defs["memory_embeddings_hnsw_idx"]
    assert "USING hnsw (embedding vector_cosine_ops)" in defs["knowledge_embeddings_hnsw_idx"]
    assert "USING gin (tsv)" in defs["memory_documents_tsv_idx"]
    assert "USING gin (tsv)" in defs["knowledge_documents_tsv_idx"]


async def test_ensure_agent_schema_is_idempotent_and_versioned(
    conn: Connection, two_agents: tuple[str, str]
) -> None:
    await ensure_agent_schema(conn, two_agents[0], embedding_dims=3)
    versions = await conn.fetch(
        "SELECT version FROM choir_control.schema_version WHERE scope = $1",
        f"agent:{two_agents[0]}",
    )
    assert [r["version"] for r in versions] == [m.version for m in AGENT_MIGRATIONS]


async def test_other_dimensions_keep_stored_vectors_and_report_them_stale(
    conn: Connection, two_agents: tuple[str, str]
) -> None:
    async with run_as_agent(conn, two_agents[0]) as agent:
        doc_id = await agent.fetchval(
            "INSERT INTO knowledge_documents (name, text) VALUES ('note', 'a note') RETURNING id"
        )
        await agent.execute(
            "INSERT INTO knowledge_embeddings VALUES ($1, $2)", doc_id, [1.0, 0.0, 0.0]
        )
    # choird starts (it used to refuse): the vectors stay, their model is named
    stored = await ensure_agent_schema(conn, two_agents[0], embedding_dims=8)
    assert stored == EmbeddingModel("local", 3)
    assert await embedding_dims_of(conn, two_agents[0]) == 3


async def test_empty_embedding_tables_take_the_new_dimensions(
    conn: Connection, two_agents: tuple[str, str]
) -> None:
    await ensure_agent_schema(conn, two_agents[0], embedding_dims=8)

    assert await embedding_dims_of(conn, two_agents[0]) == 8
    types = await conn.fetch(
        "SELECT format_type(a.atttypid, a.atttypmod) AS type FROM pg_attribute a "
        "JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = $1 AND a.attname = 'embedding' AND c.relkind = 'r'",
        f"choir_{two_agents[0]}",
    )
    assert [r["type"] for r in types] == ["vector(8)", "vector(8)"]
    # the HNSW indexes came back with the column, and the agent's role still uses the tables
    async with run_as_agent(conn, two_agents[0]) as agent:
        indexes = await agent.fetch(
            "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema() "
            "AND indexdef LIKE '%USING hnsw%'"
        )
        doc_id = await agent.fetchval(
            "INSERT INTO knowledge_documents (name, text) VALUES ('note', 'a note') RETURNING id"
        )
        await agent.execute("INSERT INTO knowledge_embeddings VALUES ($1, $2)", doc_id, [1.0] * 8)
    assert {r["indexname"] for r in indexes} == {
        "memory_embeddings_hnsw_idx",
        "knowledge_embeddings_hnsw_idx",
    }


@pytest.mark.parametrize("dims", [0, 2001])
async def test_dimensions_an_hnsw_index_cannot_hold_are_refused(
    conn: Connection, agent_ids: tuple[str, str], dims: int
) -> None:
    with pytest.raises(ConfigError, match="1 to 2000"):
        await ensure_agent_schema(conn, agent_ids[0], embedding_dims=dims)


async def test_agent_role_cannot_log_in(conn: Connection, two_agents: tuple[str, str]) -> None:
    can_login = await conn.fetchval(
        "SELECT rolcanlogin FROM pg_roles WHERE rolname = $1", f"choir_{two_agents[0]}"
    )
    assert can_login is False


async def test_agent_role_uses_its_own_schema_including_vector_search(
    conn: Connection, two_agents: tuple[str, str]
) -> None:
    async with run_as_agent(conn, two_agents[0]) as agent:
        assert await agent.fetchval("SELECT current_user") == f"choir_{two_agents[0]}"
        doc_id = await agent.fetchval(
            "INSERT INTO memory_documents (session_id, tier, chunk_index, text, metadata) "
            "VALUES ('s1', 'mid_term', 0, 'the deploy script needs sudo', $1) RETURNING id",
            {"topic": "deploy"},
        )
        await agent.execute(
            "INSERT INTO memory_embeddings (document_id, embedding) VALUES ($1, $2)",
            doc_id,
            [1.0, 0.0, 0.0],
        )
        row = await agent.fetchrow(
            "SELECT d.metadata, 1 - (e.embedding <=> $1) AS score, "
            "d.tsv @@ to_tsquery('deploy') AS text_match "
            "FROM memory_documents d JOIN memory_embeddings e ON d.id = e.document_id",
            [1.0, 0.0, 0.0],
        )
    assert row is not None
    assert row["metadata"] == {"topic": "deploy"}
    assert row["score"] == pytest.approx(1.0)
    assert row["text_match"] is True
    assert await conn.fetchval("SELECT current_user") == "postgres"


@pytest.mark.parametrize(
    "query",
    [
        "SELECT count(*) FROM choir_control.sessions",
        "SELECT count(*) FROM choir_control.schema_version",
        "CREATE TABLE choir_control.sneaky (x int)",
        "CREATE TABLE public.sneaky (x int)",
    ],
)
async def test_agent_role_cannot_touch_control_tables_or_public(
    conn: Connection, two_agents: tuple[str, str], query: str
) -> None:
    with pytest.raises(asyncpg.InsufficientPrivilegeError):
        async with run_as_agent(conn, two_agents[0]) as agent:
            await agent.execute(query)


@pytest.mark.parametrize("table", ["memory_documents", "knowledge_embeddings"])
async def test_agent_role_cannot_read_another_agents_schema(
    conn: Connection, two_agents: tuple[str, str], table: str
) -> None:
    own, other = two_agents
    with pytest.raises(asyncpg.InsufficientPrivilegeError, match=f"schema choir_{other}"):
        async with run_as_agent(conn, own) as agent:
            await agent.fetch(f'SELECT * FROM "choir_{other}".{table}')


async def test_run_as_agent_refuses_to_nest_in_a_transaction(
    conn: Connection, two_agents: tuple[str, str]
) -> None:
    async with conn.transaction():
        with pytest.raises(RuntimeError, match="not inside a transaction"):
            async with run_as_agent(conn, two_agents[0]):
                pass
