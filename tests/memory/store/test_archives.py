"""Compaction archives in an agent's knowledge (real Postgres): stored once however often they
are stored, found by every knowledge search and by name, and never changed by any write."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from choir.core.memory.knowledge.graph import GraphFilter, ItemType
from choir.core.memory.summaries.archives import ArchiveEntry, archive_entry
from choir.daemon.memory.search.query import MemoryQuery
from choir.daemon.memory.store import PostgresMemoryStore
from choir.errors import ConflictError
from choir.protocol.log.events import CompactionArchive, MemoryWriteCommitted
from choir.protocol.tooling.memory import MemoryDelta
from choir.store.knowledge.immutable import ArchiveImmutable


def entry(
    upto: int = 9, text: str = "The user moved the staging deploy to port 8443."
) -> ArchiveEntry:
    event = MemoryWriteCommitted(
        summary_lane="edge",
        delta=MemoryDelta(mode="append", summary_update=text),
        window_start_rev=upto + 1,
        archive=CompactionArchive(
            name=f"archive/00aa11bb22cc33dd/{upto}",
            folded_from_rev=2,
            archived_at="2026-11-27T13:52Z",
        ),
    )
    made = archive_entry("s-00aa11bb22cc33dd", upto + 1, event)
    assert made is not None
    return made


async def test_an_archive_is_stored_once_however_often_it_is_stored(
    store: PostgresMemoryStore, ada: str
) -> None:
    [first] = await store.store_archives(ada, [entry()])
    assert await store.store_archives(ada, [entry(), entry()]) == []
    items = await store.list_knowledge(ada, limit=10)
    assert [i.id for i in items] == [first.id]
    assert (first.name, first.loc, first.type) == (
        "archive/00aa11bb22cc33dd/9",
        "archive:00aa11bb22cc33dd",
        ItemType.ABSTRACT,
    )


async def test_a_name_held_by_another_item_is_refused_not_skipped(
    store: PostgresMemoryStore, ada: str
) -> None:
    await store.add_knowledge(ada, "a note", name="archive/00aa11bb22cc33dd/9")
    with pytest.raises(ConflictError, match="holds something else"):
        await store.store_archives(ada, [entry()])


async def test_archives_are_searched_with_everything_else_and_opened_by_name(
    store: PostgresMemoryStore, ada: str
) -> None:
    await store.put_knowledge(ada, "the production deploy uses port 443", name="prod.port")
    await store.store_archives(ada, [entry()])
    for mode in ("text", "relevance"):
        hits = await store.search(
            ada, MemoryQuery(store="knowledge", mode=mode, text="staging deploy port")
        )
        assert any("8443" in hit.text for hit in hits), mode
        assert any("443" in hit.text and "8443" not in hit.text for hit in hits), mode
    only = await store.search_placed(
        ada,
        MemoryQuery(store="knowledge", mode="text", text="deploy port"),
        GraphFilter(loc="archive"),
    )
    assert [hit.hit.text for hit in only] == [entry().text]
    opened = await store.get_knowledge(ada, "archive/00aa11bb22cc33dd/9")
    assert opened.text == entry().text


def changes(
    store: PostgresMemoryStore, ada: str, name: str
) -> dict[str, Callable[[], Awaitable[object]]]:
    return {
        "write": lambda: store.write_knowledge(ada, name, "rewritten"),
        "put": lambda: store.put_knowledge(ada, "rewritten", name=name),
        "rename": lambda: store.rename_knowledge(ada, name, "renamed"),
        "remove": lambda: store.delete_knowledge(ada, name),
        "restore": lambda: store.restore_knowledge(ada, name, 1),
    }


@pytest.mark.parametrize("change", ["write", "put", "rename", "remove", "restore"])
async def test_no_write_changes_an_archive_and_nothing_is_half_written(
    store: PostgresMemoryStore, ada: str, change: str
) -> None:
    [item] = await store.store_archives(ada, [entry()])
    name = item.name
    attempt = changes(store, ada, name)[change]
    with pytest.raises(ArchiveImmutable, match="archives are immutable"):
        await attempt()
    after = await store.get_knowledge(ada, name)
    assert (after.name, after.text, after.version) == (name, item.text, item.version)


async def test_an_archive_may_be_given_an_alias(store: PostgresMemoryStore, ada: str) -> None:
    [item] = await store.store_archives(ada, [entry()])
    aliased = await store.alias_knowledge(ada, item.name, "the-port-move")
    assert aliased.aliases == ("the-port-move",)
    assert (await store.get_knowledge(ada, "the-port-move")).id == item.id


async def test_racing_stores_of_one_archive_store_it_once_and_none_fails(
    store: PostgresMemoryStore, ada: str
) -> None:
    stored = await asyncio.gather(*(store.store_archives(ada, [entry()]) for _ in range(4)))
    assert sorted(len(new) for new in stored) == [0, 0, 0, 1]
    assert [i.name for i in await store.list_knowledge(ada, limit=10)] == [entry().name]
