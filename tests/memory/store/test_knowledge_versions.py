"""Knowledge versions: every content write keeps the previous one; restore is a new version;
agent migration 6 names and versions the items an older schema holds."""

from __future__ import annotations

import uuid

import pytest

from choir.core.memory.knowledge.names import derived_name
from choir.daemon.memory.store import PostgresMemoryStore
from choir.errors import NotFoundError
from choir.store.agent_schema import ensure_agent_schema
from choir.store.knowledge.writes import KnowledgeNameTaken
from choir.store.postgres.ddl import AGENT_MIGRATIONS, apply_migrations
from choir.store.postgres.idents import agent_schema, quote_ident
from choir.store.postgres.pool import Pool
from tests.memory.store.conftest import DIMS
from tests.memory.store.support import vec

BEFORE_NAMES = 5
"""The last agent migration without names (knowledge had optional dedup keys)."""


async def test_every_write_keeps_the_previous_version(store: PostgresMemoryStore, ada: str) -> None:
    await store.add_knowledge(ada, "prefers vim", name="user.editor", metadata={"tags": ["a"]})
    second = await store.write_knowledge(ada, "user.editor", "prefers helix")
    third = await store.put_knowledge(ada, "prefers zed", name="user.editor")

    assert (second.changed, second.item.version, third.version) == (True, 2, 3)
    assert second.item.metadata == {"tags": ["a"]}  # no metadata given: kept
    item, versions = await store.knowledge_history(ada, "user.editor", limit=10)
    assert item == third
    assert [(v.version, v.text, v.restored_from) for v in versions] == [
        (3, "prefers zed", None),
        (2, "prefers helix", None),
        (1, "prefers vim", None),
    ]
    assert [v.metadata for v in versions] == [{}, {"tags": ["a"]}, {"tags": ["a"]}]
    limited = await store.knowledge_history(ada, "user.editor", limit=1)
    assert [v.version for v in limited[1]] == [3]


async def test_writing_the_same_content_again_adds_no_version(
    store: PostgresMemoryStore, ada: str
) -> None:
    item = await store.add_knowledge(ada, "prefers vim", name="user.editor")
    await store.set_vectors(ada, "knowledge", [(item.id, vec(1, 0, 0))])

    same = await store.write_knowledge(ada, "user.editor", "prefers vim")

    assert (same.changed, same.item.version, same.item.has_vector) == (False, 1, True)


async def test_restore_writes_the_old_content_as_a_new_version(
    store: PostgresMemoryStore, ada: str
) -> None:
    item = await store.add_knowledge(ada, "prefers vim", name="user.editor")
    await store.write_knowledge(ada, "user.editor", "prefers helix")
    await store.set_vectors(ada, "knowledge", [(item.id, vec(0, 1, 0))])
    await store.rename_knowledge(ada, "user.editor", "editor")

    restored = await store.restore_knowledge(ada, "editor", 1)

    assert (restored.item.version, restored.item.text) == (3, "prefers vim")
    assert not restored.item.has_vector  # the helix text's vector went with it
    _, versions = await store.knowledge_history(ada, "editor", limit=10)
    assert [(v.version, v.name, v.restored_from) for v in versions] == [
        (3, "editor", 1),
        (2, "user.editor", None),
        (1, "user.editor", None),
    ]
    again = await store.restore_knowledge(ada, "editor", 3)  # always a version of its own
    assert (again.item.version, again.item.text) == (4, "prefers vim")


async def test_restoring_a_version_that_does_not_exist_names_the_range(
    store: PostgresMemoryStore, ada: str
) -> None:
    await store.add_knowledge(ada, "prefers vim", name="user.editor")
    await store.write_knowledge(ada, "user.editor", "prefers helix")

    with pytest.raises(NotFoundError, match="has no version 7; it has versions 1 to 2"):
        await store.restore_knowledge(ada, "user.editor", 7)
    item, versions = await store.knowledge_history(ada, "user.editor", limit=10)
    assert (item.version, len(versions)) == (2, 2)


async def test_migration_6_names_and_versions_the_items_of_an_older_schema(pool: Pool) -> None:
    agent_id = f"old-{uuid.uuid4().hex[:8]}"
    schema = quote_ident(agent_schema(agent_id))
    texts = ["The deploy host is castor", "¡Ünïcode only!", "", "The deploy host is castor"]
    async with pool.acquire() as conn:
        await apply_migrations(
            conn, f"agent:{agent_id}", AGENT_MIGRATIONS[:BEFORE_NAMES], schema=schema, dims=DIMS
        )
        keyed = await conn.fetchval(
            f"INSERT INTO {schema}.knowledge_documents (key, text) VALUES ($1, $2) RETURNING id",
            "user.theme",
            "prefers dark mode",
        )
        unnamed = [
            await conn.fetchval(
                f"INSERT INTO {schema}.knowledge_documents (text) VALUES ($1) RETURNING id", text
            )
            for text in texts
        ]
        await ensure_agent_schema(conn, agent_id, DIMS)  # choird's next start

    store = PostgresMemoryStore(pool)
    assert (await store.get_knowledge(agent_id, "user.theme")).id == keyed
    for item_id, text in zip(unnamed, texts, strict=True):
        expected = derived_name(text, item_id)
        item = await store.get_knowledge(agent_id, expected)
        assert (item.id, item.version) == (item_id, 1)
    assert derived_name("", unnamed[2]).startswith("item-")
    _, versions = await store.knowledge_history(agent_id, "user.theme", limit=10)
    assert [(v.version, v.text) for v in versions] == [(1, "prefers dark mode")]
    with pytest.raises(KnowledgeNameTaken, match="the name of another item"):
        await store.add_knowledge(agent_id, "x", name=derived_name(texts[0], unnamed[0]))
