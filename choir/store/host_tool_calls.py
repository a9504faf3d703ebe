"""`choir_control.host_tool_calls`: every EXECUTE_HOST_TOOL by (session, call id), with its result.

A host tool must never run twice for one call (§13.3), also when choird restarts between a call
and its resend (issue 12 point 11). A call is claimed here before its handler runs — one INSERT
that only one claimant can win — and its result is stored when it finishes. A resend finds the
row: a finished call is answered with the stored result; a call still marked running that no
choird runs any more (the one that ran it died) is answered "outcome unknown", never re-run.

The table is its own migration scope (`host_tool_calls` in `ddl`), created with the control
schema but numbered apart from it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from choir.store.postgres.pool import Connection

CallState = Literal["running", "finished"]


@dataclass(frozen=True, slots=True)
class StoredCall:
    """A call someone claimed before: what it was, and its result once it finished."""

    tool_name: str
    state: CallState
    result: dict[str, Any] | None


async def claim(
    conn: Connection, session_id: str, call_id: str, tool_name: str, now: datetime
) -> StoredCall | None:
    """Mark the call running; None if this claim won, else the call as it was stored."""
    won = await conn.fetchval(
        "INSERT INTO choir_control.host_tool_calls "
        "(session_id, call_id, tool_name, state, started_at) VALUES ($1, $2, $3, 'running', $4) "
        "ON CONFLICT (session_id, call_id) DO NOTHING RETURNING true",
        session_id,
        call_id,
        tool_name,
        now,
    )
    if won:
        return None
    row = await conn.fetchrow(
        "SELECT tool_name, state, result FROM choir_control.host_tool_calls "
        "WHERE session_id = $1 AND call_id = $2",
        session_id,
        call_id,
    )
    assert row is not None, "a claimed call cannot disappear"
    return StoredCall(row["tool_name"], row["state"], row["result"])


async def finish(
    conn: Connection, session_id: str, call_id: str, result: dict[str, Any], now: datetime
) -> None:
    """Store the call's result (it is answered from here from now on)."""
    await conn.execute(
        "UPDATE choir_control.host_tool_calls SET state = 'finished', result = $3, "
        "finished_at = $4 WHERE session_id = $1 AND call_id = $2",
        session_id,
        call_id,
        result,
        now,
    )
