"""`AgentHandler`, the one place an agent call is authenticated: what a caller is told when its
lease cannot be checked at all."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator

import asyncpg
import pytest

from choir.daemon.agents.handler import AgentHandler
from choir.daemon.agents.refusals import DATABASE_DOWN
from choir.daemon.agents.services import AgentServices
from choir.daemon.staging.stage import ConfigStage
from choir.protocol import ErrorCode, Verb
from choir.store.postgres.pool import Pool
from choir.transport import Peer, Request, RpcError
from choir.transport.dispatch import authorize_events, invoke

from .agent import Chain
from .conftest import Clock


@pytest.fixture
async def dead_pool() -> AsyncIterator[Pool]:
    """A real pool whose server is gone: every acquire fails to connect."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    pool = await asyncpg.create_pool(
        host="127.0.0.1", port=port, user="choir", database="choir", min_size=0, timeout=2
    )
    try:
        yield pool
    finally:
        await pool.close()


async def test_a_lease_choird_cannot_check_is_unavailable_not_unauthorized(
    services: AgentServices, stage: ConfigStage, clock: Clock, dead_pool: Pool
) -> None:
    """A choird that restarted holds no session in memory; while its database is down it cannot
    check a lease, and says so (retry later) rather than calling the agent's lease invalid or
    failing with an internal error."""
    started = await services.sessions.start("agent-1", {})
    restarted = AgentServices.build(dead_pool, stage, clock=clock)
    handler = AgentHandler(restarted.rpc, restarted.sessions, bound_agent="agent-1")
    request = Request(
        verb=Verb.HEARTBEAT.value,
        request_id="r-1",
        session_id=started.session_id,
        lease_token=started.lease_token,
        payload=Chain().heartbeat(0).model_dump(mode="json"),
        peer=Peer("uds", "/run/agent-1.sock"),
    )

    with pytest.raises(RpcError) as refused:
        await invoke(handler, request)
    with pytest.raises(RpcError) as listening:
        await authorize_events(handler, started.session_id, started.lease_token)

    assert (refused.value.code, refused.value.message) == (ErrorCode.UNAVAILABLE, DATABASE_DOWN)
    assert listening.value.code == ErrorCode.UNAVAILABLE
