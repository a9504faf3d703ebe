"""A host tool call is never run twice, also across a choird restart (issue 12 point 11).

A real choird (the production composition root, in this process) serves an agent's calls on
its socket; a host tool with a side effect (it counts its runs in a file) is registered the way
choird's services register theirs. The agent calls it, choird restarts — its memory of calls is
gone, the session is crashed because no agent process survives it here — the agent resumes the
session and resends the call under the same call id, as recovery does. Before the fix the
resend ran the tool a second time; now it gets the stored result. (The tool's side effect is an
entry in a list of this process: both choirds run here.) A call that was still running
when choird stopped is answered `outcome_unknown`, and not run again either.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from choir.agent.replication.control_plane import ControlPlane
from choir.daemon.agents.host_tools import OUTCOME_UNKNOWN, HostToolCall, HostToolHandler
from choir.daemon.app import ChoirDaemon
from choir.home import ChoirHome
from choir.protocol import ExecuteHostToolRequest, ToolResult
from choir.store.postgres.target import ConnectParams
from tests.e2e.agent_side import hello
from tests.harness.daemons import agent_control_plane, running_daemon
from tests.harness.homes import external_postgres, make_home

# The second in-process choird used to find the first's instance lock still held, now and then:
# a git of the first one's repo fetch, forked just before the stop, shared the lock's file until
# its exec. `InstanceLock.release` now unlocks the file itself (tests/daemon/test_instance_lock.py).
pytestmark = [pytest.mark.slow]

TOOL = "test.counting"  # a host tool of the test's own: choird serves choir.web.browse itself


@pytest.fixture
def home(root: Path, pg_params: ConnectParams) -> ChoirHome:
    return make_home(root, postgres=external_postgres(pg_params))


def counting_tool(
    runs: list[str], started: asyncio.Event | None = None, release: asyncio.Event | None = None
) -> HostToolHandler:
    """A host tool whose side effect is an entry in `runs` per run; it can wait for `release`."""

    async def handler(call: HostToolCall) -> ToolResult:
        runs.append(call.call_id)
        if started is not None:
            started.set()
        if release is not None:
            await release.wait()
        return ToolResult.ok(f"browsed {call.input.get('url')}", run=len(runs))

    return handler


async def resumed_agent(daemon: ChoirDaemon, session_id: str) -> ControlPlane:
    """The agent after choird's restart: its session resumed, a new lease, INIT_HELLO again."""
    assert daemon.services is not None
    resumed = await daemon.services.sessions.start("agent-1", {}, resume=session_id)
    agent = await agent_control_plane(daemon, "uds", session_id, resumed.lease_token)
    await agent.init_hello(hello("agent-1", session_id))
    return agent


def call(call_id: str) -> ExecuteHostToolRequest:
    return ExecuteHostToolRequest(tool_name=TOOL, call_id=call_id, input={"url": "http://x"})


async def test_a_resend_after_a_choird_restart_gets_the_stored_result(home: ChoirHome) -> None:
    runs: list[str] = []
    async with running_daemon(home) as daemon:
        assert daemon.services is not None
        daemon.services.host_tools.register(TOOL, counting_tool(runs))
        started = await daemon.services.sessions.start("agent-1", {})
        session_id = started.session_id
        agent = await agent_control_plane(daemon, "uds", session_id, started.lease_token)
        await agent.init_hello(hello("agent-1", session_id))
        first = await agent.execute_host_tool(call("call-1"))
        again = await agent.execute_host_tool(call("call-1"))  # a resend to the same choird
        await agent.close()

    async with running_daemon(home) as daemon:
        assert daemon.services is not None
        daemon.services.host_tools.register(TOOL, counting_tool(runs))
        agent = await resumed_agent(daemon, session_id)
        after_restart = await agent.execute_host_tool(call("call-1"))
        other = await agent.execute_host_tool(call("call-2"))
        await agent.close()

    assert runs == ["call-1", "call-2"]  # call-1 ran once
    assert first.output == again.output == after_restart.output
    assert first.output["status"] == "success"
    assert other.output["status"] == "success"


async def test_a_call_running_when_choird_stopped_is_never_run_again(home: ChoirHome) -> None:
    runs: list[str] = []
    started_run = asyncio.Event()
    async with running_daemon(home) as daemon:
        assert daemon.services is not None
        tool = counting_tool(runs, started_run, asyncio.Event())
        daemon.services.host_tools.register(TOOL, tool)
        started = await daemon.services.sessions.start("agent-1", {})
        session_id = started.session_id
        agent = await agent_control_plane(daemon, "uds", session_id, started.lease_token)
        await agent.init_hello(hello("agent-1", session_id))
        pending = asyncio.create_task(agent.execute_host_tool(call("call-1")))
        await asyncio.wait_for(started_run.wait(), 10)  # its side effect is done, it waits
    pending.cancel()
    await asyncio.gather(pending, return_exceptions=True)
    await agent.close()

    async with running_daemon(home) as daemon:
        assert daemon.services is not None
        daemon.services.host_tools.register(TOOL, counting_tool(runs))
        agent = await resumed_agent(daemon, session_id)
        after_restart = await agent.execute_host_tool(call("call-1"))
        await agent.close()

    assert runs == ["call-1"]
    assert after_restart.output["status"] == "error"
    assert after_restart.output["error_code"] == OUTCOME_UNKNOWN
    assert "not run again" in after_restart.output["summary"]
