"""What a job card (`cards`) keeps in Postgres, and what a starting choird reads back of it.

Writes never raise and never hold a card long: a database away for `WRITE_S` costs that write
(logged), and the card goes on in memory — it is then only lost if choird restarts before a
later write of it takes: the message's and each edit's write (`card_shown`) stores the whole
row if it is missing, so a card whose first writes failed is stored by the next that takes.

`resumable` reads every stored card with what the card needs to catch up: the events of its
session after its job's start (its job's steps, progress and end) and its session's row (ended
while choird was away or not).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final

from choir.daemon.agents.ingest import committed_of
from choir.logs import get_logger
from choir.protocol import CommittedEvent
from choir.store.events import read_events
from choir.store.gateway.job_cards import CardRow, open_cards
from choir.store.postgres.pool import Connection, Pool
from choir.store.sessions import SessionRow, get_session

log = get_logger("choird.telegram")

WRITE_S: Final = 5.0
"""How long one card write may take (the database away) before it is given up."""
PAGE: Final = 1000
"""Events read at a time when a card catches up with its session's log."""


@dataclass(frozen=True)
class Resumable:
    """A stored card, the session events after its job's start, and its session."""

    row: CardRow
    events: list[CommittedEvent]
    session: SessionRow | None


class CardStore:
    """The cards' writes to `gateway_job_cards`."""

    def __init__(self, pool: Pool | None) -> None:
        self._pool = pool

    async def write(self, what: str, card_id: str, job: str, write: Writer) -> bool:
        """Run `write` on a connection; whether it took (a failure is logged, never raised)."""
        if self._pool is None:
            return False
        try:
            async with asyncio.timeout(WRITE_S), self._pool.acquire() as conn:
                await write(conn)
        except Exception as error:
            log.warning(
                f"telegram job card {what} not stored: a choird restart would not resume it",
                fields={"card": card_id, "job": job, "error": type(error).__name__},
            )
            return False
        return True


Writer = Callable[[Connection], Awaitable[None]]


async def resumable(pool: Pool) -> list[Resumable]:
    """Every stored card with its session's events after its job's start and its session."""
    found: list[Resumable] = []
    async with pool.acquire() as conn:
        for row in await open_cards(conn):
            events: list[CommittedEvent] = []
            rev = row.started_rev + 1
            while True:
                page = await read_events(conn, row.session_id, rev, PAGE)
                events.extend(committed_of(record) for record in page)
                if len(page) < PAGE:
                    break
                rev = page[-1].rev + 1
            found.append(Resumable(row, events, await get_session(conn, row.session_id)))
    return found
