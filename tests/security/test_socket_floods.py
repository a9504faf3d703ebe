"""Connection and frame floods against a real choird (issue 11, hole 3).

A tool running inside an agent can open as many connections to `/run/choir.sock` as it likes.
choird runs here as its own process with a low open-files limit (the test process keeps its
own), one real agent started on the process runtime and heartbeating every 300 ms. Whatever the
flood, `choirctl status` must answer during it and after it, and the agent must keep
heartbeating; choird must hold no more connections than its caps.
"""

from __future__ import annotations

import asyncio
import resource
import socket
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pytest

from choir.home import ChoirHome
from choir.store.postgres.pool import connect_plain
from choir.store.postgres.target import ConnectParams
from choir.transport.limits import AGENT_SOCKET_LIMITS, Limits
from tests.harness.homes import external_postgres, make_home, short_root
from tests.harness.processes import BIN, Choird, environment, run_choirctl, wait_until_ready
from tests.security.flood import (
    flooding,
    nested,
    oversized_header,
    raw_frame,
    read_frame,
    request,
    send_without_reading,
)

# serial: a flood of connections and open files; under parallel load the recovery budgets
# measure the other workers, not choird.
pytestmark = [pytest.mark.slow, pytest.mark.serial]

OPEN_FILES = 128
"""choird's soft and hard limit: far below what the floods ask for."""
STATUS_WITHIN_S = 10.0


