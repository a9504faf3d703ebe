"""The process runtime behind the same interface: unsandboxed (bwrap turned off with
`CHOIR_BWRAP=`) and saying so, the lease token out of every environment, agents of a previous
choird killed at start, and the runtime choice. The bwrap sandbox: `test_process_sandbox.py`.
"""

from __future__ import annotations

import asyncio
import hashlib
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from choir.client import ChoirClient
from choir.daemon.app import ChoirDaemon
from choir.daemon.runtimes.base import RuntimeChoice
from choir.daemon.runtimes.bwrap import BWRAP_ENV
from choir.home import ChoirHome
from tests.harness.daemons import poll_until, running_daemon, session_row
from tests.harness.homes import read_config, write_config
from tests.harness.processes import run_choirctl

pytestmark = pytest.mark.slow


def environ_of(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/environ").read_bytes().decode().split("\0")


def fake_agent(script: Path, socket: Path) -> subprocess.Popen[bytes]:
    """A process that looks like choir-agent on `socket`, leading its own session."""
    return subprocess.Popen(
        [sys.executable, str(script), "--control-plane=uds", f"--socket={socket}"],
        start_new_session=True,
    )


async def test_verify_says_unsandboxed_and_the_token_is_in_no_environment(
    process_choird: tuple[ChoirDaemon, ChoirClient],
) -> None:
    daemon, client = process_choird
    started = await client.agent_start("agent-1", {"dm": "console"})
    assert (started.runtime, started.sandboxed) == ("process", False)
    before = await asyncio.to_thread(run_choirctl, daemon.home, "agent", "status", "agent-1")
    assert "security   none: a host process (unsandboxed)" in before.stdout

    verified = await client.call("agent.verify", agent_id="agent-1")
    assert verified["ok"] is False
    assert [check["item"] for check in verified["checks"]] == ["sandbox"]
    status = await client.agent_status("agent-1")
    assert status.verified.checks[0].item == "sandbox"
    shown = await asyncio.to_thread(run_choirctl, daemon.home, "agent", "verify", "agent-1")
    assert shown.returncode == 1
    assert "FAILS sandbox" in shown.stdout
    assert "  FAIL  sandbox  a host process (process runtime, unsandboxed)" in shown.stdout

    environ = environ_of(started.pid)
    names = {variable.partition("=")[0] for variable in environ if variable}
    assert names == {"PATH", "HOME", "LANG", "CHOIR_AGENT_ID", "CHOIR_SESSION_ID"} | {
        "CHOIR_AGENT_REPO",  # where it clones its own repo from, and which branch
        "CHOIR_AGENT_REF",
    }
    row = await session_row(daemon, started.session_id)
    values = {variable.partition("=")[2] for variable in environ}
    assert row.lease_id not in {hashlib.sha256(v.encode()).hexdigest() for v in values}
    await client.agent_stop("agent-1")


async def test_verify_refuses_an_agent_that_is_not_running(
    process_choird: tuple[ChoirDaemon, ChoirClient],
) -> None:
    from choir.errors import ConflictError

    _, client = process_choird
    with pytest.raises(ConflictError, match="agent-1 is not running: start it, then verify it"):
        await client.call("agent.verify", agent_id="agent-1")


async def test_choird_start_kills_agents_a_previous_choird_left(
    home: ChoirHome, root: Path
) -> None:
    home.create_directories()
    fake = root / "bin" / "choir-agent"  # stands in for a choir-agent whose choird died
    fake.parent.mkdir()
    fake.write_text("import time\ntime.sleep(300)\n")
    socket = home.agent_socket("agent-1")
    other = root / "other-home" / "socks" / "agents" / "agent-1.sock"
    orphan, stranger = (fake_agent(fake, path) for path in (socket, other))
    try:
        async with running_daemon(home, runtime="process"):
            await poll_until(lambda: orphan.poll() is not None, within=5)
            assert orphan.returncode == -signal.SIGKILL
            assert stranger.poll() is None  # another home's agent is not ours to kill
    finally:
        for process in (orphan, stranger):
            process.kill()
            process.wait()


@pytest.mark.parametrize("how", ["flag", "config"])
async def test_docker_without_an_engine_refuses_and_auto_falls_back(
    home: ChoirHome, root: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    from choir.errors import UnavailableError

    dead = f"unix://{root}/no-engine/docker.sock"  # not a parent of the workspaces
    monkeypatch.setenv("DOCKER_HOST", dead)
    monkeypatch.setenv(BWRAP_ENV, "")
    if how == "config":
        data = read_config(home)
        data["container"] = {"runtime": "docker"}
        write_config(home, data)
    flag: RuntimeChoice | None = "docker" if how == "flag" else None
    with pytest.raises(
        UnavailableError, match=f"no Docker engine answers at {dead}.*--runtime process"
    ):
        async with running_daemon(home, runtime=flag):
            pass
    async with running_daemon(home, runtime="auto") as daemon:
        assert daemon.runtime is not None
        assert (daemon.runtime.name, daemon.runtime.sandboxed) == ("process", False)
