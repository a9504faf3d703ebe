"""Picking a transport once, at startup (§12.2): `connect(target)` returns a `Client`.

Callers (choir-agent, choirctl, the TUI) hold a `Client` and never ask which transport is
behind it; a path or `unix://` URL means the Unix socket, `http://` / `https://` the HTTP
transport.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from pathlib import Path
from types import TracebackType
from typing import Protocol, Self

from choir.errors import UsageError
from choir.transport.handler import Payload
from choir.transport.limits import DEFAULT_MAX_FRAME
from choir.transport.uds.client import UdsClient


class Client(Protocol):
    """What every transport's client offers."""

    session_id: str
    """Sent with every call unless the call names another."""
    lease_token: str
    """Sent with every call unless the call names another; never logged."""

    async def call(
        self,
        verb: str,
        payload: Payload | None = None,
        *,
        session_id: str | None = None,
        lease_token: str | None = None,
    ) -> Payload:
        """The answer payload; RpcError when refused, TransportError when the channel fails."""
        ...

    def stream(
        self,
        verb: str,
        payload: Payload | None = None,
        *,
        session_id: str | None = None,
        lease_token: str | None = None,
    ) -> AsyncGenerator[Payload, None]:
        """The verb's items as they come; close it to stop the server's side."""
        ...

    def pushes(
        self,
        *,
        session_id: str | None = None,
        lease_token: str | None = None,
        after_seq: int = 0,
    ) -> AsyncGenerator[Payload, None]:
        """The session's pushes (PushEnvelope dicts) after `after_seq`."""
        ...

    async def close(self) -> None: ...

    async def __aenter__(self) -> Self: ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...


async def connect(
    target: str | Path,
    *,
    session_id: str = "",
    lease_token: str = "",
    call_timeout: float | None = 30.0,
    ca_file: Path | None = None,
    max_frame: int = DEFAULT_MAX_FRAME,
) -> Client:
    """A client for `target`: a socket path, `unix:///path`, `http://host:port` or `https://…`.

    The Unix socket connects now (TransportError if nothing listens); HTTP connects on the
    first call. `ca_file` is the certificate an https server is verified against.
    """
    text = str(target)
    scheme, _, rest = text.partition("://") if "://" in text else ("", "", text)
    if scheme in ("", "unix"):
        return await UdsClient.connect(
            rest,
            session_id=session_id,
            lease_token=lease_token,
            call_timeout=call_timeout,
            max_frame=max_frame,
        )
    if scheme in ("http", "https"):
        from choir.transport.http.client import HttpClient  # heavy: httpx, cryptography

        return HttpClient(
            text,
            session_id=session_id,
            lease_token=lease_token,
            call_timeout=call_timeout,
            ca_file=ca_file,
            max_frame=max_frame,
        )
    raise UsageError(
        f"unknown transport {scheme!r} in {text}; use a socket path, unix://, http:// or https://"
    )