@dataclass
class Running:
    home: ChoirHome
    choird: Choird
    pg: ConnectParams

    async def last_heartbeat(self) -> tuple[str, datetime]:
        conn = await connect_plain(self.pg)
        try:
            row = await conn.fetchrow(
                "SELECT status, last_heartbeat_at FROM choir_control.sessions "
                "WHERE agent_id = 'agent-1' ORDER BY started_at DESC LIMIT 1"
            )
        finally:
            await conn.close()
        assert row is not None
        return row["status"], row["last_heartbeat_at"]

    async def heartbeats_go_on(self) -> None:
        """The agent's session is active and a heartbeat arrives within 3 s."""
        status, before = await self.last_heartbeat()
        assert status == "active"
        for _ in range(30):
            await asyncio.sleep(0.1)
            status, now = await self.last_heartbeat()
            if now > before:
                assert status == "active"
                return
        raise AssertionError("the agent's heartbeats stopped")

    def status(self) -> tuple[float, str | None]:
        """How long `choirctl status` took, and why it did not answer (exit 0, the agent
        listed) within STATUS_WITHIN_S (None: it did)."""
        began = time.monotonic()
        try:
            done = subprocess.run(
                [str(BIN / "choirctl"), "status"],
                env=environment(CHOIR_HOME=str(self.home.root)),
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=STATUS_WITHIN_S,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return STATUS_WITHIN_S, f"no answer within {STATUS_WITHIN_S} s"
        took = time.monotonic() - began
        if done.returncode == 0 and "agents    1 of 2 running" in done.stdout:
            return took, None
        return took, f"exit {done.returncode}: {done.stdout.strip()} {done.stderr.strip()}"

    def status_fails(self) -> str:
        """Why `choirctl status` did not answer (`status`); empty when it did."""
        return self.status()[1] or ""

    def status_recovers(self, within: float = 20.0) -> str:
        """`status_fails` once choird has had up to `within` seconds to close what a flood left
        behind (each closed connection is noticed by its reader, in turn)."""
        deadline = time.monotonic() + within
        while (why := self.status_fails()) and time.monotonic() < deadline:
            time.sleep(0.5)
        return why

    def log(self) -> str:
        return self.home.choird_log.read_text(errors="replace")


def spawn_choird(home: ChoirHome, open_files: tuple[int, int], *args: str) -> Choird:
    """choird on the process runtime with RLIMIT_NOFILE set to `open_files` (soft, hard)."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, open_files)

    stderr = home.root.parent / "choird.stderr"
    with stderr.open("wb") as sink:
        process = subprocess.Popen(
            [str(BIN / "choird"), "--runtime", "process", *args],
            env=environment(CHOIR_HOME=str(home.root)),
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=sink,
            preexec_fn=limit,
        )
    return Choird(process, stderr, home.choird_log)


@contextmanager
def running_choird(home: ChoirHome, open_files: tuple[int, int], *args: str) -> Iterator[Choird]:
    choird = spawn_choird(home, open_files, *args)
    try:
        wait_until_ready(choird)
        yield choird
    finally:
        if choird.process.poll() is None:
            choird.process.terminate()
        try:
            choird.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            choird.process.kill()
            choird.process.wait()


@asynccontextmanager
async def running_agent(
    pg_params: ConnectParams, open_files: int, *args: str
) -> AsyncIterator[Running]:
    """choird limited to `open_files` open files, agent-1 started and heartbeating."""
    with short_root("sf-") as root:
        home = make_home(root, postgres=external_postgres(pg_params), heartbeat_interval_ms=300)
        (root / "ws-other").mkdir()
        with running_choird(home, (open_files, open_files), *args) as choird:
            started = run_choirctl(home, "agent", "start", "agent-1", "--dm", "console")
            assert started.returncode == 0, started.stderr
            running = Running(home, choird, pg_params)
            await running.heartbeats_go_on()
            yield running


@pytest.fixture
async def running(pg_params: ConnectParams) -> AsyncIterator[Running]:
    async with running_agent(pg_params, OPEN_FILES) as running:
        yield running


def open_files(pid: int) -> tuple[int, int]:
    """The soft and hard open-files limits of process `pid`."""
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            soft, hard = line.split()[3:5]
            return int(soft), int(hard)
    raise AssertionError("no open-files line in /proc/<pid>/limits")


def test_choird_raises_its_open_files_limit_to_the_hard_limit(pg_params: ConnectParams) -> None:
    """Started with systemd's default soft limit, choird lifts it to the hard limit."""
    with short_root("sf-") as root:
        home = make_home(root, postgres=external_postgres(pg_params))
        with running_choird(home, (100, 4096)) as choird:
            assert open_files(choird.process.pid) == (4096, 4096)


async def test_a_connection_flood_on_an_agent_socket_wedges_nothing(running: Running) -> None:
    """Three processes in the agent's container open 300 connections each (2.3x choird's
    open-files limit): choird keeps at most the agent socket's cap, refuses the rest at once,
    and serves the operator and the agent's heartbeats throughout."""
    agent_socket = running.home.agent_socket("agent-1")
    with flooding(agent_socket, 300, processes=3) as flooders:
        assert not running.status_fails()
        await running.heartbeats_go_on()
        assert all(f.connected == 300 for f in flooders), [f.connected for f in flooders]
        held = [f.held for f in flooders]
        per_process = AGENT_SOCKET_LIMITS.max_connections_per_peer
        assert per_process is not None
        assert all(h <= per_process for h in held), held
        assert sum(held) <= AGENT_SOCKET_LIMITS.max_connections, held
    assert not running.status_fails()
    await running.heartbeats_go_on()
    assert "refusing connections" in running.log()


async def test_a_connection_flood_on_the_operator_socket_leaves_room_and_recovers(
    running: Running,
) -> None:
    """One process opening 300 operator connections is held to the per-peer cap, so
    `choirctl status` (another process) still answers; six processes together exhaust choird's
    open files — accept() fails with EMFILE — and once they are gone choird answers again."""
    operator = running.home.operator_socket
    per_peer = Limits().max_connections_per_peer
    assert per_peer is not None
    with flooding(operator, 300) as [flooder]:
        assert not running.status_fails()
        await running.heartbeats_go_on()
        assert flooder.connected == 300
        assert flooder.held <= per_peer
    with flooding(operator, 60, processes=6) as flooders:
        assert sum(f.held for f in flooders) >= OPEN_FILES - 40  # choird ran out of files
        await running.heartbeats_go_on()
    assert not running.status_recovers()
    await running.heartbeats_go_on()
    assert "accept failed; retrying" in running.log()


async def test_a_connection_flood_on_the_http_listener_wedges_nothing(
    pg_params: ConnectParams,
) -> None:
    """choird serving agents over HTTP, limited to 400 open files: three processes open 200 TCP
    connections each. The listener keeps at most its cap (256), so choird never runs out of
    files and the operator and the agent (over HTTP itself) are served throughout."""
    port = _free_port()
    listen = f"127.0.0.1:{port}"
    async with running_agent(pg_params, 400, "--transport", "http", "--listen", listen) as running:
        with flooding(f"tcp:{listen}", 200, processes=3) as flooders:
            assert not running.status_fails()
            await running.heartbeats_go_on()
            held = sum(f.held for f in flooders)
            assert held <= Limits().max_connections + 128, held  # + the listen backlog
        assert not running.status_fails()
        await running.heartbeats_go_on()
        assert "refusing connections" in running.log()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


async def test_a_frame_flood_from_one_connection_is_bounded(running: Running) -> None:
    """One connection to the agent socket sends requests for 2 s without reading an answer,
    then oversized frames and deeply nested JSON: choird stops reading it once its answers
    back up (it takes a bounded number of bytes), answers every bad frame with an error frame
    and keeps the connection, the operator and the heartbeats served."""
    path = str(running.home.agent_socket("agent-1"))
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(path)
        taken = await asyncio.to_thread(send_without_reading, sock, 2.0)
        # About 0.5 MiB: the socket buffers and what is read before the answers back up; a
        # listener that kept reading took ~9 MiB in the same 2 s, and more the longer it went.
        assert taken < 2 << 20, f"choird took {taken} bytes from a peer that reads nothing"
        assert not running.status_fails()
        await running.heartbeats_go_on()
    reader, writer = await asyncio.open_unix_connection(path)
    try:
        await _bad_frames_get_errors(reader, writer)
    finally:
        writer.close()
    assert not running.status_fails()
    await running.heartbeats_go_on()


async def test_deep_nesting_on_the_operator_socket_gets_error_frames(running: Running) -> None:
    reader, writer = await asyncio.open_unix_connection(str(running.home.operator_socket))
    try:
        await _bad_frames_get_errors(reader, writer, "status")
    finally:
        writer.close()
    assert not running.status_fails()


async def _bad_frames_get_errors(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, verb: str = "HEARTBEAT"
) -> None:
    """Each bad frame is answered; a good request on the same connection still is."""
    limit = Limits().max_frame
    writer.write(oversized_header(limit + 1) + b"x" * (limit + 1))
    writer.write(raw_frame(nested(100_000)))
    writer.write(raw_frame(b'{"t": "req", "request_id": "big", "payload": 1' + b"0" * 5000 + b"}"))
    writer.write(raw_frame(_deep_request("deep", verb, 1000)))
    writer.write(request("probe", "NO_SUCH_VERB", {}))
    await writer.drain()
    answers = [await asyncio.wait_for(read_frame(reader), 10) for _ in range(5)]
    assert [a["t"] for a in answers[:3]] == ["err", "err", "err"]
    assert {(a["t"], a["request_id"]) for a in answers[3:]} == {("res", "deep"), ("res", "probe")}
    assert all(a.get("ok") is not True for a in answers)


def _deep_request(request_id: str, verb: str, depth: int) -> bytes:
    """A request whose payload nests objects `depth` levels deep (within the decoder's limit,
    past the encoder's: orjson reads 1024 levels but writes only 254)."""
    head = f'{{"t": "req", "request_id": "{request_id}", "verb": "{verb}", "payload": '
    return head.encode() + b'{"a": ' * depth + b"{}" + b"}" * depth + b"}"
