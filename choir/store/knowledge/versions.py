"""Knowledge versions (from seed design 003): every content write keeps the one before it.

Version 1 is the added content; each write that changes the text, metadata (tags), loc, type or
data adds the next one (`knowledge_writes`). Restoring version N writes N's text, metadata,
loc, type and data as a new version (edges are not versioned: a restore keeps them), marked
`restored_from` N, so a restore is itself undone by restoring again. Versions go with the item
when it is removed. Functions take a connection already running as the agent.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final
from uuid import UUID

from choir.core.memory.knowledge.graph import ItemFields, ItemType
from choir.core.memory.knowledge.provenance import Provenance, provenance_of
from choir.errors import NotFoundError, UsageError
from choir.failpoints import failpoint
from choir.store.knowledge.items import resolved
from choir.store.knowledge.writes import Written, write_item
from choir.store.postgres.jsonb_safe import decode_text
from choir.store.postgres.pool import Connection

HISTORY_MAX: Final = 1000
"""Most versions one history answer lists (the newest)."""

_HISTORY: Final = """
SELECT version, name, text, metadata, written_at, restored_from, loc, type, data, provenance
FROM knowledge_versions
WHERE document_id = $1 ORDER BY version DESC LIMIT $2
"""
_ONE: Final = (
    "SELECT text, metadata, loc, type, data FROM knowledge_versions "
    "WHERE document_id = $1 AND version = $2"
)
_RANGE: Final = "SELECT min(version), max(version) FROM knowledge_versions WHERE document_id = $1"

Restored = Callable[[str, dict[str, Any]], tuple[str, dict[str, Any]]]
"""A restored version's (text, data) → what the restore stores: in an encrypted memory, the
two sealed (a version written in the clear before it was marked encrypted); it may refuse
(raise), and the restore writes nothing."""


@dataclass(frozen=True, slots=True)
class KnowledgeVersion:
    """One stored version of an item's content."""

    version: int
    name: str
    """The item's name when this version was written."""
    text: str
    metadata: dict[str, Any]
    written_at: datetime
    restored_from: int | None
    """The version this one restored, if it was a restore."""
    loc: str = ""
    type: ItemType = ItemType.INFO
    data: dict[str, Any] = field(default_factory=dict)
    provenance: Provenance | None = None
    """Who wrote this version (None: before provenance was recorded)."""


async def history(
    conn: Connection, ref: UUID | str, *, limit: int = HISTORY_MAX
) -> tuple[UUID, list[KnowledgeVersion]]:
    """The item `ref` names and its versions, newest first."""
    if not 1 <= limit <= HISTORY_MAX:
        raise UsageError(f"a knowledge history lists 1 to {HISTORY_MAX} versions, not {limit}")
    item_id = await resolved(conn, ref)
    rows = await conn.fetch(_HISTORY, item_id, limit)
    return item_id, [
        KnowledgeVersion(
            version=row["version"],
            name=row["name"],
            text=decode_text(row["text"]),
            metadata=row["metadata"],
            written_at=row["written_at"],
            restored_from=row["restored_from"],
            loc=row["loc"],
            type=ItemType(row["type"]),
            data=row["data"],
            provenance=provenance_of(row["provenance"]),
        )
        for row in rows
    ]


async def restore(
    conn: Connection,
    ref: UUID | str,
    version: int,
    provenance: Provenance | None = None,
    stored_as: Restored | None = None,
) -> Written:
    """Write version `version`'s content as the item's newest version, written by
    `provenance` (the restore's writer, not the restored version's); its text and data as
    `stored_as` makes them (None: as the version holds them)."""
    item_id = await resolved(conn, ref)
    row = await conn.fetchrow(_ONE, item_id, version)
    if row is None:
        low, high = await conn.fetchrow(_RANGE, item_id) or (None, None)
        raise NotFoundError(
            f"knowledge item {str(ref)!r} has no version {version}; it has versions "
            f"{low} to {high} (see its history)"
        )
    text, data = decode_text(row["text"]), row["data"]
    if stored_as is not None:
        text, data = stored_as(text, data)
    fields = ItemFields(loc=row["loc"], type=ItemType(row["type"]), data=data)
    written = await write_item(
        conn,
        item_id,
        text,
        metadata=row["metadata"],
        restored_from=version,
        fields=fields,
        provenance=provenance,
    )
    await failpoint("memory.restore.after_write")  # written (sealed where encrypted), uncommitted
    return written
