"""`choir_control.sessions`: one row per agent session, its lease token hash and replication head.

The lease token itself is never stored: `lease_id` holds its SHA-256, so a database dump does not
hand out live tokens, and it is set to NULL (revoked) when the session ends. `ack_rev` and
`head_hash` are the last revision choird acknowledged and its chain hash; `last_heartbeat_at` is
the last sign of life (set on activation too, so a booting container is not reaped at once).

Every state change is a guarded UPDATE (`WHERE status = 'active'`, `WHERE ack_rev = $n`) that
reports whether it applied, so two writers racing on one session cannot both win.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, Final

from asyncpg import Record

from choir.store.postgres.pool import Connection


class SessionStatus(StrEnum):
    """Where a session stands; only `active` sessions hold leases and a valid token."""

    ACTIVE = "active"
    STOPPED = "stopped"
    """Ended gracefully; the next start creates a new session."""
    SUSPENDED = "suspended"
    """Stopped for a restart or update; the next start resumes it (design notes, "Sessions")."""
    CRASHED = "crashed"
    """No heartbeat in time, or its container vanished; the next start resumes it."""
    FORKED = "forked"
    """Stopped because the agent's chain diverged from the stored one; never resumed."""


RESUMABLE: Final = frozenset({SessionStatus.SUSPENDED, SessionStatus.CRASHED})
"""Statuses the next start resumes by default."""
END_REASON_CHARS: Final = 500
"""How much of an end reason is kept (an agent's own reason can be a long error)."""

_COLUMNS: Final = """
session_id, agent_id, status, started_at, ended_at, resource_bindings, config_version,
last_heartbeat_at, ack_rev, head_hash, lease_id, end_reason
"""


@dataclass(frozen=True, slots=True)
class SessionRow:
    """One stored session."""

    session_id: str
    agent_id: str
    status: SessionStatus
    started_at: datetime
    ended_at: datetime | None
    resource_bindings: dict[str, Any]
    config_version: int | None
    """The config version the agent last reported running."""
    last_heartbeat_at: datetime | None
    ack_rev: int
    head_hash: str | None
    """Chain hash at `ack_rev`; None before the first event."""
    lease_id: str | None
    """SHA-256 (hex) of the lease token; None once revoked."""
    end_reason: str | None = None
    """Why the session ended (redacted, as choird logged it); None while active, and for
    sessions that ended before choir recorded it."""

    @classmethod
    def of(cls, row: Record) -> SessionRow:
        return cls(**{**dict(row), "status": SessionStatus(row["status"])})


@dataclass(frozen=True, slots=True)
class Activation:
    """What (re)starting a session records."""

    token_hash: str = field(repr=False)
    """SHA-256 (hex) of the new lease token."""
    bindings: dict[str, Any]
    """The resolved resource bindings, JSON form."""
    config_version: int
    """The running config version handed to the agent."""
    at: datetime


async def insert_session(
    conn: Connection, session_id: str, agent_id: str, activation: Activation
) -> None:
    """Create an active session."""
    await conn.execute(
        "INSERT INTO choir_control.sessions (session_id, agent_id, lease_id, status, started_at,"
        " resource_bindings, config_version, last_heartbeat_at) "
        "VALUES ($1, $2, $3, 'active', $4, $5, $6, $4)",
        session_id,
        agent_id,
        activation.token_hash,
        activation.at,
        activation.bindings,
        activation.config_version,
    )


async def reactivate(
    conn: Connection, session_id: str, expected: SessionStatus, activation: Activation
) -> bool:
    """Make an ended session active again with a new token; False if its status changed."""
    result = await conn.execute(
        "UPDATE choir_control.sessions SET status = 'active', ended_at = NULL, lease_id = $3,"
        " resource_bindings = $4, config_version = $5, last_heartbeat_at = $6, end_reason = NULL "
        "WHERE session_id = $1 AND status = $2",
        session_id,
        expected.value,
        activation.token_hash,
        activation.bindings,
        activation.config_version,
        activation.at,
    )
    return _updated(result)


async def session_user(conn: Connection, session_id: str) -> str:
    """The user of `session_id`: its bound DM ("": none, or no such session)."""
    dm = await conn.fetchval(
        "SELECT resource_bindings ->> 'dm' FROM choir_control.sessions WHERE session_id = $1",
        session_id,
    )
    return dm if isinstance(dm, str) else ""


