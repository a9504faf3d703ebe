"""Committed events: an event with its revision, lane, time and place in the hash chain.

An event too large to travel whole is committed as a preview with an `ArtifactRef` to all of it
(`choir.protocol.wire.artifacts`); the reference is part of what the chain hash covers.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Self

from pydantic import Field

from choir.protocol.base import WireModel
from choir.protocol.log.chain import commit_hash
from choir.protocol.log.events import Event
from choir.protocol.log.lanes import LaneId
from choir.protocol.scalars import Sha256Hex, UtcTimestamp, format_ts


def event_json(event: Event) -> dict[str, Any]:
    """`event` in its JSON form: what a chain hash covers, and what a store keeps of it.

    Dumped by the event's own serializer, built with its validator when the event was made, not
    by `EVENT_ADAPTER`'s: the union picks the variant by `kind` and dumps it with that serializer,
    so the form is the same, and building the union's schema for it cost choir-agent ~10 ms of
    CPU at its first commit, on the path of its first reply (and twice the time per dump)."""
    form: dict[str, Any] = event.__pydantic_serializer__.to_python(event, mode="json")
    return form


class ArtifactRef(WireModel):
    """Where the whole of a previewed event is: its canonical JSON, named by its digest."""

    sha256: Sha256Hex
    """SHA-256 of the complete event's canonical JSON (sorted keys, no whitespace, UTF-8)."""
    size: int = Field(ge=1)
    """Its length in bytes."""


class CommittedEvent(WireModel):
    """One revision of the session log (§7.4); `session_events` rows hold exactly this."""

    rev: int = Field(ge=1)
    """Position in the session log; contiguous from 1."""
    lane: LaneId
    """Lane that caused the event: `edge` or `core:<job-name>`."""
    ts: UtcTimestamp
    """Commit time, UTC."""
    hash_prev: Sha256Hex
    """`hash` of rev - 1, or GENESIS_HASH for rev 1."""
    hash: Sha256Hex
    """`commit_hash(hash_prev, rev, lane, ts, event)`."""
    event: Event
    """The fact committed — a preview of it when `artifact` is set."""
    artifact: ArtifactRef | None = Field(default=None, exclude_if=lambda ref: ref is None)
    """The whole event, when `event` is only its preview (left out on the wire otherwise)."""

    @classmethod
    def seal(
        cls,
        *,
        rev: int,
        lane: str,
        ts: datetime,
        hash_prev: str,
        event: Event,
        artifact: ArtifactRef | None = None,
    ) -> Self:
        """A committed event with its chain hash computed."""
        ref = artifact.model_dump(mode="json") if artifact is not None else None
        digest = commit_hash(hash_prev, rev, lane, format_ts(ts), event_json(event), ref)
        return cls(
            rev=rev,
            lane=lane,
            ts=ts,
            hash_prev=hash_prev,
            hash=digest,
            event=event,
            artifact=artifact,
        )

    def computed_hash(self, event: dict[str, Any] | None = None) -> str:
        """The hash this record should carry, recomputed from its content; `event` is the JSON
        form of its event (`event_json`) when the caller already has it."""
        if event is None:
            event = event_json(self.event)
        ref = self.artifact.model_dump(mode="json") if self.artifact is not None else None
        return commit_hash(self.hash_prev, self.rev, self.lane, format_ts(self.ts), event, ref)


def chain_break(
    records: Sequence[CommittedEvent],
    *,
    base_rev: int,
    hash_prev: str,
    check_hashes: bool = False,
    where: str = "patches",
    events: Sequence[dict[str, Any]] | None = None,
) -> str | None:
    """Why `records` do not continue a chain at (`base_rev`, `hash_prev`); None if they do.

    Always checks contiguous revisions and `hash_prev` links; with `check_hashes`, also
    recomputes every hash (what choird does before acknowledging a heartbeat) — over `events`,
    the records' events in JSON form, when the caller has them (choird stores those very forms,
    so each event is serialized once).
    """
    expected_rev, expected_prev = base_rev + 1, hash_prev
    for index, record in enumerate(records):
        if record.rev != expected_rev:
            return f"{where}[{index}].rev: expected {expected_rev}, got {record.rev}"
        if record.hash_prev != expected_prev:
            return f"{where}[{index}].hash_prev: does not match the hash of rev {record.rev - 1}"
        event = events[index] if events is not None else None
        if check_hashes and record.computed_hash(event) != record.hash:
            return f"{where}[{index}].hash: does not match the content of rev {record.rev}"
        expected_rev, expected_prev = record.rev + 1, record.hash
    return None
