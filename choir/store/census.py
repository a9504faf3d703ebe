"""Counts of choird's state for the metrics endpoint: sessions by status, agents with an active
session, approvals pending. One round trip, read when the endpoint is scraped."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from choir.store.postgres.pool import Connection

_CENSUS: Final = """
SELECT
    (SELECT coalesce(jsonb_object_agg(status, n), '{}'::jsonb)
       FROM (SELECT status, count(*) AS n FROM choir_control.sessions GROUP BY status) AS s)
        AS sessions,
    (SELECT coalesce(array_agg(DISTINCT agent_id), '{}')
       FROM choir_control.sessions WHERE status = 'active') AS active_agents,
    (SELECT count(*) FROM choir_control.pending_approvals WHERE status = 'pending')
        AS approvals_pending
"""


@dataclass(frozen=True, slots=True)
class Census:
    sessions: dict[str, int]
    """Session status -> how many sessions have it."""
    active_agents: list[str]
    approvals_pending: int


async def census(conn: Connection) -> Census:
    row = await conn.fetchrow(_CENSUS)
    assert row is not None  # a SELECT without FROM always answers one row
    return Census(
        sessions={str(k): int(v) for k, v in row["sessions"].items()},
        active_agents=sorted(row["active_agents"]),
        approvals_pending=row["approvals_pending"],
    )
