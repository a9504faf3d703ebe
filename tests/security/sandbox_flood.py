"""A flood of choird's agent socket as a tool inside the agent's sandbox sends it.

Standard library only: the test copies this file into the agent's workspace and runs it there
(`docker exec` in the agent's container, or `choir.exec` in its bwrap sandbox) with whatever
python3 the sandbox has:

    python3 sandbox_flood.py SOCKET SPEC... (SPEC: KIND:NUMBER)

Phase one runs the frame floods (they need connections of their own), phase two the connection
floods; each SPEC is one process of its phase:
- `unread:S` — up to 8 connections, each sent requests for S seconds without a byte read back;
- `frames:N` — one connection sent bad frames (an oversized one, invalid JSON, deep nesting, an
  unknown verb) N times over, then 256 frames of random bytes and a good request, and how each
  was answered; then, on a connection of its own, a length prefix past anything choird skips;
- `hold:N` — up to N connections opened within 8 s and held;
- `churn:S` — connect and hang up for S seconds, as fast as it goes.
Every process reports one JSON line; the parent writes them all to `flood-report.json` in the
working directory once phase two has reported, holds the `hold` connections until a file
`flood-stop` appears there (60 s at most), then writes `flood-ended`. Every loop is bounded in
count and time.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import signal
import socket
import struct
import sys
import time
import traceback
from typing import Any

HEADER = struct.Struct(">I")
CONNECT_WITHIN_S = 8.0
SETTLE_S = 1.0
"""Time choird gets to accept or refuse connections before they are counted."""
HOLD_S = 60.0
READ_TIMEOUT_S = 10.0
MAX_FRAME = 1 << 20
"""choird's frame limit (`Limits.max_frame`): one byte more is an oversized frame."""
PHASES = (("unread", "frames"), ("hold", "churn"))

Report = dict[str, Any]


def attempt(path: str) -> socket.socket | None:
    """A connection, or None when choird's listen backlog is full."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.setblocking(False)
    try:
        sock.connect(path)
    except OSError as error:
        sock.close()
        if error.errno in (errno.EAGAIN, errno.ECONNREFUSED):
            return None
        raise
    return sock


def still_open(sock: socket.socket) -> bool:
    """Whether choird's end of `sock` is open (accepted and kept, or still in the backlog)."""
    try:
        return sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) != b""
    except BlockingIOError:
        return True
    except OSError:
        return False


def hold(path: str, count: float) -> tuple[Report, list[socket.socket]]:
    made: list[socket.socket] = []
    full = 0
    deadline = time.monotonic() + CONNECT_WITHIN_S
    out_of_files = False
    while len(made) < count and time.monotonic() < deadline:
        try:
            sock = attempt(path)
        except OSError as error:
            if error.errno not in (errno.EMFILE, errno.ENFILE):
                raise
            out_of_files = True  # this process's own limit (the sandbox's, or choird's)
            break
        if sock is None:
            full += 1
            time.sleep(0.005)
            continue
        made.append(sock)
    time.sleep(SETTLE_S)
    held = sum(1 for sock in made if still_open(sock))
    report = {"connected": len(made), "held": held, "backlog_full": full}
    return {**report, "out_of_files": out_of_files}, made


def churn(path: str, seconds: float) -> tuple[Report, list[socket.socket]]:
    connected = full = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        sock = attempt(path)
        if sock is None:
            full += 1
            continue
        connected += 1
        sock.close()
    return {"connected": connected, "backlog_full": full}, []


def frame(body: bytes) -> bytes:
    return HEADER.pack(len(body)) + body


def request(request_id: str, verb: str = "NO_SUCH_VERB") -> bytes:
    body = {"t": "req", "request_id": request_id, "verb": verb, "payload": {}}
    return frame(json.dumps(body).encode())


def unread(path: str, seconds: float) -> tuple[Report, list[socket.socket]]:
    """Requests written round-robin to up to 8 connections, never reading an answer."""
    made = [sock for sock in (attempt(path) for _ in range(8)) if sock is not None]
    batch = b"".join(request(f"r{i}") for i in range(200))
    taken = [0] * len(made)
    deadline = time.monotonic() + seconds
    while made and time.monotonic() < deadline:
        blocked = 0
        for i, sock in enumerate(made):
            try:
                taken[i] += sock.send(batch[taken[i] % len(batch) :])
            except BlockingIOError:
                blocked += 1
            except OSError:
                blocked += 1  # choird hung up on it: counted as taking nothing more
        if blocked == len(made):
            time.sleep(0.01)
    for sock in made:
        sock.close()
    return {"connections": len(made), "taken": taken}, []


