"""`approval.list|show|approve|reject|extend` (§8.10, §19.6): each proposal answered once.

Answering goes through `ApprovalService`, which tells its subscribers exactly once: the daemon
pushes `approval_resolved` to the agent from there and the live feed shows it, so nothing here
pushes. Answering an approval that is no longer pending is a conflict naming how it ended.
"""

from __future__ import annotations

from choir.daemon.operator.context import OperatorContext
from choir.daemon.operator.views import approval_view
from choir.protocol.operator.answers import ApprovalList as ApprovalListAnswer
from choir.protocol.operator.requests import (
    ApprovalAnswer,
    ApprovalExtend,
    ApprovalList,
    ApprovalRef,
)
from choir.protocol.operator.views import ApprovalView


async def approval_list(ctx: OperatorContext, request: ApprovalList) -> ApprovalListAnswer:
    """Pending approvals oldest first; with `all`, resolved ones too."""
    if request.agent_id is not None:
        ctx.require_agent(request.agent_id)
    rows = await ctx.services.approvals.list(
        status=None if request.all else "pending", agent_id=request.agent_id
    )
    return ApprovalListAnswer(approvals=[approval_view(row) for row in rows])


async def approval_show(ctx: OperatorContext, request: ApprovalRef) -> ApprovalView:
    return approval_view(await ctx.services.approvals.show(request.approval_id))


async def approval_approve(ctx: OperatorContext, request: ApprovalAnswer) -> ApprovalView:
    row = await ctx.services.approvals.approve(
        request.approval_id, by=request.by, agent_id=request.agent_id
    )
    return approval_view(row)


async def approval_extend(ctx: OperatorContext, request: ApprovalExtend) -> ApprovalView:
    """A paused job's budget question answered with an amount: the job resumes with it."""
    row = await ctx.services.approvals.extend(
        request.approval_id, request.amount, by=request.by, agent_id=request.agent_id
    )
    return approval_view(row)


async def approval_reject(ctx: OperatorContext, request: ApprovalAnswer) -> ApprovalView:
    row = await ctx.services.approvals.reject(
        request.approval_id, by=request.by, agent_id=request.agent_id
    )
    return approval_view(row)
