"""Knowledge, tier 4 (§11.6, §23.3): an agent's own notes in `knowledge_documents`.

Functions take a connection already running as the agent (`run_as_agent`): table names are
unqualified and resolve in the agent's schema. An item is addressed by its id, its unique name or
one of its aliases (`choir.core.memory.knowledge.names`). This module reads; the closed set of
writes (add, write, rename, alias, remove, and restore of a version) is `knowledge_writes`.
Texts may hold any character (NUL included, `jsonb_safe.encode_text`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final
from uuid import UUID

from asyncpg import Record

from choir.core.memory.knowledge.graph import (
    NO_FIELDS,
    ItemFields,
    ItemType,
    check_fields,
    check_tags,
)
from choir.core.memory.knowledge.names import check_name
from choir.core.memory.knowledge.provenance import Provenance, provenance_of
from choir.errors import NotFoundError, UsageError
from choir.store.postgres.jsonb_safe import decode_text, encode_json
from choir.store.postgres.pool import Connection

KNOWLEDGE_MAX_BYTES: Final = 32 * 1024
"""Largest knowledge text (UTF-8): a note or a reference page, not a document store; larger
content is split into items by the caller."""
KNOWLEDGE_METADATA_MAX_BYTES: Final = 4 * 1024
"""Largest metadata (tags, source, category) as JSON."""
LIST_MAX: Final = 1000
"""Most items one page lists."""

_FIELDS: Final = (
    "d.id, d.name, d.text, d.metadata, d.version, d.created_at, d.updated_at, d.loc, d.type, "
    "d.data, d.memory_class, d.owner_user, d.provenance"
)
_HAS_VECTOR: Final = "EXISTS (SELECT FROM knowledge_embeddings e WHERE e.document_id = d.id)"
_ALIASES: Final = (
    "ARRAY(SELECT n.name FROM knowledge_names n WHERE n.document_id = d.id AND n.is_alias "
    "ORDER BY n.name) AS aliases"
)
COLUMNS: Final = f"{_FIELDS}, {_ALIASES}, {_HAS_VECTOR} AS has_vector"

# An id, a name or an alias; a ref that is one item's id and another's name names the first.
_RESOLVE: Final = """
SELECT id FROM (
    SELECT id, 0 AS rank FROM knowledge_documents WHERE id = $1
    UNION ALL SELECT id, 1 FROM knowledge_documents WHERE name = $2
    UNION ALL SELECT document_id, 2 FROM knowledge_names WHERE name = $2 AND is_alias
) AS r ORDER BY rank LIMIT 1
"""

_GET: Final = f"SELECT {COLUMNS} FROM knowledge_documents d WHERE d.id = $1"

_LIST: Final = f"""
SELECT {COLUMNS} FROM knowledge_documents d
WHERE $2::timestamptz IS NULL OR (d.created_at, d.id) > ($2, $3)
ORDER BY d.created_at, d.id LIMIT $1
"""

_POSITION: Final = "SELECT created_at FROM knowledge_documents WHERE id = $1"


@dataclass(frozen=True, slots=True)
class KnowledgeItem:
    """One stored knowledge item."""

    id: UUID
    name: str
    """Its unique name (e.g. `user.preference.theme`): the dedup key of a put."""
    aliases: tuple[str, ...]
    """Other names it answers to, sorted."""
    text: str
    metadata: dict[str, Any]
    version: int
    """1 when added; each write of its content adds one (`knowledge_versions` keeps them)."""
    created_at: datetime
    updated_at: datetime
    has_vector: bool
    """Whether its embedding is stored (False until the queue or a backfill writes it)."""
    loc: str = ""
    """Its place in the hierarchy (`projects:choir:design`; "" none), design 003."""
    type: ItemType = ItemType.INFO
    data: dict[str, Any] = field(default_factory=dict)
    """Structured data beside the text (a JSON object)."""
    memory_class: str = "knowledge"
    """Which of the agent's memories holds it (`choir.core.memory.access.MemoryClass`)."""
    owner_user: str = ""
    """A personal item's user (the DM it was written from); "" for the other classes."""
    provenance: Provenance | None = None
    """Who wrote its current content (None: written before provenance was recorded)."""

    @property
    def tags(self) -> tuple[str, ...]:
        """Its labels (kept in `metadata`, as they were before the graph)."""
        tags = self.metadata.get("tags")
        return tuple(tag for tag in tags if isinstance(tag, str)) if isinstance(tags, list) else ()


