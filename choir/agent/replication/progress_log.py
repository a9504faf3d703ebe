"""Replication progress in the agent's log (§22.1 "heartbeat revisions: replication progress").

A heartbeat ships every ~100 ms while events flow, so one INFO line each would drown the log.
Each acknowledged heartbeat is a DEBUG line (built only when DEBUG is on); at INFO, one line at
most every `EVERY_S` sums up what was replicated since the last one (heartbeats, events, the
acknowledged revision, the slowest round trip) — and says nothing while nothing moved.
`ProgressNotes` is the pure tally; `HeartbeatSender` feeds it and logs what it returns.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Final

from choir.logs import get_logger

EVERY_S: Final = 60.0
"""At most one INFO progress line this often."""

log = get_logger("choir.agent.replication.replicator")


@dataclass(slots=True)
class ProgressNotes:
    """Heartbeats and events acknowledged since the last INFO line."""

    since: float
    """When the last INFO line was logged (or replication started)."""
    heartbeats: int = 0
    events: int = 0
    slowest_ms: int = 0

    def acknowledged(self, now: float, events: int, round_trip_ms: int) -> None:
        self.heartbeats += 1
        self.events += events
        self.slowest_ms = max(self.slowest_ms, round_trip_ms)

    def due(self, now: float) -> dict[str, Any] | None:
        """The INFO line's fields when one is due (and resets the tally), else None."""
        if now - self.since < EVERY_S or not self.events:
            return None
        fields = {
            "heartbeats": self.heartbeats,
            "events": self.events,
            "slowest_ms": self.slowest_ms,
            "over_s": round(now - self.since, 1),
        }
        self.since, self.heartbeats, self.events, self.slowest_ms = now, 0, 0, 0
        return fields


def heartbeat_acknowledged(
    notes: ProgressNotes, now: float, *, base_rev: int, ack_rev: int, round_trip_ms: int
) -> None:
    """Log one acknowledged heartbeat: DEBUG always, the INFO summary when due."""
    events = ack_rev - base_rev
    notes.acknowledged(now, events, round_trip_ms)
    if log.isEnabledFor(logging.DEBUG):
        fields = {"base_rev": base_rev, "ack_rev": ack_rev, "round_trip_ms": round_trip_ms}
        log.debug("heartbeat acknowledged", fields=fields)
    summary = notes.due(now)
    if summary is not None:
        log.info("replication progress", fields={"ack_rev": ack_rev, **summary})


def snapshot_stored(rev: int, events_since: int) -> None:
    """choird stored a working-memory snapshot at `rev` (§13.4): recovery replays from here."""
    log.info("snapshot stored", fields={"rev": rev, "events_since_last": events_since})


__all__ = ["EVERY_S", "ProgressNotes", "heartbeat_acknowledged", "snapshot_stored"]
