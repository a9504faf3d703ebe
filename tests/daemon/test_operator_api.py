"""The operator API over a real Unix socket: status, agents, sessions, approvals, refusals.

Each test serves `OperatorApi` on `$CHOIR_HOME/socks/choird.sock` over the real control plane
(embedded Postgres, a `choirctl init` home) and talks to it with `ChoirClient`, as choirctl does.
"""

from __future__ import annotations

import asyncio

import pytest

from choir import __version__
from choir.client import ChoirClient
from choir.daemon.agents.services import AgentServices
from choir.daemon.operator.api import OperatorApi
from choir.errors import ConflictError, NotFoundError, UnavailableError, UsageError
from choir.protocol import ReportStatusRequest, RequestApprovalRequest, Verb
from choir.protocol.operator.answers import (
    AgentCounts,
    CancelRequested,
    GatewayView,
    InjectRequested,
)
from choir.store.postgres.pool import open_pool
from choir.transport import UdsServer
from tests.harness.proposals import TOOL_PROPOSAL
from tests.harness.waits import poll_until

from .agent import AgentClient, Chain
from .operator_served import Pushes, served_api, served_choird, served_home, served_pushes  # noqa: F401  (fixtures)


async def start(services: AgentServices, agent_id: str = "agent-1") -> AgentClient:
    return AgentClient(services, await services.sessions.start(agent_id, {}))


def report(lane: str, state: str, **fields: object) -> ReportStatusRequest:
    return ReportStatusRequest.model_validate({"lane": lane, "state": state, **fields})


async def test_status_reports_choirds_health(choird, services, home, clock):
    clock.advance(90_000)
    agent = await start(services)
    ctx = await services.sessions.authenticate(agent.session_id, agent.token)
    await services.approvals.request(
        ctx, RequestApprovalRequest(request_type="tool", payload=TOOL_PROPOSAL)
    )

    status = await choird.status()

    assert status.version == __version__
    assert status.uptime_s == 90.0
    assert (status.config_version, status.config_staged) == (1, False)
    assert status.postgres.state == "ok"
    assert status.gateways == [
        # no choird started it (as before its startup step 8)
        GatewayView(name="bot", type="telegram", state="starting"),
        GatewayView(name="console", type="console", state="running"),
    ]
    assert status.agents == AgentCounts(total=2, running=1, interrupted=[])
    assert status.approvals_pending == 1
    assert status.sockets.operator == str(home.operator_socket)


async def test_status_answers_with_postgres_degraded(home, services, pg_params, pushes, clock):
    async with open_pool(pg_params, min_size=1, max_size=1) as closed:
        pass
    api = OperatorApi(services, closed, push=pushes, clock=clock)
    async with (
        UdsServer(home.operator_socket, api),
        await ChoirClient.connect(home) as client,
    ):
        status = await client.status()
    assert status.postgres.state == "degraded"
    assert status.postgres.reason
    assert status.agents == AgentCounts(total=2, running=None, interrupted=None)


async def test_agent_list_shows_every_configured_agent(choird, services, clock):
    assert [(a.agent_id, a.state) for a in (await choird.agent_list()).agents] == [
        ("agent-1", "stopped"),
        ("agent-2", "stopped"),
    ]
    agent = await start(services)
    clock.advance(5_000)

    first, second = (await choird.agent_list()).agents

    assert first.state == "running"
    assert first.session_id == agent.session_id
    assert first.uptime_s == 5.0
    assert first.config_version == 1
    assert first.bindings["llm"] == "demo"
    assert (second.state, second.session_id, second.bindings["llm"]) == (
        "stopped",
        None,
        "sonnet",
    )
    await services.sessions.mark_crashed(agent.session_id, "test")
    assert (await choird.agent_list()).agents[0].state == "crashed"


async def test_agent_status_has_lanes_skill_budgets_and_config_lag(choird, services, clock):
    agent = await start(services)
    services.status.report(
        agent.session_id,
        report("edge", "EDGE_REASONING", skill="code_review", budget_remaining={"tokens": 900}),
        clock(),
    )
    services.status.report(agent.session_id, report("core:fix-bug", "CORE_REASONING"), clock())

    status = await choird.agent_status("agent-1")

    assert status.state == "running"
    assert status.skill == "code_review"
    assert status.budget_remaining == {"tokens": 900}
    assert status.budgets["max_core_jobs"] == 20
    assert [(lane.lane, lane.state) for lane in status.lanes] == [
        ("edge", "EDGE_REASONING"),
        ("core:fix-bug", "CORE_REASONING"),
    ]
    assert (status.config_version, status.config_version_latest) == (1, 1)
    assert status.config_behind is False
    assert status.last_heartbeat_at == clock().isoformat()


