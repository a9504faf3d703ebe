"""The HNSW indexes' build parameters (agent migration 5): m 8, made in place on an agent schema
of an earlier version, its stored vectors kept and found through the new index."""

from __future__ import annotations

import uuid

import numpy as np
from pgvector import Vector as PgVector

from choir.daemon.memory.search.query import MemoryQuery
from choir.daemon.memory.store import PostgresMemoryStore
from choir.store.agent_schema import ensure_agent_schema, run_as_agent
from choir.store.memory.search import QUERIES
from choir.store.postgres.ddl import AGENT_MIGRATIONS, apply_migrations
from choir.store.postgres.idents import agent_schema, quote_ident
from choir.store.postgres.pool import Pool
from tests.memory.store.conftest import DIMS

INDEXES = ("memory_embeddings_hnsw_idx", "knowledge_embeddings_hnsw_idx")
BEFORE_M8 = 4
"""The last agent migration building the indexes with m 16."""


def _plan_nodes(plan: dict[str, object]) -> list[dict[str, object]]:
    nodes = [plan]
    for child in plan.get("Plans", []):  # type: ignore[attr-defined]
        nodes += _plan_nodes(child)
    return nodes


async def test_an_older_agent_schema_gets_m8_indexes_and_keeps_its_vectors(pool: Pool) -> None:
    agent_id = f"old-{uuid.uuid4().hex[:8]}"
    schema = quote_ident(agent_schema(agent_id))
    async with pool.acquire() as conn:
        # an agent schema as a choird of agent migration 4 left it, with knowledge and vectors
        await apply_migrations(
            conn,
            f"agent:{agent_id}",
            AGENT_MIGRATIONS[:BEFORE_M8],
            schema=schema,
            dims=DIMS,
        )
        notes = {"north": [1.0, 0.0, 0.0], "east": [0.0, 1.0, 0.0], "up": [0.0, 0.0, 1.0]}
        for text, vector in notes.items():
            doc = await conn.fetchval(
                f"INSERT INTO {schema}.knowledge_documents (text) VALUES ($1) RETURNING id", text
            )
            await conn.execute(
                f"INSERT INTO {schema}.knowledge_embeddings VALUES ($1, $2)", doc, vector
            )
        await ensure_agent_schema(conn, agent_id, DIMS)  # choird's next start
        definitions = await conn.fetch(
            "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = $1",
            agent_schema(agent_id),
        )
    built = {row["indexname"]: row["indexdef"] for row in definitions}
    m8 = "USING hnsw (embedding vector_cosine_ops) WITH (m='8', ef_construction='128')"
    for name in INDEXES:
        assert m8 in built[name], built[name]

    store = PostgresMemoryStore(pool)
    vector = np.array([0.1, 0.9, 0.0], np.float32)
    hits = await store.search(agent_id, MemoryQuery(store="knowledge", vector=vector, limit=3))
    assert [hit.text for hit in hits] == ["east", "north", "up"]
    async with pool.acquire() as conn, run_as_agent(conn, agent_id) as agent:
        await agent.execute("SET LOCAL enable_seqscan = off")  # three rows: any plan is cheap
        explained = await agent.fetchval(
            "EXPLAIN (FORMAT JSON) " + QUERIES["knowledge", "semantic"], PgVector(vector), 3
        )
    used = {node.get("Index Name") for node in _plan_nodes(explained[0]["Plan"])}
    assert "knowledge_embeddings_hnsw_idx" in used
