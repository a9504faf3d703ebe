"""A session's intents without a result (issue 19), read by a few queries, not the whole log.

The recovery inbox lists them for every crashed session each time it is listed (the console's
Inbox tab refreshes it), and `session.recover` reads them for each listing and decision; a long
session's log is tens of thousands of events whose tool results are most of its bytes. What
`open_intents` returns is what folding the log in rev order gives: a call id's
latest non-idempotent intent, unless a result of that id comes after it; its arguments from the
latest model output before it that proposed that id (None when none did, `{}` when the call had
none). How it gets there without the fold:

- the intents looked at are those after the session's latest snapshot (taken every
  `snapshot_every_events`) and the ones open at it — its `open_intents`, the agent's ledger
  folded exactly so (and only sealed snapshots are stored); they are read from the log itself,
  the snapshot only says which. Without a snapshot, every intent (`session_events_intents_idx`);
- each one's result is looked up by call id (`session_events_results_idx`: an index probe per
  intent — a lateral with LIMIT, so the planner cannot make it a hash join that reads, and
  de-TOASTs, every result's payload for its call id);
- the model output that proposed a call is looked for only for the few calls left, in windows
  of revs growing backwards from the intent (it is nearly always just before it) — and not at
  all by `unanswered_intents`, which `session.recover` reads (it shows no arguments).

Oldest first means by the rev of each call's latest intent; the fold's dict kept a call where
its first intent put it, which is the same order as long as an id is committed once until it
is answered — as the agent does.

Several small queries rather than one: each has one sensible plan whatever the table's
statistics say (one query joining it all was planned as whole-session scans before an ANALYZE).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from choir.store.postgres.pool import Connection

_BOUND: Final = """
SELECT rev, snapshot->'open_intents' AS open_intents
FROM choir_control.session_snapshots
WHERE session_id = $1
ORDER BY rev DESC
LIMIT 1
"""

_INTENTS: Final = """
SELECT rev, event_type, lane, payload->>'call_id' AS call_id, payload->>'tool' AS tool,
       payload->>'side_effect' AS side_effect,
       payload->'idempotent' = 'true'::jsonb AS idempotent, created_at
FROM choir_control.session_events
WHERE session_id = $1 AND event_type = 'tool_call_committed' AND rev > $2
UNION ALL
SELECT e.* FROM unnest($3::bigint[]) AS bound (rev)
CROSS JOIN LATERAL (
    SELECT rev, event_type, lane, payload->>'call_id', payload->>'tool',
           payload->>'side_effect', payload->'idempotent' = 'true'::jsonb, created_at
    FROM choir_control.session_events
    WHERE session_id = $1 AND rev = bound.rev
    LIMIT 1
) e
WHERE bound.rev <= $2
"""
"""The intents after the bound, and the revs open at it (the rows of those revs: a probe of the
unique (session_id, rev) index each — with `event_type` in the WHERE the planner took the
partial index and read every intent, and with `rev = ANY (...)` and no statistics it scanned
every rev up to the bound; the caller checks the type)."""

_UNANSWERED: Final = """
SELECT i.call_id
FROM unnest($2::text[], $3::bigint[]) AS i (call_id, rev)
LEFT JOIN LATERAL (
    SELECT true AS answered FROM choir_control.session_events r
    WHERE r.session_id = $1 AND r.event_type = 'tool_result_committed'
      AND r.payload->>'call_id' = i.call_id AND r.rev > i.rev
    LIMIT 1
) result ON true
WHERE result.answered IS NULL
"""

_PROPOSED: Final = """
SELECT payload->'tool_calls' AS calls
FROM choir_control.session_events
WHERE session_id = $1 AND rev < $2 AND rev >= $3 AND event_type = 'model_output'
  AND payload->'tool_calls' @> $4::jsonb
ORDER BY rev DESC
LIMIT 1
"""

FIRST_WINDOW: Final = 64
"""Revs before an open intent searched first for the model output that proposed it; each next
window is four times the last."""


@dataclass(frozen=True, slots=True)
class UnansweredIntent:
    """A non-idempotent intent whose call the log has no result for, as it was committed."""

    rev: int
    lane: str
    call_id: str
    tool: str
    side_effect: str | None
    created_at: datetime


@dataclass(frozen=True, slots=True)
class OpenIntent:
    """A non-idempotent call committed to run whose result the log never got."""

    lane: str
    call_id: str
    tool: str
    arguments: dict[str, Any] | None
    """As the model proposed them; None when no model output of the log proposed the call."""
    created_at: datetime


async def open_intents(conn: Connection, session_id: str) -> list[OpenIntent]:
    """The session's intents without a result, oldest first, with their model's arguments."""
    return [
        OpenIntent(
            intent.lane,
            intent.call_id,
            intent.tool,
            await _arguments(conn, session_id, intent.call_id, intent.rev),
            intent.created_at,
        )
        for intent in await unanswered_intents(conn, session_id)
    ]


async def unanswered_intents(conn: Connection, session_id: str) -> list[UnansweredIntent]:
    """The session's intents without a result, oldest first."""
    bound = await conn.fetchrow(_BOUND, session_id)
    after, at_bound = 0, []
    if bound is not None and isinstance(bound["open_intents"], list):
        after = bound["rev"]
        at_bound = [int(intent["rev"]) for intent in bound["open_intents"]]
    latest: dict[str, Any] = {}  # call id -> its latest non-idempotent intent
    for row in sorted(await conn.fetch(_INTENTS, session_id, after, at_bound), key=_rev):
        if row["event_type"] == "tool_call_committed" and not row["idempotent"]:
            latest[row["call_id"]] = row
    if not latest:
        return []
    intents = list(latest.values())
    unanswered = await conn.fetch(
        _UNANSWERED, session_id, [i["call_id"] for i in intents], [i["rev"] for i in intents]
    )
    open_ids = {row["call_id"] for row in unanswered}
    return [
        UnansweredIntent(
            row["rev"],
            row["lane"],
            row["call_id"],
            row["tool"],
            row["side_effect"],
            row["created_at"],
        )
        for row in sorted(intents, key=_rev)
        if row["call_id"] in open_ids
    ]


async def _arguments(
    conn: Connection, session_id: str, call_id: str, rev: int
) -> dict[str, Any] | None:
    """The arguments of `call_id` in the latest model output before `rev` that proposed it."""
    window, end = FIRST_WINDOW, rev
    while end > 1:
        start = max(1, end - window)
        calls = await conn.fetchval(_PROPOSED, session_id, end, start, [{"id": call_id}])
        if calls is not None:
            proposed = [call for call in calls if call.get("id") == call_id][-1]
            arguments = proposed.get("arguments")
            return dict(arguments) if isinstance(arguments, dict) else {}
        window, end = window * 4, start
    return None


def _rev(row: Any) -> int:
    return int(row["rev"])
