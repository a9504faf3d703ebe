"""The summary tree's roots in the knowledge store (design 004): roll-ups, stored once, linked
`derived_from` the session summaries they cover, never changed.

A roll-up is stored like an archive (`knowledge_archives.store_archive`: idempotent by name,
immutable by its metadata key) and linked to each summary it covers that is stored; a summary
stored later (its session's close ran after the roll-up was stored) is linked to the roll-ups
covering it then (`link_covering`), so the tree does not depend on the order of closes.

Roll-ups are per user (`owner_user`, the user of the sessions summarized; "": sessions with no
user): the summaries pending for a roll-up are one user's — the asking session's user's, else
those of no user —, a roll-up is that one user's (`owner_of`), and it is linked only to
summaries of its own user: never one user's root over another's branch.
"""

from __future__ import annotations

from dataclasses import replace
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
  AND NOT (s.name = ANY($2::text[])) AND s.owner_user = $3
ORDER BY s.created_at, s.id LIMIT $1
"""

_OWNERS: Final = """
SELECT DISTINCT owner_user FROM knowledge_documents
WHERE name = ANY($1::text[]) AND metadata ? 'session_summary'
"""

_STORED: Final = (
    "SELECT name FROM knowledge_documents WHERE name = ANY($1::text[]) AND owner_user = $2"
)

_COVERING: Final = """
SELECT r.name FROM knowledge_documents r JOIN knowledge_documents s ON s.name = $1
WHERE r.metadata ? 'memory_rollup' AND r.metadata -> 'memory_rollup' -> 'covers' ? $1
    AND r.owner_user = s.owner_user
"""


async def store_rollup(conn: Connection, entry: ArchiveEntry) -> KnowledgeItem | None:
    """Store the roll-up `entry` unless stored, and link it derived_from each summary it covers
    that is stored and of its own user; the new item, or None when it was there (its links are
    made again: a no-op when they exist)."""
    covers = list(entry.metadata[ROLLUP_KEY]["covers"])
    entry = replace(entry, owner=await owner_of(conn, covers, entry.owner))
    item = await store_archive(conn, entry)
    stored = {row["name"] for row in await conn.fetch(_STORED, covers, entry.owner)}
    for name in covers:
        if name in stored:
            await link(conn, entry.name, name, EdgeType.DERIVED_FROM)
    return item


async def owner_of(conn: Connection, covers: list[str], session_user: str) -> str:
    """Whose a roll-up over the summaries `covers` is: their one user ("": sessions with none);
    the user of the session that wrote it when they are several or none is stored (choir's
    roll-up lists one user's summaries: that only happens to a roll-up made otherwise)."""
    owners = [row["owner_user"] for row in await conn.fetch(_OWNERS, covers)]
    return owners[0] if len(owners) == 1 else session_user


async def link_covering(conn: Connection, summary: str) -> None:
    """Link the roll-ups of its user covering `summary` (stored before it) to it."""
    for row in await conn.fetch(_COVERING, summary):
        await link(conn, row["name"], summary, EdgeType.DERIVED_FROM)


async def pending_summaries(
    conn: Connection, limit: int, *, user: str, besides: list[str] | None = None
) -> list[PendingSummary]:
    """The session summaries of `user` no stored roll-up covers, oldest first, but `besides`
    (those the agent has rolled up already, its roll-up maybe not stored yet); when there are
    none, those of sessions with no user: one roll-up is over one user's sessions only."""
    rows = await conn.fetch(_PENDING, limit, besides or [], user)
    if not rows and user:  # the user's are rolled up: those of no user, as a roll-up of its own
        rows = await conn.fetch(_PENDING, limit, besides or [], "")
    return [PendingSummary(row["name"], row["text"]) for row in rows]


__all__ = ["link_covering", "owner_of", "pending_summaries", "store_rollup"]
