"""The sizes that bound events, pages and artifact chunks, and the chunks' base64 codec.

Pure and free of pydantic: the console reads artifacts back with these before it has loaded any
wire model, so its first paint does not wait for them.
"""

from __future__ import annotations

import base64
import binascii
from typing import Final

EVENT_INLINE_MAX: Final = 128 * 1024
"""Largest committed record (canonical JSON bytes) carried whole; a larger event is committed as
a preview plus an artifact. Far below one frame, so a page always holds at least one event."""
PAGE_MAX_BYTES: Final = 512 * 1024
"""Most bytes of events one heartbeat, handover page or `session.events` answer carries; half a
frame, leaving room for a snapshot or the envelope."""
ARTIFACT_CHUNK_BYTES: Final = 384 * 1024
"""Raw bytes per artifact chunk (512 KiB once base64-encoded)."""


def encode_chunk(data: bytes) -> str:
    """`data` as the wire's base64 text."""
    return base64.b64encode(data).decode("ascii")


def decode_chunk(text: str) -> bytes:
    """The bytes of a base64 chunk; ValueError when it is not base64."""
    try:
        return base64.b64decode(text, validate=True)
    except binascii.Error as exc:
        raise ValueError(f"not base64: {exc}") from None
