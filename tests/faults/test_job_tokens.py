"""Core job tokens (§7.5(3)): a job's host tool calls and proposals carry a token derived from
the lease, and choird refuses one whose job ended (a restarted choird too), that expired, or that
another session's lease derived.

A real choird (the production composition root, in this process) serves the agent's calls on
its socket; the agent side is choir-agent's own pieces — its `ControlPlane`, its host bridge
and its `JobTokens` over the session's lease, and a `CommitLog` replicated by heartbeat (how
choird learns that a job ended). The host tool is the test's own and counts its runs, so a
refusal is seen to run nothing.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from choir.agent.kernel.commitlog import CommitLog
from choir.agent.replication.control_plane import ControlPlane, ControlPlaneHostBridge
from choir.agent.replication.job_tokens import JobTokens
from choir.daemon.agents.host_tools import HostToolCall, HostToolHandler
from choir.daemon.agents.job_gate import JobGate
from choir.daemon.app import ChoirDaemon
from choir.errors import ConflictError
from choir.home import ChoirHome
from choir.protocol import (
    EDGE_LANE,
    CoreJobStart,
    CoreStarted,
    CoreStopped,
    ExecuteHostToolRequest,
    RequestApprovalRequest,
    ToolResult,
    core_lane,
)
from choir.protocol.wire.job_tokens import JOB_TOKEN_REFUSED, JOB_TOKEN_TTL, JobToken
from choir.store.postgres.target import ConnectParams
from choir.transport import RpcError
from tests.e2e.agent_side import heartbeat, hello
from tests.harness.daemons import agent_control_plane, pool_of, running_daemon
from tests.harness.homes import external_postgres, make_home

pytestmark = [pytest.mark.slow]

TOOL = "test.counting"
JOB, JOB_ID = "fix-tests", "job-1"
LANE = core_lane(JOB)


@pytest.fixture
def home(root: Path, pg_params: ConnectParams) -> ChoirHome:
    return make_home(root, postgres=external_postgres(pg_params))


def counting_tool(
    runs: list[str], started: asyncio.Event | None = None, release: asyncio.Event | None = None
) -> HostToolHandler:
    async def handler(call: HostToolCall) -> ToolResult:
        runs.append(call.call_id)
        if started is not None:
            started.set()
        if release is not None:
            await release.wait()
        return ToolResult.ok("counted", run=len(runs))

    return handler


class Agent:
    """One session's agent side: its control plane, its job tokens, its replicated log."""

    def __init__(self, cp: ControlPlane, session_id: str, lease_token: str) -> None:
        self.cp, self.session_id, self.lease_token = cp, session_id, lease_token
        self.tokens = JobTokens(lease_token, session_id)
        self.running: dict[str, str] = {LANE: JOB_ID}
        self.tokens.job_of = self.running.get
        self.bridge = ControlPlaneHostBridge(cp, self.tokens)
        self.log = CommitLog()
        self.acked = 0

    async def end_job(self, outcome: str = "cancelled") -> None:
        """The job ends in the agent, and its `CoreStopped` is replicated to choird."""
        self.running.pop(LANE, None)
        self.log.commit(
            LANE, CoreStopped(job_name=JOB, job_id=JOB_ID, outcome=outcome, report="stopped")
        )
        await self.replicate()

    async def replicate(self) -> None:
        answer = await self.cp.heartbeat(heartbeat(self.log, base_rev=self.acked))
        self.acked = answer.ack_rev

    async def call(self, call_id: str, job: JobToken | None) -> ToolResult:
        request = ExecuteHostToolRequest(tool_name=TOOL, call_id=call_id, job=job)
        return ToolResult.model_validate((await self.cp.execute_host_tool(request)).output)


async def started_agent(daemon: ChoirDaemon, agent_id: str = "agent-1") -> Agent:
    assert daemon.services is not None
    started = await daemon.services.sessions.start(agent_id, {})
    cp = await agent_control_plane(
        daemon, "uds", started.session_id, started.lease_token, agent_id=agent_id
    )
    await cp.init_hello(hello(agent_id, started.session_id))
    agent = Agent(cp, started.session_id, started.lease_token)
    start = CoreJobStart.model_validate(
        {"job_id": JOB_ID, "job_name": JOB, "task_spec": "fix the tests"}
    )
    agent.log.commit(LANE, CoreStarted(job=start))
    await agent.replicate()
    return agent


def refused(result: ToolResult, why: str) -> bool:
    return (
        result.status == "error"
        and result.error_code == JOB_TOKEN_REFUSED
        and why in (result.summary or "")
    )


async def test_a_jobs_host_tool_call_runs_with_its_token(home: ChoirHome) -> None:
    runs: list[str] = []
    async with running_daemon(home) as daemon:
        assert daemon.services is not None
        daemon.services.host_tools.register(TOOL, counting_tool(runs))
        agent = await started_agent(daemon)
        from_job = await agent.bridge.execute_host_tool(TOOL, "call-1", {}, lane=LANE)
        from_edge = await agent.bridge.execute_host_tool(TOOL, "call-2", {}, lane=EDGE_LANE)
        await agent.cp.close()
    assert from_job.status == from_edge.status == "success"
    assert runs == ["call-1", "call-2"]


