"""A heartbeat as the agent sends it: its log entries, already in their JSON form.

The agent does not build a `HeartbeatRequest` to send one. Validating one parses every patch's
event into its typed model and walks the chain, and sending it dumps them all back to JSON — about
a tenth of the agent's CPU per model call (bench.step_e2e), spent re-checking what the agent's own
commit log produced a moment ago. An entry holds the exact JSON a `CommittedEvent` dumps to
(`LogEntry.wire`), so the request's wire form is assembled from those. choird still validates every
heartbeat it receives in full: the check stays at the trust boundary, where it protects something.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from choir.agent.kernel.commitlog import LogEntry
from choir.protocol import Snapshot


@dataclass(frozen=True, slots=True)
class OutgoingHeartbeat:
    """The fields of a `HeartbeatRequest`, with the patches as the log's entries."""

    base_rev: int
    new_rev: int
    patches: Sequence[LogEntry]
    config_version: int
    hash_prev: str
    hash_new: str
    timestamp: str
    """Already in the wire's timestamp form (`now_ts`)."""
    snapshot: Snapshot | None = None

    def wire(self) -> dict[str, Any]:
        """The JSON form of the `HeartbeatRequest` these fields make."""
        snapshot = self.snapshot
        return {
            "base_rev": self.base_rev,
            "new_rev": self.new_rev,
            "patches": [entry.wire() for entry in self.patches],
            "config_version": self.config_version,
            "hash_prev": self.hash_prev,
            "hash_new": self.hash_new,
            "timestamp": self.timestamp,
            "snapshot": snapshot.model_dump(mode="json") if snapshot is not None else None,
        }


__all__ = ["OutgoingHeartbeat"]
