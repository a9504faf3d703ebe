"""A real choird in its own process for benchmarks, with agent-1's session started.

The server process is what `choird` runs (the `ChoirDaemon` composition root with the operator
API, logging to `logs/choird.log`, its own embedded Postgres) plus one session for agent-1, whose
credentials it prints as one JSON line once ready. The agent side of a benchmark connects to the
agent socket with them, the way a container would. Closing the server's stdin stops it cleanly.

    async with choird_server(config={"rpc": {...}}) as server:
        control_plane = ControlPlane(await connect(server.agent_socket, ...))
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the server process imports none of the agent side
    from choir.agent.replication.control_plane import ControlPlane

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Server:
    """The running server process and agent-1's way in."""

    pid: int
    home: Path
    agent_socket: Path
    session_id: str
    lease_token: str


def serve(root: str, config_json: str) -> None:
    """The server process: choird over a fresh home in `root` until stdin closes."""
    asyncio.run(_serve(Path(root), json.loads(config_json)))


async def _serve(root: Path, config: dict[str, Any]) -> None:
    from choir.config import init_home
    from choir.daemon.app import ChoirDaemon, DaemonOptions
    from choir.daemon.operator.api import operator_handler
    from choir.home import ChoirHome
    from choir.logs import setup_logging, shutdown_logging

    home = ChoirHome(root / "h")
    init_home(home)
    data = json.loads(home.config_file.read_text())
    home.config_file.write_text(json.dumps({**data, **config}, indent=2))
    setup_logging(home, "choird")
    try:
        async with ChoirDaemon(DaemonOptions(home), operator=operator_handler) as daemon:
            assert daemon.services is not None
            started = await daemon.services.sessions.start("agent-1", {})
            socket = await daemon.open_agent_socket("agent-1")
            ready = {
                "pid": os.getpid(),
                "home": str(home.root),
                "agent_socket": str(socket),
                "session_id": started.session_id,
                "lease_token": started.lease_token,
            }
            print(json.dumps(ready), flush=True)
            await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    finally:
        shutdown_logging()


@contextlib.asynccontextmanager
async def choird_server(config: dict[str, Any] | None = None) -> AsyncIterator[Server]:
    """choird in a child process over a temporary home; `config` overrides top-level keys."""
    with tempfile.TemporaryDirectory(prefix="cb-", dir="/tmp") as root:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            f"from bench.choird_server import serve; serve({root!r}, {json.dumps(config or {})!r})",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
        assert process.stdin is not None
        assert process.stdout is not None
        try:
            async with asyncio.timeout(60):
                line = await process.stdout.readline()
            if not line:
                raise RuntimeError("the benchmark choird did not start (see its stderr)")
            ready = json.loads(line)
            yield Server(
                pid=ready["pid"],
                home=Path(ready["home"]),
                agent_socket=Path(ready["agent_socket"]),
                session_id=ready["session_id"],
                lease_token=ready["lease_token"],
            )
        finally:
            process.stdin.close()
            await process.wait()


async def hello_agent(server: Server) -> ControlPlane:
    """agent-1's control plane on the server's agent socket, its INIT_HELLO said (an image
    choird did not pin, as a bench's agent is); the caller closes it."""
    from choir.agent.replication.control_plane import ControlPlane
    from choir.protocol import PROTOCOL_VERSION, InitHelloRequest
    from choir.transport import connect

    client = await connect(
        server.agent_socket, session_id=server.session_id, lease_token=server.lease_token
    )
    control_plane = ControlPlane(client)
    try:
        await control_plane.init_hello(
            InitHelloRequest(
                protocol_version=PROTOCOL_VERSION,
                agent_id="agent-1",
                session_id=server.session_id,
                image_version="bench",
                tool_manifest_hash="a" * 64,
                skill_manifest_hash="b" * 64,
            )
        )
    except BaseException:
        await control_plane.close()
        raise
    return control_plane
