"""`choir_control.approval_audit`: who did what to an approval, through which front end, when.

One row per fact — requested, approved, rejected (a timeout included), each apply step begun or
ended, what was applied (commit and image ids), a failure and its reason — appended, never
edited, so `choirctl approval show` can replay an approval's whole story (issue 17).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from asyncpg import Record

from choir.store.postgres.jsonb_safe import decode_text, encode_text
from choir.store.postgres.pool import Connection


@dataclass(frozen=True, slots=True)
class AuditRow:
    at: datetime
    action: str
    """`requested`, `approved`, `rejected`, `step`, `applied` or `failed`."""
    actor: str | None
    """Who: a DM name, `choirctl`, `choir tui`, `timeout`, or `choird` for the pipeline."""
    via: str | None
    """The front end: `choirctl`, `tui`, `telegram`, `console`, `timeout`, `choird`."""
    detail: str

    @classmethod
    def of(cls, row: Record) -> AuditRow:
        actor = row["actor"]
        return cls(
            row["at"],
            row["action"],
            None if actor is None else decode_text(actor),
            row["via"],
            decode_text(row["detail"]),
        )


async def add_audit(
    conn: Connection,
    approval_id: str,
    action: str,
    *,
    at: datetime,
    actor: str | None = None,
    via: str | None = None,
    detail: str = "",
) -> None:
    await conn.execute(
        "INSERT INTO choir_control.approval_audit (approval_id, at, action, actor, via, detail) "
        "VALUES ($1, $2, $3, $4, $5, $6)",
        approval_id,
        at,
        action,
        None if actor is None else encode_text(actor),  # a DM's name: any text
        via,
        encode_text(detail),
    )


async def audit_of(conn: Connection, approval_id: str) -> list[AuditRow]:
    """The approval's audit trail, oldest first."""
    rows = await conn.fetch(
        "SELECT at, action, actor, via, detail FROM choir_control.approval_audit "
        "WHERE approval_id = $1 ORDER BY id",
        approval_id,
    )
    return [AuditRow.of(row) for row in rows]
