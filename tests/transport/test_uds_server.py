"""The Unix-socket listener's own edges: the socket file, and raw bytes no client would send."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import stat
import struct
import sys
from pathlib import Path

import orjson
import pytest

from choir.errors import ConflictError
from choir.protocol.wire.envelope import ErrorCode
from choir.transport import Limits, RpcError, TransportError, UdsClient, UdsServer, connect
from tests.harness.waits import poll_until
from tests.transport.conftest import EchoHandler, Served


class RawConnection:
    """Bytes in, frames out: a client that can send what a real client never would."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, path: str | Path) -> RawConnection:
        return cls(*await asyncio.open_unix_connection(str(path)))

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def send_json(self, value: object) -> None:
        body = orjson.dumps(value)
        await self.send(struct.pack(">I", len(body)) + body)

    async def receive(self) -> dict[str, object]:
        async with asyncio.timeout(5):
            (size,) = struct.unpack(">I", await self.reader.readexactly(4))
            return orjson.loads(await self.reader.readexactly(size))  # type: ignore[no-any-return]

    async def closed_by_server(self) -> bool:
        async with asyncio.timeout(5):
            return await self.reader.read() == b""

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(ConnectionError):
            await self.writer.wait_closed()

    async def __aenter__(self) -> RawConnection:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def request(request_id: str = "r1", verb: str = "empty", **fields: object) -> dict[str, object]:
    """A well-formed request frame, with `fields` overriding or adding keys."""
    return {
        "t": "req",
        "request_id": request_id,
        "verb": verb,
        "session_id": "",
        "lease_token": "",
        "payload": {},
        **fields,
    }


async def test_socket_file_is_mode_0600(uds_served: Served) -> None:
    mode = os.stat(uds_served.target).st_mode
    assert stat.S_ISSOCK(mode)
    assert stat.S_IMODE(mode) == 0o600
    assert [p.name for p in Path(uds_served.target).parent.iterdir()] == ["choird.sock"]


async def test_a_second_server_on_a_live_socket_is_refused(uds_served: Served) -> None:
    with pytest.raises(ConflictError) as caught:
        await UdsServer(Path(uds_served.target), EchoHandler()).start()
    assert str(caught.value) == f"choird is already running (socket {uds_served.target} answers)"
    async with await uds_served.client() as client:
        assert await client.call("empty") == {}


async def test_a_stale_socket_file_is_replaced(short_dir: Path) -> None:
    path = short_dir / "choird.sock"
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(path))
    stale.close()
    async with UdsServer(path, EchoHandler()), await connect(path) as client:
        assert await client.call("empty") == {}


async def test_a_file_that_is_not_a_socket_is_left_alone(short_dir: Path) -> None:
    path = short_dir / "choird.sock"
    path.write_text("precious")
    with pytest.raises(ConflictError, match="is not a socket"):
        await UdsServer(path, EchoHandler()).start()
    assert path.read_text() == "precious"


async def test_closing_removes_the_socket_and_clients_see_it(short_dir: Path) -> None:
    path = short_dir / "choird.sock"
    async with UdsServer(path, EchoHandler()):
        client = await connect(path)
    assert not path.exists()
    with pytest.raises(TransportError, match="lost"):
        await client.call("empty")
    with pytest.raises(TransportError, match="cannot connect"):
        await connect(path)


async def test_close_lets_a_running_call_finish(short_dir: Path) -> None:
    handler = EchoHandler()
    path = short_dir / "choird.sock"
    server = UdsServer(path, handler)
    await server.start()
    async with await connect(path) as client:
        call = asyncio.create_task(client.call("slow", {"delay": 0.2, "n": 7}))
        await poll_until(lambda: bool(handler.seen))
        await server.close()
        assert await call == {"n": 7}


async def test_peer_credentials_reach_the_handler(uds_served: Served) -> None:
    async with await uds_served.client() as client:
        await client.call("empty")
    peer = uds_served.handler.seen[0].peer
    assert (peer.transport, peer.pid, peer.uid) == ("uds", os.getpid(), os.getuid())


async def test_a_too_long_socket_path_is_a_clear_error(short_dir: Path) -> None:
    path = short_dir / ("x" * 120) / "choird.sock"
    with pytest.raises(Exception, match="longer than 107 bytes"):
        await UdsServer(path, EchoHandler()).start()


