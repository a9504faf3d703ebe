"""`agent.update` and `agent.update_all` (§17.4, §17.5): build if needed, then redeploy.

"Build" is the runtime's: the docker runtime builds the agent's image (`ensure_agent_image`,
which skips an image that is up to date); the process runtime re-materialises the agent's
`/choir` tree — beside the one a running agent uses, so a failed build leaves it running on
what it has. The candidate is compared with what the agent was started from; only a difference
redeploys a running agent: a graceful stop for update (its session suspended), then a start
resuming that session with the same bindings. A stopped agent is built, never started.

Update-all goes agent by agent, sequentially, and keeps going past a failure; each agent's
outcome is `built`, `redeployed`, `skipped` or `failed`, with the reason. Both verbs stream
progress (`progress`), since a docker build takes a while.
"""

from __future__ import annotations

import asyncio
import hashlib
import shutil
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

from choir.daemon.operator.agents.launches import Lifecycle
from choir.daemon.operator.agents.lifecycle import lifecycle_of, relaunch, stop_session
from choir.daemon.operator.approvals.applies import recorded_update
from choir.daemon.operator.context import OperatorContext
from choir.daemon.operator.progress import Report, reporting
from choir.daemon.runtimes.process import ProcessRuntime
from choir.errors import ChoirError, one_line
from choir.protocol import VersionInfo
from choir.protocol.base import WireModel
from choir.protocol.operator.answers import UpdateAll, UpdateOutcome
from choir.protocol.operator.items import Progress, UpdateAllResult, UpdateResult
from choir.protocol.operator.requests import AgentRef, NoArguments
from choir.store.sessions import SessionStatus

Outcome = Literal["built", "redeployed", "skipped", "failed"]
STAGING: Final = "choir.next"
"""Where the process runtime stages a candidate tree, beside the agent's `choir`."""


@dataclass(frozen=True)
class Candidate:
    """What the agent would run after an update."""

    version: VersionInfo
    built: bool
    """A docker build ran (docker), or the tree differs from the agent's (process)."""
    digest: str | None = None
    """The candidate tree's content digest (process runtime): catches edits no commit shows."""


async def agent_update(ctx: OperatorContext, request: AgentRef) -> AsyncIterator[WireModel]:
    """Build if needed, then stop and start the agent resuming its session (§17.4)."""
    ctx.require_agent(request.agent_id)
    lifecycle_of(ctx)
    return reporting(
        lambda report: update_one(ctx, request.agent_id, report),
        lambda outcome: UpdateResult(result=outcome),
    )


async def agent_update_all(ctx: OperatorContext, _: NoArguments) -> AsyncIterator[WireModel]:
    """Every configured agent in turn (§17.5); a failure is reported and the next one goes."""
    lifecycle_of(ctx)
    return reporting(
        lambda report: _update_all(ctx, report), lambda outcomes: UpdateAllResult(result=outcomes)
    )


async def _update_all(ctx: OperatorContext, report: Report) -> UpdateAll:
    outcomes = []
    for agent_id in sorted(ctx.config.agents):
        try:
            outcome = await update_one(ctx, agent_id, report)
        except ChoirError as error:
            outcome = _outcome(agent_id, "failed", one_line(error.message))
        report(Progress(agent_id=agent_id, phase="outcome", outcome=outcome))
        outcomes.append(outcome)
    failed = sum(outcome.outcome == "failed" for outcome in outcomes)
    return UpdateAll(agents=outcomes, failed=failed)


async def update_one(ctx: OperatorContext, agent_id: str, report: Report) -> UpdateOutcome:
    """Build `agent_id` and, if it runs something else, redeploy it; its outcome. A failure
    stays in the recovery inbox (`applies`)."""
    async with recorded_update(ctx, agent_id):
        return await _update_one(ctx, agent_id, report)


