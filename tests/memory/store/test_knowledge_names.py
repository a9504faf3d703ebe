"""Named knowledge (seed design 002): unique names, aliases in the same namespace, the closed
set of writes (add, write, rename, alias, remove), each refusal leaving nothing written."""

from __future__ import annotations

import asyncio
import re

import pytest

from choir.core.memory.knowledge.names import KnowledgeNameRefused, derived_name
from choir.daemon.memory.store import PostgresMemoryStore
from choir.errors import NotFoundError
from choir.store.knowledge.writes import KnowledgeNameTaken
from tests.memory.store.support import vec


async def test_an_unnamed_item_gets_a_slug_of_its_text_and_id(
    store: PostgresMemoryStore, ada: str
) -> None:
    item = await store.add_knowledge(ada, "The Deploy host is *castor*, since May!")

    assert item.name == f"the-deploy-host-is-castor-since-may-{item.id.hex[:8]}"
    assert item.name == derived_name(item.text, item.id)
    assert (item.aliases, item.version) == ((), 1)
    assert await store.get_knowledge(ada, item.name) == item


async def test_an_item_answers_to_its_name_its_aliases_and_its_id(
    store: PostgresMemoryStore, ada: str
) -> None:
    item = await store.add_knowledge(ada, "prefers helix", name="user.editor")
    aliased = await store.alias_knowledge(ada, "user.editor", "editor")
    again = await store.alias_knowledge(ada, "editor", "favourite-editor")

    assert again.aliases == ("editor", "favourite-editor")
    for ref in ("user.editor", "editor", "favourite-editor", item.id, str(item.id)):
        assert (await store.get_knowledge(ada, ref)).id == item.id
    assert aliased.version == again.version == 1  # a name is no content: no new version
    assert await store.alias_knowledge(ada, "user.editor", "editor") == again  # idempotent


@pytest.mark.parametrize(
    ("taker", "problem"),
    [
        ("user.editor", "it is the name of another item"),
        ("editor", "it is an alias of 'user.editor'"),
    ],
)
async def test_a_taken_name_or_alias_is_refused_for_every_op_and_nothing_changes(
    store: PostgresMemoryStore, ada: str, taker: str, problem: str
) -> None:
    held = await store.add_knowledge(ada, "prefers helix", name="user.editor")
    await store.alias_knowledge(ada, held.name, "editor")
    other = await store.add_knowledge(ada, "prefers dark mode", name="user.theme")

    with pytest.raises(KnowledgeNameTaken, match=re.escape(problem)):
        await store.add_knowledge(ada, "another editor", name=taker)
    with pytest.raises(KnowledgeNameTaken, match=re.escape(problem)):
        await store.rename_knowledge(ada, "user.theme", taker)
    with pytest.raises(KnowledgeNameTaken, match=re.escape(problem)):
        await store.alias_knowledge(ada, "user.theme", taker)

    assert await store.get_knowledge(ada, "user.theme") == other
    assert [i.name for i in await store.list_knowledge(ada, limit=10)] == [
        "user.editor",
        "user.theme",
    ]
    assert (await store.get_knowledge(ada, taker)).id == held.id


async def test_an_item_cannot_alias_its_own_name(store: PostgresMemoryStore, ada: str) -> None:
    await store.add_knowledge(ada, "prefers helix", name="user.editor")
    with pytest.raises(KnowledgeNameTaken, match=r"already named 'user\.editor'"):
        await store.alias_knowledge(ada, "user.editor", "user.editor")


async def test_rename_frees_the_old_name_and_may_take_its_own_alias(
    store: PostgresMemoryStore, ada: str
) -> None:
    item = await store.add_knowledge(ada, "prefers helix", name="editor")
    await store.alias_knowledge(ada, "editor", "user.editor")

    renamed = await store.rename_knowledge(ada, "editor", "user.editor")

    assert (renamed.id, renamed.name, renamed.aliases) == (item.id, "user.editor", ())
    with pytest.raises(NotFoundError, match="no knowledge item editor"):
        await store.get_knowledge(ada, "editor")
    reused = await store.add_knowledge(ada, "an editor is a program", name="editor")
    assert reused.id != item.id


async def test_unknown_names_are_not_found_and_nothing_is_written(
    store: PostgresMemoryStore, ada: str
) -> None:
    await store.add_knowledge(ada, "prefers helix", name="user.editor")
    for attempt in (
        store.write_knowledge(ada, "user.editr", "prefers vim"),
        store.rename_knowledge(ada, "user.editr", "x"),
        store.alias_knowledge(ada, "user.editr", "x"),
        store.knowledge_history(ada, "user.editr", limit=10),
        store.restore_knowledge(ada, "user.editr", 1),
    ):
        with pytest.raises(NotFoundError, match=r"no knowledge item named 'user\.editr'"):
            await attempt
    assert await store.delete_knowledge(ada, "user.editr") is False
    (only,) = await store.list_knowledge(ada, limit=10)
    assert (only.name, only.aliases, only.version, only.text) == (
        "user.editor",
        (),
        1,
        "prefers helix",
    )


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("", "1 to 200 characters, not 0"),
        ("n" * 201, "not 201"),
        (" padded", "surrounding spaces"),
        ("tab\there", "control characters"),
        ("3f0c0000-0000-4000-8000-000000000000", "looks like an item id"),
    ],
)
async def test_bad_names_are_refused_before_anything_is_written(
    store: PostgresMemoryStore, ada: str, name: str, problem: str
) -> None:
    await store.add_knowledge(ada, "kept", name="kept")
    with pytest.raises(KnowledgeNameRefused, match=problem):
        await store.add_knowledge(ada, "x", name=name)
    with pytest.raises(KnowledgeNameRefused, match=problem):
        await store.rename_knowledge(ada, "kept", name)
    with pytest.raises(KnowledgeNameRefused, match=problem):
        await store.alias_knowledge(ada, "kept", name)
    assert [(i.name, i.aliases) for i in await store.list_knowledge(ada, limit=10)] == [
        ("kept", ())
    ]


async def test_remove_takes_aliases_versions_and_vector_and_frees_the_names(
    store: PostgresMemoryStore, ada: str
) -> None:
    item = await store.add_knowledge(ada, "prefers helix", name="user.editor")
    await store.alias_knowledge(ada, "user.editor", "editor")
    await store.write_knowledge(ada, "editor", "prefers vim")
    await store.set_vectors(ada, "knowledge", [(item.id, vec(1, 0, 0))])

    assert await store.delete_knowledge(ada, "editor") is True

    assert await store.list_knowledge(ada, limit=10) == []
    again = await store.add_knowledge(ada, "editor: a program", name="editor")
    assert (again.version, again.has_vector) == (1, False)
    (_, versions) = await store.knowledge_history(ada, "editor", limit=10)
    assert [v.text for v in versions] == ["editor: a program"]


async def test_two_concurrent_adds_of_one_name_store_one_item(
    store: PostgresMemoryStore, ada: str
) -> None:
    results = await asyncio.gather(
        *(store.add_knowledge(ada, f"text {n}", name="race") for n in range(4)),
        return_exceptions=True,
    )

    stored = [r for r in results if not isinstance(r, BaseException)]
    refused = [r for r in results if isinstance(r, BaseException)]
    assert len(stored) == 1
    assert all(isinstance(r, KnowledgeNameTaken) for r in refused), refused
    (only,) = await store.list_knowledge(ada, limit=10)
    assert only == stored[0]
