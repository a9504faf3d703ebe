"""A `Client` that survives choird restarts: it reconnects on the next call after a loss.

The Unix-socket client leaves reconnecting to its caller (a lost connection fails every later
call). An agent must outlive a choird restart — its commit log is the buffer while choird is
away (§13.1) — so the agent's `ControlPlane` sits on this wrapper: a call that finds the
connection gone drops it, and the next call connects afresh. Nothing is retried here; whether a
verb may be re-sent is the caller's decision (HEARTBEAT may, a non-idempotent tool may not).
`on_connected` listeners hear of every new connection, so what choird keeps only in memory
(the lanes' status) can be told again to a choird that restarted.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Callable
from pathlib import Path
from types import TracebackType
from typing import Final, Self

from choir.transport import CallTimeout, Client, TransportError, connect
from choir.transport.handler import Payload

CONNECT_PATIENCE_S: Final = 30.0
"""How long a connection is attempted while choird is away (a restart takes seconds)."""
CONNECT_RETRY_S: Final = (0.1, 2.0)
"""First and longest pause between connection attempts."""


class ReconnectingClient:
    """Implements `choir.transport.Client` over a fresh connection after each loss."""

    def __init__(
        self,
        target: str | Path,
        *,
        session_id: str,
        lease_token: str,
        call_timeout: float | None = 30.0,
        ca_file: Path | None = None,
        connect_patience_s: float = CONNECT_PATIENCE_S,
    ) -> None:
        self.target = target
        """The socket path or URL `connect` is given."""
        self.session_id = session_id
        self.lease_token = lease_token
        self.call_timeout = call_timeout
        self.ca_file = ca_file
        """The certificate an https choird is verified against."""
        self.connect_patience_s = connect_patience_s
        """How long the first connection is retried before the call fails (0: one attempt)."""
        self._connected_once = False
        self._client: Client | None = None
        self._connecting = asyncio.Lock()
        self._listeners: list[Callable[[], None]] = []

    def on_connected(self, listener: Callable[[], None]) -> Callable[[], None]:
        """Call `listener` each time a connection is established — the first, and every one
        after a loss (a restarted choird knows nothing the agent told the one before); returns
        the unsubscribe callable."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    async def call(
        self,
        verb: str,
        payload: Payload | None = None,
        *,
        session_id: str | None = None,
        lease_token: str | None = None,
    ) -> Payload:
        client = await self._connected()
        try:
            return await client.call(verb, payload, session_id=session_id, lease_token=lease_token)
        except CallTimeout:
            raise  # the channel may be fine; only the call was slow
        except TransportError:
            await self._drop(client)
            raise

    async def stream(
        self,
        verb: str,
        payload: Payload | None = None,
        *,
        session_id: str | None = None,
        lease_token: str | None = None,
    ) -> AsyncGenerator[Payload, None]:
        client = await self._connected()
        items = client.stream(verb, payload, session_id=session_id, lease_token=lease_token)
        async with contextlib.aclosing(items):
            try:
                async for item in items:
                    yield item
            except TransportError:
                await self._drop(client)
                raise

    async def pushes(
        self,
        *,
        session_id: str | None = None,
        lease_token: str | None = None,
        after_seq: int = 0,
    ) -> AsyncGenerator[Payload, None]:
        """The session's pushes; after a TransportError, subscribe again with the last seq."""
        client = await self._connected()
        items = client.pushes(session_id=session_id, lease_token=lease_token, after_seq=after_seq)
        async with contextlib.aclosing(items):
            try:
                async for item in items:
                    yield item
            except TransportError:
                await self._drop(client)
                raise

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def _connected(self) -> Client:
        async with self._connecting:
            if self._client is None:
                self._client = await self._connect_patiently()
                for listener in list(self._listeners):
                    listener()
            return self._client

    async def _connect_patiently(self) -> Client:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (0.0 if self._connected_once else self.connect_patience_s)
        pause, longest = CONNECT_RETRY_S
        while True:
            try:
                client = await connect(
                    self.target,
                    session_id=self.session_id,
                    lease_token=self.lease_token,
                    call_timeout=self.call_timeout,
                    ca_file=self.ca_file,
                )
            except TransportError:
                if loop.time() + pause > deadline:
                    raise
            else:
                self._connected_once = True
                return client
            await asyncio.sleep(pause)
            pause = min(longest, pause * 2)

    async def _drop(self, client: Client) -> None:
        if self._client is client:
            self._client = None
        with contextlib.suppress(TransportError):
            await client.close()
