"""Knowledge (tier 4): put (insert, update by name), get/delete by id or name, paging, limits."""

from __future__ import annotations

import secrets

import pytest

from choir.core.memory.knowledge.graph import ItemFields
from choir.core.memory.sealed_items import SEALED_KEY, seal_item
from choir.core.memory.sealing import NONCE_BYTES
from choir.daemon.memory.store import PostgresMemoryStore
from choir.errors import NotFoundError, UsageError
from choir.store.knowledge.items import KNOWLEDGE_MAX_BYTES, KnowledgeRefused
from tests.memory.store.support import vec


async def test_an_item_is_found_by_its_id_and_by_its_key(
    store: PostgresMemoryStore, ada: str
) -> None:
    item = await store.put_knowledge(ada, "prefers dark mode", name="user.theme", metadata={"t": 1})

    by_id = await store.get_knowledge(ada, item.id)
    by_id_text = await store.get_knowledge(ada, str(item.id))
    by_key = await store.get_knowledge(ada, "user.theme")
    assert by_id == by_id_text == by_key == item
    assert (item.text, item.name, item.metadata, item.has_vector) == (
        "prefers dark mode",
        "user.theme",
        {"t": 1},
        False,
    )


async def test_putting_an_existing_key_updates_the_item_in_place(
    store: PostgresMemoryStore, ada: str
) -> None:
    first = await store.put_knowledge(ada, "prefers dark mode", name="user.theme")
    second = await store.put_knowledge(ada, "prefers light mode", name="user.theme")

    assert second.id == first.id
    assert second.text == "prefers light mode"
    assert second.updated_at >= first.updated_at
    assert len(await store.list_knowledge(ada, limit=10)) == 1


async def test_a_changed_text_drops_the_stale_vector_and_the_same_text_keeps_it(
    store: PostgresMemoryStore, ada: str
) -> None:
    item = await store.put_knowledge(ada, "prefers dark mode", name="user.theme")
    assert await store.set_vectors(ada, "knowledge", [(item.id, vec(1, 0, 0))]) == 1

    same = await store.put_knowledge(ada, "prefers dark mode", name="user.theme", metadata={"a": 1})
    assert same.has_vector
    assert (await store.get_knowledge(ada, item.id)).has_vector

    changed = await store.put_knowledge(ada, "prefers light mode", name="user.theme")
    assert not changed.has_vector
    assert not (await store.get_knowledge(ada, item.id)).has_vector
    assert [(m.target, m.id) for m in await store.missing_vectors(ada, limit=10)] == [
        ("knowledge", item.id)
    ]


async def test_a_sealed_item_is_never_backfilled_with_a_vector(
    store: PostgresMemoryStore, ada: str
) -> None:
    """An encrypted memory's item stores a placeholder text: nothing to embed, ever (an item
    whose own data merely has the key beside others is embedded as any other); `memory stats`
    does not count it as waiting for a vector either."""
    key = secrets.token_bytes(32)
    text, data = seal_item(key, ada, "personal", "likes tea", {}, nonce=bytes(NONCE_BYTES))
    await store.add_knowledge(ada, text, name="sealed", fields=ItemFields(data=data))
    plain = await store.add_knowledge(
        ada, "has a key", name="plain", fields=ItemFields(data={SEALED_KEY: "x", "other": 1})
    )
    assert [m.id for m in await store.missing_vectors(ada, limit=10)] == [plain.id]
    stats = await store.stats(ada)
    assert (stats.knowledge_items, stats.vectors_missing) == (2, 1)


async def test_items_without_a_key_are_separate(store: PostgresMemoryStore, ada: str) -> None:
    one = await store.put_knowledge(ada, "same text")
    two = await store.put_knowledge(ada, "same text")
    assert one.id != two.id


async def test_delete_by_id_or_key_answers_whether_something_was_deleted(
    store: PostgresMemoryStore, ada: str
) -> None:
    keyed = await store.put_knowledge(ada, "the deploy needs sudo", name="deploy.sudo")
    plain = await store.put_knowledge(ada, "the office is closed on Fridays")
    await store.set_vectors(ada, "knowledge", [(keyed.id, vec(0, 1, 0))])

    assert await store.delete_knowledge(ada, "deploy.sudo") is True
    assert await store.delete_knowledge(ada, plain.id) is True
    assert await store.delete_knowledge(ada, plain.id) is False
    assert await store.delete_knowledge(ada, "no.such.key") is False
    with pytest.raises(NotFoundError, match=r"no knowledge item deploy\.sudo"):
        await store.get_knowledge(ada, "deploy.sudo")
    assert (await store.stats(ada)).knowledge_items == 0


async def test_a_name_that_looks_like_another_items_id_is_refused(
    store: PostgresMemoryStore, ada: str
) -> None:
    target = await store.put_knowledge(ada, "the real one")
    with pytest.raises(UsageError, match="looks like an item id"):
        await store.put_knowledge(ada, "an impostor", name=str(target.id))
    assert [i.text for i in await store.list_knowledge(ada, limit=10)] == ["the real one"]


async def test_listing_pages_oldest_first(store: PostgresMemoryStore, ada: str) -> None:
    items = [await store.put_knowledge(ada, f"note {n}") for n in range(5)]

    first = await store.list_knowledge(ada, limit=2)
    second = await store.list_knowledge(ada, limit=2, after=first[-1].id)
    third = await store.list_knowledge(ada, limit=2, after=second[-1].id)

    assert [i.id for i in first + second + third] == [i.id for i in items]
    with pytest.raises(UsageError, match="1 to 1000 items, not 0"):
        await store.list_knowledge(ada, limit=0)
    await store.delete_knowledge(ada, third[0].id)
    with pytest.raises(NotFoundError, match="list again from the start"):
        await store.list_knowledge(ada, limit=2, after=third[0].id)


async def test_oversized_content_is_refused_with_the_limit_named_and_nothing_written(
    store: PostgresMemoryStore, ada: str
) -> None:
    await store.put_knowledge(ada, "small", name="k")
    with pytest.raises(KnowledgeRefused, match=f"over the limit of {KNOWLEDGE_MAX_BYTES} bytes"):
        await store.put_knowledge(ada, "é" * (KNOWLEDGE_MAX_BYTES // 2 + 1), name="k")
    with pytest.raises(KnowledgeRefused, match="over the limit"):
        await store.put_knowledge(ada, "x" * (KNOWLEDGE_MAX_BYTES + 1))
    assert [(i.name, i.text) for i in await store.list_knowledge(ada, limit=10)] == [("k", "small")]
    # exactly at the limit is stored
    at_limit = await store.put_knowledge(ada, "x" * KNOWLEDGE_MAX_BYTES)
    assert len(at_limit.text) == KNOWLEDGE_MAX_BYTES


@pytest.mark.parametrize(
    ("text", "key", "problem"),
    [("   ", None, "text is empty"), ("ok", "", "name is 1 to 200"), ("ok", "k" * 201, "201")],
)
async def test_empty_text_and_bad_names_are_refused(
    store: PostgresMemoryStore, ada: str, text: str, key: str | None, problem: str
) -> None:
    with pytest.raises(UsageError, match=problem):
        await store.put_knowledge(ada, text, name=key)
    assert await store.list_knowledge(ada, limit=10) == []


async def test_any_character_survives_a_round_trip(store: PostgresMemoryStore, ada: str) -> None:
    text = "nul \x00 and soh \x01 kept"
    item = await store.put_knowledge(ada, text, name="odd")
    assert (await store.get_knowledge(ada, "odd")).text == item.text == text
