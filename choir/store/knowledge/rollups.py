"""The summary tree's roots in the knowledge store (design 004): roll-ups, stored once, linked
`derived_from` the session summaries they cover, never changed.

A roll-up is stored like an archive (`knowledge_archives.store_archive`: idempotent by name,
immutable by its metadata key) and linked to each summary it covers that is stored; a summary
stored later (its session's close ran after the roll-up was stored) is linked to the roll-ups
covering it then (`link_covering`), so the tree does not depend on the order of closes.
"""

from __future__ import annotations

from typing import Final

from choir.core.memory.knowledge.graph import EdgeType
from choir.core.memory.summaries.archives import ArchiveEntry
from choir.core.memory.summaries.rollup import PendingSummary
from choir.core.memory.summaries.tree import ROLLUP_KEY
from choir.store.knowledge.archives import store_archive
from choir.store.knowledge.graph import link
from choir.store.knowledge.items import KnowledgeItem
from choir.store.postgres.pool import Connection

_PENDING: Final = """
SELECT s.name, s.text FROM knowledge_documents s
WHERE s.metadata ? 'session_summary' AND s.name IS NOT NULL
  AND NOT EXISTS (SELECT FROM knowledge_documents r
                  WHERE r.metadata ? 'memory_rollup'
                    AND r.metadata -> 'memory_rollup' -> 'covers' ? s.name)
  AND NOT (s.name = ANY($2::text[]))
ORDER BY s.created_at, s.id LIMIT $1
"""

_STORED: Final = "SELECT name FROM knowledge_documents WHERE name = ANY($1::text[])"

_COVERING: Final = """
SELECT name FROM knowledge_documents
WHERE metadata ? 'memory_rollup' AND metadata -> 'memory_rollup' -> 'covers' ? $1
"""


async def store_rollup(conn: Connection, entry: ArchiveEntry) -> KnowledgeItem | None:
    """Store the roll-up `entry` unless stored, and link it derived_from each summary it covers
    that is stored; the new item, or None when it was there (its links are made again: a no-op
    when they exist)."""
    item = await store_archive(conn, entry)
    covers = list(entry.metadata[ROLLUP_KEY]["covers"])
    stored = {row["name"] for row in await conn.fetch(_STORED, covers)}
    for name in covers:
        if name in stored:
            await link(conn, entry.name, name, EdgeType.DERIVED_FROM)
    return item


async def link_covering(conn: Connection, summary: str) -> None:
    """Link the roll-ups covering `summary` (stored before it) to it."""
    for row in await conn.fetch(_COVERING, summary):
        await link(conn, row["name"], summary, EdgeType.DERIVED_FROM)


async def pending_summaries(
    conn: Connection, limit: int, *, besides: list[str] | None = None
) -> list[PendingSummary]:
    """The session summaries no stored roll-up covers, oldest first, but `besides` (those the
    agent has rolled up already, its roll-up maybe not stored yet)."""
    rows = await conn.fetch(_PENDING, limit, besides or [])
    return [PendingSummary(row["name"], row["text"]) for row in rows]


__all__ = ["link_covering", "pending_summaries", "store_rollup"]
