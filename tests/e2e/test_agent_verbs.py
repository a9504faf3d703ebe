"""The 8 agent verbs end to end: agent `ControlPlane` -> real transport -> a running choird.

Every test runs twice: over the agent's own Unix socket and over HTTPS (self-signed
certificate, verified). What choird answers is checked as the agent sees it, and what it
stored is checked in Postgres.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass

import pytest

from choir.agent.kernel.commitlog import CommitLog
from choir.agent.replication.control_plane import ControlPlane
from choir.client import ChoirClient
from choir.daemon.app import ChoirDaemon
from choir.protocol import (
    ErrorCode,
    ExecuteHostToolRequest,
    FetchDynamicConfigRequest,
    GetSecretsRequest,
    ReportStatusRequest,
    RequestApprovalRequest,
    TerminateSelfRequest,
)
from choir.store.leases import Resource
from choir.store.sessions import SessionStatus
from choir.transport import RpcError, connect
from tests.e2e.agent_side import commit_messages, heartbeat, hello
from tests.harness.daemons import (
    Transport,
    agent_control_plane,
    agent_target,
    leased,
    poll_until,
    session_row,
    stored_events,
)
from tests.harness.homes import GIT_TOKEN

AGENT_1_LEASES = {
    Resource("agent", "agent-1"),
    Resource("workspace", "default"),
    Resource("git_identity", "agent-1"),
    Resource("dm", "console"),
}


@dataclass
class Agent:
    """agent-1's running session and its control plane over the test's transport."""

    control_plane: ControlPlane
    session_id: str
    lease_token: str


@pytest.fixture
async def agent(daemon: ChoirDaemon, transport: Transport) -> AsyncIterator[Agent]:
    assert daemon.services is not None
    started = await daemon.services.sessions.start("agent-1", {})
    control_plane = await agent_control_plane(
        daemon, transport, started.session_id, started.lease_token
    )
    try:
        yield Agent(control_plane, started.session_id, started.lease_token)
    finally:
        await control_plane.close()


async def test_hello_secrets_and_dynamic_config(agent: Agent) -> None:
    greeting = await agent.control_plane.init_hello(hello("agent-1", agent.session_id))
    assert greeting.status == "fresh"
    assert greeting.lease_token == agent.lease_token
    assert greeting.resource_bindings.workspace == "default"
    assert greeting.config_version == 1

    granted = await agent.control_plane.get_secrets(GetSecretsRequest(resources=["git-token"]))
    assert granted.secrets["git-token"].get_secret_value() == GIT_TOKEN

    latest = await agent.control_plane.fetch_dynamic_config(
        FetchDynamicConfigRequest(current_config_version=0)
    )
    assert latest.config_version == 1
    assert latest.config is not None
    current = await agent.control_plane.fetch_dynamic_config(
        FetchDynamicConfigRequest(current_config_version=1)
    )
    assert current.config is None


async def test_a_secret_the_session_is_not_bound_to_is_refused(agent: Agent) -> None:
    """choird's own Postgres password is in secrets.json, but no agent resource names it."""
    with pytest.raises(RpcError) as refused:
        await agent.control_plane.get_secrets(GetSecretsRequest(resources=["pg"]))
    assert refused.value.code == ErrorCode.INVALID_REQUEST
    assert "pg are not bound to session" in refused.value.message
    assert "allowed: git-token" in refused.value.message


async def test_heartbeats_are_durable_and_a_resend_is_a_no_op(
    daemon: ChoirDaemon, agent: Agent
) -> None:
    log = CommitLog()
    commit_messages(log, 3)
    first = await agent.control_plane.heartbeat(heartbeat(log))
    assert first.ack_rev == 3
    assert first.config_version_latest == 1
    stored = await stored_events(daemon, agent.session_id)
    assert [(e.rev, e.hash) for e in stored] == [(e.rev, e.hash) for e in log]

    resent = await agent.control_plane.heartbeat(heartbeat(log))
    assert resent.ack_rev == 3
    assert len(await stored_events(daemon, agent.session_id)) == 3

    commit_messages(log, 2)
    more = await agent.control_plane.heartbeat(heartbeat(log, base_rev=3))
    assert more.ack_rev == 5
    row = await session_row(daemon, agent.session_id)
    assert (row.ack_rev, row.head_hash) == (5, log.head_hash)