async def test_a_token_of_an_ended_job_is_refused_and_runs_nothing(home: ChoirHome) -> None:
    runs: list[str] = []
    async with running_daemon(home) as daemon:
        assert daemon.services is not None
        daemon.services.host_tools.register(TOOL, counting_tool(runs))
        agent = await started_agent(daemon)
        token = agent.tokens.for_lane(LANE)
        assert (await agent.call("call-1", token)).status == "success"
        await agent.end_job("completed")
        late = await agent.call("call-2", token)  # the ended job's token, presented anyway
        from_lane = await agent.bridge.execute_host_tool(TOOL, "call-3", {}, lane=LANE)
        from_edge = await agent.bridge.execute_host_tool(TOOL, "call-4", {}, lane=EDGE_LANE)
        await agent.cp.close()
    assert refused(late, "has ended (completed)")
    assert refused(from_lane, "has ended")  # the agent itself no longer sends it
    assert from_edge.status == "success"  # edge's calls need only the lease
    assert runs == ["call-1", "call-4"]


async def test_an_expired_token_is_refused(home: ChoirHome) -> None:
    runs: list[str] = []
    async with running_daemon(home) as daemon:
        assert daemon.services is not None
        daemon.services.host_tools.register(TOOL, counting_tool(runs))
        agent = await started_agent(daemon)
        then = datetime.now(UTC) - JOB_TOKEN_TTL - timedelta(seconds=1)
        old = JobTokens(agent.lease_token, agent.session_id, clock=lambda: then)
        old.job_of = agent.running.get
        expired = await agent.call("call-1", old.for_lane(LANE))
        fresh = await agent.call("call-2", agent.tokens.for_lane(LANE))
        await agent.cp.close()
    assert refused(expired, "has expired")
    assert fresh.status == "success"
    assert runs == ["call-2"]


async def test_a_token_of_one_session_is_refused_in_another(home: ChoirHome) -> None:
    runs: list[str] = []
    async with running_daemon(home) as daemon:
        assert daemon.services is not None
        daemon.services.host_tools.register(TOOL, counting_tool(runs))
        one = await started_agent(daemon, "agent-1")
        other = await started_agent(daemon, "agent-2")
        stolen = await other.call("call-1", one.tokens.for_lane(LANE))
        tampered = one.tokens.for_lane(LANE)
        assert tampered is not None
        longer = tampered.model_copy(update={"expires_at": tampered.expires_at + 3_600_000})
        extended = await one.call("call-2", longer)
        own = await other.call("call-3", other.tokens.for_lane(LANE))
        await one.cp.close()
        await other.cp.close()
    assert refused(stolen, "not issued for this session")
    assert refused(extended, "not issued for this session")
    assert own.status == "success"
    assert runs == ["call-3"]


async def test_a_job_cancelled_while_its_call_runs_gets_no_further_call(home: ChoirHome) -> None:
    runs: list[str] = []
    started_run, release = asyncio.Event(), asyncio.Event()
    async with running_daemon(home) as daemon:
        assert daemon.services is not None
        daemon.services.host_tools.register(TOOL, counting_tool(runs, started_run, release))
        agent = await started_agent(daemon)
        token = agent.tokens.for_lane(LANE)
        in_flight = asyncio.create_task(agent.call("call-1", token))
        await asyncio.wait_for(started_run.wait(), 10)
        await agent.end_job("cancelled")  # replicated while the call still runs
        after = await agent.call("call-2", token)
        resent = await agent.call("call-1", token)  # a resend of the running call
        release.set()
        first = await asyncio.wait_for(in_flight, 10)
        await agent.cp.close()
    assert first.status == "success"  # the call that was running finishes, once
    assert refused(after, "has ended (cancelled)")
    assert refused(resent, "has ended (cancelled)")
    assert runs == ["call-1"]


async def test_a_choird_that_did_not_see_the_end_reads_it_from_the_stored_events(
    home: ChoirHome,
) -> None:
    """The worst moment: the job's end was replicated, then choird restarted while the token
    still had minutes to live — the new choird's gate starts empty (a fresh `JobGate` over the
    same database, as a restarted choird builds it). Before the fix it let the token through."""
    async with running_daemon(home) as daemon:
        assert daemon.services is not None
        agent = await started_agent(daemon)
        token = agent.tokens.for_lane(LANE)
        assert token is not None
        await agent.end_job("terminated")
        ctx = await daemon.services.sessions.authenticate(agent.session_id, agent.lease_token)
        restarted = JobGate(pool_of(daemon))
        forgetful = JobGate()  # what a gate kept in memory only knew after a restart
        said = await restarted.problem(ctx, token)
        before = await forgetful.problem(ctx, token)
        await agent.cp.close()
    assert said == f"job {JOB_ID} has ended (terminated); its token no longer works"
    assert before is None


async def test_an_ended_job_can_propose_nothing_more(home: ChoirHome) -> None:
    async with running_daemon(home) as daemon:
        assert daemon.services is not None
        agent = await started_agent(daemon)
        question = {"summary": "more steps?", "budget": "per_job_max_steps", "suggested": 2}
        asked = await agent.bridge.request_approval("budget_extension", question, lane=LANE)
        token = agent.tokens.for_lane(LANE)
        await agent.end_job("cancelled")
        with pytest.raises(ConflictError, match="the job of lane core:fix-tests has ended"):
            await agent.bridge.request_approval("budget_extension", question, lane=LANE)
        late = RequestApprovalRequest(request_type="budget_extension", payload=question, job=token)
        with pytest.raises(RpcError, match=r"has ended \(cancelled\).*nothing was proposed"):
            await agent.cp.request_approval(late)
        pending = await daemon.services.approvals.list()
        await agent.cp.close()
    assert [a.id for a in pending] == [asked]
