"""A session's tool-call rows (`tool_synthesis`) in `memory_documents`, and who still lacks them.

    refs = await add_tool_rows(agent_conn, session_id, rows)     # as the agent (run_as_agent)
    done = await described_sessions(agent_conn)
    todo = await sessions_with_tool_results(admin_conn, agent_id)   # choir_control

A tool row is a `memory_documents` row of kind `tool_description` keyed by (session, tier,
`-rev`): session chunks count up from 0, so the two never share a key, and storing a session's
rows again stores nothing (the unique key, and the `NOT EXISTS` across the session's event tiers,
as `memory.add_chunks` does). The rows go where the session's event chunks are — `mid_term`
(searched, given vectors) or, once promoted, `long_term_detail` — so a backfill never makes a
promoted session mid-term again. Being ordinary rows, they are found by every search of the
session store (text, BM25, vectors) and counted, embedded and demoted with their session,
and belong to its user as its chunks do (`memory.OWNER_OF_SESSION`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from choir.core.memory.chunks import ChunkKind, MemoryChunk, Tier
from choir.core.memory.tool_synthesis import ECHOES
from choir.errors import UsageError
from choir.store.memory.chunks import OWNER_OF_SESSION, ChunkRef
from choir.store.postgres.jsonb_safe import decode_text, encode_text
from choir.store.postgres.pool import Connection

KIND: Final = str(ChunkKind.TOOL_DESCRIPTION)

_INSERT: Final = f"""
WITH target AS (
    SELECT coalesce(
        (SELECT tier FROM memory_documents
         WHERE session_id = $1 AND tier IN ('mid_term', 'long_term_detail')
         ORDER BY tier = 'mid_term' DESC LIMIT 1),
        'mid_term') AS tier
)
INSERT INTO memory_documents
    (session_id, tier, chunk_index, text, kind, first_rev, last_rev, owner_user)
SELECT $1, target.tier, c.chunk_index, c.text, $2, c.first_rev, c.last_rev,
       {OWNER_OF_SESSION.format(owner="''")}
FROM target, unnest($3::int[], $4::text[], $5::bigint[], $6::bigint[])
    AS c (chunk_index, text, first_rev, last_rev)
WHERE NOT EXISTS (
    SELECT FROM memory_documents d
    WHERE d.session_id = $1 AND d.tier IN ('mid_term', 'long_term_detail')
      AND d.chunk_index = c.chunk_index
)
ON CONFLICT (session_id, tier, chunk_index) DO NOTHING
RETURNING id, chunk_index, tier, text
"""

_DESCRIBED: Final = """
SELECT session_id, count(*) AS rows FROM memory_documents WHERE kind = $1 GROUP BY session_id
"""

_COUNT: Final = "SELECT count(*) FROM memory_documents WHERE kind = $1"

_WITH_RESULTS: Final = """
SELECT c.session_id, count(e.id) AS results
FROM choir_control.memory_closes c
JOIN choir_control.session_events e
    ON e.session_id = c.session_id AND e.event_type = 'tool_result_committed'
    AND NOT coalesce(e.payload->>'tool', '') = ANY($2::text[])
WHERE c.agent_id = $1 AND c.state = 'closed'
GROUP BY c.session_id, c.closed_at
ORDER BY c.closed_at, c.session_id
"""


@dataclass(frozen=True, slots=True)
class ClosedWithTools:
    """A session put into memory whose log holds tool results."""

    session_id: str
    results: int


async def add_tool_rows(
    conn: Connection, session_id: str, rows: Sequence[MemoryChunk]
) -> list[ChunkRef]:
    """Store the session's tool rows not stored yet; the refs of those stored now."""
    if any(row.kind is not ChunkKind.TOOL_DESCRIPTION or row.index >= 0 for row in rows):
        raise UsageError("tool rows are of kind tool_description, keyed by a negative index")
    if not rows:
        return []
    inserted = await conn.fetch(
        _INSERT,
        session_id,
        KIND,
        [row.index for row in rows],
        [encode_text(row.text) for row in rows],
        [row.first_rev for row in rows],
        [row.last_rev for row in rows],
    )
    return [
        ChunkRef(
            id=record["id"],
            index=record["chunk_index"],
            tier=Tier(record["tier"]),
            text=decode_text(record["text"]),
            new=True,
        )
        for record in sorted(inserted, key=lambda r: -r["chunk_index"])
    ]


async def described_sessions(conn: Connection) -> dict[str, int]:
    """Sessions (of the agent whose role `conn` runs as) with tool rows stored, and how many."""
    return {record["session_id"]: record["rows"] for record in await conn.fetch(_DESCRIBED, KIND)}


async def tool_row_count(conn: Connection) -> int:
    """The agent's tool rows, in every tier."""
    return int(await conn.fetchval(_COUNT, KIND) or 0)


def undescribed(
    closed: Sequence[ClosedWithTools], described: Mapping[str, int]
) -> list[ClosedWithTools]:
    """The sessions of `closed` with fewer tool rows than tool results, each with the count
    of results missing their row: never described (closed before tool rows existed), or only
    its later part (closed again after a resume)."""
    return [
        ClosedWithTools(s.session_id, s.results - described.get(s.session_id, 0))
        for s in closed
        if described.get(s.session_id, 0) < s.results
    ]


async def sessions_with_tool_results(conn: Connection, agent_id: str) -> list[ClosedWithTools]:
    """The agent's closed sessions whose logs hold tool results that get a row (not `ECHOES`'),
    closed first first (an admin connection: `choir_control`)."""
    return [
        ClosedWithTools(record["session_id"], record["results"])
        for record in await conn.fetch(_WITH_RESULTS, agent_id, sorted(ECHOES))
    ]


_UNSUMMARIZED: Final = """
SELECT count(*) FROM choir_control.memory_closes c
WHERE c.agent_id = $1 AND c.state = 'closed'
  AND NOT EXISTS (SELECT FROM choir_control.session_events e
                  WHERE e.session_id = c.session_id AND e.event_type = 'session_summary')
"""


async def unsummarized_sessions(conn: Connection, agent_id: str) -> int:
    """The agent's sessions in memory whose log holds no session summary (an admin
    connection)."""
    return int(await conn.fetchval(_UNSUMMARIZED, agent_id) or 0)