async def get_session(conn: Connection, session_id: str) -> SessionRow | None:
    row = await conn.fetchrow(
        f"SELECT {_COLUMNS} FROM choir_control.sessions WHERE session_id = $1", session_id
    )
    return None if row is None else SessionRow.of(row)


async def previous_session(conn: Connection, agent_id: str) -> SessionRow | None:
    """The agent's active session, else the one that ended last (None if it never ran)."""
    row = await conn.fetchrow(
        f"SELECT {_COLUMNS} FROM choir_control.sessions WHERE agent_id = $1 "
        "ORDER BY ended_at DESC NULLS FIRST, started_at DESC LIMIT 1",
        agent_id,
    )
    return None if row is None else SessionRow.of(row)


async def list_sessions(
    conn: Connection, agent_id: str | None = None, limit: int = 50
) -> list[SessionRow]:
    """The newest sessions first, of one agent or all."""
    rows = await conn.fetch(
        f"SELECT {_COLUMNS} FROM choir_control.sessions WHERE $1::text IS NULL OR agent_id = $1 "
        "ORDER BY started_at DESC LIMIT $2",
        agent_id,
        limit,
    )
    return [SessionRow.of(row) for row in rows]


async def end_session(
    conn: Connection, session_id: str, status: SessionStatus, now: datetime, reason: str
) -> bool:
    """End an active session for `reason` and revoke its token; False if it was not active."""
    result = await conn.execute(
        "UPDATE choir_control.sessions SET status = $2, ended_at = $3, lease_id = NULL,"
        " end_reason = $4 WHERE session_id = $1 AND status = 'active'",
        session_id,
        status.value,
        now,
        reason,
    )
    return _updated(result)


async def record_heartbeat(
    conn: Connection,
    session_id: str,
    *,
    expected_ack_rev: int,
    ack_rev: int,
    head_hash: str | None,
    config_version: int,
    now: datetime,
) -> bool:
    """Advance the acknowledged head; False if the session ended or its head moved meanwhile."""
    result = await conn.execute(
        "UPDATE choir_control.sessions SET ack_rev = $3, head_hash = $4, config_version = $5,"
        " last_heartbeat_at = $6 "
        "WHERE session_id = $1 AND ack_rev = $2 AND status = 'active'",
        session_id,
        expected_ack_rev,
        ack_rev,
        head_hash,
        config_version,
        now,
    )
    return _updated(result)


async def touch_session(
    conn: Connection, session_id: str, *, config_version: int, now: datetime
) -> bool:
    """Record a sign of life that carried nothing new; False if the session is not active."""
    result = await conn.execute(
        "UPDATE choir_control.sessions SET config_version = $2, last_heartbeat_at = $3 "
        "WHERE session_id = $1 AND status = 'active'",
        session_id,
        config_version,
        now,
    )
    return _updated(result)


async def stale_sessions(conn: Connection, cutoff: datetime) -> list[SessionRow]:
    """Active sessions whose last sign of life is older than `cutoff`."""
    rows = await conn.fetch(
        f"SELECT {_COLUMNS} FROM choir_control.sessions "
        "WHERE status = 'active' AND last_heartbeat_at < $1 ORDER BY last_heartbeat_at",
        cutoff,
    )
    return [SessionRow.of(row) for row in rows]


async def active_sessions(conn: Connection) -> list[SessionRow]:
    rows = await conn.fetch(
        f"SELECT {_COLUMNS} FROM choir_control.sessions WHERE status = 'active' ORDER BY started_at"
    )
    return [SessionRow.of(row) for row in rows]


async def end_if_stale(
    conn: Connection, session_id: str, cutoff: datetime, now: datetime, reason: str
) -> bool:
    """Mark an active session crashed for `reason` unless a heartbeat arrived after `cutoff`."""
    result = await conn.execute(
        "UPDATE choir_control.sessions SET status = 'crashed', ended_at = $3, lease_id = NULL,"
        " end_reason = $4 WHERE session_id = $1 AND status = 'active' AND last_heartbeat_at < $2",
        session_id,
        cutoff,
        now,
        reason,
    )
    return _updated(result)


def _updated(status: str) -> bool:
    """Whether an `UPDATE n` command tag reports a changed row."""
    return status.rsplit(" ", 1)[-1] != "0"
