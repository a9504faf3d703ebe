"""Crash detection with a real agent process (§13.1): heartbeats keep a session alive; SIGKILL
ends them, and choird marks the session crashed and frees its leases within the threshold.

The agent is `tests.e2e.fake_agent` in its own process, given its session and lease token in
its environment as a container is. Heartbeats every 100 ms, crashed after 1.5 s of silence:
the silence counts from the session's start, and a Python process on a loaded CI machine can
take most of a second to say hello.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

import pytest

from choir.client import ChoirClient
from choir.daemon.app import ChoirDaemon
from choir.home import ChoirHome
from choir.store.postgres.target import ConnectParams
from choir.store.sessions import SessionStatus
from tests.harness.daemons import leased, poll_until, running_daemon, session_row
from tests.harness.homes import external_postgres, make_home, short_root
from tests.harness.processes import start_fake_agent, wait_for_ack

# serial: a session is crashed after 1.5 s without a heartbeat, counted from its start; under
# parallel load the fake agent's Python start-up alone can take that long.
pytestmark = [pytest.mark.slow, pytest.mark.serial]

HEARTBEAT_MS = 100
THRESHOLD_MS = 1500
DETECTION_BUDGET_S = 3.0
"""How long after the kill the session must be crashed and its leases free."""


@dataclass
class Running:
    daemon: ChoirDaemon
    operator: ChoirClient
    session_id: str
    agent: asyncio.subprocess.Process


@pytest.fixture
def home(pg_params: ConnectParams) -> Iterator[ChoirHome]:
    with short_root() as root:
        yield make_home(
            root,
            postgres=external_postgres(pg_params),
            heartbeat_interval_ms=HEARTBEAT_MS,
            crash_detection_threshold_ms=THRESHOLD_MS,
        )


@pytest.fixture
async def running(home: ChoirHome) -> AsyncIterator[Running]:
    async with running_daemon(home) as daemon, await ChoirClient.connect(home) as operator:
        assert daemon.services is not None
        started = await daemon.services.sessions.start("agent-1", {})
        socket = await daemon.open_agent_socket("agent-1")
        agent = await start_fake_agent(
            socket, started.session_id, started.lease_token, interval_ms=HEARTBEAT_MS
        )
        try:
            yield Running(daemon, operator, started.session_id, agent)
        finally:
            if agent.returncode is None:
                agent.kill()
            await agent.wait()


async def agent_state(operator: ChoirClient) -> str:
    agents = (await operator.agent_list()).agents
    state: str = next(a.state for a in agents if a.agent_id == "agent-1")
    return state


async def test_heartbeats_keep_the_session_alive_past_the_threshold(running: Running) -> None:
    await asyncio.sleep(3 * THRESHOLD_MS / 1000)
    await wait_for_ack(running.agent, 5)
    assert await agent_state(running.operator) == "running"
    row = await session_row(running.daemon, running.session_id)
    assert row.status == SessionStatus.ACTIVE
    assert row.ack_rev >= 5


async def test_a_killed_agent_is_crashed_and_its_leases_released(running: Running) -> None:
    await wait_for_ack(running.agent, 2)
    assert len(await leased(running.daemon, running.session_id)) == 4

    running.agent.kill()
    await running.agent.wait()
    killed = time.monotonic()

    async def crashed() -> bool:
        return await agent_state(running.operator) == "crashed"

    await poll_until(crashed, within=DETECTION_BUDGET_S)
    assert await leased(running.daemon, running.session_id) == set()
    took = time.monotonic() - killed
    assert took < DETECTION_BUDGET_S, f"crash noticed and leases released after {took:.2f} s"

    [session] = (await running.operator.session_list("agent-1")).sessions
    assert (session.session_id, session.status) == (running.session_id, "crashed")
    row = await session_row(running.daemon, running.session_id)
    assert row.lease_id is None
    await poll_until(lambda: not running.daemon.home.agent_socket("agent-1").exists())


async def test_a_terminated_agent_ends_its_session_as_stopped(running: Running) -> None:
    await wait_for_ack(running.agent, 1)
    running.agent.terminate()
    assert await running.agent.wait() == 0
    row = await session_row(running.daemon, running.session_id)
    assert row.status == SessionStatus.STOPPED
    assert await leased(running.daemon, running.session_id) == set()
