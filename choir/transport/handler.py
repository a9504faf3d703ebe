"""What a listener hands to business logic, and what business logic hands back.

Both listeners (Unix socket and HTTP) decode their wire format into the same `Request` and call
the same `Handler`; the handler never learns which transport carried the call except through
`Request.peer`, which is for logging and peer checks, never for branching protocol logic (§12.2).
Verbs are plain strings: the agent socket speaks the 8 agent verbs, the operator socket speaks
its own, and checking the verb is the handler's job.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

Payload = dict[str, Any]
"""A JSON object: a verb's request or response payload."""


@dataclass(frozen=True, slots=True)
class Peer:
    """Who is on the other end, as far as the transport can tell."""

    transport: Literal["uds", "http"]
    """The listener that received the call."""
    address: str
    """The socket path (UDS) or `host:port` of the client (HTTP)."""
    pid: int | None = None
    """The client's process id from SO_PEERCRED (UDS only)."""
    uid: int | None = None
    """The client's user id from SO_PEERCRED (UDS only)."""
    gid: int | None = None
    """The client's group id from SO_PEERCRED (UDS only)."""


@dataclass(frozen=True, slots=True)
class Request:
    """One decoded call: the §12.5 envelope plus the peer it came from."""

    verb: str
    """What is asked; any string, validated by the handler."""
    request_id: str
    """Unique per call; echoed in the answer."""
    session_id: str
    """The caller's session; empty on the operator socket."""
    lease_token: str = field(repr=False)
    """The session lease as sent (Bearer token over HTTP); the handler checks it. Never logged."""
    payload: Payload
    """The verb's payload, parsed JSON but not validated."""
    peer: Peer
    """Where the call came from."""
    stream: bool = False
    """The client asked for a stream (`Client.stream`); a plain answer is sent as one item."""
    size: int | None = None
    """Bytes of the frame body (socket) or request body (HTTP) that carried the call, when the
    listener knows them. The payload arrived within them, so a handler capping payloads need not
    encode a payload again to measure one that arrived small enough."""


@dataclass(frozen=True, slots=True)
class Stream:
    """A streamed answer: each item is sent as it comes until the iterator ends.

    When the client cancels or goes away, the listener closes the iterator (an async generator's
    `finally` blocks run), so a subscription never outlives its reader.
    """

    items: AsyncIterator[Payload]
    """The items to send, in order."""

    async def aclose(self) -> None:
        """Close the iterator if it can be closed (async generators can)."""
        close = getattr(self.items, "aclose", None)
        if close is not None:
            result = close()
            if inspect.isawaitable(result):
                await result


class Handler(Protocol):
    """Business logic behind a listener.

    `handle` returns a payload or a `Stream`, or raises `RpcError` to refuse; any other
    exception is logged and answered `internal`. `authorize_events` decides whether a push
    subscription (socket `sub` frame or HTTP `GET /events`) may attach to a session.
    """

    async def handle(self, request: Request) -> Payload | Stream: ...

    async def authorize_events(self, session_id: str, lease_token: str) -> bool: ...
