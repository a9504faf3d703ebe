"""Reading history back over the operator socket in pages bounded by bytes (`protocol.artifacts`).

`session.events` answers with at most 512 KiB of events, so a reader that wants a range reads on
from each answer's `next_rev`; an event too large for one frame is stored as a preview plus an
artifact that `session.artifact` hands out in chunks. Both clients (choirctl through
`ChoirClient`, the console through its bridge) read through these functions: they take the
client's `call(verb, **payload)`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable
from typing import Any

import orjson

from choir.errors import ChoirError, NotFoundError
from choir.protocol.wire.chunks import decode_chunk

Call = Callable[..., Awaitable[dict[str, Any]]]
"""An operator call: `await call(verb, **payload)`."""


async def event_range(
    call: Call, session_id: str, from_rev: int, limit: int
) -> list[dict[str, Any]]:
    """The events from `from_rev` on, up to `limit` of them, however many answers that takes."""
    events: list[dict[str, Any]] = []
    rev = from_rev
    while len(events) < limit:
        page = await call(
            "session.events", session_id=session_id, from_rev=rev, limit=limit - len(events)
        )
        if not page["events"]:
            break
        events.extend(page["events"])
        rev = int(page["next_rev"])
    return events


async def whole_event(call: Call, session_id: str, rev: int) -> dict[str, Any]:
    """The event at `rev` of `session_id` in its complete JSON form."""
    page = await call("session.events", session_id=session_id, from_rev=rev, limit=1)
    events = page["events"]
    if not events or events[0]["rev"] != rev:
        raise NotFoundError(f"session {session_id} has no event at rev {rev}")
    artifact = events[0].get("artifact")
    if artifact is None:
        payload: dict[str, Any] = events[0]["payload"]
        return payload
    content = await read_artifact(call, session_id, rev)
    if hashlib.sha256(content).hexdigest() != artifact["sha256"]:
        raise ChoirError(f"the artifact of rev {rev} does not match its digest")
    whole: dict[str, Any] = orjson.loads(content)
    return whole


async def read_artifact(call: Call, session_id: str, rev: int) -> bytes:
    """Every byte of the artifact behind the preview at `rev`."""
    content = bytearray()
    offset: int | None = 0
    while offset is not None:
        chunk = await call("session.artifact", session_id=session_id, rev=rev, offset=offset)
        content += decode_chunk(str(chunk["data"]))
        offset = chunk["next_offset"]
    return bytes(content)


__all__ = ["Call", "event_range", "read_artifact", "whole_event"]
