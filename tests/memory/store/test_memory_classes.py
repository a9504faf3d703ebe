"""Memory classes in the store: an item's memory set at add and kept, reads scoped to the
memories a caller may read (every search mode, list, neighbours), migration 9 on older items."""

from __future__ import annotations

import uuid

import asyncpg
import pytest

from choir.core.memory.knowledge.graph import (
    EdgeType,
    GraphFilter,
    ItemFields,
    MemoryScope,
    Placement,
)
from choir.daemon.memory.search.query import MemoryQuery
from choir.daemon.memory.store import PostgresMemoryStore
from choir.store.agent_schema import ensure_agent_schema
from choir.store.postgres.ddl import AGENT_MIGRATIONS, apply_migrations
from choir.store.postgres.idents import agent_schema, quote_ident
from choir.store.postgres.pool import Pool
from tests.memory.store.conftest import DIMS
from tests.memory.store.support import vec

BEFORE_CLASSES = 8
"""The last agent migration without memory classes."""
ALICE = MemoryScope(("system", "knowledge", "app", "personal"), "alice")
"""What a session of the agent bound to DM `alice` reads."""


async def _fill(store: PostgresMemoryStore, agent: str) -> None:
    for name, memory in [
        ("note", Placement("knowledge")),
        ("alice.pet", Placement("personal", "alice")),
        ("bob.pet", Placement("personal", "bob")),
        ("release", Placement("app")),
    ]:
        item = await store.add_knowledge(
            agent, f"{name}: the cat and the release", name=name, fields=ItemFields(memory=memory)
        )
        await store.set_vectors(agent, "knowledge", [(item.id, vec(1, 0, 0))])


async def test_every_read_keeps_to_the_scope(store: PostgresMemoryStore, ada: str) -> None:
    await _fill(store, ada)
    graph = GraphFilter(scope=ALICE)
    for query in (
        MemoryQuery(store="knowledge", mode="text", text="cat"),
        MemoryQuery(store="knowledge", mode="semantic", vector=vec(1, 0, 0)),
        MemoryQuery(store="knowledge", mode="hybrid", text="cat", vector=vec(1, 0, 0)),
        MemoryQuery(store="knowledge", mode="relevance", text="cat", vector=vec(1, 0, 0)),
    ):
        hits = await store.search_placed(ada, query, graph)
        assert sorted(h.hit.source.name or "" for h in hits) == [
            "alice.pet",
            "note",
            "release",
        ], query.mode
    listed = await store.list_knowledge(ada, limit=10, graph=graph)
    assert [item.name for item in listed] == ["note", "alice.pet", "release"]
    app_only = GraphFilter(scope=MemoryScope(("app",), "alice"))
    assert [i.name for i in await store.list_knowledge(ada, limit=10, graph=app_only)] == [
        "release"
    ]
    no_user = GraphFilter(scope=MemoryScope(("knowledge", "personal"), None))
    assert [i.name for i in await store.list_knowledge(ada, limit=10, graph=no_user)] == ["note"]
    for other in ("alice.pet", "bob.pet"):
        await store.link_knowledge(ada, "note", other, EdgeType.RELATES_TO)
    _, near = await store.knowledge_neighbours(ada, "note", graph=graph)
    assert [n.item.name for n in near] == ["alice.pet"]
    # the operator's reads (no scope) see every memory
    assert len(await store.list_knowledge(ada, limit=10)) == 4


async def test_a_write_keeps_the_items_memory(store: PostgresMemoryStore, ada: str) -> None:
    await _fill(store, ada)
    written = await store.write_knowledge(
        ada, "alice.pet", "the dog", fields=ItemFields(memory=Placement("app"))
    )
    assert (written.item.memory_class, written.item.owner_user) == ("personal", "alice")
    put = await store.put_knowledge(ada, "the bird", name="alice.pet")
    assert (put.memory_class, put.owner_user, put.version) == ("personal", "alice", 3)


async def test_a_personal_item_without_its_user_is_refused_by_the_database(
    store: PostgresMemoryStore, pool: Pool, ada: str
) -> None:
    with pytest.raises(asyncpg.CheckViolationError):
        await store.add_knowledge(ada, "orphan", fields=ItemFields(memory=Placement("personal")))
    with pytest.raises(asyncpg.CheckViolationError):
        await store.add_knowledge(ada, "odd", fields=ItemFields(memory=Placement("app", "bob")))
    with pytest.raises(asyncpg.CheckViolationError):
        await store.add_knowledge(ada, "odd", fields=ItemFields(memory=Placement("secret")))
    assert await store.list_knowledge(ada, limit=10) == []  # nothing half-written


async def test_migration_9_puts_older_items_in_the_knowledge_memory(pool: Pool) -> None:
    agent_id = f"old-{uuid.uuid4().hex[:8]}"
    schema = quote_ident(agent_schema(agent_id))
    async with pool.acquire() as conn:
        await apply_migrations(
            conn, f"agent:{agent_id}", AGENT_MIGRATIONS[:BEFORE_CLASSES], schema=schema, dims=DIMS
        )
        item_id = await conn.fetchval(
            f"INSERT INTO {schema}.knowledge_documents (name, text) VALUES ('first', 'stored') "
            "RETURNING id"
        )
        await conn.execute(
            f"INSERT INTO {schema}.knowledge_names VALUES ('first', '{item_id}', false)"
        )
        await ensure_agent_schema(conn, agent_id, DIMS)  # choird's next start: migration 9
    store = PostgresMemoryStore(pool)
    item = await store.get_knowledge(agent_id, "first")
    assert (item.id, item.memory_class, item.owner_user) == (item_id, "knowledge", "")
    knowledge_only = GraphFilter(scope=MemoryScope(("knowledge",), None))
    assert [
        i.name for i in await store.list_knowledge(agent_id, limit=5, graph=knowledge_only)
    ] == ["first"]
