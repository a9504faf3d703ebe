"""`choir_control.proposal_applies`: where each approved proposal's apply is (issue 17).

The row is written before each step runs, so a choird killed mid-apply finds the step it was at
when it starts again (`open_applies`) and runs it again; every step is idempotent.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Final

from asyncpg import Record

from choir.store.postgres.jsonb_safe import decode_text, encode_text
from choir.store.postgres.pool import Connection

_COLUMNS: Final = (
    "approval_id, agent_id, step, branch, base_commit, commit_id, merged_from, image_id, "
    "failed_step, reason, undo_pending"
)


ApplyFields = Mapping[str, Any]
"""The columns above by name (the daemon's `ApplyState` as a dict): the store knows no daemon."""


def _state(row: Record) -> dict[str, Any]:
    fields: dict[str, Any] = dict(row)
    if fields["reason"] is not None:
        fields["reason"] = decode_text(fields["reason"])
    return fields


async def save_apply(conn: Connection, state: ApplyFields, *, now: datetime) -> None:
    """Insert or update the apply's row to `state`."""
    await conn.execute(
        f"INSERT INTO choir_control.proposal_applies ({_COLUMNS}, started_at, updated_at) "
        "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $12, $11, $11) "
        "ON CONFLICT (approval_id) DO UPDATE SET step = $3, base_commit = $5, commit_id = $6, "
        "merged_from = $7, image_id = $8, failed_step = $9, reason = $10, undo_pending = $12, "
        "updated_at = $11",
        state["approval_id"],
        state["agent_id"],
        state["step"],
        state["branch"],
        state["base_commit"],
        state["commit_id"],
        state["merged_from"],
        state["image_id"],
        state["failed_step"],
        None if state["reason"] is None else encode_text(state["reason"]),
        now,
        bool(state.get("undo_pending", False)),
    )


async def get_apply(conn: Connection, approval_id: str) -> dict[str, Any] | None:
    row = await conn.fetchrow(
        f"SELECT {_COLUMNS} FROM choir_control.proposal_applies WHERE approval_id = $1",
        approval_id,
    )
    return None if row is None else _state(row)


async def open_applies(conn: Connection) -> list[dict[str, Any]]:
    """Applies not finished (choird stopped in the middle, or before it finished undoing a
    failure), oldest first."""
    rows = await conn.fetch(
        f"SELECT {_COLUMNS} FROM choir_control.proposal_applies "
        "WHERE step NOT IN ('done', 'failed') OR undo_pending ORDER BY started_at, approval_id"
    )
    return [_state(row) for row in rows]
