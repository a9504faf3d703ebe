"""Session memory, tiers 2-3 (§11.4-11.5, §23.2): chunks in `memory_documents` and promotion.

Functions take a connection already running as the agent (`run_as_agent`): table names are
unqualified and resolve in the agent's schema. A chunk is keyed by (session, tier, index), so
storing a session's chunks again stores nothing new and answers the same ids — a close that
crashed halfway is simply run again. A session's event chunks are one family across `mid_term`
and `long_term_detail`: once promoted, storing its mid-term chunks again is a no-op too.
Promotion is one transaction (the caller's): summary chunks in, event chunks marked
`long_term_detail`, their vectors dropped. One session is closed by one caller at a time.
Every row carries the session's user (`owner_user`, its bound DM; "": none): a chunk stored
without one given takes the user of the session's rows stored before it (`OWNER_OF_SESSION`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final
from uuid import UUID

from choir.core.memory.chunks import ChunkKind, MemoryChunk, Tier
from choir.errors import UsageError
from choir.store.postgres.jsonb_safe import decode_text, encode_text
from choir.store.postgres.pool import Connection

SEARCHED_TIERS: Final = (Tier.MID_TERM, Tier.LONG_TERM_SUMMARY)
"""The tiers `store: session` searches and the only ones that carry vectors (§11.5)."""
_FAMILY: Final = {
    Tier.MID_TERM: (Tier.MID_TERM, Tier.LONG_TERM_DETAIL),
    Tier.LONG_TERM_DETAIL: (Tier.MID_TERM, Tier.LONG_TERM_DETAIL),
    Tier.LONG_TERM_SUMMARY: (Tier.LONG_TERM_SUMMARY,),
}
"""Tiers holding the same chunks of a session: an event chunk is mid-term, then detail."""

OWNER_OF_SESSION: Final = """coalesce(nullif({owner}, ''), (
    SELECT o.owner_user FROM memory_documents o
    WHERE o.session_id = $1 AND o.owner_user <> '' LIMIT 1), '')"""
"""The owner a session's new row gets: `{owner}` (a parameter) if given, else its rows'."""

_INSERT: Final = f"""
INSERT INTO memory_documents
    (session_id, tier, chunk_index, text, kind, first_rev, last_rev, owner_user)
SELECT $1, $2, c.chunk_index, c.text, c.kind, c.first_rev, c.last_rev,
       {OWNER_OF_SESSION.format(owner="$9::text")}
FROM unnest($3::int[], $4::text[], $5::text[], $6::bigint[], $7::bigint[])
    AS c (chunk_index, text, kind, first_rev, last_rev)
WHERE NOT EXISTS (
    SELECT FROM memory_documents d
    WHERE d.session_id = $1 AND d.tier = ANY($8::text[]) AND d.chunk_index = c.chunk_index
)
ON CONFLICT (session_id, tier, chunk_index) DO NOTHING
RETURNING id
"""

_STORED: Final = """
SELECT id, chunk_index, tier, text FROM memory_documents
WHERE session_id = $1 AND tier = ANY($2::text[]) AND chunk_index = ANY($3::int[])
"""

_DEMOTE: Final = """
WITH detail AS (
    UPDATE memory_documents SET tier = 'long_term_detail'
    WHERE session_id = $1 AND tier = 'mid_term'
    RETURNING id
)
DELETE FROM memory_embeddings e USING detail WHERE e.document_id = detail.id
"""

_MID_TERM_SESSIONS: Final = """
SELECT session_id FROM memory_documents WHERE tier = 'mid_term'
GROUP BY session_id ORDER BY min(created_at), session_id
"""

_BY_ID: Final = """
SELECT d.id, d.session_id, d.tier, d.chunk_index, d.text, d.kind, d.first_rev, d.last_rev,
       d.created_at, EXISTS (SELECT FROM memory_embeddings e WHERE e.document_id = d.id)
           AS has_vector
FROM memory_documents d WHERE d.id = $1
"""


@dataclass(frozen=True, slots=True)
class StoredChunk:
    """One stored chunk, as an operator opens it (`memory show`)."""

    id: UUID
    session_id: str
    tier: Tier
    index: int
    kind: ChunkKind
    first_rev: int | None
    last_rev: int | None
    """The session events it was cut from (None for a summary chunk)."""
    text: str
    created_at: datetime
    has_vector: bool


@dataclass(frozen=True, slots=True)
class ChunkRef:
    """A stored chunk: what the embedding queue needs to give it a vector."""

    id: UUID
    index: int
    tier: Tier
    text: str
    new: bool
    """Stored by this call; False when an earlier run had stored it."""


async def add_chunks(
    conn: Connection,
    session_id: str,
    tier: Tier,
    chunks: Sequence[MemoryChunk],
    *,
    owner: str = "",
) -> list[ChunkRef]:
    """Store `chunks` of `session_id` in `tier` unless stored already; their refs, in order.
    `owner`: the session's user ("": the user of its rows stored already, if any)."""
    _check_indexes(chunks)
    if not chunks:
        return []
    family = [str(t) for t in _FAMILY[tier]]
    inserted = await conn.fetch(
        _INSERT,
        session_id,
        str(tier),
        [c.index for c in chunks],
        [encode_text(c.text) for c in chunks],
        [str(c.kind) for c in chunks],
        [c.first_rev for c in chunks],
        [c.last_rev for c in chunks],
        family,
        owner,
    )
    new = {row["id"] for row in inserted}
    rows = await conn.fetch(_STORED, session_id, family, [c.index for c in chunks])
    by_index = {row["chunk_index"]: row for row in rows}
    return [
        ChunkRef(
            id=(row := by_index[c.index])["id"],
            index=c.index,
            tier=Tier(row["tier"]),
            text=decode_text(row["text"]),
            new=row["id"] in new,
        )
        for c in chunks
    ]


async def promote(
    conn: Connection, session_id: str, summary: Sequence[MemoryChunk]
) -> list[ChunkRef]:
    """Move `session_id` to long-term memory (§11.5 steps 3-4); the summary chunks' refs.

    Must run in one transaction with nothing else: a crash in between leaves the session
    mid-term, and running it again completes it.
    """
    refs = await add_chunks(conn, session_id, Tier.LONG_TERM_SUMMARY, summary)
    await conn.execute(_DEMOTE, session_id)
    return refs


async def mid_term_sessions(conn: Connection) -> list[str]:
    """Sessions with mid-term chunks, the one stored first first (the next to promote)."""
    rows = await conn.fetch(_MID_TERM_SESSIONS)
    return [row["session_id"] for row in rows]


async def get_chunk(conn: Connection, chunk_id: UUID) -> StoredChunk | None:
    """The chunk with id `chunk_id`, or None."""
    row = await conn.fetchrow(_BY_ID, chunk_id)
    if row is None:
        return None
    return StoredChunk(
        id=row["id"],
        session_id=row["session_id"],
        tier=Tier(row["tier"]),
        index=row["chunk_index"],
        kind=ChunkKind(row["kind"]),
        first_rev=row["first_rev"],
        last_rev=row["last_rev"],
        text=decode_text(row["text"]),
        created_at=row["created_at"],
        has_vector=row["has_vector"],
    )


def _check_indexes(chunks: Sequence[MemoryChunk]) -> None:
    indexes = [c.index for c in chunks]
    if len(set(indexes)) != len(indexes):
        raise UsageError("memory chunks of one session and tier must have distinct indexes")
    if any(i < 0 for i in indexes):
        raise UsageError("memory chunk indexes start at 0")
