"""`choir_control.gateway_reply_cursors`: the last agent reply each Telegram DM was sent.

Agent replies reach a DM from memory, as heartbeats make them durable; a choird killed between
a reply's commit and Telegram's answer to its `sendMessage` would lose it. So each DM (a bot's
gateway name and the chat id) keeps the position — session id and event rev — of the last
`agent_replied` event the bot is done with, written once its last message left, and a starting
choird sends again what its sessions replied after that position (`replies_after`). A cursor
with no session means nothing of a session was sent yet: every reply of the DM's next session
is owed.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Final

from choir.store.events import EventRecord
from choir.store.postgres.pool import Connection

REPLIED: Final = "agent_replied"
"""The event type of a reply (what `session_events.event_type` holds for one)."""

_LOAD: Final = """
SELECT session_id, rev FROM choir_control.gateway_reply_cursors
WHERE gateway = $1 AND chat_id = $2
"""

_START: Final = """
INSERT INTO choir_control.gateway_reply_cursors (gateway, chat_id, session_id, rev)
VALUES ($1, $2, $3, $4)
ON CONFLICT (gateway, chat_id) DO NOTHING
"""

# within one session the cursor never moves back (a late write of an earlier reply); another
# session's reply moves it there, since a chat's replies are sent, and written, in order
_SAVE: Final = """
INSERT INTO choir_control.gateway_reply_cursors (gateway, chat_id, session_id, rev)
VALUES ($1, $2, $3, $4)
ON CONFLICT (gateway, chat_id) DO UPDATE
SET rev = CASE WHEN gateway_reply_cursors.session_id = EXCLUDED.session_id
               THEN GREATEST(gateway_reply_cursors.rev, EXCLUDED.rev)
               ELSE EXCLUDED.rev END,
    session_id = EXCLUDED.session_id,
    updated_at = now()
"""

_AFTER: Final = """
SELECT * FROM (
    SELECT rev, event_type, lane, payload, hash_prev, hash, created_at, artifact
    FROM choir_control.session_events
    WHERE session_id = $1 AND rev > $2 AND event_type = $3 AND created_at >= $4
    ORDER BY rev DESC
    LIMIT $5
) AS newest
ORDER BY rev
"""


@dataclass(frozen=True, slots=True)
class ReplyCursor:
    """Where a DM's sent replies end."""

    session_id: str | None
    """The session of the last reply sent; None: none yet."""
    rev: int
    """Its rev (0 with no session)."""


async def load_cursor(conn: Connection, gateway: str, chat_id: int) -> ReplyCursor | None:
    """The DM's cursor (None: the DM never had one)."""
    row = await conn.fetchrow(_LOAD, gateway, chat_id)
    return None if row is None else ReplyCursor(row["session_id"], int(row["rev"]))


async def start_cursor(
    conn: Connection, gateway: str, chat_id: int, session_id: str | None, rev: int
) -> None:
    """Give a DM that has none its first cursor (one it has is left as it is)."""
    await conn.execute(_START, gateway, chat_id, session_id, rev)


async def save_cursor(
    conn: Connection, gateway: str, chat_id: int, session_id: str, rev: int
) -> None:
    """Record that the reply at (`session_id`, `rev`) was sent to the DM."""
    await conn.execute(_SAVE, gateway, chat_id, session_id, rev)


async def replies_after(
    conn: Connection, session_id: str, rev: int, since: datetime, limit: int
) -> list[EventRecord]:
    """The session's replies after `rev` committed at `since` or later, at most the newest
    `limit` of them, in rev order."""
    rows = await conn.fetch(_AFTER, session_id, rev, REPLIED, since, limit)
    return [EventRecord(**dict(row)) for row in rows]
