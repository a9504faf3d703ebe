"""An agent whose vectors came from another model (same size even): its semantic and hybrid
searches answer by text and never rank the old vectors, and no new vector is stored beside
them; once the re-embed switched it, semantic search answers the new model's vectors only."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest

from choir.daemon.memory.embedding.vector_models import VectorModels
from choir.daemon.memory.search.query import MemoryQuery
from choir.daemon.memory.store import PostgresMemoryStore
from choir.store.agent_schema import ensure_agent_schema
from choir.store.memory.embedding_model import EmbeddingModel, switch_embedding_model
from choir.store.postgres.ddl import apply_control_schema
from choir.store.postgres.pool import Pool, open_pool
from choir.store.postgres.target import ConnectParams

OLD, NEW = EmbeddingModel("m-old", 3), EmbeddingModel("m-new", 3)


@pytest.fixture
def agent() -> str:
    return f"ada-{uuid.uuid4().hex[:8]}"


@pytest.fixture
async def pool(pg_params: ConnectParams, agent: str) -> AsyncIterator[Pool]:
    async with open_pool(pg_params, min_size=1, max_size=3) as opened:
        async with opened.acquire() as conn:
            await apply_control_schema(conn)
            await ensure_agent_schema(conn, agent, OLD.dims, OLD.name)
        yield opened


async def test_a_stale_agent_is_searched_by_text_until_its_reembed_switches_it(
    pool: Pool, agent: str
) -> None:
    before = PostgresMemoryStore(pool)  # a choird on the old model stored these
    lunch = await before.put_knowledge(agent, "lunch is at noon")
    deploy = await before.put_knowledge(agent, "the deploy key lives in the vault")
    await before.set_vectors(agent, "knowledge", [(lunch.id, [1.0, 0.0, 0.0])])
    await before.set_vectors(agent, "knowledge", [(deploy.id, [0.0, 1.0, 0.0])])

    # choird restarts on another model of the same size: the start finds the agent stale
    async with pool.acquire() as conn:
        stored = await ensure_agent_schema(conn, agent, NEW.dims, NEW.name)
    assert stored == OLD
    models = VectorModels(NEW)
    models.record(agent, stored)
    assert not models.current(agent)
    store = PostgresMemoryStore(pool, models=models)

    # the query's vector is nearest the lunch item's old vector: it must not count
    query = MemoryQuery(store="knowledge", mode="semantic", text="deploy", vector=[1.0, 0.0, 0.0])
    hits = await store.search(agent, query)
    assert [h.source.id for h in hits] == [deploy.id]  # by text
    hybrid = MemoryQuery(store="knowledge", mode="hybrid", text="deploy", vector=[1.0, 0, 0])
    assert [h.source.id for h in await store.search(agent, hybrid)] == [deploy.id]
    assert await store.search(agent, MemoryQuery(store="knowledge", vector=[1.0, 0, 0])) == []
    # a new model's vector is not stored beside the old ones
    assert await store.set_vectors(agent, "knowledge", [(deploy.id, [0.0, 0.0, 1.0])]) == 0
    assert (await store.stats(agent)).vectors_missing == 0  # the old two, untouched

    async with pool.acquire() as conn:
        assert await switch_embedding_model(conn, agent, NEW) is True
    models.record(agent, NEW)
    assert (await store.stats(agent)).vectors_missing == 2
    assert await store.set_vectors(agent, "knowledge", [(deploy.id, [0.0, 0.0, 1.0])]) == 1
    semantic = await store.search(agent, query)
    assert [h.source.id for h in semantic] == [deploy.id]  # the only vector: the new model's