def read_frame(sock: socket.socket) -> dict[str, Any] | None:
    """The next frame choird sends, or None at end of stream."""
    head = read_exactly(sock, HEADER.size)
    if head is None:
        return None
    (size,) = HEADER.unpack(head)
    body = read_exactly(sock, size)
    if body is None:
        return None
    answer: dict[str, Any] = json.loads(body)
    return answer


def read_exactly(sock: socket.socket, size: int) -> bytes | None:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def blocking(path: str) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(READ_TIMEOUT_S)
    sock.connect(path)
    return sock


def frames(path: str, rounds: float) -> tuple[Report, list[socket.socket]]:
    """Bad frames on one connection, each answered; then a length prefix that ends it."""
    answers: list[str] = []
    with blocking(path) as sock:
        for i in range(int(rounds)):
            sock.sendall(HEADER.pack(MAX_FRAME + 1) + b"x" * (MAX_FRAME + 1))
            sock.sendall(frame(b"\xff\xfe not json"))
            sock.sendall(frame(b"[" * 100_000 + b"]" * 100_000))
            sock.sendall(request(f"probe-{i}"))
            answers += [kind_of(read_frame(sock)) for _ in range(4)]
        sock.sendall(b"".join(frame(os.urandom(1000)) for _ in range(256)))
        garbage = [kind_of(read_frame(sock)) for _ in range(256)]
        sock.sendall(request("after-garbage"))
        after = kind_of(read_frame(sock))
    with blocking(path) as sock:
        sock.sendall(HEADER.pack(0xFFFFFFFF))
        absurd = [kind_of(read_frame(sock)), end_of(sock)]
    return {
        "answers": answers,
        "garbage": sorted(set(garbage)),
        "after_garbage": after,
        "absurd_prefix": absurd,
    }, []


def kind_of(answer: dict[str, Any] | None) -> str:
    return "closed" if answer is None else str(answer["t"])


def end_of(sock: socket.socket) -> str:
    """`closed` if choird hangs up within the read timeout, else `open`."""
    try:
        return "closed" if sock.recv(1) == b"" else "open"
    except TimeoutError:
        return "open"
    except OSError:
        return "closed"


KINDS = {"hold": hold, "churn": churn, "unread": unread, "frames": frames}


def child(path: str, kind: str, number: float, out: int) -> None:
    report, keep = KINDS[kind](path, number)
    line = json.dumps({"kind": kind, "pid": os.getpid(), **report}) + "\n"
    os.write(out, line.encode())
    if keep:
        time.sleep(HOLD_S + READ_TIMEOUT_S)  # the parent ends it sooner
    os._exit(0)


def run(path: str, specs: list[tuple[str, float]]) -> list[Report]:
    reports: list[Report] = []
    holders: list[int] = []
    for kinds in PHASES:
        wanted = [spec for spec in specs if spec[0] in kinds]
        if wanted:
            done, pids = collect(path, wanted)
            reports += done
            holders += pids
    write_atomically("flood-report.json", json.dumps(reports))
    deadline = time.monotonic() + HOLD_S
    while not os.path.exists("flood-stop") and time.monotonic() < deadline:
        time.sleep(0.05)
    for pid in holders:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    for pid in holders:
        os.waitpid(pid, 0)
    write_atomically("flood-ended", "")
    return reports


def collect(path: str, specs: list[tuple[str, float]]) -> tuple[list[Report], list[int]]:
    """One phase: a report per process; the finished ones reaped, the holders' pids returned."""
    reader, writer = os.pipe()
    pids = []
    for kind, number in specs:
        pid = os.fork()
        if pid == 0:
            os.close(reader)
            try:
                child(path, kind, number, writer)
            finally:
                traceback.print_exc()
                os._exit(1)
        pids.append(pid)
    os.close(writer)
    reports: list[Report] = []
    buffered = b""
    while len(reports) < len(specs):
        chunk = os.read(reader, 1 << 16)
        if not chunk:
            break  # a child died before reporting: the missing report tells
        buffered += chunk
        *lines, buffered = buffered.split(b"\n")
        reports += [json.loads(line) for line in lines if line]
    os.close(reader)
    holding = {r["pid"] for r in reports if r["kind"] == "hold"}
    for pid in pids:
        if pid not in holding:
            os.waitpid(pid, 0)
    return reports, [pid for pid in pids if pid in holding]


def write_atomically(name: str, text: str) -> None:
    with open(name + ".tmp", "w") as out:
        out.write(text)
    os.replace(name + ".tmp", name)


def main(argv: list[str]) -> None:
    path, *raw = argv
    specs = [(kind, float(number)) for kind, _, number in (spec.partition(":") for spec in raw)]
    unknown = [kind for kind, _ in specs if kind not in KINDS]
    if unknown:
        raise SystemExit(f"unknown flood kinds {unknown}; use {sorted(KINDS)}")
    print(json.dumps(run(path, specs)), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
