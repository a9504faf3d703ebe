"""The summary tree in the knowledge store: compaction archives (seed design 002) and session
summaries (design 004), stored once, linked, never changed.

Each is a knowledge item (`choir.core.memory.summaries.archives`, `summary_tree`): searched with
every other item (BM25, text, vector, relevance) and opened by name like one. Storing one is
idempotent by its name — the paths that store it (an archive when its event is durable and at
the session's close; a summary at the close, which a crash makes run again) may all run — the
first stored wins (a racing second store finds the first's item), and a name an item of
another kind holds is refused loudly rather than
skipped. A session summary is linked `derived_from` to each of the session's archives. Every
content write, rename and removal of these items is refused (`knowledge_immutable`): aliases,
links and reads are not writes of them.
"""

from __future__ import annotations

from collections.abc import Sequence

from choir.core.memory.knowledge.graph import (
    EdgeType,
    GraphFilter,
    ItemFields,
    ItemType,
    Placement,
)
from choir.core.memory.summaries.archives import ArchiveEntry
from choir.errors import ConflictError
from choir.store.knowledge.graph import link, list_filtered
from choir.store.knowledge.items import KnowledgeItem, get_item
from choir.store.knowledge.writes import KnowledgeNameTaken, add_item
from choir.store.postgres.pool import Connection

LEAVES_MAX = 1000
"""Most archives one session summary is linked to (a session folds far fewer windows)."""


async def store_archive(conn: Connection, entry: ArchiveEntry) -> KnowledgeItem | None:
    """Store `entry` unless it is stored already; the new item, or None when it was there."""
    if await _stored(conn, entry):
        return None
    # knowledge class, whoever's: choird writes it unsealed (the event log holds the same words)
    fields = ItemFields(
        loc=entry.loc, type=ItemType.ABSTRACT, memory=Placement("knowledge", entry.owner)
    )
    # A savepoint (by hand: `run_as_agent` began the transaction with a plain BEGIN, which
    # asyncpg's nested `transaction()` refuses): the other path may be storing it right now.
    await conn.execute("SAVEPOINT tree_item")
    try:
        item = await add_item(
            conn, entry.text, name=entry.name, metadata=entry.metadata, fields=fields
        )
    except KnowledgeNameTaken:
        await conn.execute("ROLLBACK TO SAVEPOINT tree_item")
        if await _stored(conn, entry):  # it committed first: stored once, by it
            return None
        raise
    await conn.execute("RELEASE SAVEPOINT tree_item")
    return item


async def _stored(conn: Connection, entry: ArchiveEntry) -> bool:
    """Whether `entry` is stored; a name another item holds is refused."""
    existing = await get_item(conn, entry.name)
    if existing is None:
        return False
    [key] = entry.metadata
    same = existing.metadata.get(key)
    if not isinstance(same, dict) or same.get("session_id") != entry.metadata[key].get(
        "session_id"
    ):
        raise ConflictError(
            f"cannot store {entry.name!r} of the summary tree: an item of that name holds "
            "something else; rename that item so the tree's item can take its name"
        )
    return True


async def archive_names(conn: Connection, loc: str) -> list[str]:
    """The names of the archives at `loc` (`archive:<session>`), oldest first."""
    items = await list_filtered(conn, GraphFilter(loc=loc), limit=LEAVES_MAX)
    return [item.name for item in items]


async def link_sources(conn: Connection, branch: str, leaves: Sequence[str]) -> None:
    """`branch` derived_from each of `leaves` (existing edges stay as they are)."""
    for leaf in leaves:
        await link(conn, branch, leaf, EdgeType.DERIVED_FROM)


__all__ = ["archive_names", "link_sources", "store_archive"]
