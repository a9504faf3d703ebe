"""`choir_control.session_inbox`: user messages choird accepted, until the agent has them (§19.2).

A message is stored here before its sender hears it was accepted, and stays `pending` until the
agent's `user_msg` event carrying its id is durable: the heartbeat that stores that event marks it
`delivered` in the same transaction (`mark_delivered`; a heartbeat of new events only, in its one
statement: `choir.store.heartbeats`). So after any crash — the agent's, or
choird's between accepting and pushing — the pending messages of a session are exactly those it
must still be given (`pending`), and none it already has. A session that ends for good settles
its pending messages `undelivered` (`give_up`), so their senders can be told.

The push is kept as the JSON bytes of its `UserMessagePush`: bytea holds any text, NUL included,
which neither `text` nor `jsonb` can.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

import orjson

from choir.store.postgres.pool import Connection

_ACCEPT: Final = """
INSERT INTO choir_control.session_inbox (message_id, session_id, agent_id, push, accepted_at)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (message_id) DO NOTHING
RETURNING seq
"""

_PENDING: Final = """
SELECT message_id, session_id, agent_id, push FROM choir_control.session_inbox
WHERE session_id = $1 AND status = 'pending'
ORDER BY seq
"""

_DELIVERED: Final = """
UPDATE choir_control.session_inbox AS i
SET status = 'delivered', delivered_rev = d.rev, settled_at = $3
FROM unnest($2::text[], $4::bigint[]) AS d (message_id, rev)
WHERE i.session_id = $1 AND i.message_id = d.message_id AND i.status = 'pending'
"""

_GIVE_UP: Final = """
UPDATE choir_control.session_inbox SET status = 'undelivered', settled_at = $2
WHERE session_id = $1 AND status = 'pending'
RETURNING message_id, session_id, agent_id, push
"""

_STATUS: Final = "SELECT status FROM choir_control.session_inbox WHERE message_id = $1"


@dataclass(frozen=True, slots=True)
class InboxMessage:
    """A message waiting for its agent."""

    message_id: str
    session_id: str
    agent_id: str
    push: dict[str, Any]
    """The JSON form of its `UserMessagePush`."""


async def accept(
    conn: Connection,
    *,
    message_id: str,
    session_id: str,
    agent_id: str,
    push: dict[str, Any],
    now: datetime,
) -> bool:
    """Store a message for the session's agent; False if `message_id` was accepted before."""
    seq = await conn.fetchval(_ACCEPT, message_id, session_id, agent_id, orjson.dumps(push), now)
    return seq is not None


async def pending(conn: Connection, session_id: str) -> list[InboxMessage]:
    """The session's messages its agent does not durably have yet, oldest first."""
    return [_message(row) for row in await conn.fetch(_PENDING, session_id)]


async def mark_delivered(
    conn: Connection, session_id: str, delivered: Sequence[tuple[str, int]], now: datetime
) -> None:
    """(message id, rev of its durable `user_msg`) pairs: those messages are delivered."""
    if delivered:
        ids, revs = [m for m, _ in delivered], [r for _, r in delivered]
        await conn.execute(_DELIVERED, session_id, ids, now, revs)


async def give_up(conn: Connection, session_id: str, now: datetime) -> list[InboxMessage]:
    """Settle the session's pending messages as undelivered; the ones settled."""
    return [_message(row) for row in await conn.fetch(_GIVE_UP, session_id, now)]


async def status_of(conn: Connection, message_id: str) -> str | None:
    """`pending`, `delivered` or `undelivered`; None for an unknown id."""
    status: str | None = await conn.fetchval(_STATUS, message_id)
    return status


def _message(row: Any) -> InboxMessage:
    return InboxMessage(
        row["message_id"], row["session_id"], row["agent_id"], orjson.loads(row["push"])
    )


__all__ = ["InboxMessage", "accept", "give_up", "mark_delivered", "pending", "status_of"]
