"""The session events a knowledge item's content came from (issue 15, provenance).

An agent's write records its session, the tool call's id and the session's committed revision
when the call ran (`choir.core.memory.knowledge.provenance`). The call's events are found by its id
in `choir_control.session_events` (from a little before that revision: the agent may have sent
them already), and the user message is the newest `user_msg` before the call. Reads only; the
connection is choird's own (the event log is the control plane's, not the agent's schema).
"""

from __future__ import annotations

from typing import Final

from choir.store.events import EventRecord
from choir.store.postgres.pool import Connection

SLACK: Final = 1_000
"""Revisions before the recorded one searched for the call: events the agent had sent and
choird stored before the call reached it."""

_CALL: Final = """
SELECT rev, event_type, lane, payload, hash_prev, hash, created_at, artifact
FROM choir_control.session_events
WHERE session_id = $1 AND rev >= $2 AND payload ->> 'call_id' = $3
  AND event_type IN ('tool_call_requested', 'tool_result_committed')
ORDER BY rev
"""

_USER_BEFORE: Final = """
SELECT rev, event_type, lane, payload, hash_prev, hash, created_at, artifact
FROM choir_control.session_events
WHERE session_id = $1 AND rev < $2 AND event_type = 'user_msg'
ORDER BY rev DESC LIMIT 1
"""


async def source_events(
    conn: Connection, session_id: str, call_id: str, after_rev: int
) -> list[EventRecord]:
    """The user message before call `call_id`, the call and its result, in order; empty when
    the call's events are not stored (yet: they come with the agent's next heartbeat)."""
    rows = await conn.fetch(_CALL, session_id, max(after_rev - SLACK, 0), call_id)
    if not rows:
        return []
    user = await conn.fetchrow(_USER_BEFORE, session_id, rows[0]["rev"])
    found = ([user] if user is not None else []) + list(rows)
    return [EventRecord(**dict(row)) for row in found]
