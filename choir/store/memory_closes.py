"""`choir_control.memory_closes`: which ended sessions have been put into memory (§11.8 6-7).

    (no row) --close begins--> closing(chunk_chars) --chunks stored, promotions done--> closed

A close records `closing` with the chunk size it cuts with *before* storing anything, so a close
interrupted (choird killed, Postgres gone) is resumed with the same size: the chunker is
deterministic, the store keys chunks by (session, tier, index), and the rerun stores nothing
twice even when `memory_chunk_chars` changed meanwhile. A session with a `closed` row is never
chunked again.

A session is *ended for memory* when it stopped gracefully or forked (final statuses), or when
it crashed or was suspended and its agent has since started a newer session: the default start
resumes only the latest session, so an older one has aged out of being resumed.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from choir.store.postgres.pool import Connection

_PENDING: Final = """
SELECT s.session_id, s.agent_id, c.chunk_chars
FROM choir_control.sessions s
LEFT JOIN choir_control.memory_closes c USING (session_id)
WHERE (c.state IS NULL OR c.state = 'closing')
  AND s.agent_id = ANY($1::text[])
  AND ($2::text IS NULL OR s.agent_id = $2)
  AND (s.status IN ('stopped', 'forked')
       OR (s.status IN ('crashed', 'suspended') AND EXISTS (
           SELECT FROM choir_control.sessions n
           WHERE n.agent_id = s.agent_id AND n.started_at > s.started_at)))
ORDER BY s.started_at, s.session_id
LIMIT $3
"""

_BEGIN: Final = """
INSERT INTO choir_control.memory_closes (session_id, agent_id, state, chunk_chars)
VALUES ($1, $2, 'closing', $3)
ON CONFLICT (session_id) DO UPDATE SET session_id = EXCLUDED.session_id
RETURNING state, chunk_chars
"""

_FINISH: Final = """
UPDATE choir_control.memory_closes SET state = 'closed', chunks = $2, closed_at = $3
WHERE session_id = $1 AND state = 'closing'
"""

_LAST: Final = """
SELECT max(closed_at) FROM choir_control.memory_closes WHERE agent_id = $1 AND state = 'closed'
"""


@dataclass(frozen=True, slots=True)
class PendingClose:
    """An ended session whose memory is not closed yet."""

    session_id: str
    agent_id: str
    chunk_chars: int | None
    """The chunk size an interrupted close began with; None when none began."""

    @property
    def interrupted(self) -> bool:
        return self.chunk_chars is not None


@dataclass(frozen=True, slots=True)
class Begun:
    """What `begin` found or recorded."""

    closed: bool
    """Closed already (by an earlier run): nothing to do."""
    chunk_chars: int
    """The size to cut with: the one recorded first."""


async def pending_closes(
    conn: Connection, agents: Collection[str], *, agent_id: str | None = None, limit: int = 100
) -> list[PendingClose]:
    """Ended sessions of `agents` (of `agent_id` only, when given) not closed yet, oldest first."""
    rows = await conn.fetch(_PENDING, list(agents), agent_id, limit)
    return [PendingClose(row["session_id"], row["agent_id"], row["chunk_chars"]) for row in rows]


async def begin_close(conn: Connection, session_id: str, agent_id: str, chunk_chars: int) -> Begun:
    """Record that `session_id`'s close begins with `chunk_chars`, unless one began already."""
    row = await conn.fetchrow(_BEGIN, session_id, agent_id, chunk_chars)
    assert row is not None
    return Begun(row["state"] == "closed", row["chunk_chars"])


async def finish_close(conn: Connection, session_id: str, chunks: int, now: datetime) -> bool:
    """Mark `session_id` closed with its `chunks` count; False when it was closed already."""
    status: str = await conn.execute(_FINISH, session_id, chunks, now)
    return status.rsplit(" ", 1)[-1] != "0"


async def last_close(conn: Connection, agent_id: str) -> datetime | None:
    """When the agent's latest session close finished (`memory stats`)."""
    value: datetime | None = await conn.fetchval(_LAST, agent_id)
    return value
