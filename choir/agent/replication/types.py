"""The vocabulary of replication: its settings and counters, its errors, its callbacks."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from choir.agent.replication.backoff import Backoff
from choir.agent.replication.policy import MAX_BATCH
from choir.errors import ChoirError
from choir.protocol import Snapshot
from choir.protocol.wire.artifacts import PAGE_MAX_BYTES

DEFAULT_INTERVAL_MS: Final = 5000
"""§13.1's default heartbeat interval, until a config says otherwise."""

DEFAULT_SNAPSHOT_EVERY_EVENTS: Final = 1000
DEFAULT_SNAPSHOT_EVERY_S: Final = 300
"""config.json's defaults for the snapshot cadence (§13.4), until a config says otherwise."""

SnapshotProvider = Callable[[], Snapshot | None]
"""The runtime's §13.4 state at the log's current head; None while it has none to give yet."""


class ReplicationError(ChoirError):
    """Committed events are not (yet) durable at choird."""


class ReplicationFatal(ReplicationError):
    """Replication stopped for good (fork, session ended, choird ahead of this agent)."""


FatalHandler = Callable[[ReplicationFatal], None]


@dataclass(frozen=True, slots=True)
class ReplicationSettings:
    heartbeat_interval_ms: int | None = None
    """A bare sign of life after this long without any heartbeat; None follows config.json's
    hot-reloadable `heartbeat_interval_ms` (§13.1, default 5000)."""
    coalesce_ms: int = 25
    """How long the first new commit waits for company before shipping."""
    max_batch: int = MAX_BATCH
    """Patches per heartbeat; a larger backlog goes out in several."""
    max_batch_bytes: int = PAGE_MAX_BYTES
    """Bytes of patches per heartbeat (at least one patch), so a heartbeat fits in a frame
    whatever its events weigh."""
    intent_timeout_s: float = 5.0
    """How long a non-idempotent tool waits for its intent's ack before it fails."""
    flush_timeout_s: float = 10.0
    """How long a graceful stop waits for the last ack."""
    snapshot_every_events: int | None = None
    """A working-memory snapshot after this many events… (None follows config.json's
    hot-reloadable `snapshot_every_events`, default 1000)"""
    snapshot_every_s: float | None = None
    """…or this long, whichever comes first, if something was committed since (None follows
    `snapshot_every_s`, default 300)."""
    call_timeout_s: float = 10.0
    """A heartbeat unanswered this long counts as failed (and is resent from the ack)."""
    backoff: Backoff = field(default_factory=Backoff)
    """Retry delays while choird is unreachable."""


@dataclass(slots=True)
class ReplicationStats:
    heartbeats: int = 0
    """Heartbeats choird acknowledged."""
    events: int = 0
    """Patches those heartbeats carried (resends included)."""
    snapshots: int = 0
    failures: int = 0
    """Heartbeats that failed (transport errors and refusals)."""
