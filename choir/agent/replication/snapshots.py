"""When a heartbeat carries a working-memory snapshot (§13.1 "periodic snapshots bound replay
cost", §13.4): every `every_events` events or `every_s` seconds, if anything was committed.

The cadence is read at each heartbeat (config.json's `snapshot_every_events` and
`snapshot_every_s` are hot-reloadable). Events are counted from the last snapshot choird
stored — after a resume, from the snapshot it resumed from — so the tail a recovery replays stays
bounded however often the agent restarts.
"""

from __future__ import annotations

from collections.abc import Callable

from choir.agent.replication.policy import snapshot_due
from choir.agent.replication.types import SnapshotProvider
from choir.logs import get_logger
from choir.protocol import Snapshot

log = get_logger("choir.agent.replication.replicator")

Cadence = Callable[[], tuple[int, float]]
"""(events, seconds) between snapshots, as currently configured."""


class SnapshotSchedule:
    """Asks `provider` for a snapshot when one is due; a failing provider never stops a
    heartbeat, it only skips that snapshot (one that is not ready yet answers None)."""

    def __init__(self, provider: SnapshotProvider | None, cadence: Cadence, *, rev: int) -> None:
        self._provider = provider
        self._cadence = cadence
        self._rev = rev
        """The rev of the last snapshot choird stored (the restored one's, at start)."""
        self._at = 0.0

    @property
    def rev(self) -> int:
        """The rev of the last snapshot choird stored."""
        return self._rev

    def started(self, now: float) -> None:
        """Replication started: the time-based cadence counts from `now`."""
        self._at = now

    def take(self, new_rev: int, head_hash: str, now: float) -> Snapshot | None:
        """The snapshot for a heartbeat ending at the log head `new_rev`, if one is due."""
        provider = self._provider
        if provider is None:
            return None
        every_events, every_s = self._cadence()
        if not snapshot_due(
            new_rev - self._rev, now - self._at, every_events=every_events, every_s=every_s
        ):
            return None
        try:
            snapshot = provider()
        except Exception:
            log.exception("snapshot provider failed; sending the heartbeat without one")
            return None
        if snapshot is None:
            return None
        if (snapshot.rev, snapshot.hash) != (new_rev, head_hash):
            log.warning(
                "snapshot is not at the log head; skipped",
                fields={"snapshot_rev": snapshot.rev, "head_rev": new_rev},
            )
            return None
        return snapshot

    def stored(self, rev: int, now: float) -> None:
        """choird acknowledged a heartbeat carrying the snapshot at `rev`."""
        self._rev, self._at = rev, now

    def skipped(self, rev: int, now: float) -> None:
        """The snapshot at `rev` could not be sent (too large): wait a full period again."""
        self.stored(rev, now)
