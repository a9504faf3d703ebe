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
import random
from collections.abc import Callable
from types import TracebackType
from typing import Self

from choir.agent.commitlog import CommitLog, LogEntry, now_ts
from choir.agent.control_plane import ControlPlane
from choir.agent.replication_policy import Outage, heartbeat_of, judge
from choir.agent.replication_snapshots import SnapshotSchedule
from choir.agent.replication_sync import ConfigSync
from choir.agent.replication_types import (
    DEFAULT_INTERVAL_MS,
    FatalHandler,
    IntentNotDurable,
    ReplicationError,
    ReplicationFatal,
    ReplicationSettings,
    ReplicationStats,
    SnapshotProvider,
)
from choir.agent.replication_waiters import AckWaiters
from choir.failpoints import failpoint
from choir.logs import get_logger
from choir.protocol import HeartbeatRequest, HeartbeatResponse, Snapshot
from choir.transport import RpcError, TransportError

log = get_logger("choir.agent.replication")


class Replicator:
    """Ships `log` to choird through `control_plane`; start it before the first commit."""

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
        self.log = log
        self.settings = settings or ReplicationSettings()
        self.stats = ReplicationStats()
        self._cp = control_plane
        self._sync = sync
        self._on_fatal = on_fatal
        self._acked = log.head_rev if acked_rev is None else acked_rev
        """choird's ack. A restored log holds exactly what choird acknowledged."""
        self._fatal: ReplicationFatal | None = None
        self._waiters = AckWaiters()
        self._urgent_rev = 0
        self._pending_since: float | None = None
        """When the oldest unsent commit was made; None once everything was sent."""
        self._last_sent = 0.0
        self._outage = Outage(self.settings.backoff)
        self._batch = self.settings.max_batch
        self._snapshots = SnapshotSchedule(
            snapshot_provider,
            every_events=self.settings.snapshot_every_events,
            every_s=self.settings.snapshot_every_s,
            rev=self._acked,
            now=0.0,
        )
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._unsubscribe: Callable[[], None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

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
        self._snapshots.stored(self._acked, loop.time())
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

    # -- the sender task -------------------------------------------------------------------------

    def _committed(self, entry: LogEntry) -> None:
        """Log listener; runs on every commit, so it does almost nothing."""
        if self._pending_since is None and self._loop is not None:
            self._pending_since = self._loop.time()
            self._wake.set()

    async def _run(self) -> None:
        try:
            while True:
                await self._until_due()
                await self._send_one()
        except asyncio.CancelledError:
            raise
        except ReplicationFatal as fatal:
            self._die(fatal)
        except BaseException as exc:  # a bug, or a failpoint panic: never die silently
            log.error("replication crashed", exc_info=exc)
            self._die(ReplicationFatal(f"replication crashed: {exc}"))
            if not isinstance(exc, Exception):
                raise  # a panic keeps propagating, to whoever awaits this task

    async def _until_due(self) -> None:
        """Wait until a heartbeat is due: urgent, coalesced, or a sign of life."""
        assert self._loop is not None
        settings = self.settings
        while True:
            now = self._loop.time()
            if now < self._outage.retry_at:
                await asyncio.sleep(self._outage.retry_at - now)
                continue
            if self.log.head_rev > self._acked:
                if self._urgent_rev > self._acked or self._pending_since is None:
                    return
                due = self._pending_since + settings.coalesce_ms / 1000
            else:
                due = self._last_sent + self._interval_s()
            if now >= due:
                return
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(due - now):
                    await self._wake.wait()

    def _interval_s(self) -> float:
        interval = self.settings.heartbeat_interval_ms
        if interval is None:
            configured = self._sync.state.current().data.get("heartbeat_interval_ms")
            interval = configured if isinstance(configured, int) else DEFAULT_INTERVAL_MS
        return interval / 1000

    async def _send_one(self) -> None:
        request = self._next_request()
        await failpoint("heartbeat.before_send")
        try:
            async with asyncio.timeout(self.settings.call_timeout_s):
                reply = await self._cp.heartbeat(request)
        except TimeoutError:
            self._failed(f"no answer within {self.settings.call_timeout_s:g} s")
            return
        except TransportError as error:
            self._failed(str(error))
            return
        except RpcError as error:
            self._refused(error, request)
            return
        await failpoint("heartbeat.after_send_before_ack")
        self._acknowledged(request, reply)

    def _next_request(self) -> HeartbeatRequest:
        """The heartbeat for the revisions after the ack, built with no await in between."""
        base = self._acked
        entries = self.log.since(base)[: self._batch]
        shipped_to_head = not entries or entries[-1].rev == self.log.head_rev
        if shipped_to_head:
            self._pending_since = None
        return heartbeat_of(
            entries,
            base_rev=base,
            hash_prev=entries[0].hash_prev if entries else self._hash_at(base),
            config_version=self._sync.version,
            timestamp=now_ts(),
            snapshot=self._snapshot(entries) if entries and shipped_to_head else None,
        )

    def _hash_at(self, rev: int) -> str:
        if rev == self.log.head_rev:
            return self.log.head_hash
        try:
            return self.log.entry(rev + 1).hash_prev
        except KeyError:
            raise ReplicationFatal(
                f"choird's ack (rev {rev}) is older than this agent's log, which starts after "
                f"rev {self.log.base_rev}: the revisions in between are gone"
            ) from None

    def _snapshot(self, entries: list[LogEntry]) -> Snapshot | None:
        assert self._loop is not None
        return self._snapshots.take(entries[-1].rev, entries[-1].hash, self._loop.time())

    def _acknowledged(self, request: HeartbeatRequest, reply: HeartbeatResponse) -> None:
        assert self._loop is not None
        now = self._loop.time()
        if reply.ack_rev > self.log.head_rev:
            raise ReplicationFatal(
                f"choird acknowledged rev {reply.ack_rev} but this agent's log ends at rev "
                f"{self.log.head_rev}: it runs a session another process advanced"
            )
        if (ended := self._outage.ended()) is not None:
            attempts, since = ended
            log.info(
                "choird reachable again; replication resumed",
                fields={"down_s": round(now - since, 3), "attempts": attempts},
            )
        self._batch = self.settings.max_batch
        self._acked = reply.ack_rev
        self._last_sent = now
        self.stats.heartbeats += 1
        self.stats.events += len(request.patches)
        if request.snapshot is not None:
            self._snapshots.stored(request.new_rev, now)
            self.stats.snapshots += 1
        self._waiters.release(self._acked)
        self._sync.notice_version(reply.config_version_latest)

    def _failed(self, reason: str) -> None:
        """A heartbeat that may succeed later: back off, keep the log as the buffer."""
        assert self._loop is not None
        self.stats.failures += 1
        if self._outage.failed(reason, self._loop.time(), random.random()):
            log.warning(
                "choird unreachable; committing locally and retrying",
                fields={"error": reason, "unreplicated": self.log.head_rev - self._acked},
            )

    def _refused(self, error: RpcError, request: HeartbeatRequest) -> None:
        verdict = judge(
            error,
            head_rev=self.log.head_rev,
            floor_rev=self.log.base_rev,
            batch=len(request.patches),
        )
        if verdict.action == "retry":
            self._failed(verdict.reason)
        elif verdict.action == "shrink":
            self.stats.failures += 1
            self._batch = max(1, len(request.patches) // 2)
        elif verdict.action == "resync":
            self.stats.failures += 1
            log.warning(
                "choird expects another base revision; resending from it",
                fields={"sent_base_rev": request.base_rev, "expected": verdict.rev},
            )
            self._acked = verdict.rev
        else:
            raise ReplicationFatal(f"replication stopped: {verdict.reason}")

    # -- ending ----------------------------------------------------------------------------------

    def _die(self, fatal: ReplicationFatal) -> None:
        self._fatal = fatal
        log.error(fatal.message, fields={"acked_rev": self._acked, "head_rev": self.log.head_rev})
        self._waiters.fail(fatal)
        if self._on_fatal is not None:
            self._on_fatal(fatal)

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
    "IntentNotDurable",
    "ReplicationError",
    "ReplicationFatal",
    "ReplicationSettings",
    "ReplicationStats",
    "Replicator",
    "SnapshotProvider",
]
