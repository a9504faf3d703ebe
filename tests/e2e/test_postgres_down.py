"""Postgres going away under a running choird, and coming back.

choird runs its own embedded Postgres here (the home's default), so the test can stop exactly
the server choird uses. While it is down: `status` says degraded, a HEARTBEAT is refused rather
than acknowledged (an ack would let the agent drop events that are not durable), and calls that
need no database still work. Once the server is back, the same heartbeat is acknowledged and
stored.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from choir.agent.kernel.commitlog import CommitLog
from choir.agent.replication.control_plane import ControlPlane
from choir.client import ChoirClient
from choir.daemon.app import ChoirDaemon
from choir.protocol import ErrorCode, ReportStatusRequest
from choir.store.postgres.embedded import EmbeddedPostgres
from choir.transport import RpcError
from tests.e2e.agent_side import commit_messages, heartbeat, hello
from tests.harness.daemons import agent_control_plane, poll_until, running_daemon, stored_events
from tests.harness.homes import make_home, short_root

pytestmark = pytest.mark.slow


@dataclass
class Stack:
    daemon: ChoirDaemon
    server: EmbeddedPostgres
    operator: ChoirClient
    agent: ControlPlane
    session_id: str


@pytest.fixture
async def stack() -> AsyncIterator[Stack]:
    with short_root("pd-") as root:
        home = make_home(root)
        async with running_daemon(home) as daemon, await ChoirClient.connect(home) as operator:
            assert daemon.services is not None
            assert daemon.database is not None
            server = daemon.database.embedded
            assert server is not None
            started = await daemon.services.sessions.start("agent-1", {})
            agent = await agent_control_plane(
                daemon, "uds", started.session_id, started.lease_token
            )
            try:
                await agent.init_hello(hello("agent-1", started.session_id))
                yield Stack(daemon, server, operator, agent, started.session_id)
            finally:
                await agent.close()


async def postgres_state(operator: ChoirClient) -> str:
    state: str = (await operator.status()).postgres.state
    return state


async def test_choird_degrades_while_postgres_is_down_and_recovers(stack: Stack) -> None:
    log = CommitLog()
    commit_messages(log, 2)
    assert (await stack.agent.heartbeat(heartbeat(log))).ack_rev == 2

    await asyncio.to_thread(stack.server.stop)
    status = await stack.operator.status()
    assert status.postgres.state == "degraded"
    assert status.postgres.reason

    commit_messages(log, 3)
    with pytest.raises(RpcError) as refused:
        await stack.agent.heartbeat(heartbeat(log, base_rev=2))
    # Not acknowledged: the agent keeps the events and resends them once choird says so.
    assert refused.value.code == ErrorCode.UNAVAILABLE
    assert "retry later" in refused.value.message
    # What needs no database keeps working.
    ack = await stack.agent.report_status(ReportStatusRequest(lane="edge", state="EDGE_IDLE"))
    assert ack.ack is True

    await asyncio.to_thread(stack.server.start)

    async def postgres_ok() -> bool:
        return await postgres_state(stack.operator) == "ok"

    await poll_until(postgres_ok, within=10)
    assert (await stack.agent.heartbeat(heartbeat(log, base_rev=2))).ack_rev == 5
    stored = await stored_events(stack.daemon, stack.session_id)
    assert [e.hash for e in stored] == [e.hash for e in log]
