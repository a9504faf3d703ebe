"""`choir_control.leases`: exclusive resources and the session holding each (§6.4).

The primary key (resource_kind, resource_name) is the lock: a second holder cannot insert. A set
of leases is taken with one statement under a savepoint; when any is already held (also by a
concurrent start that committed first), `acquire` rolls the savepoint back and returns the
holders, so nothing of the set stays leased.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final, NamedTuple

from asyncpg import Record

from choir.store.postgres.pool import Connection


class Resource(NamedTuple):
    """An exclusive resource: its kind (`workspace`, `dm`, …) and its name in config.json."""

    kind: str
    name: str


@dataclass(frozen=True, slots=True)
class Lease:
    """Who holds a resource."""

    resource: Resource
    agent_id: str
    session_id: str
    acquired_at: datetime


_HOLDERS: Final = """
SELECT l.resource_kind, l.resource_name, l.agent_id, l.session_id, l.acquired_at
FROM choir_control.leases l
JOIN unnest($1::text[], $2::text[]) AS wanted (kind, name)
  ON wanted.kind = l.resource_kind AND wanted.name = l.resource_name
ORDER BY array_position($1::text[], l.resource_kind), l.resource_name
"""

_ACQUIRE: Final = """
INSERT INTO choir_control.leases (resource_kind, resource_name, agent_id, session_id, acquired_at)
SELECT kind, name, $3, $4, $5 FROM unnest($1::text[], $2::text[]) AS wanted (kind, name)
ON CONFLICT (resource_kind, resource_name) DO NOTHING
RETURNING resource_kind
"""

_LIST: Final = """
SELECT resource_kind, resource_name, agent_id, session_id, acquired_at
FROM choir_control.leases ORDER BY resource_kind, resource_name
"""


async def acquire(
    conn: Connection,
    resources: Sequence[Resource],
    *,
    agent_id: str,
    session_id: str,
    now: datetime,
) -> list[Lease]:
    """Lease every resource to the session, or none: returns the conflicting leases ([] = done).

    A concurrent transaction leasing the same resource makes the insert wait for it; if that one
    commits, the resource counts as held here too.
    """
    kinds, names = [r.kind for r in resources], [r.name for r in resources]
    try:
        async with conn.transaction():
            taken = await conn.fetch(_ACQUIRE, kinds, names, agent_id, session_id, now)
            if len(taken) < len(resources):
                raise _Held
    except _Held:
        return [_lease(row) for row in await conn.fetch(_HOLDERS, kinds, names)]
    return []


async def release(conn: Connection, session_id: str) -> int:
    """Release every lease of the session; returns how many were held."""
    result = await conn.execute(
        "DELETE FROM choir_control.leases WHERE session_id = $1", session_id
    )
    return int(result.rsplit(" ", 1)[-1])


async def leases_of(conn: Connection, session_id: str) -> list[Lease]:
    rows = await conn.fetch(
        "SELECT resource_kind, resource_name, agent_id, session_id, acquired_at "
        "FROM choir_control.leases WHERE session_id = $1 ORDER BY resource_kind, resource_name",
        session_id,
    )
    return [_lease(row) for row in rows]


async def all_leases(conn: Connection) -> list[Lease]:
    """Every lease held, by kind and name (for `choirctl workspace list` and status)."""
    return [_lease(row) for row in await conn.fetch(_LIST)]


class _Held(Exception):
    """Rolls the savepoint of a partly taken lease set back."""


def _lease(row: Record) -> Lease:
    return Lease(
        Resource(row["resource_kind"], row["resource_name"]),
        row["agent_id"],
        row["session_id"],
        row["acquired_at"],
    )
