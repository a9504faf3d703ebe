"""User messages are durable before they are acknowledged, and reach the agent after any crash.

Every DM front end (the console today, Telegram later) hands a message to `Inbox.accept`: it is
stored (`store.inbox`) before the sender hears it was accepted, then pushed to the agent. The
agent commits a `user_msg` event carrying the message's id; the heartbeat that makes that event
durable marks the message delivered in the same transaction (`daemon.replication`). Until then
the message is pending, and every INIT_HELLO of its session pushes the pending messages again
(`redeliver`) — after an agent crash — as does a restarted choird for each agent it adopts
(choird died between accepting and pushing, and the agent rode it out). The
agent drops a message id it already committed, so nothing is answered twice.

A session that ends for good (stopped, forked) never reads its pending messages: they are
settled undelivered and the front end that accepted them tells their senders.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from choir.daemon.sessions.service import SessionService
from choir.daemon.sessions.state import Clock, SessionEnded, utc_now
from choir.failpoints import failpoint
from choir.logs import get_logger
from choir.protocol import UserMessagePush
from choir.store import inbox as store
from choir.store.inbox import InboxMessage
from choir.store.postgres.pool import Pool
from choir.store.sessions import SessionStatus

log = get_logger("choird.inbox")

Pusher = Callable[[str, UserMessagePush], None]
"""Push a message to a session's agent (the daemon's hub)."""
Undelivered = Callable[[InboxMessage, str], None]
"""Told of a message its session will never read, with why."""

GIVE_UP_STATUSES = frozenset({SessionStatus.STOPPED, SessionStatus.FORKED})
"""Sessions that end this way are never resumed by default: their messages are undelivered."""


class Inbox:
    """Accepts user messages durably and hands them to agents, again after a resume."""

    def __init__(self, pool: Pool, sessions: SessionService, *, clock: Clock = utc_now) -> None:
        self._pool = pool
        self._clock = clock
        self._pushers: list[Pusher] = []
        self._undelivered: list[Undelivered] = []
        self._tasks: set[asyncio.Task[None]] = set()
        sessions.subscribe(self._ended)

    def subscribe(self, pusher: Pusher) -> Callable[[], None]:
        """Where redelivered messages go (the daemon's push hub); returns the unsubscribe."""
        self._pushers.append(pusher)
        return lambda: self._pushers.remove(pusher)

    def subscribe_undelivered(self, listener: Undelivered) -> Callable[[], None]:
        self._undelivered.append(listener)
        return lambda: self._undelivered.remove(listener)

    async def accept(
        self, session_id: str, agent_id: str, push: UserMessagePush, deliver: Callable[[], None]
    ) -> bool:
        """Store `push` for the session's agent, then — once the caller has answered its
        sender — `deliver` it. False (and nothing delivered) when its id was accepted before."""
        async with self._pool.acquire() as conn:
            fresh = await store.accept(
                conn,
                message_id=push.message_id,
                session_id=session_id,
                agent_id=agent_id,
                push=push.model_dump(mode="json"),
                now=self._clock(),
            )
        if fresh:
            self._spawn(self._deliver(deliver))
        return fresh

    async def redeliver(self, session_id: str) -> int:
        """Push the session's pending messages again, oldest first; how many."""
        async with self._pool.acquire() as conn:
            messages = await store.pending(conn, session_id)
        for message in messages:
            push = UserMessagePush.model_validate(message.push)
            for pusher in list(self._pushers):
                pusher(session_id, push)
        if messages:
            log.info(
                "pending user messages pushed again",
                fields={"session": session_id, "count": len(messages)},
            )
        return len(messages)

    async def close(self) -> None:
        """Finish what is being delivered or settled."""
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _deliver(self, deliver: Callable[[], None]) -> None:
        # a separate task: the acceptance is answered before the push (a crash in between
        # leaves the message pending, to be pushed at the next INIT_HELLO)
        await failpoint("inbox.after_accept_before_push")
        deliver()

    def _ended(self, ended: SessionEnded) -> None:
        if ended.status in GIVE_UP_STATUSES:
            self._spawn(self._give_up(ended))

    async def _give_up(self, ended: SessionEnded) -> None:
        async with self._pool.acquire() as conn:
            messages = await store.give_up(conn, ended.session_id, self._clock())
        why = f"the session {ended.status.value} before the agent read it"
        for message in messages:
            for listener in list(self._undelivered):
                listener(message, why)

    def _spawn(self, work: object) -> None:
        assert asyncio.iscoroutine(work)
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and (error := task.exception()) is not None:
            log.error("inbox task failed", exc_info=error)


__all__ = ["GIVE_UP_STATUSES", "Inbox", "Pusher"]
