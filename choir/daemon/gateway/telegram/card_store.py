"""What a job card (`cards`) keeps in Postgres, and what a starting choird reads back of it.

A card's first write (`claim`: its row, and its session's card cursor past its job's start)
is made before its message is sent and tried until it takes, the card waiting meanwhile: what
lets a restart tell a card never sent from one that may show (`choir.store.gateway.job_cards`).
Every later write never raises and never holds a card long: a database away for `WRITE_S`
costs that write (logged), and the card goes on in memory — only a restart before a later
write of it takes loses what the lost one stored: the message's and each edit's write
(`card_shown`) stores the whole row, its live [Inject…] prompts too, whichever earlier write
failed.

A card's writes apply one at a time, in the order they were made (`write`): each is a snapshot
of the card taken when it was made, so a later one is never overwritten by an earlier one that
ran late on another of the pool's connections. That is what lets an edit's write store the
card's prompts as they are in memory: a prompt's write made before it applies first (or was
lost, and the edit stores it again), and a prompt replied to is gone from every snapshot made
after the reply's write — none made before it can apply after it.

`resumable` reads every stored card with what the card needs to catch up: the events of its
session after its job's start (its job's steps, progress and end) and its session's row (ended
while choird was away or not). `unsent` reads the job starts no card was sent for (past their
sessions' card cursors: choird stopped before the card's row was stored) with their jobs'
events, to send those cards now; the sessions whose cards show nowhere have their cursors moved
past their starts instead (no card is owed to a job started while its session had no card
chat), so a starting choird does not read their starts again.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Final

from choir.daemon.agents.ingest import Durable, committed_of
from choir.logs import get_logger
from choir.protocol import CommittedEvent
from choir.store.events import EventRecord, read_events
from choir.store.gateway.job_cards import (
    CardRow,
    add_card,
    advance_cursor,
    job_events,
    open_cards,
    uncarded_starts,
)
from choir.store.postgres.pool import Connection, Pool
from choir.store.sessions import SessionRow, get_session

log = get_logger("choird.telegram")

WRITE_S: Final = 5.0
"""How long one card write may take (the database away) before it is given up."""
PAGE: Final = 1000
"""Events read at a time when a card catches up with its session's log."""
CLAIM_RETRY_S: Final = (1.0, 2.0, 5.0, 10.0, 30.0)
"""Waits between tries of a card's first write (the database away); the last repeats."""


@dataclass(frozen=True)
class Resumable:
    """A stored card, the session events after its job's start, and its session."""

    row: CardRow
    events: list[CommittedEvent]
    session: SessionRow | None


class CardStore:
    """The cards' writes to `gateway_job_cards`, each card's in the order they were made."""

    def __init__(self, pool: Pool | None) -> None:
        self._pool = pool
        self._turns: dict[str, _Turn] = {}
        """card id -> the queue of its writes, while one is made or waits."""

    async def write(
        self,
        what: str,
        card_id: str,
        job: str,
        write: Writer,
        *,
        lost: str = "a choird restart would not resume it",
    ) -> bool:
        """Run `write` on a connection, after the card's writes made before it; whether it
        took (a failure — waiting included, `WRITE_S` at most — is logged with what it costs,
        `lost`, never raised). Its place among the card's writes is taken before it first
        waits: a caller that takes the snapshot it writes and calls this with no `await` in
        between has it applied after every earlier snapshot of the card and before every
        later one (the lock is FIFO), whichever pool connection each runs on."""
        if self._pool is None:
            return False
        try:
            async with (
                asyncio.timeout(WRITE_S),
                self._turn(card_id),
                self._pool.acquire() as conn,
            ):
                await write(conn)
        except Exception as error:
            log.warning(
                f"telegram job card {what} not stored: {lost}",
                fields={"card": card_id, "job": job, "error": type(error).__name__},
            )
            return False
        return True

    async def passed(self, session_id: str, rev: int) -> None:
        """The session's card cursor past its job start at `rev`, which gets no card (its
        session has no card chat); a failure is logged, never raised: that start is only
        read again at choird's next start."""
        if self._pool is None:
            return
        try:
            async with asyncio.timeout(WRITE_S), self._pool.acquire() as conn:
                await advance_cursor(conn, session_id, rev)
        except Exception as error:
            log.info(
                "telegram job card cursor not moved: read again at the next start",
                fields={"session": session_id, "error": type(error).__name__},
            )

    @contextlib.asynccontextmanager
    async def _turn(self, card_id: str) -> AsyncIterator[None]:
        """The card's writes one at a time, first made first (forgotten when none waits)."""
        turn = self._turns.setdefault(card_id, _Turn())
        turn.users += 1
        try:
            async with turn.lock:
                yield
        finally:
            turn.users -= 1
            if not turn.users:
                del self._turns[card_id]

    async def claim(self, row: CardRow) -> None:
        """Store the card about to be sent, and its session's card cursor past its job's
        start; tried until it takes (the card is sent after). Without a database, at once."""
        if self._pool is None:
            return
        add = partial(add_card, row=row)
        for wait in itertools.chain(CLAIM_RETRY_S, itertools.repeat(CLAIM_RETRY_S[-1])):
            lost = "it is sent once it is (tried again)"
            if await self.write("start", row.card_id, row.job_name, add, lost=lost):
                return
            await asyncio.sleep(wait)


@dataclass(eq=False)
class _Turn:
    """One card's writes: `lock` (FIFO) held by the one being made, `users` counts it and
    those waiting."""

    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0


Writer = Callable[[Connection], Awaitable[None]]
Wanted = Callable[[str], Awaitable[bool]]
"""Whether a session's cards show anywhere (a Telegram DM with cards on is bound to it)."""


async def unsent(pool: Pool, wanted: Wanted) -> list[Durable]:
    """The job starts of the active sessions `wanted` (those with a card chat) whose cards
    were never sent, each session's from its first such start on with its jobs' events after:
    as if replicated now. The other sessions' cursors pass their starts: none is owed a card."""
    found: list[Durable] = []
    async with pool.acquire() as conn:
        for start in await uncarded_starts(conn):
            if not await wanted(start.session_id):
                await advance_cursor(conn, start.session_id, start.last_rev)
                continue
            events = await _paged(job_events, conn, start.session_id, start.rev)
            found.append(Durable(start.session_id, start.agent_id, events))
    return found


async def resumable(pool: Pool) -> list[Resumable]:
    """Every stored card with its session's events after its job's start and its session."""
    found: list[Resumable] = []
    async with pool.acquire() as conn:
        for row in await open_cards(conn):
            events = await _paged(read_events, conn, row.session_id, row.started_rev + 1)
            found.append(Resumable(row, events, await get_session(conn, row.session_id)))
    return found


PageRead = Callable[[Connection, str, int, int], Awaitable[list[EventRecord]]]
"""Up to a number of a session's events from a rev on, in rev order."""


async def _paged(
    read: PageRead, conn: Connection, session_id: str, rev: int
) -> list[CommittedEvent]:
    """Every event `read` gives of the session from `rev` on, `PAGE` at a time."""
    events: list[CommittedEvent] = []
    while True:
        page = await read(conn, session_id, rev, PAGE)
        events.extend(committed_of(record) for record in page)
        if len(page) < PAGE:
            return events
        rev = page[-1].rev + 1
