"""The replicator's sender task (§13.1): when a heartbeat is due, what it carries, what the answer
means.

A `Replicator` holds one and keeps the public face (lifecycle, durable intents, flush); the sender
owns replication's state (choird's ack, the outage, the snapshot schedule), its task and the waits
on acks. One task runs `_run`, so one heartbeat is in flight at a time; every heartbeat carries the
revisions after choird's ack (≤ the batch size), and the last one that reaches the log head carries
a snapshot when one is due (`SnapshotSchedule`). State changes happen between awaits only, on the
event loop, so the log listener and the durability waits see them whole.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from typing import Final

from choir.agent.kernel.commitlog import CommitLog, LogEntry, now_ts
from choir.agent.replication import progress_log
from choir.agent.replication.artifacts import ArtifactUploader
from choir.agent.replication.backoff import Outage
from choir.agent.replication.config_sync import ConfigSync
from choir.agent.replication.control_plane import ControlPlane
from choir.agent.replication.outgoing import OutgoingHeartbeat
from choir.agent.replication.policy import heartbeat_of, judge, next_batch, patch_size
from choir.agent.replication.snapshots import SnapshotSchedule
from choir.agent.replication.types import (
    DEFAULT_INTERVAL_MS,
    DEFAULT_SNAPSHOT_EVERY_EVENTS,
    DEFAULT_SNAPSHOT_EVERY_S,
    FatalHandler,
    ReplicationError,
    ReplicationFatal,
    ReplicationSettings,
    ReplicationStats,
    SnapshotProvider,
)
from choir.agent.replication.waiters import AckWaiters
from choir.failpoints import failpoint
from choir.logs import get_logger
from choir.protocol import ErrorCode, HeartbeatResponse, Snapshot
from choir.transport import RpcError, TransportError

log = get_logger("choir.agent.replication.replicator")

URGENT_KINDS: Final = frozenset({"agent_replied"})
"""Events someone is waiting for: choird delivers a reply to the user's DM only once it is
durable, so a reply ships at once rather than after `coalesce_ms` (it usually ends a burst of
commits anyway, so this seldom costs a heartbeat more)."""


class HeartbeatSender:
    """The state of replication and the task that ships heartbeats; a `Replicator` holds one."""

    def __init__(
        self,
        log: CommitLog,
        control_plane: ControlPlane,
        sync: ConfigSync,
        *,
        settings: ReplicationSettings | None,
        snapshot_provider: SnapshotProvider | None,
        on_fatal: FatalHandler | None,
        acked_rev: int | None,
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
        self._snapshots = SnapshotSchedule(snapshot_provider, self._cadence, rev=log.base_rev)
        """Counts from the log's base: a resume from an old snapshot snapshots again soon."""
        self._wake = asyncio.Event()
        self._progress = progress_log.ProgressNotes(since=0.0)
        """What the next INFO "replication progress" line sums up."""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._artifacts = ArtifactUploader(log, control_plane, self.settings.call_timeout_s)
        self._artifacts.held(log)  # a restored log holds what choird acknowledged
        self._task: asyncio.Task[None] | None = None

    @property
    def acked_rev(self) -> int:
        """The highest revision choird has made durable."""
        return self._acked

    @property
    def fatal(self) -> ReplicationFatal | None:
        """Why replication stopped for good, if it did."""
        return self._fatal

    @property
    def running(self) -> bool:
        return self._task is not None

    def start(self) -> None:
        """Start the sender task on the running loop (once)."""
        if self._task is not None:
            return
        self._loop = loop = asyncio.get_running_loop()
        self._last_sent = loop.time()
        self._snapshots.started(loop.time())
        self._progress.since = loop.time()
        if self.log.head_rev > self._acked:
            self._pending_since = loop.time()
        self._task = loop.create_task(self._run(), name="replicator")

    async def halt(self, error: ReplicationError) -> None:
        """Stop the task; every wait on an ack still open fails with `error`."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._waiters.fail(error)

    def committed(self, entry: LogEntry) -> None:
        """Log listener; runs on every commit, so it does almost nothing."""
        if self._pending_since is None and self._loop is not None:
            self._pending_since = self._loop.time()
            self._wake.set()
        if entry.event["kind"] in URGENT_KINDS:
            self._urgent_rev = entry.rev
            self._wake.set()

    async def wait_acked(self, rev: int, limit_s: float, what: str) -> None:
        """Ship up to `rev` now and return once choird acknowledged it; ReplicationError if it
        did not within `limit_s` or cannot (replication stopped or not running)."""
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
            interval = self._configured("heartbeat_interval_ms", DEFAULT_INTERVAL_MS)
        return interval / 1000

    def _cadence(self) -> tuple[int, float]:
        """(events, seconds) between snapshots: the settings', else config.json's (hot)."""
        settings = self.settings
        events = settings.snapshot_every_events
        if events is None:
            events = self._configured("snapshot_every_events", DEFAULT_SNAPSHOT_EVERY_EVENTS)
        seconds = settings.snapshot_every_s
        if seconds is None:
            seconds = self._configured("snapshot_every_s", DEFAULT_SNAPSHOT_EVERY_S)
        return events, seconds

    def _configured(self, key: str, default: int) -> int:
        value = self._sync.state.current().data.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else default

    async def _send_one(self) -> None:
        if not await self._upload_artifacts():
            return
        request = self._next_request()
        await failpoint("heartbeat.before_send")
        assert self._loop is not None
        sent_at = self._loop.time()
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
        self._acknowledged(request, reply, sent_at)

    async def _upload_artifacts(self) -> bool:
        """Upload the artifacts the next heartbeat's previews name; False when that failed (the
        failure is recorded as a failed heartbeat: back off, retry)."""
        window = self.log.since(self._acked)[: self._batch]
        if all(map(self._artifacts.ready, window)):
            return True
        budget, upcoming = self.settings.max_batch_bytes, []
        for entry in window:
            upcoming.append(entry)
            budget -= patch_size(entry)
            if budget < 0:
                break
        try:
            await self._artifacts.upload(upcoming)
        except TimeoutError:
            timeout = self.settings.call_timeout_s
            self._failed(f"an artifact upload had no answer within {timeout:g} s")
            return False
        except TransportError as error:
            self._failed(str(error))
            return False
        except RpcError as error:
            log_range = {"head_rev": self.log.head_rev, "floor_rev": self.log.base_rev}
            verdict = judge(error, **log_range, batch=1)
            if verdict.action != "retry":
                raise ReplicationFatal(f"replication stopped: {error.message}") from None
            self._failed(verdict.reason)
            return False
        return True

    def _next_request(self) -> OutgoingHeartbeat:
        """The heartbeat for the revisions after the ack, built with no await in between."""
        base = self._acked
        entries = next_batch(
            self.log.since(base),
            max_count=self._batch,
            max_bytes=self.settings.max_batch_bytes,
            ready=self._artifacts.ready,
        )
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

    def _acknowledged(
        self, request: OutgoingHeartbeat, reply: HeartbeatResponse, sent_at: float
    ) -> None:
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
        progress_log.heartbeat_acknowledged(
            self._progress,
            now,
            base_rev=self._acked,
            ack_rev=reply.ack_rev,
            round_trip_ms=int((now - sent_at) * 1000),
        )
        self._acked = reply.ack_rev
        self._last_sent = now
        self.stats.heartbeats += 1
        self.stats.events += len(request.patches)
        if request.snapshot is not None:
            progress_log.snapshot_stored(request.new_rev, request.new_rev - self._snapshots.rev)
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

    def _refused(self, error: RpcError, request: OutgoingHeartbeat) -> None:
        if request.snapshot is not None and error.code == ErrorCode.PAYLOAD_TOO_LARGE:
            assert self._loop is not None
            self.stats.failures += 1
            self._snapshots.skipped(request.new_rev, self._loop.time())
            self._pending_since = self._loop.time()  # resend the events now, without it
            log.warning(
                "snapshot too large for one heartbeat; skipped until the next one is due",
                fields={"rev": request.new_rev, "error": error.message},
            )
            return
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

    def _die(self, fatal: ReplicationFatal) -> None:
        self._fatal = fatal
        log.error(fatal.message, fields={"acked_rev": self._acked, "head_rev": self.log.head_rev})
        self._waiters.fail(fatal)
        if self._on_fatal is not None:
            self._on_fatal(fatal)


__all__ = ["HeartbeatSender"]