async def test_agent_status_of_an_unknown_agent_is_not_found(choird):
    with pytest.raises(NotFoundError, match=r"no agent named 'nobody'.*agent-1, agent-2"):
        await choird.agent_status("nobody")


async def test_session_list_newest_first_and_by_agent(choird, services, clock):
    one = await start(services)
    clock.advance(1_000)
    two = await start(services, "agent-2")

    listed = (await choird.session_list()).sessions
    assert [s.session_id for s in listed] == [two.session_id, one.session_id]
    assert listed[0].status == "active"
    only = (await choird.session_list("agent-1")).sessions
    assert [s.session_id for s in only] == [one.session_id]
    with pytest.raises(NotFoundError):
        await choird.session_list("nobody")


async def test_session_events_reads_the_last_events_or_a_window(choird, services):
    agent = await start(services)
    chain = Chain()
    chain.commit(7)
    await agent.ok(Verb.HEARTBEAT, chain.heartbeat(0))

    tail = await choird.session_events(agent.session_id, limit=3)
    assert [e.rev for e in tail.events] == [5, 6, 7]
    assert tail.next_rev == 8
    assert tail.events[0].event_type == "user_msg"
    assert tail.events[0].payload["text"] == "hello 5"
    window = await choird.session_events(agent.session_id, from_rev=2, limit=2)
    assert [e.rev for e in window.events] == [2, 3]
    assert (await choird.session_events(agent.session_id, from_rev=9)).events == []


async def test_session_events_refusals(choird, services):
    agent = await start(services)
    with pytest.raises(NotFoundError, match=r"no session 's-none'"):
        await choird.session_events("s-none")
    with pytest.raises(UsageError, match=r"session.events: from_rev"):
        await choird.session_events(agent.session_id, from_rev=0)
    with pytest.raises(UsageError, match=r"answers with a stream"):
        await choird.call("session.events", session_id=agent.session_id, follow=True)


async def test_following_events_sends_the_snapshot_then_new_ones_until_the_end(choird, services):
    agent = await start(services)
    chain = Chain()
    chain.commit(2)
    await agent.ok(Verb.HEARTBEAT, chain.heartbeat(0))
    seen: list[int] = []

    async def follow() -> None:
        async for event in choird.follow_session_events(agent.session_id):
            seen.append(event.rev)

    reader = asyncio.create_task(follow())
    await poll_until(lambda: seen == [1, 2])
    chain.commit(3)
    await agent.ok(Verb.HEARTBEAT, chain.heartbeat(2))
    await poll_until(lambda: seen == [1, 2, 3, 4, 5])
    await services.sessions.stop(agent.session_id, "test")
    await asyncio.wait_for(reader, 5)
    assert seen == [1, 2, 3, 4, 5]


async def test_following_an_unknown_session_is_refused_at_once(choird):
    with pytest.raises(NotFoundError):
        async for _ in choird.follow_session_events("s-none"):
            pass


async def test_session_cores_lists_core_lanes(choird, services, clock):
    agent = await start(services)
    services.status.report(agent.session_id, report("edge", "EDGE_IDLE"), clock())
    services.status.report(
        agent.session_id,
        report("core:fix-bug", "CORE_WAITING_TOOL", skill="debug", step=4),
        clock(),
    )

    cores = await choird.session_cores(agent.session_id)

    assert cores.status == "active"
    assert [(c.job_name, c.state, c.skill, c.step) for c in cores.cores] == [
        ("fix-bug", "CORE_WAITING_TOOL", "debug", 4)
    ]


async def test_cancel_pushes_to_the_agent(choird, services, pushes, clock):
    agent = await start(services)
    services.status.report(agent.session_id, report("core:fix-bug", "CORE_REASONING"), clock())
    services.status.report(agent.session_id, report("core:old-job", "CORE_COMPLETED"), clock())

    answer = await choird.session_cancel(agent.session_id, "fix-bug")

    assert answer == CancelRequested(
        session_id=agent.session_id, job_name="fix-bug", requested=True
    )
    assert pushes.sent[-1] == (
        agent.session_id,
        {"kind": "core_cancel", "job_name": "fix-bug", "reason": "cancelled by the operator"},
    )
    with pytest.raises(NotFoundError, match=r"no core job named 'nope'.*session cores"):
        await choird.session_cancel(agent.session_id, "nope")
    with pytest.raises(ConflictError, match=r"already finished \(CORE_COMPLETED\)"):
        await choird.session_cancel(agent.session_id, "old-job")
    with pytest.raises(UsageError, match=r"invalid job name"):
        await choird.session_cancel(agent.session_id, "Bad Name")