async def test_a_heartbeat_ahead_of_the_ack_is_refused_and_nothing_stored(
    daemon: ChoirDaemon, agent: Agent
) -> None:
    log = CommitLog()
    commit_messages(log, 5)
    with pytest.raises(RpcError) as refused:
        await agent.control_plane.heartbeat(heartbeat(log, base_rev=2))
    assert refused.value.code == ErrorCode.CONFLICT
    assert refused.value.message.startswith("expected base_rev 0, got 2")
    assert await stored_events(daemon, agent.session_id) == []
    assert (await session_row(daemon, agent.session_id)).ack_rev == 0


async def test_an_approval_request_is_answered_by_the_operator_and_pushed_back(
    agent: Agent, operator: ChoirClient
) -> None:
    asked = await agent.control_plane.request_approval(
        # a budget question is told when answered; an applied proposal once its apply ends
        RequestApprovalRequest(request_type="budget_extension", payload={"suggested": 1})
    )
    assert asked.status == "pending"
    pending = await operator.approval_list()
    assert [a.approval_id for a in pending.approvals] == [asked.approval_id]

    await operator.approval_approve(asked.approval_id)
    # Pushes made before the agent subscribes wait for it (the hub keeps a short history).
    pushes = agent.control_plane.pushes()
    assert isinstance(pushes, AsyncGenerator)
    try:
        envelope = await asyncio.wait_for(anext(pushes), 5)
    finally:
        await pushes.aclose()
    assert envelope.session_id == agent.session_id
    assert envelope.push.kind == "approval_resolved"
    assert envelope.push.model_dump()["approval_id"] == asked.approval_id


async def test_reported_lane_status_shows_in_agent_status(
    agent: Agent, operator: ChoirClient
) -> None:
    report = ReportStatusRequest(
        lane="edge", state="EDGE_REASONING", skill="triage", step=2, budget_remaining={"x": 1}
    )
    ack = await agent.control_plane.report_status(report)
    assert ack.ack is True
    status = await operator.agent_status("agent-1")
    assert status.state == "running"
    assert status.skill == "triage"
    [lane] = status.lanes
    assert (lane.lane, lane.state, lane.step) == ("edge", "EDGE_REASONING", 2)


async def test_an_unknown_host_tool_is_a_structured_error(agent: Agent) -> None:
    answer = await agent.control_plane.execute_host_tool(
        ExecuteHostToolRequest(tool_name="choir.no.such", call_id="call-1", input={"a": 1})
    )
    assert answer.call_id == "call-1"
    assert answer.status == "error"
    result = answer.tool_result()
    assert result.error_code == "unknown_host_tool"
    assert "choir.no.such" in result.summary


async def test_terminate_self_ends_the_session_and_revokes_the_token(
    daemon: ChoirDaemon, agent: Agent, transport: Transport
) -> None:
    assert await leased(daemon, agent.session_id) == AGENT_1_LEASES
    ack = await agent.control_plane.terminate_self(TerminateSelfRequest(reason="done"))
    assert ack.ack is True
    row = await session_row(daemon, agent.session_id)
    assert row.status == SessionStatus.STOPPED
    assert row.lease_id is None
    assert await leased(daemon, agent.session_id) == set()
    if transport == "uds":
        # The agent's socket lives as long as its session.
        await poll_until(lambda: not daemon.home.agent_socket("agent-1").exists())
    # A new connection (the socket re-opened, as for the agent's next session) with the old token.
    again = await agent_control_plane(daemon, transport, agent.session_id, agent.lease_token)
    try:
        with pytest.raises(RpcError) as refused:
            await again.report_status(ReportStatusRequest(lane="edge", state="EDGE_IDLE"))
    finally:
        await again.close()
    assert refused.value.code == ErrorCode.UNAUTHORIZED


