"""Server pushes (choird -> agent) fanned out to whichever connections listen for a session.

Business logic calls `hub.push(session_id, push)` without knowing the transport; each live
subscription (socket `sub` frames, HTTP SSE `GET /events`) receives a `PushEnvelope`-shaped dict
`{session_id, seq, push}`. `seq` counts per session from `base` + 1; a short history lets a
client that reconnects resume with `after_seq` (SSE `Last-Event-ID`) without missing what was
pushed in between, and lets pushes made before the agent first subscribed wait for it. A
subscriber that falls `backlog` pushes behind is cut off with an `unavailable` error so one
stalled reader can never grow choird's memory; it resubscribes from its last seq. The history
restarts with choird, so a push that must survive a crash is business logic's to store.

choird numbers from `base` = its start time in milliseconds, so a restarted choird's seqs are
above any its predecessor handed out (unless that one pushed more than once a millisecond on
average): an agent that rode the restart out resubscribes with its old `after_seq` and gets
every push the new choird made before it came back — the messages redelivered to an adopted
agent among them. Numbered from 1 again, those pushes were skipped whenever the new choird had
pushed as many as the old seq before the agent resubscribed.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Self

from choir.protocol.wire.error_codes import ErrorCode
from choir.transport.errors import RpcError
from choir.transport.handler import Payload

_CLOSED = object()


@dataclass
class _Session:
    history: deque[Payload]
    seq: int = 0
    subscribers: set[PushSubscription] = field(default_factory=set)


class PushHub:
    """Per-session push fan-out shared by every listener of one server process."""

    def __init__(self, *, history: int = 256, backlog: int = 1024, base: int = 0) -> None:
        self._history = history
        self._backlog = backlog
        self._base = base
        """Where every session's seq starts counting (its first push is `base` + 1)."""
        self._sessions: dict[str, _Session] = {}

    def push(self, session_id: str, push: Payload) -> int:
        """Send `push` (a ServerPush in JSON form) to the session's subscribers; its seq."""
        session = self._session(session_id)
        session.seq += 1
        envelope = {"session_id": session_id, "seq": session.seq, "push": push}
        session.history.append(envelope)
        for subscription in tuple(session.subscribers):
            subscription.offer(envelope)
        return session.seq

    def subscribe(self, session_id: str, *, after_seq: int = 0) -> PushSubscription:
        """A subscription that first replays the kept pushes with seq > after_seq.

        An `after_seq` beyond anything this hub numbered comes from a client of a previous
        server process (choird restarted; its agent kept running): it has seen none of this
        hub's pushes, so all kept ones are replayed, and numbering continues above its seq so
        its next resubscription stays meaningful.
        """
        session = self._session(session_id)
        subscription = PushSubscription(session_id, self._backlog, self._drop)
        if after_seq > session.seq:
            after_seq, session.seq = 0, after_seq
        for envelope in session.history:
            if envelope["seq"] > after_seq:
                subscription.offer(envelope)
        session.subscribers.add(subscription)
        return subscription

    def close_session(self, session_id: str) -> None:
        """End the session's subscriptions (their iterators finish) and forget its history."""
        session = self._sessions.pop(session_id, None)
        if session is not None:
            for subscription in tuple(session.subscribers):
                subscription.finish()

    def subscriber_count(self, session_id: str) -> int:
        """How many live subscriptions the session has (0 means a push only reaches history)."""
        session = self._sessions.get(session_id)
        return len(session.subscribers) if session else 0

    def sessions(self) -> Iterator[str]:
        """Sessions with history or subscribers."""
        return iter(tuple(self._sessions))

    def _session(self, session_id: str) -> _Session:
        session = self._sessions.get(session_id)
        if session is None:
            session = _Session(history=deque(maxlen=self._history), seq=self._base)
            self._sessions[session_id] = session
        return session

    def _drop(self, subscription: PushSubscription) -> None:
        session = self._sessions.get(subscription.session_id)
        if session is not None:
            session.subscribers.discard(subscription)


class PushSubscription:
    """Async iterator of push envelopes for one session; close it when the reader goes away."""

    def __init__(
        self, session_id: str, backlog: int, on_finish: Callable[[PushSubscription], None]
    ) -> None:
        self.session_id = session_id
        """The session listened to."""
        self.last_seq = 0
        """Seq of the last envelope handed out; resubscribe with it after an error."""
        self._on_finish = on_finish
        self._backlog = backlog
        self._queue: asyncio.Queue[object] = asyncio.Queue()
        self._error: RpcError | None = None
        self._done = False

    def offer(self, envelope: Payload) -> None:
        """Queue an envelope, or cut the subscription off if the reader is too far behind."""
        if self._done:
            return
        if self._queue.qsize() >= self._backlog:
            self._error = RpcError(
                ErrorCode.UNAVAILABLE,
                f"push reader fell {self._backlog} pushes behind; "
                f"resubscribe with after_seq={self.last_seq}",
            )
            while not self._queue.empty():
                self._queue.get_nowait()
            self.finish()
            return
        self._queue.put_nowait(envelope)

    def finish(self) -> None:
        """End the iteration after what is already queued."""
        if not self._done:
            self._done = True
            self._queue.put_nowait(_CLOSED)
            self._on_finish(self)

    def close(self) -> None:
        """Stop listening now."""
        self.finish()

    async def aclose(self) -> None:
        self.close()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> Payload:
        item = await self._queue.get()
        if item is _CLOSED:
            self._queue.put_nowait(_CLOSED)
            if self._error is not None:
                raise self._error
            raise StopAsyncIteration
        assert isinstance(item, dict)
        self.last_seq = item["seq"]
        return item
