"""`choir_control.memory_closes`: which ended sessions have been put into memory (§11.8 6-7).

    (no row) --close begins--> closing --chunks stored, promotions done--> closed
    closed --the session was resumed and has more events--> closing (its new events only)

A close records `closing` with the chunk size it cuts with *before* storing anything, so a close
interrupted (choird killed, Postgres gone) is resumed with the same size: the chunker is
deterministic, the store keys chunks by (session, tier, index), and the rerun stores nothing
twice even when `memory_chunk_chars` changed meanwhile. `closed` records how far the session's
events went (`to_rev`) and its chunk count: a session resumed later (`agent start --resume`) and
ended again has only its newer events chunked, numbered on from there.

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
SELECT s.session_id, s.agent_id, s.ack_rev, c.state
FROM choir_control.sessions s
LEFT JOIN choir_control.memory_closes c USING (session_id)
WHERE (c.state IS NULL OR c.state = 'closing' OR c.to_rev < s.ack_rev)
  AND s.agent_id = ANY($1::text[])
  AND ($2::text IS NULL OR s.agent_id = $2)
  AND NOT s.session_id = ANY($4::text[])
  AND (s.status IN ('stopped', 'forked')
       OR (s.status IN ('crashed', 'suspended') AND EXISTS (
           SELECT FROM choir_control.sessions n
           WHERE n.agent_id = s.agent_id AND n.started_at > s.started_at)))
ORDER BY s.started_at, s.session_id
LIMIT $3
"""

# A `closing` row is returned as it is (a resumed close repeats itself); a `closed` one behind
# the session's events reopens for the events after it; an up-to-date `closed` one: no row.
_BEGIN: Final = """
INSERT INTO choir_control.memory_closes AS c (session_id, agent_id, state, chunk_chars)
VALUES ($1, $2, 'closing', $3)
ON CONFLICT (session_id) DO UPDATE SET
    state = 'closing',
    closed_at = NULL,
    from_rev = CASE WHEN c.state = 'closed' THEN c.to_rev ELSE c.from_rev END,
    first_index = CASE WHEN c.state = 'closed' THEN c.chunks ELSE c.first_index END
WHERE c.state = 'closing' OR c.to_rev < $4
RETURNING chunk_chars, from_rev, first_index
"""

_FINISH: Final = """
UPDATE choir_control.memory_closes
SET state = 'closed', chunks = first_index + $2, to_rev = $3, closed_at = $4
WHERE session_id = $1 AND state = 'closing'
"""

_LAST: Final = """
SELECT max(closed_at) FROM choir_control.memory_closes WHERE agent_id = $1 AND state = 'closed'
"""


@dataclass(frozen=True, slots=True)
class PendingClose:
    """An ended session whose memory is not closed yet (or not up to its last event)."""

    session_id: str
    agent_id: str
    ack_rev: int = 0
    """The session's last stored event: what the close covers."""
    state: str | None = None
    """`closing`: a close began and was cut short; `closed`: the session has events since."""

    @property
    def interrupted(self) -> bool:
        return self.state == "closing"


@dataclass(frozen=True, slots=True)
class Begun:
    """A close to do: how to cut, and which events."""

    chunk_chars: int
    """The size to cut with: the one recorded first."""
    from_rev: int
    """Events up to this rev are in memory already (a session resumed after its close)."""
    first_index: int
    """The index its first new chunk takes."""


async def pending_closes(
    conn: Connection,
    agents: Collection[str],
    *,
    agent_id: str | None = None,
    skip: Collection[str] = (),
    limit: int = 100,
) -> list[PendingClose]:
    """Ended sessions of `agents` (of `agent_id` only, when given; none of `skip`) not closed
    yet, oldest first."""
    rows = await conn.fetch(_PENDING, list(agents), agent_id, limit, list(skip))
    return [PendingClose(*row.values()) for row in rows]


async def begin_close(
    conn: Connection, session_id: str, agent_id: str, chunk_chars: int, ack_rev: int
) -> Begun | None:
    """Record that `session_id`'s close begins (with `chunk_chars`, unless one began already);
    None when it is closed up to `ack_rev`."""
    row = await conn.fetchrow(_BEGIN, session_id, agent_id, chunk_chars, ack_rev)
    return None if row is None else Begun(*row.values())


async def finish_close(
    conn: Connection, session_id: str, chunks: int, to_rev: int, now: datetime
) -> bool:
    """Mark `session_id` closed up to `to_rev`, with `chunks` new chunks; False when it was
    not closing."""
    status: str = await conn.execute(_FINISH, session_id, chunks, to_rev, now)
    return status.rsplit(" ", 1)[-1] != "0"


async def last_close(conn: Connection, agent_id: str) -> datetime | None:
    """When the agent's latest session close finished (`memory stats`)."""
    value: datetime | None = await conn.fetchval(_LAST, agent_id)
    return value
