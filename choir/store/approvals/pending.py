"""`choir_control.pending_approvals`: proposals waiting for the operator (§8.10, §19.6).

An approval is resolved once: `resolve` and `expire` only change rows still `pending`, in one
guarded UPDATE, so an operator's click and the timeout sweep cannot both win. A timeout is a
rejection (§19.6) with `resolved_by` `timeout`. A proposal choird applies once approved (a
skill) then ends `applied` or `failed` (`finish_approval`, only from `approved`).
`content_sha256` is the hash of exactly what was reviewed; an apply refuses other content.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, Literal

from asyncpg import Record

from choir.store.postgres.jsonb_safe import decode_text, encode_text
from choir.store.postgres.pool import Connection

ApprovalStatus = Literal["pending", "approved", "applied", "rejected", "failed"]

_COLUMNS: Final = (
    "id, session_id, agent_id, request_type, payload, status, created_at, resolved_at, "
    "resolved_by, content_sha256, resolved_via, outcome"
)


@dataclass(frozen=True, slots=True)
class ApprovalRow:
    """One stored approval request."""

    id: str
    session_id: str | None
    agent_id: str
    request_type: str
    payload: dict[str, Any]
    status: ApprovalStatus
    created_at: datetime
    resolved_at: datetime | None
    resolved_by: str | None
    """Who answered: a DM name, `choirctl`, or `timeout`."""
    content_sha256: str | None = None
    """SHA-256 of the proposed content as reviewed (a skill: its file's bytes); None for kinds
    whose content is not bound yet."""
    resolved_via: str | None = None
    """The front end that answered: `choirctl`, `tui`, `telegram`, `console`, or `timeout`."""
    outcome: str | None = None
    """An applied proposal's end: what was applied, or the failed step and why."""

    @classmethod
    def of(cls, row: Record) -> ApprovalRow:
        fields = dict(row)
        for name in ("resolved_by", "outcome"):
            if fields[name] is not None:
                fields[name] = decode_text(fields[name])
        return cls(**fields)


async def insert_approval(
    conn: Connection,
    approval_id: str,
    *,
    session_id: str,
    agent_id: str,
    request_type: str,
    payload: dict[str, Any],
    now: datetime,
    content_sha256: str | None = None,
) -> ApprovalRow:
    row = await conn.fetchrow(
        "INSERT INTO choir_control.pending_approvals "
        "(id, session_id, agent_id, request_type, payload, created_at, content_sha256) "
        f"VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING {_COLUMNS}",
        approval_id,
        session_id,
        agent_id,
        request_type,
        payload,
        now,
        content_sha256,
    )
    assert row is not None  # INSERT … RETURNING always yields the row
    return ApprovalRow.of(row)


async def get_approval(conn: Connection, approval_id: str) -> ApprovalRow | None:
    row = await conn.fetchrow(
        f"SELECT {_COLUMNS} FROM choir_control.pending_approvals WHERE id = $1", approval_id
    )
    return None if row is None else ApprovalRow.of(row)


async def list_approvals(
    conn: Connection, *, status: ApprovalStatus | None = "pending", agent_id: str | None = None
) -> list[ApprovalRow]:
    """Approvals oldest first, filtered by status and agent (None: any)."""
    rows = await conn.fetch(
        f"SELECT {_COLUMNS} FROM choir_control.pending_approvals "
        "WHERE ($1::text IS NULL OR status = $1) AND ($2::text IS NULL OR agent_id = $2) "
        "ORDER BY created_at, id",
        status,
        agent_id,
    )
    return [ApprovalRow.of(row) for row in rows]


async def resolve_approval(
    conn: Connection,
    approval_id: str,
    status: Literal["approved", "rejected"],
    *,
    by: str,
    now: datetime,
    via: str | None = None,
    granted: int | None = None,
    restart: bool | None = None,
) -> ApprovalRow | None:
    """Answer a pending approval; None when it is not pending (or does not exist).

    `granted` (an approved `budget_extension`) is stored in the payload as `granted`, and
    `restart` (whether the approver chose to restart what a config change needs) as
    `restart_chosen`, in the same guarded UPDATE: decided with the answer, or not at all. Either
    overwrites a key of that name the agent may have sent.
    """
    row = await conn.fetchrow(
        "UPDATE choir_control.pending_approvals SET status = $2, resolved_at = $3, "
        "resolved_by = $4, resolved_via = $5, payload = payload"
        " || CASE WHEN $6::bigint IS NULL THEN '{}'::jsonb"
        " ELSE jsonb_build_object('granted', $6::bigint) END"
        " || CASE WHEN $7::boolean IS NULL THEN '{}'::jsonb"
        " ELSE jsonb_build_object('restart_chosen', $7::boolean) END "
        f"WHERE id = $1 AND status = 'pending' RETURNING {_COLUMNS}",
        approval_id,
        status,
        now,
        encode_text(by),  # a DM's name: any text, NUL included
        via,
        granted,
        restart,
    )
    return None if row is None else ApprovalRow.of(row)


async def finish_approval(
    conn: Connection, approval_id: str, status: Literal["applied", "failed"], outcome: str
) -> ApprovalRow | None:
    """End an approved proposal's apply, saying how; None unless it was `approved`."""
    row = await conn.fetchrow(
        "UPDATE choir_control.pending_approvals SET status = $2, outcome = $3 "
        f"WHERE id = $1 AND status = 'approved' RETURNING {_COLUMNS}",
        approval_id,
        status,
        encode_text(outcome),
    )
    return None if row is None else ApprovalRow.of(row)


async def note_outcome(conn: Connection, approval_id: str, outcome: str) -> ApprovalRow | None:
    """Say where an approved proposal's apply waits (a tool: for its implementation), leaving it
    `approved`; None unless it is `approved`."""
    row = await conn.fetchrow(
        "UPDATE choir_control.pending_approvals SET outcome = $2 "
        f"WHERE id = $1 AND status = 'approved' RETURNING {_COLUMNS}",
        approval_id,
        encode_text(outcome),
    )
    return None if row is None else ApprovalRow.of(row)


async def expire_approvals(
    conn: Connection, *, created_before: datetime, now: datetime, by: str
) -> list[ApprovalRow]:
    """Reject (§19.6) every approval still pending that was created before `created_before`."""
    rows = await conn.fetch(
        "UPDATE choir_control.pending_approvals SET status = 'rejected', resolved_at = $2, "
        "resolved_by = $3, resolved_via = $3 WHERE status = 'pending' AND created_at < $1 "
        f"RETURNING {_COLUMNS}",
        created_before,
        now,
        by,
    )
    return sorted((ApprovalRow.of(row) for row in rows), key=lambda a: (a.created_at, a.id))
