"""Agent replies to a Telegram DM survive a choird killed before Telegram took them.

Each DM keeps a cursor in Postgres (`choir.store.gateway.reply_cursors`): the session and rev of
the last `agent_replied` event the bot is done with — written after the last message of the
reply left (or was given up, counted and reported: never retried forever), by the chat's own
sender, so writes follow the chat's order. A starting bot sends again, before any new reply,
what is owed after it (`owed`): the replies of the cursor's session after its rev, then those
of the session now bound to the DM if that is another one — at most the newest `CATCH_UP_MAX`,
none older than `CATCH_UP_AGE`: a reply a day old, or the tail of a long backlog, is news to
nobody. Delivery is at least once, within one reply: a reply sent whose cursor write was lost
(choird killed in between, the database away) is sent once more, all of its chunks.

A DM that never had a cursor (a new DM, or choir upgraded) starts at the head of its bound
session — what was replied before counts as sent — or, with none bound, before the next
session's first reply.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from typing import Final

from choir.daemon.agents.ingest import committed_of
from choir.daemon.gateway.telegram.outbox import Done
from choir.logs import get_logger
from choir.protocol.log.committed import CommittedEvent
from choir.store.events import head
from choir.store.gateway.reply_cursors import (
    load_cursor,
    replies_after,
    save_cursor,
    start_cursor,
)
from choir.store.postgres.pool import Pool

log = get_logger("choird.telegram")

CATCH_UP_MAX: Final = 20
"""Most replies a DM is sent again when its bot starts (the newest)."""
CATCH_UP_AGE: Final = timedelta(hours=24)
"""Replies committed longer ago than this are not sent again."""
CATCH_UP_RETRY_S: Final = (1.0, 2.0, 5.0, 10.0, 30.0)
"""Waits after a catch-up that failed (the database away); the try after the last one is the
last (what is owed then is lost, logged)."""
WRITE_S: Final = 5.0
"""How long a cursor write may hold the chat's next message (the database away)."""


async def owed(
    pool: Pool, gateway: str, chat_id: int, bound: str | None, now: datetime
) -> list[tuple[str, CommittedEvent]]:
    """The replies the DM is owed, as (session id, event) in the order they are to go;
    `bound` is the session holding the DM now."""
    async with pool.acquire() as conn:
        cursor = await load_cursor(conn, gateway, chat_id)
        if cursor is None:
            top = await head(conn, bound) if bound is not None else None
            await start_cursor(conn, gateway, chat_id, bound, top.rev if top else 0)
            return []
        after = [(cursor.session_id, cursor.rev)] if cursor.session_id is not None else []
        if bound is not None and bound != cursor.session_id:
            after.append((bound, 0))
        found: list[tuple[str, CommittedEvent]] = []
        for session_id, rev in after:
            records = await replies_after(conn, session_id, rev, now - CATCH_UP_AGE, CATCH_UP_MAX)
            found.extend((session_id, committed_of(record)) for record in records)
    return found[-CATCH_UP_MAX:]


def sent(pool: Pool, gateway: str, chat_id: int, session_id: str, rev: int) -> Done:
    """What the outbox runs once the reply at (`session_id`, `rev`) left: its cursor written.
    Never raises: a lost write means the reply is sent again at the next start, no more."""

    async def write() -> None:
        try:
            async with asyncio.timeout(WRITE_S), pool.acquire() as conn:
                await save_cursor(conn, gateway, chat_id, session_id, rev)
        except Exception as error:
            log.warning(
                "telegram reply cursor not stored: the reply is sent again if choird restarts",
                fields={"gateway": gateway, "chat_id": chat_id, "session": session_id,
                        "rev": rev, "error": type(error).__name__},
            )  # fmt: skip

    return write