async def test_inject_pushes_the_instruction_for_a_running_job_only(
    choird, services, pushes, clock
):
    agent = await start(services)
    services.status.report(agent.session_id, report("core:fix-bug", "CORE_REASONING"), clock())
    services.status.report(agent.session_id, report("core:old-job", "CORE_COMPLETED"), clock())

    answer = await choird.session_inject(agent.session_id, "fix-bug", "keep the old page")

    assert answer == InjectRequested(
        session_id=agent.session_id, job_name="fix-bug", requested=True
    )
    assert pushes.sent[-1] == (
        agent.session_id,
        {"kind": "core_inject", "job_name": "fix-bug", "text": "keep the old page"},
    )
    with pytest.raises(NotFoundError, match=r"no core job named 'nope'.*session cores"):
        await choird.session_inject(agent.session_id, "nope", "x")
    with pytest.raises(ConflictError, match=r"already finished \(CORE_COMPLETED\): nothing to"):
        await choird.session_inject(agent.session_id, "old-job", "x")
    with pytest.raises(UsageError):
        await choird.session_inject(agent.session_id, "fix-bug", "")
    assert len(pushes.kinds(agent.session_id)) == 1


async def test_compact_pushes_to_an_active_session_only(choird, services, pushes):
    agent = await start(services)

    await choird.session_compact(agent.session_id)
    await choird.session_compact(agent.session_id, "edge")

    assert pushes.kinds(agent.session_id) == ["compact", "compact"]
    assert pushes.sent[-1][1]["lane"] == "edge"
    with pytest.raises(NotFoundError, match=r"no lane 'core:ghost'"):
        await choird.session_compact(agent.session_id, "core:ghost")
    await services.sessions.stop(agent.session_id, "test")
    with pytest.raises(ConflictError, match=r"is not active \(it is stopped\)"):
        await choird.session_compact(agent.session_id)
    with pytest.raises(NotFoundError):
        await choird.session_cancel("s-none", "fix-bug")


async def test_approvals_are_listed_shown_and_answered_once(choird, services, clock):
    agent = await start(services)
    ctx = await services.sessions.authenticate(agent.session_id, agent.token)
    ids = []
    for kind in ("budget_extension", "budget_extension"):  # neither checked at proposal time
        clock.advance(1_000)
        request = RequestApprovalRequest(request_type=kind, payload={"summary": kind})
        ids.append((await services.approvals.request(ctx, request)).approval_id)

    pending = (await choird.approval_list()).approvals
    assert [a.approval_id for a in pending] == ids
    shown = await choird.approval_show(ids[0])
    assert (shown.agent_id, shown.request_type, shown.payload) == (
        "agent-1",
        "budget_extension",
        {"summary": "budget_extension"},
    )
    with pytest.raises(UsageError, match="--restart is for config changes; approval"):
        await choird.approval_approve(ids[0], restart=True)  # and it stays pending
    approved = await choird.approval_approve(ids[0])
    assert (approved.status, approved.resolved_by) == ("approved", "choirctl")
    assert (await choird.approval_reject(ids[1], by="console")).resolved_by == "console"

    with pytest.raises(ConflictError, match=f"approval {ids[0]} is already approved"):
        await choird.approval_reject(ids[0])
    assert (await choird.approval_list()).approvals == []
    everything = await choird.approval_list(include_resolved=True, agent_id="agent-1")
    assert [a.status for a in everything.approvals] == ["approved", "rejected"]
    with pytest.raises(NotFoundError, match=r"no approval 'ap-none'"):
        await choird.approval_show("ap-none")


async def test_unknown_verbs_and_bad_payloads_are_refused_with_the_fix(choird):
    with pytest.raises(UsageError, match=r"unknown operator verb 'agent.explode'"):
        await choird.call("agent.explode")
    with pytest.raises(UsageError, match=r"session.list: limit"):
        await choird.call("session.list", limit=0)
    with pytest.raises(UsageError, match=r"status: colour: Extra inputs"):
        await choird.call("status", colour="blue")


async def test_connecting_without_choird_says_how_to_start_it(home):
    with pytest.raises(UnavailableError, match=r"choird is not running \(no socket at .*choird"):
        await ChoirClient.connect(home)
    home.socks.mkdir(parents=True, exist_ok=True)
    home.operator_socket.touch()
    with pytest.raises(UnavailableError, match=r"nothing listens on"):
        await ChoirClient.connect(home)
