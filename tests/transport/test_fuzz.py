"""Random bytes, random JSON and truncated frames never take a listener down.

Each example opens a fresh connection to the Unix socket or the HTTP port, throws junk at it and
hangs up; then a long-lived client must still get a normal answer from both listeners. Bounded
to a few hundred examples (about ten seconds).
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

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
)
from choir.transport.framing import encode_frame


class QuickHandler:
    """Answers at once whatever it is sent, so junk can never tie the listener up."""

    async def handle(self, request: Request) -> Payload | Stream:
        if request.verb == "empty":
            return {}
        if request.verb == "echo":
            return request.payload
        if request.verb == "stream":
            return Stream(self._three())
        raise RpcError(ErrorCode.NOT_FOUND, "unknown verb")

    async def authorize_events(self, session_id: str, lease_token: str) -> bool:
        return lease_token == "ok"

    async def _three(self) -> AsyncIterator[Payload]:
        for i in range(3):
            yield {"i": i}


@dataclass
class Listeners:
    socket_path: Path
    http_port: int
    socket_client: Client
    http_client: Client

    async def still_answer(self) -> None:
        async with asyncio.timeout(5):
            assert await self.socket_client.call("echo", {"n": 1}) == {"n": 1}
            assert await self.http_client.call("echo", {"n": 2}) == {"n": 2}


@pytest.fixture
async def listeners(short_dir: Path) -> AsyncIterator[Listeners]:
    handler, hub = QuickHandler(), PushHub()
    path = short_dir / "choird.sock"
    async with (
        UdsServer(path, handler, hub=hub),
        HttpServer(handler, hub=hub) as http,
        await connect(path) as socket_client,
        await connect(http.url) as http_client,
    ):
        yield Listeners(path, http.port, socket_client, http_client)


integers = st.integers(-(2**63), 2**63 - 1)
json_values = st.recursive(
    st.none() | st.booleans() | integers | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
frame_like = st.fixed_dictionaries(
    {"t": st.sampled_from(["req", "sub", "cancel", "res", "push", "x"])},
    optional={
        "request_id": st.one_of(st.text(max_size=8), json_values),
        "verb": st.sampled_from(["empty", "echo", "stream", "nope", ""]) | json_values,
        "session_id": st.text(max_size=8) | json_values,
        "lease_token": st.sampled_from(["ok", "bad"]) | json_values,
        "payload": json_values,
        "stream": st.booleans() | json_values,
        "after_seq": integers | json_values,
    },
)


TRICKY_BODIES = [
    b'{"t":"req","request_id":"r","verb":"echo","payload":{"n":1e999}}',
    b'{"t":"req","request_id":"r","verb":"echo","payload":{"n":123456789012345678901234567890}}',
    b'{"t":"req","request_id":"r","verb":"echo","payload":{"s":"\\ud800"}}',
    b'{"t":"req","request_id":"r","request_id":"r2","verb":"echo"}',
    b"[" * 5000 + b"]" * 5000,
    b'{"t":"sub","request_id":"r","session_id":"s","lease_token":"ok","after_seq":1e3}',
    b'{"t":"cancel","request_id":["r"]}',
    b"\xef\xbb\xbf{}",
    b"",
]


@st.composite
def socket_junk(draw: st.DrawFn) -> bytes:
    """Bytes for the socket: raw noise, framed random JSON, frame-shaped objects, or a cut frame."""
    kind = draw(st.sampled_from(["noise", "json", "tricky", "frames", "truncated", "huge_prefix"]))
    if kind == "noise":
        return draw(st.binary(max_size=200))
    if kind in ("json", "tricky"):
        values = (
            st.sampled_from(TRICKY_BODIES) if kind == "tricky" else json_values.map(orjson.dumps)
        )
        bodies = draw(st.lists(values, min_size=1, max_size=3))
        return b"".join(struct.pack(">I", len(body)) + body for body in bodies)
    frames = b"".join(encode_frame(f) for f in draw(st.lists(frame_like, min_size=1, max_size=4)))
    if kind == "frames":
        return frames
    if kind == "truncated":
        return frames[: draw(st.integers(0, len(frames) - 1))]
    return struct.pack(">I", draw(st.integers(1 << 20, (1 << 32) - 1))) + draw(
        st.binary(max_size=50)
    )


http_junk = st.one_of(
    st.binary(max_size=300),
    st.builds(
        lambda verb, body, auth: (
            (
                f"POST /rpc/{verb} HTTP/1.1\r\nHost: x\r\nAuthorization: {auth}\r\n"
                f"Content-Length: {len(body)}\r\n\r\n"
            ).encode()
            + body
        ),
        st.sampled_from(["empty", "echo", "stream", "%00", "a/b", "x" * 300]),
        st.binary(max_size=200) | json_values.map(orjson.dumps),
        st.sampled_from(["Bearer ok", "Bearer", "Basic x", "", "Bearer \x7f"]),
    ),
    st.builds(
        lambda session, last: (
            f"GET /events?session_id={session} HTTP/1.1\r\nHost: x\r\n"
            f"Authorization: Bearer ok\r\nLast-Event-ID: {last}\r\n\r\n"
        ).encode(),
        st.sampled_from(["s", "", "%ff", "s" * 300]),
        st.sampled_from(["", "0", "7", "-1", "abc", "99999999999999999999"]),
    ),
)


async def throw(
    reader_writer: tuple[asyncio.StreamReader, asyncio.StreamWriter], junk: bytes
) -> None:
    reader, writer = reader_writer
    try:
        writer.write(junk)
        await writer.drain()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(0.01):
                await reader.read(65536)
    except ConnectionError:
        pass
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()


@settings(
    max_examples=400,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(junk=socket_junk())
async def test_socket_junk_never_stops_the_listeners(listeners: Listeners, junk: bytes) -> None:
    await throw(await asyncio.open_unix_connection(str(listeners.socket_path)), junk)
    await listeners.still_answer()


@settings(
    max_examples=250,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(junk=http_junk)
async def test_http_junk_never_stops_the_listeners(listeners: Listeners, junk: bytes) -> None:
    await throw(await asyncio.open_connection("127.0.0.1", listeners.http_port), junk)
    await listeners.still_answer()
