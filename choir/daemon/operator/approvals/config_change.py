"""An approved `choir.propose.config_change` applied as the operator would: config.json written,
then `config load` and `config apply` (issue 17).

Refused, with nothing written, when the patch is not what was reviewed or config.json changed
where it applies since the proposal (the review hash differs), when config.json has edits the
running config has not applied yet (applying would publish them unreviewed), or when the
result would not load. config.json is replaced atomically (keeping its mode) and restored if
`config load` then refuses the home. A change only a restart puts into effect is approved only
with the approver's explicit `--restart` (`config_restart`); the running agents it names are
then restarted (their sessions resumed), while what only a choird restart takes stays pending
(`config show`), the outcome saying so and naming `choir restart`: an approval does not restart
choird itself (the operator picks the moment; a restart would also cut the approval's own
front end off while it reports). A choird killed after
writing config.json starts with it; the apply it resumes then finds the patch already running
and ends `applied`.
"""

from __future__ import annotations

import asyncio
import json
import stat
from typing import Any, Final

from choir.config import config_hash
from choir.config.atomic import atomic_write
from choir.config.validation.validate import validate_config_text
from choir.core.proposal_diff import merge_patch
from choir.daemon.operator.agents.lifecycle import agent_restart
from choir.daemon.operator.config import config_apply, config_load
from choir.daemon.operator.context import OperatorContext
from choir.daemon.proposals.config_patch import patch_of, patched_config, review_hash
from choir.daemon.proposals.config_restart import HOW_TO_RESTART_CHOIRD, RestartPlan, restart_plan
from choir.daemon.proposals.executor import Note
from choir.daemon.proposals.git_apply import ApplyError
from choir.errors import ChoirError, one_line
from choir.failpoints import failpoint
from choir.protocol.operator.answers import ChangeView
from choir.protocol.operator.requests import AgentRef, NoArguments
from choir.store.approvals.pending import ApprovalRow
from choir.store.sessions import SessionStatus

_LOCK: Final = asyncio.Lock()
"""One config change at a time: each reads config.json, writes it and publishes it."""


async def apply_config_change(ctx: OperatorContext, row: ApprovalRow, note: Note) -> str:
    """Apply approved config change `row`; what changed (`ApplyError` naming why not)."""
    async with _LOCK:
        path = ctx.home.config_file
        try:
            before = await asyncio.to_thread(path.read_text)
            mode = stat.S_IMODE(path.stat().st_mode)
        except OSError as error:
            raise ApplyError(f"cannot read {path}: {error.strerror}") from None
        patch = patch_of(row.payload)
        if _already(before, patch) and _running(ctx, before):
            # a choird killed after writing config.json started with it: the change runs
            await note("step", "check: the patch is already in config.json and running")
            return f"config_version {ctx.stage.running.version}: already in effect"
        patched = patched_config(before, row.payload, ctx.stage.secrets.names())
        current = review_hash(json.loads(before), patch)
        if row.content_sha256 is None or current != row.content_sha256:
            raise ApplyError(
                "config.json changed where the patch applies since it was proposed, or the patch "
                f"is not the one reviewed (sha256 {current[:12]} ≠ "
                f"{str(row.content_sha256)[:12]}): nothing applied; the agent can propose it again"
            )
        if not _running(ctx, before):
            raise ApplyError(
                "config.json has edits the running config has not applied (choirctl config "
                "diff): apply or undo them first; nothing applied"
            )
        await note("step", f"check: done (sha256 {current[:12]})")
        await asyncio.to_thread(atomic_write, path, patched.text.encode(), mode)
        await note("step", "write: config.json written")
        await failpoint("proposal.config_after_write")
        loaded = await config_load(ctx, NoArguments())
        if not loaded.staged:
            await asyncio.to_thread(atomic_write, path, before.encode(), mode)
            raise ApplyError(f"config load refused it: {'; '.join(loaded.errors or [])}")
        applied = await config_apply(ctx, NoArguments())
        changes = "; ".join(_said(view) for view in applied.changes) or "no change"
        await note("step", f"apply: config_version {applied.config_version}: {changes}")
        pending = [f"{c.op} {c.path}" for c in ctx.stage.pending()]
    detail = f"config_version {applied.config_version}: {changes}"
    if row.payload.get("restart_chosen") is True:
        restarted = await _restart_agents(ctx, restart_plan(applied.changes), note)
        detail += f"; {restarted}" if restarted else ""
        if pending:
            detail += (
                f"; pending until choird restarts: {', '.join(pending)} (choird is not "
                f"restarted by an approval: {HOW_TO_RESTART_CHOIRD} puts it into effect, its "
                "agents kept running)"
            )
    elif pending:
        detail += (
            f"; pending until choird restarts: {', '.join(pending)}"
            f" (nothing was restarted: {HOW_TO_RESTART_CHOIRD} puts it into effect)"
        )
    return detail


async def _restart_agents(ctx: OperatorContext, plan: RestartPlan, note: Note) -> str:
    """Restart the running agents `plan` names (each resumes its session with the applied
    config); what was restarted, or why one was not."""
    wanted = list(ctx.config.agents) if plan.every_agent else list(plan.agents)
    said = []
    for agent_id in wanted:
        latest = await ctx.latest_session(agent_id)
        if latest is None or latest.status != SessionStatus.ACTIVE:
            continue  # not running: its next start binds the new config
        try:
            await agent_restart(ctx, AgentRef(agent_id=agent_id))
        except ChoirError as error:
            said.append(f"restart of {agent_id} failed: {one_line(error.message)}")
            await note("step", f"restart: {agent_id} failed: {one_line(error.message)}")
            continue
        said.append(f"{agent_id} restarted")
        await note("step", f"restart: {agent_id} restarted, its session resumed")
    return ", ".join(said)


def _already(text: str, patch: dict[str, Any]) -> bool:
    """Whether config.json's `text` has the patch applied already."""
    try:
        document = json.loads(text)
    except ValueError:
        return False
    return isinstance(document, dict) and merge_patch(document, patch) == document


def _running(ctx: OperatorContext, text: str) -> bool:
    """Whether config.json's `text` is the config choird runs (nothing edited unapplied)."""
    on_disk = validate_config_text(text, None).config
    return on_disk is not None and config_hash(on_disk) == ctx.stage.running.loaded.config_hash


def _said(change: ChangeView) -> str:
    """`~ approval_timeout_ms [hot-reload]`, with the command a restart-required one needs."""
    how = "" if change.scope == "hot-reload" else f" → {change.action}"
    return f"{change.op} {change.path} [{change.scope}]{how}"
