"""A test handler served on real sockets: the same handler behind the Unix socket and HTTPS.

`served` is parametrized over the transports, so every test that uses it proves the two behave
identically; tests for one transport's own edges use `uds_server` / `https_server` directly.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from choir.protocol.wire.envelope import ErrorCode
from choir.transport import (
    Client,
    HttpServer,
    Payload,
    PushHub,
    Request,
    RpcError,
    Stream,
    UdsServer,
    connect,
    tls,
)
from tests.harness.waits import poll_until


@dataclass
class EchoHandler:
    """Verbs that exercise every path a listener has; records what it saw."""

    seen: list[Request] = field(default_factory=list)
    """Every request handled, in arrival order."""
    closed: dict[str, asyncio.Event] = field(default_factory=dict)
    """request id -> set when that request's stream iterator was closed."""
    started: dict[str, asyncio.Event] = field(default_factory=dict)
    """request id -> set when that request's stream iterator started."""
    finished_calls: list[str] = field(default_factory=list)
    """Verbs of `slow` calls that ran to the end."""

    async def handle(self, request: Request) -> Payload | Stream:
        self.seen.append(request)
        verb, payload = request.verb, request.payload
        if verb == "empty":
            return {}
        if verb == "echo":
            return {
                "payload": payload,
                "verb": verb,
                "request_id": request.request_id,
                "session_id": request.session_id,
                "lease_token": request.lease_token,
                "transport": request.peer.transport,
                "size": request.size,
            }
        if verb == "secure":
            if request.lease_token != f"lease-{request.session_id}":
                raise RpcError(ErrorCode.UNAUTHORIZED, "unknown session or wrong lease token")
            return {"ok": True}
        if verb == "fail":
            raise RpcError(ErrorCode(payload["code"]), payload["message"], payload.get("details"))
        if verb == "boom":
            raise RuntimeError("handler bug")
        if verb == "not_a_dict":
            return [1, 2]  # type: ignore[return-value]
        if verb == "slow":
            await asyncio.sleep(payload["delay"])
            self.finished_calls.append(str(payload.get("n")))
            return {"n": payload.get("n")}
        if verb == "count":
            return Stream(self._count(request.request_id, payload["n"], payload.get("fail_at")))
        if verb == "forever":
            return Stream(self._forever(request.request_id))
        raise RpcError(ErrorCode.NOT_FOUND, f"unknown verb {verb}")

    async def authorize_events(self, session_id: str, lease_token: str) -> bool:
        return lease_token == f"lease-{session_id}"

    async def _count(self, request_id: str, n: int, fail_at: int | None) -> AsyncIterator[Payload]:
        closed = self.closed.setdefault(request_id, asyncio.Event())
        try:
            for i in range(n):
                if i == fail_at:
                    raise RpcError(ErrorCode.UNAVAILABLE, f"source failed at {i}")
                yield {"i": i}
        finally:
            closed.set()

    async def _forever(self, request_id: str) -> AsyncIterator[Payload]:
        closed = self.closed.setdefault(request_id, asyncio.Event())
        started = self.started.setdefault(request_id, asyncio.Event())
        try:
            yield {"i": 0}
            started.set()
            await asyncio.Event().wait()
            yield {"i": 1}
        finally:
            closed.set()

    async def wait_closed(self, verb: str) -> None:
        """Until every stream of `verb` started so far has been closed on the server."""
        ids = [r.request_id for r in self.seen if r.verb == verb]
        await poll_until(lambda: all(i in self.closed and self.closed[i].is_set() for i in ids))


@dataclass
class Served:
    """One listener serving an EchoHandler, and how to reach it."""

    transport: str
    handler: EchoHandler
    hub: PushHub
    target: str
    ca_file: Path | None

    async def client(self, **options: object) -> Client:
        return await connect(self.target, ca_file=self.ca_file, **options)  # type: ignore[arg-type]


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A directory with a short path: Unix socket paths are limited to 107 bytes."""
    root = Path(tempfile.mkdtemp(prefix="ct-", dir="/tmp"))
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def tls_files() -> Iterator[tuple[Path, Path]]:
    """A self-signed certificate and key for localhost, made once per test session."""
    root = Path(tempfile.mkdtemp(prefix="ct-tls-", dir="/tmp"))
    try:
        tls.create_self_signed(root / "cert.pem", root / "key.pem")
        yield root / "cert.pem", root / "key.pem"
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
async def uds_served(short_dir: Path) -> AsyncIterator[Served]:
    handler, hub = EchoHandler(), PushHub()
    path = short_dir / "choird.sock"
    async with UdsServer(path, handler, hub=hub):
        yield Served("uds", handler, hub, str(path), None)


@pytest.fixture
async def https_served(tls_files: tuple[Path, Path]) -> AsyncIterator[Served]:
    handler, hub = EchoHandler(), PushHub()
    context = tls.server_context(*tls_files)
    async with HttpServer(handler, hub=hub, ssl_context=context) as server:
        yield Served("https", handler, hub, server.url, tls_files[0])


@pytest.fixture(params=["uds", "https"])
def served(request: pytest.FixtureRequest) -> Served:
    """The same handler behind each transport in turn."""
    return request.getfixturevalue(f"{request.param}_served")  # type: ignore[no-any-return]
