"""`choir_control.session_snapshots`: working-memory snapshots that bound replay (§13.4).

A snapshot at rev N plus the events after N restore a session. Snapshots arrive with heartbeats
and are stored in the heartbeat's transaction, so a stored snapshot never points past `ack_rev`.
"""

from __future__ import annotations

from typing import Any, Final, NamedTuple

from choir.store.postgres.pool import Connection

_SAVE: Final = """
INSERT INTO choir_control.session_snapshots (session_id, rev, snapshot) VALUES ($1, $2, $3)
ON CONFLICT (session_id, rev) DO UPDATE SET snapshot = EXCLUDED.snapshot, created_at = now()
"""

_LATEST: Final = """
SELECT rev, snapshot FROM choir_control.session_snapshots
WHERE session_id = $1 AND rev <= $2 ORDER BY rev DESC LIMIT 1
"""


class StoredSnapshot(NamedTuple):
    rev: int
    snapshot: dict[str, Any]
    """The JSON form of `choir.protocol.Snapshot`."""


async def save_snapshot(
    conn: Connection, session_id: str, rev: int, snapshot: dict[str, Any]
) -> None:
    """Store the session's snapshot at `rev`; a resent one replaces the earlier copy."""
    await conn.execute(_SAVE, session_id, rev, snapshot)


async def latest_snapshot(conn: Connection, session_id: str, max_rev: int) -> StoredSnapshot | None:
    """The newest snapshot at or before `max_rev`, or None."""
    row = await conn.fetchrow(_LATEST, session_id, max_rev)
    return None if row is None else StoredSnapshot(row["rev"], row["snapshot"])
