"""Git credentials without secrets on disk or in the environment (§14.4).

choir-agent holds the leased git identity's token in memory only. Git asks for it through the
`git-cred-helper` entry point (the same executable, dispatching on argv[0]): the helper speaks
git's credential protocol on stdin/stdout and fetches the answer from choir-agent over a Unix
socket on a tmpfs (`/run/choir-cred.sock` in the container). choir-agent answers only for the
hosts the identity is allowed to reach; any other host gets nothing, so a hostile remote URL
cannot phish the token.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Final

DEFAULT_SOCKET: Final = "/run/choir-cred.sock"
SOCKET_ENV: Final = "CHOIR_CRED_SOCKET"
MAX_REQUEST: Final = 4096


class GitCredential:
    """What the agent answers: a username and the token, for a fixed set of hosts."""

    __slots__ = ("_hosts", "_token", "username")

    def __init__(self, username: str, token: str, hosts: Iterable[str]) -> None:
        self.username = username
        self._token = token
        self._hosts = frozenset(h.lower() for h in hosts)

    def __repr__(self) -> str:
        return f"GitCredential(username={self.username!r}, hosts={sorted(self._hosts)})"

    def answer(self, request: Mapping[str, str]) -> dict[str, str]:
        """The credential for an https request to an allowed host; nothing otherwise."""
        host = request.get("host", "").lower()
        if request.get("protocol") != "https" or host not in self._hosts:
            return {}
        return {"username": self.username, "password": self._token}


class CredentialServer:
    """Serves `current()` (swapped on secret refresh) on a private Unix socket."""

    def __init__(self, path: Path, current: Callable[[], GitCredential | None]) -> None:
        self.path = path
        self._current = current
        self._server: asyncio.AbstractServer | None = None

    async def __aenter__(self) -> CredentialServer:
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        old = os.umask(0o177)  # the socket is born 0600
        try:
            self._server = await asyncio.start_unix_server(self._serve, path=str(self.path))
        finally:
            os.umask(old)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            raw = await asyncio.wait_for(reader.read(MAX_REQUEST), 5)
            request = json.loads(raw or b"{}")
            credential = self._current()
            answer = credential.answer(request) if credential and isinstance(request, dict) else {}
            writer.write(json.dumps(answer).encode())
            await writer.drain()
        except (TimeoutError, ValueError, ConnectionError):
            pass
        finally:
            writer.close()


def parse_credential_request(text: str) -> dict[str, str]:
    """git's credential protocol: `key=value` lines up to a blank line."""
    request: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            break
        key, sep, value = line.partition("=")
        if sep:
            request[key] = value
    return request


def helper_main(argv: list[str]) -> int:
    """`git-cred-helper [--socket PATH] get|store|erase`: only `get` answers; the others are
    no-ops. The socket is `--socket` (how choir-agent configures git), else $CHOIR_CRED_SOCKET,
    else DEFAULT_SOCKET."""
    args, path = argv[1:], os.environ.get(SOCKET_ENV, DEFAULT_SOCKET)
    if len(args) >= 2 and args[0] == "--socket":
        args, path = args[2:], args[1]
    if not args or args[0] != "get":
        return 0
    request = parse_credential_request(sys.stdin.read())
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(5)
            conn.connect(path)
            conn.sendall(json.dumps(request).encode())
            conn.shutdown(socket.SHUT_WR)
            answer = json.loads(_read_all(conn) or b"{}")
    except (OSError, ValueError):
        sys.stderr.write("git-cred-helper: choir-agent is not answering; no credential\n")
        return 0
    for key in ("username", "password"):
        if key in answer:
            sys.stdout.write(f"{key}={answer[key]}\n")
    return 0


def _read_all(conn: socket.socket) -> bytes:
    chunks = []
    while chunk := conn.recv(4096):
        chunks.append(chunk)
    return b"".join(chunks)
