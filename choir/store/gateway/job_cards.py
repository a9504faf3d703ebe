"""`choir_control.gateway_job_cards`: the live core-job cards a restarted choird resumes.

A card (`choir.daemon.gateway.telegram.cards`) is one Telegram message edited as its job runs.
What a new choird needs to go on editing it — and to honour its buttons — is stored here: the
chat (bot, chat id, DM), the message, the job (session, name, the rev of its `core_started`),
the text last shown, the job's state, whether [Cancel] was pressed and the [Inject…] prompts
awaiting a reply. How the job went on while
choird was away is not: it is read again from the session's event log, from `started_rev` on.
The button signatures need nothing more: they bind the card id, the bot and the chat under the
key kept in the home (`telegram-callback.key`). A row is written before the message is sent
(`message_id` null), given its message once Telegram answered and its text and state at each
edit — the whole row again if it is missing: a card is stored by its first write that takes —
and deleted with the card's final edit.

Each session also keeps a card cursor (`gateway_card_cursors`): the rev of the last
`core_started` whose card's row was stored, advanced in the transaction that adds the row — or
past the starts of a session whose cards show nowhere, owed none (`advance_cursor`) — and
never moved back. A card is sent only once its row took, so a start past the cursor never had
its card sent — choird stopped between the start's replication and the row — and a starting
choird sends it (`uncarded_starts`); a start at or before it has its row, or had it until its
final edit or its giving up, and is never sent again.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Final

from choir.store.events import EventRecord
from choir.store.postgres.pool import Connection

_ADD: Final = """
INSERT INTO choir_control.gateway_job_cards
    (card_id, gateway, chat_id, dm, agent_id, session_id, job_name, started_rev, started_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
ON CONFLICT (card_id) DO NOTHING
"""
_CURSOR: Final = """
INSERT INTO choir_control.gateway_card_cursors (session_id, rev) VALUES ($1, $2)
ON CONFLICT (session_id) DO UPDATE
SET rev = greatest(gateway_card_cursors.rev, EXCLUDED.rev), updated_at = now()
"""
# the active sessions' first and last job starts past their cursor (a session without one had
# none stored)
_UNCARDED: Final = """
SELECT s.session_id, s.agent_id, min(e.rev) AS rev, max(e.rev) AS last_rev
FROM choir_control.sessions s
LEFT JOIN choir_control.gateway_card_cursors c ON c.session_id = s.session_id
JOIN choir_control.session_events e
    ON e.session_id = s.session_id AND e.rev > coalesce(c.rev, 0)
    AND e.event_type = 'core_started'
WHERE s.status = 'active'
GROUP BY s.session_id, s.agent_id
ORDER BY s.session_id
"""
_JOB_EVENTS: Final = """
SELECT rev, event_type, lane, payload, hash_prev, hash, created_at, artifact
FROM choir_control.session_events
WHERE session_id = $1 AND rev >= $2 AND event_type = ANY($3::text[])
ORDER BY rev
LIMIT $4
"""
JOB_EVENT_TYPES: Final = ("core_started", "core_event_emitted", "core_stopped", "model_output")
"""What moves a card: a job's start, progress and end, and its steps' LLM calls."""
# the whole row if it is missing (its earlier writes failed), else what the card showed, a
# [Cancel] whose own write failed (never undone) and its live prompts: a prompt whose own write
# failed is stored again, one replied to since is gone. The card's writes apply in the order
# they were made (`card_store.CardStore.write`), so no snapshot older than a prompt's write or
# its reply's applies after it
_SHOWN: Final = """
INSERT INTO choir_control.gateway_job_cards
    (card_id, gateway, chat_id, dm, agent_id, session_id, job_name, started_rev, started_at,
     message_id, shown, state, cancelling, prompts)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
ON CONFLICT (card_id) DO UPDATE
SET message_id = EXCLUDED.message_id, shown = EXCLUDED.shown, state = EXCLUDED.state,
    cancelling = gateway_job_cards.cancelling OR EXCLUDED.cancelling, prompts = EXCLUDED.prompts
"""
_CANCELLING: Final = (
    "UPDATE choir_control.gateway_job_cards SET cancelling = true WHERE card_id = $1"
)
# the newest PROMPTS_KEPT only: a card pressed [Inject…] at endlessly keeps a bounded row;
# once (an edit's write made between the prompt and its own write stored it already)
_PROMPTED: Final = """
UPDATE choir_control.gateway_job_cards
SET prompts = (array_append(prompts, $2))[greatest(1, cardinality(prompts) + 2 - $3):]
WHERE card_id = $1 AND NOT $2 = ANY(prompts)
"""
_ANSWERED: Final = """
UPDATE choir_control.gateway_job_cards SET prompts = array_remove(prompts, $2) WHERE card_id = $1
"""
_DROP: Final = "DELETE FROM choir_control.gateway_job_cards WHERE card_id = $1"
_OPEN: Final = """
SELECT card_id, gateway, chat_id, dm, agent_id, session_id, job_name, started_rev, started_at,
       message_id, shown, state, cancelling, prompts
FROM choir_control.gateway_job_cards
ORDER BY created_at, card_id
"""


@dataclass(frozen=True, slots=True)
class CardRow:
    """A card whose job was not seen to end."""

    card_id: str
    gateway: str
    chat_id: int
    dm: str
    agent_id: str
    session_id: str
    job_name: str
    started_rev: int
    """The rev of the job's `core_started` event."""
    started_at: datetime
    message_id: int | None = None
    """None: choird stopped while the card was being sent (it may or may not show)."""
    shown: str = ""
    state: str = "starting"
    """The job's state as the card last read it (`thinking`, `running a tool`…)."""
    cancelling: bool = False
    prompts: tuple[int, ...] = ()
    """The message ids of its [Inject…] prompts not replied to yet (the newest few)."""


@dataclass(frozen=True, slots=True)
class Uncarded:
    """An active session with a job start past its card cursor: no card of it was sent."""

    session_id: str
    agent_id: str
    rev: int
    """The rev of its first such `core_started`."""
    last_rev: int
    """The rev of its last one."""


async def add_card(conn: Connection, row: CardRow) -> None:
    """Record a card about to be sent, and its session's card cursor past its job's start,
    together (a card id seen twice is recorded once)."""
    async with conn.transaction():
        await conn.execute(_ADD, *_identity(row))
        await conn.execute(_CURSOR, row.session_id, row.started_rev)


async def advance_cursor(conn: Connection, session_id: str, rev: int) -> None:
    """The session's card cursor past its job start at `rev`, with no card stored: its
    session's cards show nowhere (never moved back)."""
    await conn.execute(_CURSOR, session_id, rev)


async def uncarded_starts(conn: Connection) -> list[Uncarded]:
    """The active sessions with job starts whose cards were never sent."""
    return [Uncarded(**dict(row)) for row in await conn.fetch(_UNCARDED)]


async def job_events(
    conn: Connection, session_id: str, from_rev: int, limit: int
) -> list[EventRecord]:
    """Up to `limit` of the session's `JOB_EVENT_TYPES` events from `from_rev` on."""
    rows = await conn.fetch(_JOB_EVENTS, session_id, from_rev, list(JOB_EVENT_TYPES), limit)
    return [EventRecord(**dict(row)) for row in rows]


async def card_shown(conn: Connection, row: CardRow) -> None:
    """The card's message is in its chat, showing `row.shown` (sent, or edited since), with
    its live prompts `row.prompts`. A card whose earlier writes were lost (the database away)
    is stored whole: a restart resumes it. The card's writes must apply in the order they
    were made (`CardStore.write`): an older snapshot's prompts would undo a reply's write.
    Only the card's own task writes this, before the final edit's `drop_card`: it never brings
    back a dropped card."""
    await conn.execute(
        _SHOWN,
        *_identity(row),
        row.message_id,
        row.shown,
        row.state,
        row.cancelling,
        list(row.prompts),
    )


async def card_cancelling(conn: Connection, card_id: str) -> None:
    """The card's [Cancel] was pressed and its job told to cancel."""
    await conn.execute(_CANCELLING, card_id)


async def card_prompted(conn: Connection, card_id: str, prompt_id: int, kept: int) -> None:
    """The card's [Inject…] sent the prompt `prompt_id` (the newest `kept` are kept)."""
    await conn.execute(_PROMPTED, card_id, prompt_id, kept)


async def card_answered(conn: Connection, card_id: str, prompt_id: int) -> None:
    """The prompt `prompt_id` was replied to (it is spent)."""
    await conn.execute(_ANSWERED, card_id, prompt_id)


async def drop_card(conn: Connection, card_id: str) -> None:
    """The card is done with (its final edit made, or given up)."""
    await conn.execute(_DROP, card_id)


async def open_cards(conn: Connection) -> list[CardRow]:
    """Every card not done with, oldest first."""
    rows = await conn.fetch(_OPEN)
    return [CardRow(**{**dict(row), "prompts": tuple(row["prompts"])}) for row in rows]


def _identity(row: CardRow) -> tuple[object, ...]:
    """What a card is and where it shows: the first nine columns, in the statements' order."""
    return (
        row.card_id, row.gateway, row.chat_id, row.dm, row.agent_id, row.session_id,
        row.job_name, row.started_rev, row.started_at,
    )  # fmt: skip
