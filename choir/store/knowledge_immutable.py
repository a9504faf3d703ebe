"""Which knowledge items no write may change: compaction archives (`knowledge_archives`).

`knowledge_writes` asks here before a content write, a rename or a removal, in the write's own
transaction, so a refusal leaves nothing half-written.
"""

from __future__ import annotations

from typing import Final
from uuid import UUID

from choir.core.memory.archives import ARCHIVE_KEY
from choir.errors import ConflictError
from choir.store.postgres.pool import Connection

_IS_ARCHIVE: Final = "SELECT name FROM knowledge_documents WHERE id = $1 AND metadata ? $2"


class ArchiveImmutable(ConflictError):
    """A write, rename or removal of a compaction archive."""


async def refuse_archive(conn: Connection, item_id: UUID, what: str) -> None:
    """Refuse `what` (e.g. "rewrite") of the item `item_id` if it is a compaction archive."""
    name = await conn.fetchval(_IS_ARCHIVE, item_id, ARCHIVE_KEY)
    if name is not None:
        raise ArchiveImmutable(
            f"cannot {what} {name!r}: it is a compaction archive, and archives are immutable; "
            "write a new note (and link it to the archive) instead"
        )


__all__ = ["ArchiveImmutable", "refuse_archive"]
