"""The knowledge graph's writes under faults: a connection killed mid-write leaves nothing
half-written and the rerun completes; a link racing the removal of its target is a clear
refusal, not a foreign-key error. Writes are held by a lock an admin connection takes, as in
`test_faults`."""

from __future__ import annotations

import asyncio

import pytest

from choir.core.memory.knowledge.graph import EdgeType, ItemFields, ItemType
from choir.daemon.memory.store import PostgresMemoryStore
from choir.errors import NotFoundError, UnavailableError
from choir.store.postgres.idents import agent_schema, quote_ident
from choir.store.postgres.pool import Pool
from tests.memory.store.test_faults import kill_the_waiting_backend, wait_for_a_lock_waiter


async def test_killed_while_writing_graph_fields_then_rerun(
    store: PostgresMemoryStore, pool: Pool, ada: str
) -> None:
    item = await store.add_knowledge(
        ada, "deploys go to castor", name="deploy", fields=ItemFields(loc="a")
    )
    fields = ItemFields(loc="projects:choir", type=ItemType.RECORD, data={"host": "pollux"})
    schema = quote_ident(agent_schema(ada))
    async with pool.acquire() as admin:
        blocker = admin.transaction()
        await blocker.start()
        await admin.execute(
            f"SELECT FROM {schema}.knowledge_documents WHERE id = $1 FOR UPDATE", item.id
        )
        write = asyncio.create_task(
            store.write_knowledge(ada, "deploy", "deploys go to pollux", fields=fields)
        )
        await kill_the_waiting_backend(admin)
        with pytest.raises(UnavailableError):
            await write
        await blocker.rollback()

    kept = await store.get_knowledge(ada, "deploy")
    assert (kept.version, kept.text, kept.loc, kept.type, kept.data) == (
        1, "deploys go to castor", "a", ItemType.INFO, {},
    )  # fmt: skip
    _, versions = await store.knowledge_history(ada, "deploy", limit=5)
    assert [v.version for v in versions] == [1]

    written = await store.write_knowledge(ada, "deploy", "deploys go to pollux", fields=fields)
    assert (written.item.version, written.item.loc, written.item.data) == (
        2, "projects:choir", {"host": "pollux"},
    )  # fmt: skip


async def test_killed_while_linking_then_rerun(
    store: PostgresMemoryStore, pool: Pool, ada: str
) -> None:
    source = await store.add_knowledge(ada, "the new host", name="new")
    target = await store.add_knowledge(ada, "the old host", name="old")
    schema = quote_ident(agent_schema(ada))
    async with pool.acquire() as admin:
        blocker = admin.transaction()
        await blocker.start()
        # the same edge, uncommitted: the link's insert waits on its key
        await admin.execute(
            f"INSERT INTO {schema}.knowledge_edges (source_id, type, target_id) "
            "VALUES ($1, $2, $3)",
            source.id, "supersedes", target.id,
        )  # fmt: skip
        link = asyncio.create_task(store.link_knowledge(ada, "new", "old", EdgeType.SUPERSEDES))
        await kill_the_waiting_backend(admin)
        with pytest.raises(UnavailableError):
            await link
        await blocker.rollback()

    assert (await store.knowledge_neighbours(ada, "new"))[1] == []
    _, _, new = await store.link_knowledge(ada, "new", "old", EdgeType.SUPERSEDES)
    assert new
    assert [n.item.name for n in (await store.knowledge_neighbours(ada, "new"))[1]] == ["old"]


async def test_a_link_racing_the_removal_of_its_target_is_refused_clearly(
    store: PostgresMemoryStore, pool: Pool, ada: str
) -> None:
    await store.add_knowledge(ada, "the new host", name="new")
    target = await store.add_knowledge(ada, "the old host", name="old")
    schema = quote_ident(agent_schema(ada))
    async with pool.acquire() as admin:
        removal = admin.transaction()
        await removal.start()
        await admin.execute(f"DELETE FROM {schema}.knowledge_documents WHERE id = $1", target.id)
        link = asyncio.create_task(store.link_knowledge(ada, "new", "old", EdgeType.RELATES_TO))
        await wait_for_a_lock_waiter(admin)  # resolved "old", its insert waits on the row
        await removal.commit()

    with pytest.raises(NotFoundError, match="was just removed"):
        await link
    assert (await store.knowledge_neighbours(ada, "new"))[1] == []