@pytest.mark.parametrize(
    ("frame", "message"),
    [
        (b"not json", "not valid JSON"),
        (b"[1, 2]", "not a JSON object"),
        (b'{"t": 5}', "not a JSON object with a string 't'"),
        (b'{"t": "bogus"}', "unknown frame type 'bogus'"),
        (b'{"t": "req", "verb": "x"}', "request_id is missing"),
    ],
)
async def test_invalid_frames_get_an_error_and_the_connection_stays(
    uds_served: Served, frame: bytes, message: str
) -> None:
    async with await RawConnection.open(uds_served.target) as raw:
        await raw.send(struct.pack(">I", len(frame)) + frame)
        answer = await raw.receive()
        assert answer["t"] == "err"
        assert message in str(answer["error"])
        await raw.send_json(request())
        assert await raw.receive() == {"t": "res", "request_id": "r1", "ok": True, "payload": {}}


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"payload": [1]}, "payload must be a JSON object"),
        ({"verb": ""}, "verb is missing or empty"),
        ({"session_id": 3}, "session_id must be a string"),
        ({"stream": "yes"}, "stream must be true or false"),
        ({"extra": 1}, "unknown request fields: extra"),
    ],
)
async def test_a_malformed_request_is_answered_on_its_id(
    uds_served: Served, fields: dict[str, object], message: str
) -> None:
    async with await RawConnection.open(uds_served.target) as raw:
        await raw.send_json({**request("bad"), **fields})
        answer = await raw.receive()
        assert answer == {
            "t": "res",
            "request_id": "bad",
            "ok": False,
            "error": {"code": "invalid_request", "message": message},
        }


async def test_an_oversized_frame_is_skipped_unread_and_the_connection_survives(
    short_dir: Path,
) -> None:
    path = short_dir / "choird.sock"
    async with (
        UdsServer(path, EchoHandler(), limits=Limits(max_frame=100)),
        await RawConnection.open(path) as raw,
    ):
        body = orjson.dumps(request(payload={"x": "y" * 500}))
        await raw.send(struct.pack(">I", len(body)) + body[:50])
        answer = await raw.receive()
        assert answer["t"] == "err"
        assert answer["size"] == len(body)
        assert answer["error"] == {
            "code": "payload_too_large",
            "message": f"frame of {len(body)} bytes exceeds the 100-byte limit; "
            "send large data as a file, not in one call",
        }
        await raw.send(body[50:])
        await raw.send_json(request("r2"))
        assert (await raw.receive())["request_id"] == "r2"


async def test_a_garbage_length_prefix_closes_only_that_connection(uds_served: Served) -> None:
    async with await RawConnection.open(uds_served.target) as raw:
        await raw.send(b"\xff\xff\xff\xffgarbage")
        assert (await raw.receive())["t"] == "err"
        assert await raw.closed_by_server()
        async with await uds_served.client() as client:
            assert await client.call("empty") == {}


async def test_a_half_sent_frame_times_out_but_an_idle_connection_does_not(
    short_dir: Path,
) -> None:
    path = short_dir / "choird.sock"
    async with (
        UdsServer(path, EchoHandler(), limits=Limits(frame_timeout=0.2)),
        await RawConnection.open(path) as idle,
        await RawConnection.open(path) as stuck,
    ):
        await stuck.send(b"\x00\x00\x00\x10{")
        error = await stuck.receive()
        assert "did not finish within 0.2 s" in str(error["error"])
        assert await stuck.closed_by_server()
        await idle.send_json(request())
        assert (await idle.receive())["ok"] is True


async def test_too_many_requests_in_flight_are_rate_limited(short_dir: Path) -> None:
    path = short_dir / "choird.sock"
    async with (
        UdsServer(path, EchoHandler(), limits=Limits(max_inflight=2)),
        await connect(path) as client,
    ):
        slow = [client.call("slow", {"delay": 0.3, "n": n}) for n in range(2)]
        results = await asyncio.gather(*slow, client.call("empty"), return_exceptions=True)
    assert results[:2] == [{"n": 0}, {"n": 1}]
    assert isinstance(results[2], RpcError)
    assert results[2].code is ErrorCode.RATE_LIMITED


