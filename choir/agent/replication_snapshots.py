"""When a heartbeat carries a working-memory snapshot (§13.1 "periodic snapshots bound replay
cost", §13.4): every `every_events` events or `every_s` seconds, if anything was committed."""

from __future__ import annotations

from choir.agent.replication_policy import snapshot_due
from choir.agent.replication_types import SnapshotProvider
from choir.logs import get_logger
from choir.protocol import Snapshot

log = get_logger("choir.agent.replication")


class SnapshotSchedule:
    """Asks `provider` for a snapshot when one is due; a failing provider never stops a
    heartbeat, it only skips that snapshot."""

    def __init__(
        self,
        provider: SnapshotProvider | None,
        *,
        every_events: int,
        every_s: float,
        rev: int,
        now: float,
    ) -> None:
        self._provider = provider
        self._every_events = every_events
        self._every_s = every_s
        self._rev = rev
        self._at = now

    def take(self, new_rev: int, head_hash: str, now: float) -> Snapshot | None:
        """The snapshot for a heartbeat ending at the log head `new_rev`, if one is due."""
        provider = self._provider
        if provider is None or not snapshot_due(
            new_rev - self._rev,
            now - self._at,
            every_events=self._every_events,
            every_s=self._every_s,
        ):
            return None
        try:
            snapshot = provider()
        except Exception:
            log.exception("snapshot provider failed; sending the heartbeat without one")
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
