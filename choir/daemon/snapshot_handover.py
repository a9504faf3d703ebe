"""What INIT_HELLO hands a resuming agent (§13.2): the newest usable snapshot and the tail.

The tail is every acknowledged event after the snapshot, so recovery never reads an event at or
before it (they stay stored: history is never deleted). A snapshot is used only if it parses,
its content matches its digest and its chain hash is the one the tail continues from (or, with
no tail, the session's head hash). One that fails is skipped with a warning — recovery then
tries the next older snapshot, and after `MAX_REFUSED` refusals, or when none is left, hands
over every event from rev 1: slower, never wrong.
"""

from __future__ import annotations

from typing import Final

from pydantic import ValidationError

from choir.daemon.replication import committed_of
from choir.daemon.session_state import LiveSession
from choir.logs import get_logger
from choir.protocol import CommittedEvent, Snapshot
from choir.store.events import read_events
from choir.store.pool import Connection, Pool
from choir.store.snapshots import StoredSnapshot, latest_snapshot

log = get_logger("choird.replication")

PAGE: Final = 1000
"""Events read per query when assembling the tail."""
MAX_REFUSED: Final = 3
"""Unusable snapshots tried before falling back to every event."""


async def handover(pool: Pool, live: LiveSession) -> tuple[Snapshot | None, list[CommittedEvent]]:
    """The newest usable snapshot of `live` and the acknowledged events after it."""
    if live.ack_rev == 0:
        return None, []
    async with pool.acquire() as conn:
        max_rev = live.ack_rev
        for _ in range(MAX_REFUSED):
            stored = await latest_snapshot(conn, live.session_id, max_rev)
            if stored is None:
                break
            snapshot, problem = _parsed(stored)
            tail = await read_tail(conn, live, after=stored.rev)
            if snapshot is not None and problem is None:
                problem = _link_problem(snapshot, tail, live.head_hash)
            if problem is None and snapshot is not None:
                return snapshot, tail
            log.warning(
                "snapshot not used for the resume",
                fields={"session": live.session_id, "rev": stored.rev, "why": problem},
            )
            max_rev = stored.rev - 1
        return None, await read_tail(conn, live, after=0)


async def read_tail(conn: Connection, live: LiveSession, *, after: int) -> list[CommittedEvent]:
    """The acknowledged events of `live` after rev `after`, in order."""
    tail: list[CommittedEvent] = []
    next_rev = after + 1
    while next_rev <= live.ack_rev:
        page = await read_events(conn, live.session_id, next_rev, PAGE)
        tail.extend(committed_of(r) for r in page if r.rev <= live.ack_rev)
        if len(page) < PAGE:
            break
        next_rev = page[-1].rev + 1
    return tail


def _parsed(stored: StoredSnapshot) -> tuple[Snapshot | None, str | None]:
    """The stored snapshot, or why it cannot be used."""
    try:
        snapshot = Snapshot.model_validate(stored.snapshot)
    except ValidationError as exc:
        return None, f"it does not parse ({exc.error_count()} problems)"
    if snapshot.rev != stored.rev:
        return None, f"it says rev {snapshot.rev} but is stored at rev {stored.rev}"
    return snapshot, snapshot.content_problem()


def _link_problem(snapshot: Snapshot, tail: list[CommittedEvent], head_hash: str) -> str | None:
    """Why the events after the snapshot do not continue its chain hash; None if they do."""
    expected = tail[0].hash_prev if tail else head_hash
    if snapshot.hash != expected:
        where = f"rev {tail[0].rev}'s hash_prev" if tail else "the session's head hash"
        return f"its hash does not match {where}"
    return None


__all__ = ["MAX_REFUSED", "handover", "read_tail"]