async def _update_one(ctx: OperatorContext, agent_id: str, report: Report) -> UpdateOutcome:
    lifecycle = lifecycle_of(ctx)
    async with lifecycle.exclusive(agent_id):
        latest = await ctx.latest_session(agent_id)
        running = latest if latest and latest.status == SessionStatus.ACTIVE else None
        report(Progress(agent_id=agent_id, phase="build", title="building if needed"))
        candidate = await _build(ctx, lifecycle, agent_id, running is not None, report)
        if running is None and not candidate.built:
            return _outcome(agent_id, "skipped", "not running; its build is up to date")
        if running is None:
            return _outcome(agent_id, "built", "not running: the next start uses the new build")
        if not _changed(lifecycle, agent_id, candidate):
            return _outcome(agent_id, "skipped", "up to date: it runs the latest build")
        report(Progress(agent_id=agent_id, phase="stop", title="stopping gracefully"))
        stopped = await stop_session(ctx, running, "update")
        report(Progress(agent_id=agent_id, phase="start", title="starting, resuming its session"))
        started = await relaunch(ctx, running)
        reason = f"session {started.session_id} resumed on the new build"
        return UpdateOutcome(
            agent_id=agent_id,
            outcome="redeployed",
            reason=reason,
            stopped=stopped,
            started=started,
        )


def _outcome(agent_id: str, outcome: Outcome, reason: str) -> UpdateOutcome:
    return UpdateOutcome(agent_id=agent_id, outcome=outcome, reason=reason)


async def _build(
    ctx: OperatorContext, lifecycle: Lifecycle, agent_id: str, running: bool, report: Report
) -> Candidate:
    runtime_name: str = lifecycle.runtime.name
    if runtime_name == "docker":
        from choir.daemon.images.build import TOTAL_STEPS, BuildProgress, ensure_agent_image

        def progress(item: BuildProgress) -> None:
            report(Progress(agent_id=agent_id, phase="build", total=TOTAL_STEPS, **vars(item)))

        image = await ensure_agent_image(ctx.home, ctx.config, agent_id, progress)
        from choir.daemon.images.kept import unpin

        await asyncio.to_thread(unpin, ctx.home, agent_id)  # an update ends a rollback
        return Candidate(image.version, image.built)
    return await asyncio.to_thread(_materialize, ctx, lifecycle, agent_id, running)


def _materialize(
    ctx: OperatorContext, lifecycle: Lifecycle, agent_id: str, running: bool
) -> Candidate:
    """The process runtime's build: a candidate tree staged beside the agent's own. A stopped
    agent's tree is replaced by it when different (`built`); a running agent's stays as it is
    until the redeploy's start materialises the tree again."""
    runtime = lifecycle.runtime
    if not isinstance(runtime, ProcessRuntime):
        raise TypeError(f"the {runtime.name} runtime builds images, not trees")
    live = ctx.home.root / "runtime" / agent_id / "choir"  # the runtime's own tree
    staging = live.with_name(STAGING)
    try:
        _, version = runtime.materialize(agent_id, ctx.config, tree=staging)
        digest = tree_digest(staging)
        changed = not live.is_dir() or digest != tree_digest(live)
        if changed and not running:
            shutil.rmtree(live, ignore_errors=True)
            staging.rename(live)
        return Candidate(version, built=changed, digest=digest)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _changed(lifecycle: Lifecycle, agent_id: str, candidate: Candidate) -> bool:
    """Whether the running agent runs something other than `candidate`."""
    launched = lifecycle.launched.get(agent_id)
    if launched is None:
        return True  # not started by this choird (e.g. run by hand): redeploy to be sure
    if candidate.version != launched.version:
        return True
    if candidate.built and candidate.digest is None:
        return True  # docker built a new image: something it is made of changed
    if candidate.digest is None or launched.root is None:
        return False
    return candidate.digest != tree_digest(launched.root)


def tree_digest(root: Path) -> str:
    """sha256 over every file under `root`: its relative path and its bytes."""
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(root)).encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()
