"""Per-tool latency and lock waits of one session, from its replicated events (§22.1).

`agent status` shows them. They are read from `session_events` when asked, not kept anywhere:
every call that ran commits its intent (`tool_call_committed`, with `lock_wait_ms`) and its
result (`tool_result_committed`, with `duration_ms`, the run once the locks were held), and those
events are durable within ~100 ms — so the figures survive an agent crash and a choird restart,
cost nothing on the heartbeat path, and are exactly the session's. A proposal refused before it
ran (unknown tool, bad input) has a result but no intent and is not counted. The session's
`(session_id, rev)` index bounds the scan to its own events.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from choir.store.postgres.pool import Connection

_TOOLS: Final = """
WITH ran AS (
    SELECT payload->>'call_id' AS call_id,
           (payload->>'lock_wait_ms')::bigint AS wait_ms
    FROM choir_control.session_events
    WHERE session_id = $1 AND event_type = 'tool_call_committed'
)
SELECT r.payload->>'tool' AS tool,
       count(*) AS calls,
       count(*) FILTER (WHERE r.payload->'result'->>'status' <> 'success') AS failed,
       percentile_disc(0.5) WITHIN GROUP (ORDER BY (r.payload->>'duration_ms')::bigint) AS p50,
       percentile_disc(0.95) WITHIN GROUP (ORDER BY (r.payload->>'duration_ms')::bigint) AS p95,
       max((r.payload->>'duration_ms')::bigint) AS max_ms,
       coalesce(sum(ran.wait_ms), 0)::bigint AS wait_ms
FROM choir_control.session_events r
JOIN ran ON ran.call_id = r.payload->>'call_id'
WHERE r.session_id = $1 AND r.event_type = 'tool_result_committed'
GROUP BY 1
ORDER BY 1
"""

_LOCKS: Final = """
SELECT count(*) AS calls,
       count(*) FILTER (WHERE w > 0) AS waited,
       coalesce(sum(w), 0)::bigint AS total_ms,
       coalesce(percentile_disc(0.95) WITHIN GROUP (ORDER BY w), 0) AS p95,
       coalesce(max(w), 0) AS max_ms
FROM (
    SELECT (payload->>'lock_wait_ms')::bigint AS w
    FROM choir_control.session_events
    WHERE session_id = $1 AND event_type = 'tool_call_committed'
      AND payload ? 'lock_wait_ms'
) AS waits
"""


@dataclass(frozen=True, slots=True)
class ToolLatency:
    """One tool's calls that ran in the session, and how long they ran."""

    tool: str
    calls: int
    failed: int
    """Calls whose result was not `success` (error, timeout, cancelled)."""
    p50_ms: int
    p95_ms: int
    max_ms: int
    lock_wait_ms: int
    """Time its calls waited for locks, in all."""


@dataclass(frozen=True, slots=True)
class LockWaits:
    """How the session's calls waited for their locks (§9)."""

    calls: int
    """Calls whose intent recorded a wait (0 ms included)."""
    waited: int
    """Those that waited at all."""
    total_ms: int
    p95_ms: int
    max_ms: int


async def tool_latencies(conn: Connection, session_id: str) -> list[ToolLatency]:
    """Per tool, by name: calls, failures, p50/p95/max run time and the lock wait."""
    rows = await conn.fetch(_TOOLS, session_id)
    return [
        ToolLatency(
            tool=row["tool"],
            calls=row["calls"],
            failed=row["failed"],
            p50_ms=row["p50"] or 0,
            p95_ms=row["p95"] or 0,
            max_ms=row["max_ms"] or 0,
            lock_wait_ms=row["wait_ms"],
        )
        for row in rows
    ]


async def lock_waits(conn: Connection, session_id: str) -> LockWaits:
    """The session's lock waits: how many calls waited, how long in all, p95 and the longest."""
    row = await conn.fetchrow(_LOCKS, session_id)
    assert row is not None  # an aggregate always answers one row
    return LockWaits(
        calls=row["calls"],
        waited=row["waited"],
        total_ms=row["total_ms"],
        p95_ms=row["p95"],
        max_ms=row["max_ms"],
    )
