"""Replication of the commit log to choird (§13.1): coalesced heartbeats, acks, durable intents.

The log is the runtime authority and its own buffer: choird's `ack_rev` is the only state kept
here, and every heartbeat carries the revisions after it (≤ `max_batch`), so a lost reply, an
outage or a choird restart all heal by resending from the last ack — resends are no-ops at
choird (§13.3). One task sends, so one heartbeat is in flight at a time.

Latency and loss (DESIGN-NOTES "Durability"): the first commit after a quiet spell is shipped
`coalesce_ms` later together with whatever followed it, so a crash loses at most that window
(≤ 100 ms, ≤ 256 events); an idle agent sends a bare sign of life every `heartbeat_interval_ms`
and nothing else. A non-idempotent tool's intent skips the wait: `make_durable` (the arbiter's
intent sink) ships at once and returns only once choird acknowledged it — or raises
`IntentNotDurable`, and the tool must not run.

While choird is unreachable the agent keeps working; retries back off (capped, jittered) and
the outage is logged once when it starts and once when it ends. A fork, an ended session or a
choird that holds more than this agent are fatal: replication stops and `on_fatal` tells the
runtime, since going on would build a history that can never be made durable.

    state = DynamicState()
    async with (
        ConfigSync(control_plane, state) as sync,
        Replicator(log, control_plane, sync, on_fatal=runtime.fatal) as replicator,
    ):
        await sync.load()                      # config + bound secrets before the first call
        arbiter = Arbiter(..., intent_sink=replicator.make_durable)
        ...                                    # leaving the block flushes (graceful stop)
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from types import TracebackType
from typing import Self

from choir.agent.kernel.commitlog import CommitLog, LogEntry
from choir.agent.kernel.intents import IntentNotDurable
from choir.agent.replication.config_sync import ConfigSync
from choir.agent.replication.control_plane import ControlPlane
from choir.agent.replication.sender import HeartbeatSender
from choir.agent.replication.types import (
    FatalHandler,
    ReplicationError,
    ReplicationFatal,
    ReplicationSettings,
    ReplicationStats,
    SnapshotProvider,
)


class Replicator(HeartbeatSender):
    """Ships `log` to choird through `control_plane`; start it before the first commit.

    The sender task and its bookkeeping are `HeartbeatSender`'s; this is the face the runtime
    and the arbiter use: start and stop, durable intents, flush.
    """

    def __init__(
        self,
        log: CommitLog,
        control_plane: ControlPlane,
        sync: ConfigSync,
        *,
        settings: ReplicationSettings | None = None,
        snapshot_provider: SnapshotProvider | None = None,
        on_fatal: FatalHandler | None = None,
        acked_rev: int | None = None,
    ) -> None:
        super().__init__(
            log,
            control_plane,
            sync,
            settings=settings,
            snapshot_provider=snapshot_provider,
            on_fatal=on_fatal,
            acked_rev=acked_rev,
        )
        self._task: asyncio.Task[None] | None = None
        self._unsubscribe: Callable[[], None] | None = None

    @property
    def acked_rev(self) -> int:
        """The highest revision choird has made durable."""
        return self._acked

    @property
    def fatal(self) -> ReplicationFatal | None:
        """Why replication stopped for good, if it did."""
        return self._fatal

    # -- lifecycle -------------------------------------------------------------------------------

    async def start(self) -> None:
        if self._task is not None:
            return
        self._loop = loop = asyncio.get_running_loop()
        self._last_sent = loop.time()
        self._snapshots.started(loop.time())
        if self.log.head_rev > self._acked:
            self._pending_since = loop.time()
        self._unsubscribe = self.log.subscribe(self._committed)
        self._task = loop.create_task(self._run(), name="replicator")

    async def stop(self, *, flush: bool = True) -> None:
        """Stop; with `flush`, first ship everything and wait for the ack (raises if it fails)."""
        try:
            if flush and self._fatal is None and self._task is not None:
                await self.flush(self.settings.flush_timeout_s)
        finally:
            await self._halt(ReplicationError("replication stopped"))

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop(flush=exc_type is None)

    # -- durability ------------------------------------------------------------------------------

    async def make_durable(self, entry: LogEntry) -> None:
        """The arbiter's intent sink: return once choird acknowledged `entry` (ships it now)."""
        if self._acked >= entry.rev:
            return
        call = entry.event.get("call_id", "?")
        what = f"the intent of call {call} (rev {entry.rev})"
        try:
            await self._wait_acked(entry.rev, self.settings.intent_timeout_s, what)
        except ReplicationError as error:
            raise IntentNotDurable(f"{error.message}; the tool was not run") from None

    async def flush(self, timeout_s: float | None = None) -> None:
        """Ship every committed revision and wait for its ack (graceful stop, §17.7)."""
        head = self.log.head_rev
        if self._acked >= head:
            return
        budget = self.settings.flush_timeout_s if timeout_s is None else timeout_s
        await self._wait_acked(head, budget, f"revisions {self._acked + 1}..{head}")

    async def _wait_acked(self, rev: int, limit_s: float, what: str) -> None:
        if self._fatal is not None:
            raise ReplicationError(f"{what} cannot be made durable: {self._fatal.message}")
        if self._task is None:
            raise ReplicationError(f"{what} cannot be made durable: replication is not running")
        self._urgent_rev = max(self._urgent_rev, rev)
        self._wake.set()
        try:
            await self._waiters.wait(rev, limit_s)
        except TimeoutError:
            outage = self._outage
            why = f" (choird unreachable: {outage.last_error})" if outage.failures else ""
            raise ReplicationError(
                f"{what} was not acknowledged by choird within {limit_s:g} s{why}"
            ) from None

    def _committed(self, entry: LogEntry) -> None:
        """Log listener; runs on every commit, so it does almost nothing."""
        if self._pending_since is None and self._loop is not None:
            self._pending_since = self._loop.time()
            self._wake.set()

    # -- ending ----------------------------------------------------------------------------------

    async def _halt(self, error: ReplicationError) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._waiters.fail(error)


__all__ = [
    "ReplicationError",
    "ReplicationFatal",
    "ReplicationSettings",
    "ReplicationStats",
    "Replicator",
    "SnapshotProvider",
]
