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


class Replicator:
    """Ships `log` to choird through `control_plane`; start it before the first commit.

    The face the runtime and the arbiter use: start and stop, durable intents, flush. The
    sender task and replication's state are its `HeartbeatSender`'s.
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
        self._sender = HeartbeatSender(
            log,
            control_plane,
            sync,
            settings=settings,
            snapshot_provider=snapshot_provider,
            on_fatal=on_fatal,
            acked_rev=acked_rev,
        )
        self.log = log
        self.settings = self._sender.settings
        self.stats = self._sender.stats
        self._unsubscribe: Callable[[], None] | None = None

    @property
    def acked_rev(self) -> int:
        """The highest revision choird has made durable."""
        return self._sender.acked_rev

    @property
    def fatal(self) -> ReplicationFatal | None:
        """Why replication stopped for good, if it did."""
        return self._sender.fatal

    # -- lifecycle -------------------------------------------------------------------------------

    async def start(self) -> None:
        if self._sender.running:
            return
        self._sender.start()
        self._unsubscribe = self.log.subscribe(self._sender.committed)

    async def stop(self, *, flush: bool = True) -> None:
        """Stop; with `flush`, first ship everything and wait for the ack (raises if it fails)."""
        try:
            if flush and self._sender.fatal is None and self._sender.running:
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
        if self._sender.acked_rev >= entry.rev:
            return
        call = entry.event.get("call_id", "?")
        what = f"the intent of call {call} (rev {entry.rev})"
        try:
            await self._sender.wait_acked(entry.rev, self.settings.intent_timeout_s, what)
        except ReplicationError as error:
            raise IntentNotDurable(f"{error.message}; the tool was not run") from None

    async def flush(self, timeout_s: float | None = None) -> None:
        """Ship every committed revision and wait for its ack (graceful stop, §17.7)."""
        head, acked = self.log.head_rev, self._sender.acked_rev
        if acked >= head:
            return
        budget = self.settings.flush_timeout_s if timeout_s is None else timeout_s
        await self._sender.wait_acked(head, budget, f"revisions {acked + 1}..{head}")

    # -- ending ----------------------------------------------------------------------------------

    async def _halt(self, error: ReplicationError) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        await self._sender.halt(error)


__all__ = [
    "ReplicationError",
    "ReplicationFatal",
    "ReplicationSettings",
    "ReplicationStats",
    "Replicator",
    "SnapshotProvider",
]
