"""The pure rules of replication: what a heartbeat carries, what a refusal means. How long to wait
for choird is `backoff`.

Kept free of I/O so the `EventIngest` is only plumbing, and so each rule is tested on its own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final, Literal

import orjson

from choir.agent.kernel.commitlog import LogEntry
from choir.agent.replication.outgoing import OutgoingHeartbeat
from choir.protocol import (
    BaseRevConflict,
    ErrorCode,
    Snapshot,
    error_details,
)
from choir.transport import RpcError

MAX_BATCH: Final = 256
"""Patches per heartbeat: bounds one request's size and the loss window of a crash."""

RECORD_OVERHEAD: Final = 256
"""Bytes a patch adds around its event (rev, lane, ts, two hashes, an artifact reference)."""

_RETRYABLE: Final = frozenset({ErrorCode.UNAVAILABLE, ErrorCode.RATE_LIMITED, ErrorCode.INTERNAL})


def heartbeat_of(
    entries: Sequence[LogEntry],
    *,
    base_rev: int,
    hash_prev: str,
    config_version: int,
    timestamp: str,
    snapshot: Snapshot | None = None,
) -> OutgoingHeartbeat:
    """The HEARTBEAT shipping `entries` (revisions base_rev+1 …), or a bare sign of life."""
    return OutgoingHeartbeat(
        base_rev=base_rev,
        new_rev=base_rev + len(entries),
        patches=entries,
        config_version=config_version,
        hash_prev=hash_prev,
        hash_new=entries[-1].hash if entries else hash_prev,
        timestamp=timestamp,
        snapshot=snapshot,
    )


def next_batch(
    entries: Sequence[LogEntry],
    *,
    max_count: int,
    max_bytes: int,
    ready: Callable[[LogEntry], bool],
) -> list[LogEntry]:
    """The leading `entries` one heartbeat carries: at most `max_count`, at most `max_bytes` of
    patches (but at least one), and none from the first whose artifact choird lacks."""
    batch: list[LogEntry] = []
    total = 0
    for entry in entries[:max_count]:
        if not ready(entry):
            break
        total += patch_size(entry)
        if batch and total > max_bytes:
            break
        batch.append(entry)
    return batch


def patch_size(entry: LogEntry) -> int:
    """About how many bytes `entry` takes in a heartbeat."""
    return len(orjson.dumps(entry.event)) + RECORD_OVERHEAD


@dataclass(frozen=True, slots=True)
class Verdict:
    """What to do about a refused heartbeat."""

    action: Literal["retry", "resync", "shrink", "fatal"]
    """retry: back off and resend. resync: resend from `rev`, choird's real ack. shrink: send
    fewer patches. fatal: stop replicating — resending cannot succeed."""
    rev: int = 0
    """For resync: the base_rev choird expects."""
    reason: str = ""
    """One line for the log or the fatal error."""


def judge(error: RpcError, *, head_rev: int, floor_rev: int, batch: int) -> Verdict:
    """The verdict on `error`, for a log holding revisions `floor_rev`+1 … `head_rev`.

    What choird's refusal means comes from its code and typed details, never from its message,
    which is for people and may change."""
    if error.code in _RETRYABLE:
        return Verdict("retry", reason=error.message)
    if error.code == ErrorCode.PAYLOAD_TOO_LARGE and batch > 1:
        return Verdict("shrink", reason=error.message)
    details = error_details(error.details) if error.code == ErrorCode.CONFLICT else None
    if isinstance(details, BaseRevConflict):
        rev = details.expected_base_rev
        if floor_rev <= rev <= head_rev:
            return Verdict("resync", rev=rev, reason=error.message)
        return Verdict(
            "fatal",
            reason=f"choird expects the revisions after {rev}, but this agent holds "
            f"{floor_rev + 1}..{head_rev}: {error.message}",
        )
    if error.code == ErrorCode.UNAUTHORIZED:
        return Verdict(
            "fatal",
            reason="choird no longer accepts this session (it ended, was reaped as crashed, "
            "or its lease was replaced): restart the agent",
        )
    return Verdict("fatal", reason=error.message)


def snapshot_due(new_events: int, elapsed_s: float, *, every_events: int, every_s: float) -> bool:
    """Whether a heartbeat bringing `new_events` since the last snapshot, `elapsed_s` after it,
    should carry a new one (§13.1 "periodic snapshots bound replay cost")."""
    return new_events > 0 and (new_events >= every_events or elapsed_s >= every_s)
