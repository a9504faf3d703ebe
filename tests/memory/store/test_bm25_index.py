"""The in-memory BM25 index stays what Postgres says: every write, rename and removal — through
another store (another choird), an operator's SQL, a transaction still open while a search
reads — is ranked by the next search exactly as an index read afresh ranks it; a write killed
halfway leaves items and change log agreeing; an agent schema made before the change log gets
it, and its items are searched at once."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from choir.daemon.memory.search.query import MemoryQuery
from choir.daemon.memory.store import PostgresMemoryStore
from choir.errors import UnavailableError
from choir.store.agent_schema import ensure_agent_schema
from choir.store.postgres.ddl import AGENT_MIGRATIONS, apply_migrations
from choir.store.postgres.idents import agent_schema, quote_ident
from choir.store.postgres.pool import Pool
from tests.memory.store.test_faults import kill_the_waiting_backend

QUERIES = ("deploy host", "castor release", "printer wiki floor", "standup friday")


async def ranked(store: PostgresMemoryStore, agent_id: str, text: str) -> list[tuple[str, float]]:
    hits = await store.search(
        agent_id, MemoryQuery(store="knowledge", mode="text", text=text, limit=20)
    )
    return [(hit.source.name or "", round(hit.score, 9)) for hit in hits]


async def assert_same_as_fresh(pool: Pool, store: PostgresMemoryStore, agent_id: str) -> None:
    """`store`'s caught-up index ranks every query as an index read afresh does."""
    fresh = PostgresMemoryStore(pool)
    for text in QUERIES:
        assert await ranked(store, agent_id, text) == await ranked(fresh, agent_id, text), text


async def test_writes_through_another_store_are_ranked_by_the_next_search(
    store: PostgresMemoryStore, pool: Pool, ada: str
) -> None:
    writer = PostgresMemoryStore(pool)  # another choird on the same database
    await writer.add_knowledge(ada, "The deploy host is castor.", name="deploy.host")
    await writer.add_knowledge(ada, "The printer is on floor two.", name="office")
    assert [name for name, _ in await ranked(store, ada, "deploy host")] == ["deploy.host"]

    await writer.add_knowledge(ada, "Standup is at nine, but not on Friday.", name="standup")
    await writer.write_knowledge(ada, "office", "The printer moved; see the wiki, floor three.")
    await writer.rename_knowledge(ada, "deploy.host", "release.machine")  # name terms change
    await writer.alias_knowledge(ada, "standup", "deploy-host-castor")  # adds no terms
    await assert_same_as_fresh(pool, store, ada)
    assert "standup" not in dict(await ranked(store, ada, "deploy host castor"))
    assert "release.machine" in dict(await ranked(store, ada, "castor release"))

    await writer.delete_knowledge(ada, "release.machine")
    assert await ranked(store, ada, "castor") == []
    await assert_same_as_fresh(pool, store, ada)


async def test_a_write_committed_after_a_search_read_is_not_missed(
    store: PostgresMemoryStore, pool: Pool, ada: str
) -> None:
    await store.add_knowledge(ada, "The deploy host is castor.", name="deploy.host")
    schema = quote_ident(agent_schema(ada))
    async with pool.acquire() as operator:
        open_write = operator.transaction()
        await open_write.start()
        await operator.execute(
            f"INSERT INTO {schema}.knowledge_documents (name, text) "
            "VALUES ('castor.notes', 'castor castor: the deploy host of the release')"
        )
        # searched while that write is open: it is not visible, and must not be lost
        assert [name for name, _ in await ranked(store, ada, "castor")] == ["deploy.host"]
        await store.add_knowledge(ada, "A later, committed note on castor.", name="later")
        assert "later" in dict(await ranked(store, ada, "castor"))
        await open_write.commit()
    assert "castor.notes" in dict(await ranked(store, ada, "castor"))
    await assert_same_as_fresh(pool, store, ada)


async def test_a_write_killed_before_its_log_row_leaves_nothing_half_written(
    store: PostgresMemoryStore, pool: Pool, ada: str
) -> None:
    item = await store.add_knowledge(ada, "The deploy host is castor.", name="deploy.host")
    before = await ranked(store, ada, "castor")
    schema = quote_ident(agent_schema(ada))
    async with pool.acquire() as admin:
        holder = admin.transaction()
        await holder.start()
        # the write's UPDATE of the item is done when its trigger waits on this log row
        await admin.execute(
            f"SELECT FROM {schema}.knowledge_term_changes WHERE document_id = $1 FOR UPDATE",
            item.id,
        )
        write = asyncio.create_task(
            store.write_knowledge(ada, "deploy.host", "The printer is on floor two.")
        )
        await kill_the_waiting_backend(admin)
        with pytest.raises(UnavailableError, match="memory is unavailable"):
            await write
        await holder.rollback()

    assert await ranked(store, ada, "castor") == before
    assert (await store.get_knowledge(ada, "deploy.host")).text == "The deploy host is castor."
    await store.write_knowledge(ada, "deploy.host", "The printer is on floor two.")
    assert await ranked(store, ada, "castor") == []  # the name's terms stay: deploy, host
    assert [name for name, _ in await ranked(store, ada, "printer")] == ["deploy.host"]
    await assert_same_as_fresh(pool, store, ada)


async def test_a_schema_made_before_the_change_log_gets_it_and_is_searched(pool: Pool) -> None:
    agent_id = f"old-{uuid.uuid4().hex[:8]}"
    schema = quote_ident(agent_schema(agent_id))
    async with pool.acquire() as admin:
        await apply_migrations(admin, f"agent:{agent_id}", AGENT_MIGRATIONS, schema=schema, dims=3)
        await admin.execute(
            f"INSERT INTO {schema}.knowledge_documents (name, text) "
            "VALUES ('deploy.host', 'The deploy host is castor.'), ('office', 'The printer.')"
        )
        await ensure_agent_schema(admin, agent_id, 3)  # the ranking migrations run here
    store = PostgresMemoryStore(pool)
    assert [name for name, _ in await ranked(store, agent_id, "castor")] == ["deploy.host"]
    await store.write_knowledge(agent_id, "office", "The printer is next to castor.")
    assert {name for name, _ in await ranked(store, agent_id, "castor")} == {
        "deploy.host",
        "office",
    }
    await assert_same_as_fresh(pool, store, agent_id)
