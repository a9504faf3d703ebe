"""Knowledge, tier 4 (§11.6, §23.3): an agent's own notes in `knowledge_documents`.

Functions take a connection already running as the agent (`run_as_agent`): table names are
unqualified and resolve in the agent's schema. An item is named by its id or, when it has one, by
its dedup key; putting an item with a key that exists updates it in place (same id). A changed
text drops the item's vector in the same statement, so a search never ranks the new text by the
old text's embedding; the embedding queue writes the new one. Texts may hold any character
(NUL included, `jsonb_safe.encode_text`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final
from uuid import UUID

from asyncpg import Record

from choir.errors import NotFoundError, UsageError
from choir.store.postgres.jsonb_safe import decode_text, encode_json, encode_text
from choir.store.postgres.pool import Connection

KNOWLEDGE_MAX_BYTES: Final = 32 * 1024
"""Largest knowledge text (UTF-8): a note or a reference page, not a document store; larger
content is split into items by the caller."""
KNOWLEDGE_KEY_MAX_CHARS: Final = 200
KNOWLEDGE_METADATA_MAX_BYTES: Final = 4 * 1024
"""Largest metadata (tags, source, category) as JSON."""
LIST_MAX: Final = 1000
"""Most items one page lists."""

_FIELDS: Final = "d.id, d.key, d.text, d.metadata, d.created_at, d.updated_at"
_HAS_VECTOR: Final = "EXISTS (SELECT FROM knowledge_embeddings e WHERE e.document_id = d.id)"
_COLUMNS: Final = f"{_FIELDS}, {_HAS_VECTOR} AS has_vector"

_INSERT: Final = f"""
WITH d AS (INSERT INTO knowledge_documents (text, metadata) VALUES ($1, $2) RETURNING *)
SELECT {_COLUMNS} FROM d
"""

# Every part of the statement sees the table as it was before it (one snapshot): `prior` is the
# item before the update, the vector goes exactly when the text changes, and `has_vector` is
# read from that snapshot only when the text stayed.
_PUT_BY_KEY: Final = f"""
WITH prior AS (SELECT id, text FROM knowledge_documents WHERE key = $3),
stale AS (
    DELETE FROM knowledge_embeddings e USING prior
    WHERE e.document_id = prior.id AND prior.text IS DISTINCT FROM $1
),
d AS (
    INSERT INTO knowledge_documents (text, metadata, key) VALUES ($1, $2, $3)
    ON CONFLICT (key) DO UPDATE
        SET text = EXCLUDED.text, metadata = EXCLUDED.metadata, updated_at = now()
    RETURNING *
)
SELECT {_FIELDS}, (prior.text IS NOT DISTINCT FROM $1 AND {_HAS_VECTOR}) AS has_vector
FROM d LEFT JOIN prior ON prior.id = d.id
"""

# A ref matching one item's id and another's key names the item with that id.
_GET: Final = f"""
SELECT {_COLUMNS} FROM knowledge_documents d
WHERE d.id = $1 OR d.key = $2 ORDER BY d.id = $1 DESC NULLS LAST LIMIT 1
"""

_DELETE: Final = """
DELETE FROM knowledge_documents WHERE id = (
    SELECT id FROM knowledge_documents WHERE id = $1 OR key = $2
    ORDER BY id = $1 DESC NULLS LAST LIMIT 1
)
"""

_LIST: Final = f"""
SELECT {_COLUMNS} FROM knowledge_documents d
WHERE $2::timestamptz IS NULL OR (d.created_at, d.id) > ($2, $3)
ORDER BY d.created_at, d.id LIMIT $1
"""

_POSITION: Final = "SELECT created_at FROM knowledge_documents WHERE id = $1"


@dataclass(frozen=True, slots=True)
class KnowledgeItem:
    """One stored knowledge item."""

    id: UUID
    key: str | None
    """The optional dedup key (e.g. `user.preference.theme`)."""
    text: str
    metadata: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    has_vector: bool
    """Whether its embedding is stored (False until the queue or a backfill writes it)."""


class KnowledgeRefused(UsageError):
    """A knowledge item that cannot be stored as given (too large, empty, bad key)."""


def check_item(text: str, key: str | None, metadata: dict[str, Any]) -> None:
    """Refuse what must not be stored, naming the limit; nothing is written before this."""
    size = len(text.encode())
    if size > KNOWLEDGE_MAX_BYTES:
        raise KnowledgeRefused(
            f"knowledge text is {size} bytes, over the limit of {KNOWLEDGE_MAX_BYTES} bytes "
            f"({KNOWLEDGE_MAX_BYTES // 1024} KiB); split it into several items"
        )
    if not text.strip():
        raise KnowledgeRefused("knowledge text is empty; give the text to remember")
    if key is not None and not 1 <= len(key) <= KNOWLEDGE_KEY_MAX_CHARS:
        raise KnowledgeRefused(
            f"knowledge key must be 1 to {KNOWLEDGE_KEY_MAX_CHARS} characters, not {len(key)}"
        )
    meta_size = len(encode_json(metadata))
    if meta_size > KNOWLEDGE_METADATA_MAX_BYTES:
        raise KnowledgeRefused(
            f"knowledge metadata is {meta_size} bytes as JSON, over the limit of "
            f"{KNOWLEDGE_METADATA_MAX_BYTES}; keep tags and sources short"
        )


async def put_item(
    conn: Connection, text: str, *, key: str | None = None, metadata: dict[str, Any] | None = None
) -> KnowledgeItem:
    """Insert an item, or update the one with `key` (its vector dropped if the text changed)."""
    meta = metadata or {}
    check_item(text, key, meta)
    if key is None:
        row = await conn.fetchrow(_INSERT, encode_text(text), meta)
    else:
        row = await conn.fetchrow(_PUT_BY_KEY, encode_text(text), meta, key)
    assert row is not None
    return _item(row)


async def get_item(conn: Connection, ref: UUID | str) -> KnowledgeItem | None:
    """The item whose id or key is `ref`, or None."""
    row = await conn.fetchrow(_GET, *_ref_args(ref))
    return _item(row) if row is not None else None


async def delete_item(conn: Connection, ref: UUID | str) -> bool:
    """Delete the item whose id or key is `ref` (its vector with it); whether one was."""
    status: str = await conn.execute(_DELETE, *_ref_args(ref))
    return status == "DELETE 1"


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
    return [_item(row) for row in rows]


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


def _item(row: Record) -> KnowledgeItem:
    return KnowledgeItem(
        id=row["id"],
        key=row["key"],
        text=decode_text(row["text"]),
        metadata=row["metadata"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        has_vector=row["has_vector"],
    )
