"""Nothing an agent started outlives it on the process runtime (issue 12 point 7).

agent-1's `choir.exec` starts a `setsid` sleeper (its own session: a process-group kill misses
it), a double-forked sleeper (adopted by whoever reaps orphans) and a plain background writer
appending to the workspace, then waits. The test kills choir-agent with SIGKILL while that runs,
as a crash would. Afterwards no process of the command may remain anywhere on the host, the
workspace file must stop growing, and the session is crashed — in the bwrap sandbox (the PID
namespace dies with the agent) and unsandboxed (the subreaper choir-agent runs under kills what
it adopted). And a hung agent whose session the heartbeat reaper declares crashed has its whole
tree killed by choird.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import signal
from pathlib import Path

import psutil
import pytest

from choir.store.postgres.target import ConnectParams
from choir.store.sessions import SessionStatus
from tests.harness.daemons import poll_until, session_row
from tests.security.process_agents import (
    SANDBOXES,
    Sandbox,
    exec_script,
    kill_all,
    process_agent,
    processes_with,
)

pytestmark = pytest.mark.slow


def command(marker: str) -> str:
    return (
        f"setsid sleep 1000.{marker} & "
        f"(sleep 1001.{marker} &) ; "
        f"(while :; do echo {marker} >> writer.log; sleep 0.05; done) & "
        f"sleep 600.{marker}"
    )


@pytest.mark.parametrize("sandbox", SANDBOXES)
async def test_a_killed_agent_leaves_no_process_and_no_writer(
    root: Path, pg_params: ConnectParams, monkeypatch: pytest.MonkeyPatch, sandbox: Sandbox
) -> None:
    marker = str(secrets.randbelow(10**9)).zfill(9)
    script = exec_script(command(marker))
    async with process_agent(
        root, pg_params, script, sandbox=sandbox, monkeypatch=monkeypatch
    ) as agent:
        writer = agent.workspace / "writer.log"
        try:
            await agent.start_worker()
            await poll_until(lambda: writer.exists() and writer.stat().st_size > 40, within=20)
            running = [" ".join(p.cmdline()) for p in processes_with(marker)]
            assert f"sleep 1000.{marker}" in running, running  # setsid execs sleep
            assert f"sleep 1001.{marker}" in running, running

            os.kill(agent.pid, signal.SIGKILL)

            await poll_until(lambda: not processes_with(marker), within=5)
            size = writer.stat().st_size
            await asyncio.sleep(0.5)
            assert writer.stat().st_size == size, "something still writes to the workspace"

            async def crashed() -> bool:
                row = await session_row(agent.daemon, agent.started.session_id)
                return row.status == SessionStatus.CRASHED

            await poll_until(crashed, within=5)
            assert agent.daemon.runtime is not None
            assert agent.daemon.runtime.running("agent-1") is None
        finally:
            kill_all(processes_with(marker))


@pytest.mark.parametrize("sandbox", SANDBOXES)
async def test_a_hung_agent_the_reaper_declares_crashed_has_its_whole_tree_killed(
    root: Path, pg_params: ConnectParams, monkeypatch: pytest.MonkeyPatch, sandbox: Sandbox
) -> None:
    """SIGSTOP stands in for a hung agent: no heartbeat, its process still there. When its
    session is declared crashed, choird kills everything under it, not just its group."""
    marker = str(secrets.randbelow(10**9)).zfill(9)
    async with process_agent(
        root, pg_params, exec_script(command(marker)), sandbox=sandbox, monkeypatch=monkeypatch
    ) as agent:
        writer = agent.workspace / "writer.log"
        try:
            await agent.start_worker()
            await poll_until(lambda: writer.exists() and writer.stat().st_size > 40, within=20)
            os.kill(agent.pid, signal.SIGSTOP)
            sessions = agent.daemon.services.sessions  # type: ignore[union-attr]
            assert await sessions.mark_crashed(agent.started.session_id, "no heartbeat (test)")
            await poll_until(lambda: not processes_with(marker), within=5)
            await poll_until(lambda: not psutil.pid_exists(agent.pid), within=5)
            assert agent.daemon.runtime is not None
            await poll_until(lambda: agent.daemon.runtime.running("agent-1") is None, within=5)
        finally:
            kill_all(processes_with(marker))
