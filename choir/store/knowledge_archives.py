"""Compaction archives in the knowledge store (seed design 002): stored once, never changed.

An archive is a knowledge item (`choir.core.memory.archives`): searched with every other item
(BM25, text, vector, relevance) and opened by name like one. Storing it is idempotent by its
name — the two paths that store it (when its event is durable, and at the session's close) may
both run, after a crash too — and a name another session's archive holds already is refused
loudly rather than skipped. Every content write, rename and removal of an archive is refused
(`knowledge_immutable`): aliases, links and reads are not writes of it.
"""

from __future__ import annotations

from choir.core.memory.archives import ARCHIVE_KEY, ArchiveEntry
from choir.core.memory.knowledge_graph import ItemFields, ItemType
from choir.errors import ConflictError
from choir.store.knowledge import KnowledgeItem, get_item
from choir.store.knowledge_writes import add_item
from choir.store.postgres.pool import Connection


async def store_archive(conn: Connection, entry: ArchiveEntry) -> KnowledgeItem | None:
    """Store `entry` unless it is stored already; the new item, or None when it was there."""
    existing = await get_item(conn, entry.name)
    if existing is not None:
        if existing.metadata.get(ARCHIVE_KEY) != entry.metadata[ARCHIVE_KEY]:
            raise ConflictError(
                f"cannot store compaction archive {entry.name!r}: an item of that name holds "
                "something else; rename that item so the archive can take its name"
            )
        return None
    fields = ItemFields(loc=entry.loc, type=ItemType.ABSTRACT)
    return await add_item(conn, entry.text, name=entry.name, metadata=entry.metadata, fields=fields)


__all__ = ["store_archive"]
