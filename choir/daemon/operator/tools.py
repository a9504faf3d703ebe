"""`tool.register` (§8.10, phase 2 of a tool's registration): a human's implementation of an
approved tool proposal validated, merged, built and deployed.

The branch must be the one an approved `choir.propose.tool` of the agent was committed on, its
apply waiting at `implement`; `proposals.tool.check_registration` says what is wrong with it
before anything moves (a one-line error, nothing merged). The rest is the approval's apply
(`ProposalApplier.register`), durable and undone on failure like a skill's; the answer is the
approval as `approval show` shows it once the apply ended.
"""

from __future__ import annotations

import asyncio

from choir.daemon.operator.approvals.verbs import approval_show
from choir.daemon.operator.context import OperatorContext
from choir.daemon.proposals import git_apply
from choir.daemon.proposals.steps import TOOL
from choir.daemon.proposals.tool import check_registration
from choir.errors import ConflictError, NotFoundError, UnavailableError
from choir.protocol.operator.requests import ApprovalRef, ToolRegister
from choir.protocol.operator.views import ApprovalView
from choir.store.approvals.applies import get_apply


async def tool_register(ctx: OperatorContext, request: ToolRegister) -> ApprovalView:
    ctx.require_agent(request.agent_id)
    if ctx.proposals is None:
        raise UnavailableError("this choird does not apply proposals: start it with its pool")
    approval_id, step = await _proposal_on(ctx, request.agent_id, request.branch)
    if step != "implement":
        raise ConflictError(
            f"the tool on {request.branch} is being registered already (at {step}): "
            f"follow it with choirctl approval show {approval_id}"
        )
    repo = await asyncio.to_thread(git_apply.target_repo, ctx.config, request.agent_id, ctx.home)
    name = request.branch.rsplit("/", 1)[-1]
    tip = await asyncio.to_thread(check_registration, repo, request.branch, name)
    await ctx.proposals.register(approval_id, tip)
    return await approval_show(ctx, ApprovalRef(approval_id=approval_id))


async def _proposal_on(ctx: OperatorContext, agent_id: str, branch: str) -> tuple[str, str]:
    """(approval id, apply step) of the approved tool proposal committed on `branch`."""
    rows = await ctx.services.approvals.list(status="approved", agent_id=agent_id)
    async with ctx.pool.acquire() as conn:
        for row in rows:
            if row.request_type != TOOL:
                continue
            apply = await get_apply(conn, row.id)
            if apply is not None and apply["branch"] == branch:
                return row.id, str(apply["step"])
    raise NotFoundError(
        f"no approved tool proposal of {agent_id} waits on branch {branch!r}: see "
        f"choirctl approval list --all --agent {agent_id} and its approval show"
    )