class KnowledgeRefused(UsageError):
    """A knowledge item that cannot be stored as given (too large, empty, bad name)."""


def check_item(
    text: str | None,
    name: str | None,
    metadata: dict[str, Any],
    fields: ItemFields = NO_FIELDS,
) -> None:
    """Refuse what must not be stored, naming the limit; nothing is written before this. A None
    text is a write that keeps the item's own."""
    if text is not None:
        _check_text(text)
    check_fields(fields)
    if name is not None:
        check_name(name)
    if "tags" in metadata:
        check_tags(metadata["tags"] if isinstance(metadata["tags"], list) else [metadata["tags"]])
    meta_size = len(encode_json(metadata))
    if meta_size > KNOWLEDGE_METADATA_MAX_BYTES:
        raise KnowledgeRefused(
            f"knowledge metadata is {meta_size} bytes as JSON, over the limit of "
            f"{KNOWLEDGE_METADATA_MAX_BYTES}; keep tags and sources short"
        )


def _check_text(text: str) -> None:
    size = len(text.encode())
    if size > KNOWLEDGE_MAX_BYTES:
        raise KnowledgeRefused(
            f"knowledge text is {size} bytes, over the limit of {KNOWLEDGE_MAX_BYTES} bytes "
            f"({KNOWLEDGE_MAX_BYTES // 1024} KiB); split it into several items"
        )
    if not text.strip():
        raise KnowledgeRefused("knowledge text is empty; give the text to remember")


async def resolve(conn: Connection, ref: UUID | str) -> UUID | None:
    """The id of the item whose id, name or alias is `ref`, or None."""
    found: UUID | None = await conn.fetchval(_RESOLVE, *_ref_args(ref))
    return found


async def resolved(conn: Connection, ref: UUID | str) -> UUID:
    """The id of the item `ref` names; `NotFoundError` when none does."""
    found = await resolve(conn, ref)
    if found is None:
        raise NotFoundError(
            f"there is no knowledge item named {str(ref)!r} (by name, alias or id); list "
            "the items to see their names"
        )
    return found


async def get_item(conn: Connection, ref: UUID | str) -> KnowledgeItem | None:
    """The item whose id, name or alias is `ref`, or None."""
    found = await resolve(conn, ref)
    if found is None:
        return None
    return await item_by_id(conn, found)


async def item_by_id(conn: Connection, item_id: UUID) -> KnowledgeItem:
    row = await conn.fetchrow(_GET, item_id)
    assert row is not None, "read in the transaction that resolved it"
    return item_of(row)


async def list_items(
    conn: Connection, *, limit: int, after: UUID | str | None = None
) -> list[KnowledgeItem]:
    """Up to `limit` items, oldest first, after the item with id `after` (the previous page's
    last); an `after` that was deleted since is refused (list again from the start)."""
    if not 1 <= limit <= LIST_MAX:
        raise UsageError(f"a knowledge page lists 1 to {LIST_MAX} items, not {limit}")
    position: datetime | None = None
    after_id = _as_uuid(after) if after is not None else None
    if after is not None:
        position = await conn.fetchval(_POSITION, after_id)
        if position is None:
            raise NotFoundError(f"no knowledge item {after}: list again from the start")
    rows = await conn.fetch(_LIST, limit, position, after_id)
    return [item_of(row) for row in rows]


def _ref_args(ref: UUID | str) -> tuple[UUID | None, str]:
    if isinstance(ref, UUID):
        return ref, str(ref)
    try:
        return UUID(ref), ref
    except ValueError:
        return None, ref


def _as_uuid(ref: UUID | str) -> UUID:
    try:
        return ref if isinstance(ref, UUID) else UUID(ref)
    except ValueError:
        raise UsageError(f"{ref!r} is not a knowledge item id (a UUID)") from None


def item_of(row: Record) -> KnowledgeItem:
    return KnowledgeItem(
        id=row["id"],
        name=row["name"],
        aliases=tuple(row["aliases"]),
        text=decode_text(row["text"]),
        metadata=row["metadata"],
        version=row["version"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        has_vector=row["has_vector"],
        loc=row["loc"],
        type=ItemType(row["type"]),
        data=row["data"],
        memory_class=row["memory_class"],
        owner_user=row["owner_user"],
        provenance=provenance_of(row["provenance"]),
    )
