"""The LLM client's POST over HTTP/1.1: asyncio streams, h11 for the protocol, kept-alive
connections per origin.

The lanes make one request shape, a POST whose answer is read whole. aiohttp served it at a
cost choir-agent felt on every start: its import builds two TLS contexts from the system's CA
store (~0.13 s of CPU on the first model call's path) and it holds ~14 MB resident. h11 is the
sans-I/O HTTP/1.1 state machine httpx is built on (~8 ms to import); the I/O here is a socket
per connection. Proxies are not handled here: the client keeps aiohttp for an environment that
names one (`LlmClient`).
"""

from __future__ import annotations

import asyncio
import ssl
import zlib
from dataclasses import dataclass, field
from typing import Final
from urllib.parse import urlsplit

import h11

READ_SIZE: Final = 65_536
IDLE_PER_ORIGIN: Final = 4
"""Idle connections kept per origin: the lanes' concurrent calls (edge, core jobs, folds)."""


class ConnectTimeout(TimeoutError):
    """No connection within the connect timeout: the host is down or unreachable."""


class Malformed(Exception):
    """The answer broke HTTP/1.1, or its body could not be decoded."""


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    headers: dict[str, str]
    """Lower-cased names; a repeated header keeps its last value."""
    content: bytes


Origin = tuple[str, str, int]


@dataclass(slots=True)
class _Connection:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    protocol: h11.Connection = field(default_factory=lambda: h11.Connection(h11.CLIENT))

    def reusable(self) -> bool:
        """Idle on both sides and not closed by the server while it waited."""
        return (
            self.protocol.our_state is h11.IDLE
            and self.protocol.their_state is h11.IDLE
            and not self.writer.is_closing()
            and not self.reader.at_eof()
        )

    def close(self) -> None:
        self.writer.close()


class Http1Pool:
    """POSTs over kept-alive HTTP/1.1 connections; `aclose` closes the idle ones."""

    def __init__(self) -> None:
        self._idle: dict[Origin, list[_Connection]] = {}

    async def post(
        self,
        url: str,
        body: bytes,
        headers: dict[str, str],
        *,
        tls: ssl.SSLContext | None,
        connect_timeout_s: float,
    ) -> Answer:
        """POST `body` to `url` (http, or https verified with `tls`) and read the whole answer.

        ConnectTimeout when no connection is made in time, OSError when it fails or breaks
        before the answer, Malformed for an answer that is not HTTP/1.1 or not decodable."""
        parts = urlsplit(url)
        scheme, host = parts.scheme, parts.hostname or ""
        port = parts.port or (443 if scheme == "https" else 80)
        origin = (scheme, host, port)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        connection = self._take(origin) or await _connect(
            host, port, tls if scheme == "https" else None, connect_timeout_s
        )
        try:
            answer = await _exchange(connection, _request(parts.netloc, target, headers, body))
        except BaseException:
            connection.close()
            raise
        protocol = connection.protocol
        if protocol.our_state is h11.DONE and protocol.their_state is h11.DONE:
            protocol.start_next_cycle()
            self._keep(origin, connection)
        else:
            connection.close()
        return answer

    async def aclose(self) -> None:
        idle, self._idle = self._idle, {}
        for connections in idle.values():
            for connection in connections:
                connection.close()

    def _take(self, origin: Origin) -> _Connection | None:
        connections = self._idle.get(origin, [])
        while connections:
            connection = connections.pop()
            if connection.reusable():
                return connection
            connection.close()
        return None

    def _keep(self, origin: Origin, connection: _Connection) -> None:
        connections = self._idle.setdefault(origin, [])
        if len(connections) < IDLE_PER_ORIGIN:
            connections.append(connection)
        else:
            connection.close()


async def _connect(
    host: str, port: int, tls: ssl.SSLContext | None, timeout_s: float
) -> _Connection:
    try:
        async with asyncio.timeout(timeout_s):
            reader, writer = await asyncio.open_connection(
                host, port, ssl=tls, server_hostname=host if tls is not None else None
            )
    except TimeoutError:
        raise ConnectTimeout(f"no connection to {host}:{port} within {timeout_s:g} s") from None
    return _Connection(reader, writer)


def _request(netloc: str, target: str, headers: dict[str, str], body: bytes) -> list[h11.Event]:
    fields = [
        ("Host", netloc),
        # what aiohttp asked for: providers compress large answers
        ("Accept-Encoding", "gzip, deflate"),
        *headers.items(),
        ("Content-Length", str(len(body))),
    ]
    return [
        h11.Request(method="POST", target=target, headers=fields),
        h11.Data(data=body),
        h11.EndOfMessage(),
    ]


async def _exchange(connection: _Connection, request: list[h11.Event]) -> Answer:
    protocol = connection.protocol
    try:
        connection.writer.write(b"".join(protocol.send(event) or b"" for event in request))
        await connection.writer.drain()
        status, headers, chunks = 0, {}, []
        while True:
            event = protocol.next_event()
            if event is h11.NEED_DATA:
                protocol.receive_data(await connection.reader.read(READ_SIZE))
            elif isinstance(event, h11.Response):
                status = event.status_code
                headers = {name.decode().lower(): value.decode() for name, value in event.headers}
            elif isinstance(event, h11.Data):
                chunks.append(bytes(event.data))
            elif isinstance(event, h11.EndOfMessage):
                break
            elif isinstance(event, h11.ConnectionClosed):
                raise ConnectionResetError("the server closed the connection before answering")
    except h11.RemoteProtocolError as exc:
        if not status:  # nothing of an answer yet: the connection broke
            raise ConnectionResetError(f"the connection broke: {exc}") from None
        raise Malformed(f"the answer broke HTTP/1.1: {exc}") from None
    return Answer(status, headers, _decoded(headers.get("content-encoding"), b"".join(chunks)))


def _decoded(encoding: str | None, content: bytes) -> bytes:
    if encoding is None or encoding.strip().lower() in ("", "identity"):
        return content
    try:
        if encoding.strip().lower() == "gzip":
            return zlib.decompress(content, wbits=zlib.MAX_WBITS | 16)
        if encoding.strip().lower() == "deflate":
            return zlib.decompress(content)
    except zlib.error:
        raise Malformed(f"the body is not valid {encoding}") from None
    raise Malformed(f"the body has an unknown Content-Encoding: {encoding}")
