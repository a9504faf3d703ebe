"""The browser's way out: a forward HTTP proxy on loopback that refuses private addresses.

Chromium runs on the host, outside the agent's container and its egress filter; left alone, a
page (or a redirect, which Playwright's request routing never sees) could reach this host's
services, the LAN or a cloud's metadata endpoint. So every request Chromium makes goes through
this proxy (`--proxy-server`, loopback included): it resolves the name itself, refuses when any
answer is not a public address (403, the reason in the body), and connects to the address it
checked — a name that changes its answer between check and use gains nothing. Plain HTTP is
forwarded one request per connection (`Connection: close`); HTTPS and WebSockets go through
CONNECT tunnels. Off when `browser.allow_private_networks` (tests on loopback).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Callable
from typing import Final
from urllib.parse import urlsplit

from choir.daemon.workers.browser.rules import private_address
from choir.logs import get_logger

log = get_logger("choird.browser.egress")

HEAD_LIMIT: Final = 64 * 1024
"""The most a request line plus headers may take."""
CONNECT_TIMEOUT_S: Final = 10.0
CHUNK: Final = 64 * 1024
HOP_HEADERS: Final = frozenset(
    {"proxy-connection", "connection", "keep-alive", "proxy-authorization"}
)

Allowed = Callable[[str], bool]
"""Whether an IP address may be reached."""


def public_only(address: str) -> bool:
    return not private_address(address)


class Refused(Exception):
    pass


class EgressProxy:
    """`async with EgressProxy() as proxy:` serves on `proxy.url` until the block ends."""

    def __init__(self, allowed: Allowed = public_only) -> None:
        self._allowed = allowed
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.port = 0
        self.refusals = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def __aenter__(self) -> EgressProxy:
        self._server = await asyncio.start_server(self._accepted, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await self._server.wait_closed()

    def _accepted(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.create_task(self._serve(reader, writer))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            if len(head) > HEAD_LIMIT:
                raise Refused("request head too large")
            line, *headers = head.decode("latin-1").split("\r\n")
            method, target, _ = line.split(" ", 2)
            if method == "CONNECT":
                host, _, port = target.rpartition(":")
                upstream = await self._connect(host.strip("[]"), int(port))
                writer.write(b"HTTP/1.1 200 Connection Established\r\n\r\n")
                await writer.drain()
            else:
                upstream = await self._forward(method, target, headers)
            await _pipe(reader, writer, *upstream)
        except Refused as refused:
            self.refusals += 1
            body = f"choir: {refused}".encode()
            writer.write(
                b"HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nConnection: close\r\n"
                + f"Content-Length: {len(body)}\r\n\r\n".encode()
                + body
            )
        except (OSError, ValueError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            writer.write(
                b"HTTP/1.1 502 Bad Gateway\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
            )
        finally:
            with contextlib.suppress(Exception):
                await writer.drain()
            writer.close()

    async def _forward(
        self, method: str, target: str, headers: list[str]
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        parts = urlsplit(target)
        if parts.scheme != "http" or not parts.hostname:
            raise Refused(f"only http URLs are forwarded, not {target!r}")
        reader, writer = await self._connect(parts.hostname, parts.port or 80)
        path = parts.path or "/"
        if parts.query:
            path += "?" + parts.query
        kept = [h for h in headers if h and h.split(":", 1)[0].strip().lower() not in HOP_HEADERS]
        writer.write(
            "\r\n".join([f"{method} {path} HTTP/1.1", *kept, "Connection: close", "", ""]).encode(
                "latin-1"
            )
        )
        return reader, writer

    async def _connect(
        self, host: str, port: int
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        loop = asyncio.get_running_loop()
        try:
            infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as error:
            raise Refused(f"cannot resolve {host}: {error}") from None
        addresses = [str(info[4][0]) for info in infos]
        if not addresses or not all(self._allowed(address) for address in addresses):
            log.info("browser: refused a private address", fields={"host": host})
            raise Refused(
                f"{host} resolves to a private or loopback address: the browser may not "
                "reach it (browser.allow_private_networks in config.json)"
            )
        async with asyncio.timeout(CONNECT_TIMEOUT_S):
            return await asyncio.open_connection(addresses[0], port)


async def _pipe(
    client_reader: asyncio.StreamReader,
    client_writer: asyncio.StreamWriter,
    upstream_reader: asyncio.StreamReader,
    upstream_writer: asyncio.StreamWriter,
) -> None:
    """Copy both ways until either side closes."""

    async def copy(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError):
            while data := await source.read(CHUNK):
                sink.write(data)
                await sink.drain()

    up = asyncio.create_task(copy(client_reader, upstream_writer))
    down = asyncio.create_task(copy(upstream_reader, client_writer))
    try:  # one side closed: a plain request's answer is complete, or a tunnel ended
        await asyncio.wait({up, down}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (up, down):
            task.cancel()
        await asyncio.gather(up, down, return_exceptions=True)
        upstream_writer.close()
