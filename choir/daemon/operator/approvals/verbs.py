"""`approval.list|show|approve|reject|extend` (§8.10, §19.6): each proposal answered once.

Answering goes through `ApprovalService`, which tells its subscribers exactly once: the daemon
pushes `approval_resolved` to the agent from there and the live feed shows it, so nothing here
pushes. Answering an approval that is no longer pending is a conflict naming how it ended.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from choir.core.proposal_diff import DIRECTORIES, proposal_diff
from choir.daemon.images import repos
from choir.daemon.operator.context import OperatorContext
from choir.daemon.operator.views import approval_view
from choir.daemon.proposals import git_apply, repo_change
from choir.daemon.proposals.config_patch import patched_config
from choir.daemon.proposals.config_restart import CHOICE, RestartPlan, restart_plan
from choir.daemon.proposals.repo_change import REPO_CHANGE
from choir.daemon.proposals.steps import CONFIG_CHANGE, TOOL
from choir.daemon.proposals.tool import proposed_tool
from choir.daemon.staging.diff import config_changes
from choir.errors import ChoirError, UsageError
from choir.protocol.operator.answers import ApprovalList as ApprovalListAnswer
from choir.protocol.operator.requests import (
    ApprovalAnswer,
    ApprovalExtend,
    ApprovalList,
    ApprovalRef,
)
from choir.protocol.operator.views import ApprovalView
from choir.store.approvals.applies import get_apply
from choir.store.approvals.audit import audit_of
from choir.store.approvals.pending import ApprovalRow


async def approval_list(ctx: OperatorContext, request: ApprovalList) -> ApprovalListAnswer:
    """Pending approvals oldest first; with `all`, resolved ones too."""
    if request.agent_id is not None:
        ctx.require_agent(request.agent_id)
    rows = await ctx.services.approvals.list(
        status=None if request.all else "pending", agent_id=request.agent_id
    )
    return ApprovalListAnswer(approvals=[approval_view(row) for row in rows])


async def approval_show(ctx: OperatorContext, request: ApprovalRef) -> ApprovalView:
    """The approval with its audit trail, once approved its apply's progress, and what its
    proposal would change as a diff (`proposal_diff`)."""
    row = await ctx.services.approvals.show(request.approval_id)
    async with ctx.pool.acquire() as conn:
        audit = await audit_of(conn, row.id)
        apply = await get_apply(conn, row.id)
    view = approval_view(row, audit, apply)
    diff = await asyncio.to_thread(_diff, ctx, view)
    return view.model_copy(update={"diff": diff}) if diff is not None else view


def _diff(ctx: OperatorContext, view: ApprovalView) -> str | None:
    """The proposal against the agent repo's current files (its working tree, or choird's
    clone at the configured ref) or config.json on disk; None when there is nothing to
    compare against (an unknown kind, an agent no longer configured, an unreadable repo)."""
    agent = ctx.config.agents.get(view.agent_id)
    if agent is None and view.request_type != "config_change":
        return None
    if view.request_type == REPO_CHANGE:
        return _branch_diff(ctx, view)
    try:
        config_json = json.loads(ctx.home.config_file.read_text())
        root = None
        if agent is not None and view.request_type in DIRECTORIES:
            root = repos.checkout(ctx.home, repos.repo_key(view.agent_id), agent.repo, fetch=False)
    except (OSError, ValueError, ChoirError):
        return None

    def read(path: str) -> str | None:
        try:
            return (root.path / path).read_text() if root is not None else None
        except (OSError, UnicodeDecodeError):
            return None

    return proposal_diff(
        view.request_type, _as_committed(view), read, config_json, agent_id=view.agent_id
    )


def _as_committed(view: ApprovalView) -> dict[str, Any]:
    """The payload with a tool's manifest as phase 1 commits it (choird sets its exec_path),
    so the diff shows the bytes the approval is bound to; as stored when it would not load."""
    if view.request_type != TOOL:
        return view.payload
    try:
        manifest = json.loads(proposed_tool(view.payload).manifest.content)
    except ChoirError:
        return view.payload
    return {**view.payload, "manifest": manifest}


def _branch_diff(ctx: OperatorContext, view: ApprovalView) -> str | None:
    """A repo change's fetched branch against its base on the ref, headed by where it is."""
    branch = f"proposal/{view.session_id or 'none'}/{repo_change.slug_of(view.payload)}"
    try:
        repo = git_apply.target_repo(ctx.config, view.agent_id)
        return repo_change.reviewed(repo, branch).shown(repo)
    except ChoirError:
        return None


async def approval_approve(ctx: OperatorContext, request: ApprovalAnswer) -> ApprovalView:
    pending = await ctx.services.approvals.show(request.approval_id)
    via = ctx.services.approvals.via(request.by)
    if request.restart and pending.request_type != CONFIG_CHANGE:
        choice = "--restart" if via not in CHOICE else "the restart choice"
        raise UsageError(
            f"{choice} is for config changes; approval {pending.id} is a "
            f"{pending.request_type} proposal: approve it without {choice}"
        )
    plain = not request.restart and pending.status == "pending"
    if plain and pending.request_type == CONFIG_CHANGE:
        plan = await asyncio.to_thread(restart_plan_of, ctx, pending)
        if plan is not None and plan.needed:
            raise UsageError(plan.refusal(pending.id, via))
    row = await ctx.services.approvals.approve(
        request.approval_id, by=request.by, agent_id=request.agent_id, restart=request.restart
    )
    if ctx.proposals is not None:
        ctx.proposals.begin(row)  # a skill is applied now; its progress is in `approval show`
    return approval_view(row)


def restart_plan_of(ctx: OperatorContext, row: ApprovalRow) -> RestartPlan | None:
    """What config change `row` needs restarted, against config.json and the running config;
    None when it no longer applies (its apply will say why)."""
    try:
        text = ctx.home.config_file.read_text()
        patched = patched_config(text, row.payload, ctx.stage.secrets.names())
    except (OSError, ChoirError):
        return None
    return restart_plan(config_changes(ctx.stage.running.config, patched.config))


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
