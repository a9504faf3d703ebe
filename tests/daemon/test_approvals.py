"""Approvals: requested by an agent, resolved exactly once, timed out when nobody answers."""

from __future__ import annotations

import pytest

from choir.daemon.agents.services import AgentServices
from choir.daemon.approvals import ApprovalService, push_of
from choir.errors import ConflictError, NotFoundError
from choir.protocol import ApprovalResolvedPush, RequestApprovalRequest
from choir.store.approvals.audit import audit_of
from choir.store.approvals.pending import ApprovalRow
from tests.harness.proposals import TOOL_PROPOSAL

from .conftest import Clock

THIRTY_MINUTES_MS = 1_800_000


@pytest.fixture
async def ask(services: AgentServices):
    """Request an approval from a running agent-1; returns its id."""
    started = await services.sessions.start("agent-1", {})
    ctx = await services.sessions.authenticate(started.session_id, started.lease_token)

    async def request(kind: str = "tool") -> str:
        payload: dict[str, object] = {"proposal": kind}
        if kind == "tool":  # checked as the agent's tool loader would: a manifest that loads
            payload.update(TOOL_PROPOSAL)
        if kind == "config_change":  # checked as `config load` would: a patch that loads
            payload["patch"] = {"approval_timeout_ms": 600_000}
        reply = await services.approvals.request(
            ctx, RequestApprovalRequest(request_type=kind, payload=payload)
        )
        return reply.approval_id

    return request


@pytest.fixture
def resolved(services: AgentServices) -> list[ApprovalRow]:
    seen: list[ApprovalRow] = []
    services.approvals.subscribe(seen.append)
    return seen


async def test_an_approval_is_pending_until_answered_once(services, ask, resolved, clock):
    approvals: ApprovalService = services.approvals
    first = await ask("tool")
    clock.advance(1)
    second = await ask("config_change")

    assert [a.id for a in await approvals.list()] == [first, second]
    clock.advance(1_000)
    approved = await approvals.approve(first, by="console")

    assert (approved.status, approved.resolved_by, approved.resolved_at) == (
        "approved",
        "console",
        clock(),
    )
    assert resolved == [approved]
    assert push_of(approved) == ApprovalResolvedPush(approval_id=first, status="approved")
    assert [a.id for a in await approvals.list()] == [second]
    assert [a.id for a in await approvals.list(status=None)] == [first, second]
    with pytest.raises(ConflictError, match=f"approval {first} is already approved"):
        await approvals.reject(first, by="ops")
    with pytest.raises(ConflictError, match=f"approval {first} is already approved"):
        await approvals.approve(first, by="ops")
    assert len(resolved) == 1


async def test_rejecting(services, ask, resolved):
    approval = await ask()

    rejected = await services.approvals.reject(approval, by="choirctl")

    assert rejected.status == "rejected"
    assert push_of(rejected).status == "rejected"
    assert (await services.approvals.show(approval)).status == "rejected"


async def test_unanswered_approvals_are_rejected_by_the_timeout(
    services, ask, resolved, clock: Clock
):
    old = await ask()
    clock.advance(THIRTY_MINUTES_MS - 1_000)
    young = await ask()
    clock.advance(2_000)

    expired = await services.approvals.expire_overdue()

    assert [(a.id, a.status, a.resolved_by, a.resolved_via) for a in expired] == [
        (old, "rejected", "timeout", "timeout")
    ]  # §19.6: silence is a rejection
    assert resolved == expired
    assert push_of(expired[0]).status == "rejected"
    assert [a.id for a in await services.approvals.list()] == [young]
    assert await services.approvals.expire_overdue() == []
    with pytest.raises(ConflictError, match=f"approval {old} is already rejected"):
        await services.approvals.approve(old, by="console")


async def test_a_regular_dm_answers_only_its_agents_approvals(services, ask):
    approval = await ask()

    with pytest.raises(ConflictError, match="belongs to agent-1, not agent-2"):
        await services.approvals.approve(approval, by="ops", agent_id="agent-2")

    assert (
        await services.approvals.approve(approval, by="console", agent_id="agent-1")
    ).status == ("approved")


async def test_unknown_approvals_are_not_found(services):
    with pytest.raises(NotFoundError, match="no approval 'ap-nope'"):
        await services.approvals.approve("ap-nope", by="console")
    with pytest.raises(NotFoundError):
        await services.approvals.show("ap-nope")


async def test_new_requests_are_told_to_request_listeners(services, ask, resolved):
    requested: list[ApprovalRow] = []
    stop = services.approvals.subscribe_requests(requested.append)

    approval = await ask("config_change")
    stop()
    await ask("tool")

    assert [(a.id, a.status, a.request_type) for a in requested] == [
        (approval, "pending", "config_change")
    ]
    assert resolved == []


async def test_each_decision_records_who_through_which_front_end_and_when(
    services, ask, pool, clock
):
    answers = [("choirctl", "choirctl"), ("choir tui", "tui"), ("ops", "console")]
    for by, via in answers:
        approval = await ask()
        clock.advance(1_000)
        decided = await services.approvals.approve(approval, by=by)
        assert (decided.resolved_by, decided.resolved_via) == (by, via)
        async with pool.acquire() as conn:
            trail = await audit_of(conn, approval)
        assert [(f.action, f.actor, f.via) for f in trail] == [
            ("requested", "agent-1", None),
            ("approved", by, via),
        ]
        assert trail[1].at == clock()
    old = await ask()
    clock.advance(THIRTY_MINUTES_MS + 1)
    await services.approvals.expire_overdue()
    async with pool.acquire() as conn:
        trail = await audit_of(conn, old)
    assert [(f.action, f.actor, f.via) for f in trail][-1] == ("rejected", "timeout", "timeout")
    assert "silence is a rejection" in trail[-1].detail


async def test_a_budget_question_is_answered_with_an_amount_carried_to_the_agent(services, ask):
    """Issue 19: `extend` grants an amount (in the row and the push); approve grants the
    suggested one; a proposal that is not a budget question cannot be extended."""
    ctx_ask = services.approvals
    started = await services.sessions.start("agent-2", {})
    ctx = await services.sessions.authenticate(started.session_id, started.lease_token)
    payload = {"budget": "per_job_max_steps", "limit": 4, "used": 4, "suggested": 4}
    request = RequestApprovalRequest(request_type="budget_extension", payload=payload)
    first = (await ctx_ask.request(ctx, request)).approval_id
    second = (await ctx_ask.request(ctx, request)).approval_id
    tool = await ask("tool")

    extended = await ctx_ask.extend(first, 7, by="choirctl")
    assert (extended.status, extended.payload) == ("approved", {**payload, "granted": 7})
    assert push_of(extended) == ApprovalResolvedPush(
        approval_id=first, status="approved", extend_by=7
    )
    approved = await ctx_ask.approve(second, by="console")
    assert push_of(approved).extend_by == 4
    with pytest.raises(ConflictError, match=f"approval {tool} is a tool proposal, not a budget"):
        await ctx_ask.extend(tool, 3, by="choirctl")
    assert (await ctx_ask.show(tool)).status == "pending"
    assert push_of(await ctx_ask.approve(tool, by="console")).extend_by is None
