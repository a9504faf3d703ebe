"""Floods aimed at choird's Unix sockets, the way a tool inside an agent's container could send
them. Every flood is bounded in count and time.

Connection floods run as separate processes (`python -m tests.security.flood TARGET COUNT`, the
target a socket path or `tcp:HOST:PORT`), as
an exec'd tool would: they connect up to COUNT times within a few seconds, wait for choird to
accept or refuse, print one JSON line `{"connected": n, "held": h}` (h: connections choird
kept open), then hold everything until their stdin closes.
"""

from __future__ import annotations

import asyncio
import errno
import json
import os
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import orjson

from choir.transport.framing import HEADER, encode_frame

REPO = Path(__file__).resolve().parents[2]
CONNECT_WITHIN_S = 8.0
"""A connection flood stops trying after this long, however many it made."""
SETTLE_S = 1.0
"""Time choird gets to accept or refuse the connections before they are counted."""


def open_connections(target: str, count: int) -> list[socket.socket]:
    """Up to `count` connections to `target` (a Unix socket path, or `tcp:HOST:PORT`), made
    within CONNECT_WITHIN_S."""
    if target.startswith("tcp:"):
        return _tcp_connections(target, count)
    made: list[socket.socket] = []
    deadline = time.monotonic() + CONNECT_WITHIN_S
    while len(made) < count and time.monotonic() < deadline:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.setblocking(False)
        try:
            sock.connect(target)
        except OSError as error:
            sock.close()
            if error.errno not in (errno.EAGAIN, errno.ECONNREFUSED):
                raise
            time.sleep(0.005)  # the listen backlog is full: choird is behind (or stuck)
            continue
        made.append(sock)
    return made


def _tcp_connections(target: str, count: int) -> list[socket.socket]:
    _, host, port = target.split(":")
    made: list[socket.socket] = []
    deadline = time.monotonic() + CONNECT_WITHIN_S
    while len(made) < count and time.monotonic() < deadline:
        try:
            sock = socket.create_connection((host, int(port)), timeout=0.5)
        except OSError:
            continue  # the backlog is full: choird is behind (or stuck)
        sock.setblocking(False)
        made.append(sock)
    return made


def still_open(sock: socket.socket) -> bool:
    """Whether the server end of `sock` is still open (accepted or waiting in the backlog)."""
    try:
        return sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) != b""
    except BlockingIOError:
        return True
    except OSError:
        return False


def _connection_flood(path: str, count: int) -> None:
    made = open_connections(path, count)
    time.sleep(SETTLE_S)
    held = sum(1 for sock in made if still_open(sock))
    print(json.dumps({"connected": len(made), "held": held}), flush=True)
    sys.stdin.read()
    for sock in made:
        sock.close()


@dataclass
class Flooder:
    """A connection flood process, holding its connections until `stop`."""

    process: subprocess.Popen[str]
    connected: int
    held: int

    def stop(self) -> None:
        self.process.communicate(timeout=10)


def start_flooders(path: Path | str, count: int, processes: int) -> list[Flooder]:
    """`processes` floods of `count` connections each, started at once; their reports read."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    started = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.security.flood", str(path), str(count)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(processes)
    ]
    flooders = []
    for process in started:
        assert process.stdout is not None
        report = json.loads(process.stdout.readline() or "{}")
        if not report:
            for each in started:
                each.kill()
                each.communicate()
            raise AssertionError("a flood process failed to report")
        flooders.append(Flooder(process, report["connected"], report["held"]))
    return flooders


@contextmanager
def flooding(path: Path | str, count: int, processes: int = 1) -> Iterator[list[Flooder]]:
    """Connection floods held for the body of the `with`, ended (and reaped) after it."""
    flooders = start_flooders(path, count, processes)
    try:
        yield flooders
    finally:
        for flooder in flooders:
            flooder.stop()


# -- frame floods from one connection ------------------------------------------------------


def request(request_id: str, verb: str, payload: object) -> bytes:
    """One `req` frame as the wire carries it."""
    frame = {"t": "req", "request_id": request_id, "verb": verb, "payload": payload}
    return encode_frame(frame)


def send_without_reading(sock: socket.socket, seconds: float) -> int:
    """Write request frames to `sock` for `seconds` without reading a byte; bytes choird took.

    A listener that kept reading would buffer an answer to each request for a peer that never
    reads them; one that applies backpressure stops taking requests after a few hundred KiB.
    """
    sock.setblocking(False)
    batch = b"".join(request(f"r{i}", "NO_SUCH_VERB", {}) for i in range(200))
    sent, offset = 0, 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            written = sock.send(batch[offset:])
        except BlockingIOError:
            time.sleep(0.01)
            continue
        sent += written
        offset = (offset + written) % len(batch)
    return sent


def nested(depth: int) -> bytes:
    """A JSON array nested `depth` levels deep."""
    return b"[" * depth + b"]" * depth


def raw_frame(body: bytes) -> bytes:
    return HEADER.pack(len(body)) + body


def oversized_header(size: int) -> bytes:
    return struct.pack(">I", size)


async def read_frame(reader: asyncio.StreamReader) -> dict[str, object]:
    """The next frame choird sends on a raw connection."""
    (size,) = HEADER.unpack(await reader.readexactly(HEADER.size))
    frame: dict[str, object] = orjson.loads(await reader.readexactly(size))
    return frame


if __name__ == "__main__":
    _connection_flood(sys.argv[1], int(sys.argv[2]))
