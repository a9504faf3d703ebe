"""A git smart-HTTP server on loopback: git's own `git http-backend` (CGI) behind a threaded
`http.server`, every request refused (401) without the one Basic credential it was given.

It serves the bare repositories under `root` as `http://127.0.0.1:<port>/<name>`; a push is
allowed to the authenticated user (http-backend enables receive-pack when `REMOTE_USER` is set).
Request bodies must carry a Content-Length (git sends one below `http.postBuffer`, 1 MiB).
"""

from __future__ import annotations

import base64
import os
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


@dataclass(frozen=True)
class GitHttp:
    root: Path
    port: int
    user: str
    password: str

    def url(self, name: str, *, credentials: bool = True) -> str:
        who = f"{self.user}:{self.password}@" if credentials else ""
        return f"http://{who}127.0.0.1:{self.port}/{name}"


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    served: GitHttp
    requests: list[str]


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def log_message(self, format: str, *args: object) -> None:
        return None

    def _serve(self) -> None:
        self.server.requests.append(f"{self.command} {self.path}")
        served = self.server.served
        expected = base64.b64encode(f"{served.user}:{served.password}".encode()).decode()
        if self.headers.get("Authorization") != f"Basic {expected}":
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="git"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        status, headers, payload = _backend(served, self, body)
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


def _backend(
    served: GitHttp, request: _Handler, body: bytes
) -> tuple[int, list[tuple[str, str]], bytes]:
    path, _, query = request.path.partition("?")
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_PROJECT_ROOT": str(served.root),
        "GIT_HTTP_EXPORT_ALL": "1",
        "REQUEST_METHOD": request.command,
        "PATH_INFO": path,
        "QUERY_STRING": query,
        "CONTENT_TYPE": request.headers.get("Content-Type", ""),
        "CONTENT_LENGTH": str(len(body)),
        "REMOTE_USER": served.user,
        "REMOTE_ADDR": "127.0.0.1",
        "HTTP_CONTENT_ENCODING": request.headers.get("Content-Encoding", ""),
        "HTTP_GIT_PROTOCOL": request.headers.get("Git-Protocol", ""),
    }
    done = subprocess.run(
        ["git", "http-backend"], input=body, env=env, capture_output=True, timeout=60, check=False
    )
    separator = b"\r\n\r\n" if b"\r\n\r\n" in done.stdout else b"\n\n"
    head, _, payload = done.stdout.partition(separator)
    status, headers = 200, []
    for line in head.decode(errors="replace").splitlines():
        name, _, value = line.partition(":")
        if name.lower() == "status":
            status = int(value.split()[0])
        elif name:
            headers.append((name, value.strip()))
    return status, headers, payload


@contextmanager
def git_http(root: Path, user: str, password: str) -> Iterator[tuple[GitHttp, list[str]]]:
    """The server for the repositories under `root`; (it, the requests it served); stopped on
    exit."""
    server = _Server(("127.0.0.1", 0), _Handler)
    served = GitHttp(root, int(server.server_address[1]), user, password)
    server.served, server.requests = served, []
    thread = threading.Thread(target=server.serve_forever, name="git-http", daemon=True)
    thread.start()
    try:
        yield served, server.requests
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)
