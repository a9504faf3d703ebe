"""The accept loop both listeners run: connection caps, and accept errors survived.

A peer that opens connections without end must not use up choird's file descriptors: each
listener keeps at most `Limits.max_connections` open, and at most `max_connections_per_peer`
for one peer (one process on a Unix socket); a connection beyond a cap is closed as soon as it
is accepted, so it never holds a descriptor or a buffer. `accept()` itself can fail when the
process or the system is out of descriptors or buffers (EMFILE, ENFILE, ENOBUFS, ENOMEM) or when
a peer gave up (ECONNABORTED): the loop waits a moment and tries again, so a flood that ends
leaves a listener that answers — one failed accept must never end it. A burst of refusals or
failures is logged once, when it starts, with the count of the previous burst. Every accept
yields to the event loop, so a reconnecting flood shares choird's time rather than taking it.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field
from typing import Final

from choir.transport.dispatch import log

BACKOFF_FIRST_S: Final = 0.01
"""Wait after the first failed accept of a burst; doubled on each further failure…"""
BACKOFF_MAX_S: Final = 0.25
"""…up to this, so a listener answers within a quarter second of descriptors coming back."""
BURST_QUIET_S: Final = 5.0
"""Refusals or failures this far apart start a new burst (and a new log line)."""


@dataclass
class Burst:
    """A run of like events that should cost one log line, not one per event."""

    quiet_s: float = BURST_QUIET_S
    count: int = 0
    """Events in the current burst."""
    last: float = field(default=-1e18)

    def note(self, now: float) -> int | None:
        """Count one event; when it starts a burst, the size of the burst before it (log it)."""
        starts = now - self.last > self.quiet_s
        self.last = now
        if not starts:
            self.count += 1
            return None
        previous, self.count = self.count, 1
        return previous


class Admission:
    """How many connections a listener holds, in all and per peer; says which to refuse."""

    def __init__(self, max_total: int, max_per_peer: int | None) -> None:
        self.max_total = max_total
        """Connections the listener may hold at once."""
        self.max_per_peer = max_per_peer
        """Connections one peer may hold at once; None: only the total is capped."""
        self.total = 0
        self._by_peer: Counter[Hashable] = Counter()

    def refusal(self, peer: Hashable) -> str | None:
        """Why a new connection from `peer` must be refused, or None to take it."""
        if self.total >= self.max_total:
            return f"{self.total} connections open, the listener's limit"
        if self.max_per_peer is not None and self._by_peer[peer] >= self.max_per_peer:
            return f"{self._by_peer[peer]} connections open from one peer, the per-peer limit"
        return None

    def opened(self, peer: Hashable) -> None:
        self.total += 1
        self._by_peer[peer] += 1

    def closed(self, peer: Hashable) -> None:
        self.total -= 1
        self._by_peer[peer] -= 1
        if self._by_peer[peer] <= 0:
            del self._by_peer[peer]


Serve = Callable[[socket.socket], Awaitable[None]]
"""Takes an accepted socket (owns it from then on; closes it when it fails)."""
Refuse = Callable[[socket.socket], str | None]
"""Why an accepted socket must be closed at once, or None to serve it."""


class BurstLog:
    """A warning logged once per burst of like events (see `Burst`)."""

    def __init__(self, message: str, where: str) -> None:
        self.message = message
        self.where = where
        self._burst = Burst()

    def note(self, why: str) -> None:
        previous = self._burst.note(time.monotonic())
        if previous is not None:
            fields: dict[str, object] = {"listener": self.where, "why": why}
            if previous:
                fields["previous_burst"] = previous
            log.warning(self.message, fields=fields)


async def accept_forever(listener: socket.socket, where: str, refuse: Refuse, serve: Serve) -> None:
    """Accept connections on `listener` until cancelled; never ends on a failed accept."""
    loop = asyncio.get_running_loop()
    failures = BurstLog("accept failed; retrying", where)
    refusals = BurstLog("refusing connections", where)
    delay = BACKOFF_FIRST_S
    while True:
        try:
            connection = await _accept(loop, listener)
        except OSError as error:
            failures.note(error.strerror or str(error))
            await asyncio.sleep(delay)
            delay = min(delay * 2, BACKOFF_MAX_S)
            continue
        delay = BACKOFF_FIRST_S
        try:
            reason = refuse(connection)
        except BaseException:
            connection.close()
            raise
        if reason is None:
            await _serve(connection, serve, where)
        else:
            connection.close()
            refusals.note(reason)
        # an accept returns without suspending while a connection waits, so a peer that
        # reconnects as fast as it is refused would hold the event loop (seen: 0.8 s at a
        # stretch from one process); let everything else run between two accepts
        await asyncio.sleep(0)


async def _accept(loop: asyncio.AbstractEventLoop, listener: socket.socket) -> socket.socket:
    """The next connection, non-blocking. Accepted with no await between the accept and the
    caller holding the socket: `loop.sock_accept` drops a connection it accepts as its task is
    cancelled (a listener closing), which then lingers unclosed until the collector finds it."""
    while True:
        try:
            connection, _ = listener.accept()
        except (BlockingIOError, InterruptedError):
            await _readable(loop, listener)
            continue
        connection.setblocking(False)
        return connection


async def _readable(loop: asyncio.AbstractEventLoop, listener: socket.socket) -> None:
    """Until `listener` has a connection waiting (or an error to report on accept)."""
    ready: asyncio.Future[None] = loop.create_future()
    fd = listener.fileno()
    loop.add_reader(fd, _wake, ready)
    try:
        await ready
    finally:
        loop.remove_reader(fd)


def _wake(ready: asyncio.Future[None]) -> None:
    if not ready.done():
        ready.set_result(None)


async def _serve(connection: socket.socket, serve: Serve, where: str) -> None:
    try:
        await serve(connection)
    except Exception as error:  # whatever one connection does, the loop goes on
        connection.close()
        log.warning("dropped a connection", fields={"listener": where, "error": repr(error)})
    except BaseException:
        connection.close()
        raise
