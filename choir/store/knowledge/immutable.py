"""Which knowledge items no write may change: the summary tree's — compaction archives, tool
sequences, session summaries and roll-ups (`knowledge_archives`, `knowledge_rollups`).

`knowledge_writes` asks here before a content write, a rename or a removal, in the write's own
transaction, so a refusal leaves nothing half-written.
"""

from __future__ import annotations

from typing import Final
from uuid import UUID

from choir.core.memory.summaries.tree import TREE_KEYS
from choir.errors import ConflictError
from choir.store.postgres.pool import Connection

_IN_TREE: Final = "SELECT name FROM knowledge_documents WHERE id = $1 AND metadata ?| $2::text[]"


class ArchiveImmutable(ConflictError):
    """A write, rename or removal of an item of the summary tree."""


async def refuse_archive(conn: Connection, item_id: UUID, what: str) -> None:
    """Refuse `what` (e.g. "rewrite") of the item `item_id` if it is in the summary tree."""
    name = await conn.fetchval(_IN_TREE, item_id, list(TREE_KEYS))
    if name is not None:
        raise ArchiveImmutable(
            f"cannot {what} {name!r}: it is in the summary tree (an archive, a tool sequence, a "
            "session summary or a roll-up), and archives are immutable; write a new note (and "
            "link it to the archive) instead"
        )


__all__ = ["ArchiveImmutable", "refuse_archive"]
