"""Events too large for one frame, and reading history back in pages bounded by bytes (§13).

A transport frame is at most 1 MiB (`rpc.max_frame_bytes`), and every recovery path — the
INIT_HELLO handover, `session.events`, the console's event view — must be able to carry back
anything that was ever accepted. So what is committed is bounded: an event whose record is larger
than `EVENT_INLINE_MAX` is committed as a *preview* (long strings and lists cut, still a valid
event of its kind) plus an `ArtifactRef` to its complete canonical JSON. The chain hash covers the
preview and the reference — hence the artifact's sha256 — so the chain covers the whole content.

The agent uploads an artifact (PUT_ARTIFACT, in chunks) before the heartbeat carrying its event;
choird refuses an event whose artifact it does not hold whole and verified. Artifacts come back in
chunks too (FETCH_ARTIFACT), and the events after a snapshot in pages (INIT_HELLO's first page,
then FETCH_EVENTS), each at most `PAGE_MAX_BYTES`.

Chunks travel as standard base64 of raw bytes: an artifact is UTF-8 JSON, and a chunk boundary
may fall inside a multi-byte character.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, Field

from choir.protocol.base import WireModel
from choir.protocol.log.committed import ArtifactRef, CommittedEvent
from choir.protocol.scalars import Sha256Hex
from choir.protocol.wire.chunks import (
    ARTIFACT_CHUNK_BYTES,
    EVENT_INLINE_MAX,
    PAGE_MAX_BYTES,
    decode_chunk,
    encode_chunk,
)


def _base64(text: str) -> str:
    decode_chunk(text)
    return text


Base64Chunk = Annotated[
    str, Field(max_length=(ARTIFACT_CHUNK_BYTES * 4) // 3 + 4), AfterValidator(_base64)
]
"""At most one chunk of raw bytes, base64-encoded."""


class PutArtifactRequest(WireModel):
    """One chunk of an artifact the agent's next heartbeat will reference."""

    sha256: Sha256Hex
    """The artifact's digest; choird checks the assembled content against it."""
    size: int = Field(ge=1)
    """The artifact's whole length in bytes."""
    offset: int = Field(ge=0)
    """Where this chunk starts; choird keeps chunks only in order, so a resend is harmless."""
    data: Base64Chunk
    """The chunk."""


class PutArtifactResponse(WireModel):
    stored: int = Field(ge=0)
    """Bytes of the artifact choird holds: the offset of the next chunk to send."""
    complete: bool
    """True once the whole artifact is stored and its digest verified."""


class FetchArtifactRequest(WireModel):
    sha256: Sha256Hex
    """An artifact an event of the caller's session references."""
    offset: int = Field(default=0, ge=0)
    """First byte wanted."""


class FetchArtifactResponse(WireModel):
    sha256: Sha256Hex
    """The artifact read."""
    size: int = Field(ge=1)
    """Its whole length; read again from `offset + len(data)` until it is reached."""
    offset: int = Field(ge=0)
    """Where `data` starts."""
    data: Base64Chunk
    """Up to ARTIFACT_CHUNK_BYTES of it."""


class FetchEventsRequest(WireModel):
    """The next page of a resume's handover, after INIT_HELLO's first one."""

    after_rev: int = Field(ge=0)
    """The last revision already received."""


class FetchEventsResponse(WireModel):
    events: list[CommittedEvent] = Field(default_factory=list)
    """Acknowledged revisions after `after_rev`, in order, at most PAGE_MAX_BYTES of them."""
    complete: bool
    """True when `events` reaches the session's last acknowledged revision."""


__all__ = [
    "ARTIFACT_CHUNK_BYTES",
    "EVENT_INLINE_MAX",
    "PAGE_MAX_BYTES",
    "ArtifactRef",
    "FetchArtifactRequest",
    "FetchArtifactResponse",
    "FetchEventsRequest",
    "FetchEventsResponse",
    "PutArtifactRequest",
    "PutArtifactResponse",
    "decode_chunk",
    "encode_chunk",
]