async def test_a_forged_token_is_refused(
    daemon: ChoirDaemon, agent: Agent, transport: Transport
) -> None:
    forged = secrets.token_urlsafe(len(agent.lease_token))[: len(agent.lease_token)]
    impostor = await agent_control_plane(daemon, transport, agent.session_id, forged)
    try:
        with pytest.raises(RpcError) as refused:
            await impostor.init_hello(hello("agent-1", agent.session_id))
    finally:
        await impostor.close()
    assert refused.value.code == ErrorCode.UNAUTHORIZED
    # The real token still works: a refused forgery changes nothing.
    greeting = await agent.control_plane.init_hello(hello("agent-1", agent.session_id))
    assert greeting.status == "fresh"


async def test_another_sessions_token_is_refused(
    daemon: ChoirDaemon, agent: Agent, transport: Transport
) -> None:
    """agent-2's token with agent-1's session id: over HTTP the token alone is the identity."""
    assert daemon.services is not None
    other = await daemon.services.sessions.start("agent-2", {})
    crossed = await agent_control_plane(daemon, transport, agent.session_id, other.lease_token)
    try:
        with pytest.raises(RpcError) as refused:
            await crossed.report_status(ReportStatusRequest(lane="edge", state="EDGE_IDLE"))
    finally:
        await crossed.close()
    assert refused.value.code == ErrorCode.UNAUTHORIZED


async def test_agent_a_token_on_agent_b_socket_is_refused(daemon: ChoirDaemon) -> None:
    assert daemon.services is not None
    await daemon.services.sessions.start("agent-1", {})
    other = await daemon.services.sessions.start("agent-2", {})
    # agent-2's own valid session and token, but sent to agent-1's socket.
    wrong_socket = await agent_control_plane(
        daemon, "uds", other.session_id, other.lease_token, agent_id="agent-1"
    )
    try:
        with pytest.raises(RpcError, match="this socket serves another agent") as refused:
            await wrong_socket.init_hello(hello("agent-2", other.session_id))
    finally:
        await wrong_socket.close()
    assert refused.value.code == ErrorCode.UNAUTHORIZED
    right_socket = await agent_control_plane(
        daemon, "uds", other.session_id, other.lease_token, agent_id="agent-2"
    )
    try:
        greeting = await right_socket.init_hello(hello("agent-2", other.session_id))
    finally:
        await right_socket.close()
    assert greeting.status == "fresh"


@pytest.mark.parametrize(
    ("verb", "payload", "code", "message"),
    [
        ("DROP_EVERYTHING", {}, ErrorCode.NOT_FOUND, "unknown verb 'DROP_EVERYTHING'"),
        ("HEARTBEAT", {"base_rev": -1}, ErrorCode.INVALID_REQUEST, "HEARTBEAT payload: "),
        ("REPORT_STATUS", {"lane": "x y", "state": "EDGE_IDLE"}, ErrorCode.INVALID_REQUEST, "lane"),
        ("GET_SECRETS", {"resources": "git-token"}, ErrorCode.INVALID_REQUEST, "resources"),
    ],
    ids=["unknown-verb", "negative-rev", "bad-lane", "resources-not-a-list"],
)
async def test_malformed_calls_are_refused_with_the_reason(
    daemon: ChoirDaemon,
    agent: Agent,
    transport: Transport,
    verb: str,
    payload: dict[str, object],
    code: ErrorCode,
    message: str,
) -> None:
    target, ca_file = await agent_target(daemon, transport)
    async with await connect(
        target, session_id=agent.session_id, lease_token=agent.lease_token, ca_file=ca_file
    ) as client:
        with pytest.raises(RpcError) as refused:
            await client.call(verb, payload)
        assert refused.value.code == code
        assert message in refused.value.message
        # The connection, and the session, are still good.
        assert await client.call("REPORT_STATUS", {"lane": "edge", "state": "EDGE_IDLE"}) == {
            "ack": True
        }
