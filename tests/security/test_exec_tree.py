"""A `choir.exec` call ends its whole process tree (issue 11 point 10).

The command starts what a process group does not hold: a `setsid` sleeper (a session of its
own), a double-forked one (its parent exits at once; the orphan is adopted), and a background
writer that ignores SIGTERM and appends to the workspace. When the call ends — the command
exits, times out or the call is cancelled — none of them may be left, and the workspace file
stops changing. Tried with the tool itself on this host, through the real agent on the process
runtime (bwrap and unsandboxed), and with the tool inside the real agent container.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import docker
import pytest

from choir.agent.kernel.workspace import Workspace
from choir.agent.tools import shell
from choir.agent.tools.shell import ExecInput
from choir.store.postgres.target import ConnectParams
from tests.harness.daemons import poll_until
from tests.runtime.conftest import BUILD_TIMEOUT_S, Choird, chat, containers_of
from tests.security.process_agents import (
    SANDBOXES,
    Sandbox,
    exec_script,
    kill_all,
    process_agent,
    processes_with,
)

Ending = Literal["exit", "timeout", "cancel"]


@pytest.fixture
def ws(tmp_path: Path) -> Iterator[Workspace]:
    root = tmp_path / "ws"
    root.mkdir()
    with Workspace(root) as workspace:
        yield workspace


def detaching(marker: str, then: str) -> str:
    """Start the three escapees, say so, then `then`."""
    return (
        f"setsid sleep 1000.{marker} & "
        f"(sleep 1001.{marker} &) ; "
        f"(trap '' TERM; while :; do echo {marker} >> writer.log; sleep 0.05; done) & "
        f"sleep 0.3; echo started-{marker}; {then}"
    )


def new_marker() -> str:
    return str(secrets.randbelow(10**9)).zfill(9)


async def still_written(path: Path) -> bool:
    size = await asyncio.to_thread(os.path.getsize, path)
    await asyncio.sleep(0.5)
    return await asyncio.to_thread(os.path.getsize, path) != size


@pytest.mark.parametrize("ending", ["exit", "timeout", "cancel"])
async def test_the_tool_ends_every_process_the_command_started(
    ws: Workspace, ending: Ending
) -> None:
    marker = new_marker()
    then = {"exit": "exit 0", "timeout": f"sleep 60.{marker}", "cancel": f"sleep 60.{marker}"}
    timeout_ms = 1500 if ending == "timeout" else 20_000
    args = ExecInput(command=detaching(marker, then[ending]), timeout_ms=timeout_ms)
    try:
        call = asyncio.create_task(shell.run(ws, args))
        if ending == "cancel":
            await poll_until(lambda: (ws.root / "writer.log").exists(), within=10)
            await asyncio.sleep(0.2)
            call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await call
        else:
            result = await call
            assert result.status == ("success" if ending == "exit" else "timeout")
            assert f"started-{marker}" in result.data["stdout"]
        assert processes_with(marker) == []
        assert not await still_written(ws.root / "writer.log")
    finally:
        kill_all(processes_with(marker))


@pytest.mark.slow
@pytest.mark.parametrize("sandbox", SANDBOXES)
async def test_an_exec_of_the_agent_leaves_nothing_running_on_the_process_runtime(
    root: Path, pg_params: ConnectParams, monkeypatch: pytest.MonkeyPatch, sandbox: Sandbox
) -> None:
    marker = new_marker()
    script = exec_script(detaching(marker, "exit 0"), done=f"started-{marker}")
    async with process_agent(
        root, pg_params, script, sandbox=sandbox, monkeypatch=monkeypatch
    ) as agent:
        try:
            await agent.start_worker()
            writer = agent.workspace / "writer.log"
            await poll_until(writer.exists, within=20)
            await poll_until(lambda: not processes_with(marker), within=10)
            assert not await still_written(writer)
            assert agent.daemon.runtime is not None
            assert agent.daemon.runtime.running("agent-1") is not None  # the agent lives on
            await agent.client.agent_stop("agent-1")
        finally:
            kill_all(processes_with(marker))


IN_CONTAINER = """
import asyncio, json, os, sys
from choir.agent.tools import shell
from choir.agent.tools.shell import ExecInput
from choir.agent.kernel.workspace import Workspace

marker, command, timeout_ms = sys.argv[1], sys.argv[2], int(sys.argv[3])
os.makedirs("/tmp/ws", exist_ok=True)

def left():
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\\0", b" ").decode()
            state = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
        except (OSError, ValueError):
            continue
        if marker in cmdline and state != "Z" and int(pid) != os.getpid():
            found.append(cmdline)
    return found

async def main():
    with Workspace("/tmp/ws") as ws:
        result = await shell.run(ws, ExecInput(command=command, timeout_ms=timeout_ms))
    await asyncio.sleep(0.3)
    size = os.path.getsize("/tmp/ws/writer.log")
    await asyncio.sleep(0.5)
    print(json.dumps({"status": result.status, "left": left(),
                      "writing": os.path.getsize("/tmp/ws/writer.log") != size}))

asyncio.run(main())
"""


@pytest.mark.slow
@pytest.mark.timeout(BUILD_TIMEOUT_S)
async def test_the_tool_ends_every_process_the_command_started_in_the_agent_container(
    choird: Choird, engine: docker.DockerClient
) -> None:
    await choird.start()
    await chat(choird.client, "hello")
    (container,) = containers_of(engine, choird.home)
    for then, status, timeout_ms in (("exit 0", "success", 20_000), ("sleep 60", "timeout", 1500)):
        marker = new_marker()
        command = detaching(marker, then)
        done = await asyncio.to_thread(
            container.exec_run,
            ["/opt/choir/bin/python", "-c", IN_CONTAINER, marker, command, str(timeout_ms)],
        )
        assert done.exit_code == 0, done.output.decode()
        seen = json.loads(done.output.decode().strip().splitlines()[-1])
        assert seen == {"status": status, "left": [], "writing": False}, seen
    await choird.client.agent_stop("agent-1")