async def test_a_duplicate_request_id_in_flight_is_refused(uds_served: Served) -> None:
    async with await RawConnection.open(uds_served.target) as raw:
        slow = request("dup", "slow", payload={"delay": 0.2, "n": 1})
        await raw.send_json(slow)
        await raw.send_json(slow)
        first = await raw.receive()
        assert first["t"] == "err"
        assert "already in flight" in str(first["error"])
        assert (await raw.receive())["payload"] == {"n": 1}


async def test_cancel_for_an_unknown_id_is_ignored(uds_served: Served) -> None:
    async with await RawConnection.open(uds_served.target) as raw:
        await raw.send_json({"t": "cancel", "request_id": "nobody"})
        await raw.send_json(request())
        assert (await raw.receive())["request_id"] == "r1"


async def test_the_client_reports_a_server_that_is_not_there(short_dir: Path) -> None:
    with pytest.raises(TransportError) as caught:
        await UdsClient.connect(short_dir / "missing.sock")
    assert str(caught.value) == (
        f"cannot connect to socket {short_dir / 'missing.sock'}: no such file or directory"
    )


async def test_connections_beyond_the_listener_cap_are_closed_at_once(short_dir: Path) -> None:
    path = short_dir / "choird.sock"
    limits = Limits(max_connections=3, max_connections_per_peer=None)
    async with UdsServer(path, EchoHandler(), limits=limits) as server:
        kept = [await RawConnection.open(path) for _ in range(3)]
        await poll_until(lambda: len(server.connections) == 3)
        async with await RawConnection.open(path) as extra:
            assert await extra.closed_by_server()
        for raw in kept:
            await raw.send_json(request())
            assert (await raw.receive())["ok"] is True
        await kept.pop().close()
        await poll_until(lambda: len(server.connections) == 2)
        async with await RawConnection.open(path) as again:
            await again.send_json(request())
            assert (await again.receive())["ok"] is True
        for raw in kept:
            await raw.close()


async def test_one_process_is_held_to_the_per_peer_cap_and_others_still_get_in(
    short_dir: Path,
) -> None:
    path = short_dir / "choird.sock"
    limits = Limits(max_connections=10, max_connections_per_peer=2)
    async with UdsServer(path, EchoHandler(), limits=limits) as server:
        kept = [await RawConnection.open(path) for _ in range(2)]
        await poll_until(lambda: len(server.connections) == 2)
        async with await RawConnection.open(path) as extra:
            assert await extra.closed_by_server()
        other = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            _CALL_FROM_ANOTHER_PROCESS,
            str(path),
            stdout=asyncio.subprocess.PIPE,
        )
        out, _ = await asyncio.wait_for(other.communicate(), 20)
        assert orjson.loads(out)["ok"] is True
        for raw in kept:
            await raw.close()


_CALL_FROM_ANOTHER_PROCESS = """
import socket, struct, sys
import orjson
with socket.socket(socket.AF_UNIX) as sock:
    sock.settimeout(10)
    sock.connect(sys.argv[1])
    body = orjson.dumps({"t": "req", "request_id": "r", "verb": "empty", "payload": {}})
    sock.sendall(struct.pack(">I", len(body)) + body)
    (size,) = struct.unpack(">I", sock.recv(4, socket.MSG_WAITALL))
    sys.stdout.write(sock.recv(size, socket.MSG_WAITALL).decode())
"""


async def test_a_client_that_never_reads_its_answers_stops_being_read(short_dir: Path) -> None:
    """Requests sent without reading: once the answers back up, the listener reads no more, so
    what it buffers for that client stays bounded; reading the answers lets it go on."""
    path = short_dir / "choird.sock"
    handler = EchoHandler()
    async with UdsServer(path, handler):
        with socket.socket(socket.AF_UNIX) as sock:
            sock.connect(str(path))
            sock.setblocking(False)
            body = orjson.dumps(request(verb="empty"))
            burst = (struct.pack(">I", len(body)) + body) * 64
            sent = 0
            while sent < 16 << 20:
                try:
                    sent += sock.send(burst)
                except BlockingIOError:
                    break
                await asyncio.sleep(0)
            assert sent < 4 << 20, f"the listener kept reading: {sent} bytes taken"
            seen = len(handler.seen)
            await asyncio.sleep(0.2)
            assert len(handler.seen) == seen  # not read while the answers wait
