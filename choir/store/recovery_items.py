"""`choir_control.recovery_items`: what the recovery inbox must remember on its own.

Most of what waits for a human after a restart is already durable where it lives (an intent
without a result in the session log, a pending approval); two things are not, so they are
recorded here:

- `failed_apply`: an `agent update` or `config apply`. Its row is written `running` before the
  apply starts and removed when it succeeds; a failure turns it `open` with the reason, and a
  choird killed meanwhile leaves it `running`, which the next choird turns `open` — so an apply
  that never finished is never forgotten.
- `approval_timed_out`: an approval whose deadline passed while no choird ran (the next one's
  sweep times it out: silence is a rejection, §19.6, but nobody was there to be silent).

A decision is one guarded UPDATE (`decide`): an item is decided once, and the loser of a race
learns it was decided elsewhere.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Final, Literal

from asyncpg import Record

from choir.store.postgres.jsonb_safe import decode_text, encode_text
from choir.store.postgres.pool import Connection

ItemKind = Literal["failed_apply", "approval_timed_out"]
ItemState = Literal["running", "open", "decided"]

_COLUMNS: Final = (
    "item_id, kind, state, agent_id, session_id, subject, reason, created_at, decided_at, "
    "decided_by, choice"
)


@dataclass(frozen=True, slots=True)
class RecoveryItem:
    item_id: str
    kind: ItemKind
    state: ItemState
    agent_id: str | None
    session_id: str | None
    subject: str
    """`agent.update` or `config.apply` (a failed apply); the approval id (a timed-out one)."""
    reason: str
    created_at: datetime
    decided_at: datetime | None
    decided_by: str | None
    choice: str | None

    @classmethod
    def of(cls, row: Record) -> RecoveryItem:
        fields = dict(row)
        if fields["decided_by"] is not None:
            fields["decided_by"] = decode_text(fields["decided_by"])
        return cls(**fields)


async def begin_apply(
    conn: Connection, item_id: str, subject: str, agent_id: str | None, now: datetime
) -> None:
    """Record an apply about to run (`running`): a choird killed during it leaves the row."""
    await conn.execute(
        "INSERT INTO choir_control.recovery_items "
        "(item_id, kind, state, agent_id, subject, created_at) "
        "VALUES ($1, 'failed_apply', 'running', $2, $3, $4)",
        item_id,
        agent_id,
        subject,
        now,
    )


async def apply_succeeded(
    conn: Connection, item_id: str, subject: str, agent_id: str | None, now: datetime
) -> list[str]:
    """Forget the apply `item_id`; earlier failures of the same apply are decided by it (their
    ids returned)."""
    async with conn.transaction():
        await conn.execute("DELETE FROM choir_control.recovery_items WHERE item_id = $1", item_id)
        rows = await conn.fetch(
            "UPDATE choir_control.recovery_items SET state = 'decided', decided_at = $3, "
            "decided_by = $1, choice = 'superseded' "
            "WHERE kind = 'failed_apply' AND state = 'open' AND subject = $1 "
            "AND agent_id IS NOT DISTINCT FROM $2 RETURNING item_id",
            subject,
            agent_id,
            now,
        )
    return [row["item_id"] for row in rows]


async def apply_failed(conn: Connection, item_id: str, reason: str) -> None:
    await conn.execute(
        "UPDATE choir_control.recovery_items SET state = 'open', reason = $2 WHERE item_id = $1",
        item_id,
        encode_text(reason),
    )


async def interrupted_applies(conn: Connection, reason: str) -> int:
    """Turn every apply a previous choird left `running` into a failure; how many."""
    done = await conn.execute(
        "UPDATE choir_control.recovery_items SET state = 'open', reason = $1 "
        "WHERE kind = 'failed_apply' AND state = 'running'",
        reason,
    )
    return int(done.split()[-1])


async def note_timed_out(
    conn: Connection,
    approval_id: str,
    *,
    agent_id: str,
    session_id: str | None,
    reason: str,
    now: datetime,
) -> None:
    """Record an approval that times out because no choird ran (once per approval)."""
    await conn.execute(
        "INSERT INTO choir_control.recovery_items "
        "(item_id, kind, state, agent_id, session_id, subject, reason, created_at) "
        "VALUES ($1, 'approval_timed_out', 'open', $2, $3, $4, $5, $6) "
        "ON CONFLICT (item_id) DO NOTHING",
        f"timeout:{approval_id}",
        agent_id,
        session_id,
        approval_id,
        reason,
        now,
    )


async def open_items(conn: Connection) -> list[RecoveryItem]:
    """Every undecided item, oldest first (a `running` apply is still running: not listed)."""
    rows = await conn.fetch(
        f"SELECT {_COLUMNS} FROM choir_control.recovery_items WHERE state = 'open' "
        "ORDER BY created_at, item_id"
    )
    return [RecoveryItem.of(row) for row in rows]


async def get_item(conn: Connection, item_id: str) -> RecoveryItem | None:
    row = await conn.fetchrow(
        f"SELECT {_COLUMNS} FROM choir_control.recovery_items WHERE item_id = $1", item_id
    )
    return None if row is None else RecoveryItem.of(row)


async def decide(
    conn: Connection, item_id: str, choice: str, *, by: str, now: datetime
) -> RecoveryItem | None:
    """Mark an open item decided; None when it is not open (decided elsewhere, or unknown)."""
    row = await conn.fetchrow(
        "UPDATE choir_control.recovery_items SET state = 'decided', decided_at = $3, "
        f"decided_by = $4, choice = $2 WHERE item_id = $1 AND state = 'open' RETURNING {_COLUMNS}",
        item_id,
        choice,
        now,
        encode_text(by),
    )
    return None if row is None else RecoveryItem.of(row)
