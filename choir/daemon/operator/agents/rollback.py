"""`agent.rollback` (issue 17 "Going back"): redeploy a kept image, or a commit built for it.

Without `to`, the target is the newest image `agent build` kept (`KEEP_PREVIOUS`) that is older
than the one the agent runs (or, stopped, would start with); with `to`, a kept image named by
its id, tag or image version, else a commit of the agent repo — built first, the global repo at
its current commit. Every refusal (unknown agent, the process runtime, nothing older kept, a
name that is neither) comes before anything changes. The agent is then pinned to the image
(`choir.daemon.images.kept`) and, when running, stopped for update and started again resuming
its session, exactly as `agent update` redeploys. If that start fails, the pin is put back and
the agent started again on what it ran, and the error says so. The image machinery
(`kept`: tarfile, importlib.metadata, ~12 ms of CPU) loads at the verb's first use, not on
choird's way to its first agent.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from choir.daemon.images import repos
from choir.daemon.operator.agents.lifecycle import lifecycle_of, relaunch, stop_session
from choir.daemon.operator.context import OperatorContext
from choir.daemon.operator.progress import Report, reporting
from choir.errors import ChoirError, NotFoundError, UsageError
from choir.protocol.base import WireModel
from choir.protocol.operator.answers import ImageBuilt, RolledBack
from choir.protocol.operator.items import Progress, RollbackResult
from choir.protocol.operator.requests import AgentRollback
from choir.store.sessions import SessionRow, SessionStatus

if TYPE_CHECKING:
    from choir.adapters.docker.engine import DockerEngine, ImageInfo
    from choir.daemon.images import kept
    from choir.daemon.images.build import BuildProgress

_REV: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/:@+-]*")
"""What `to` may be: an image id, tag or version, or a git revision (never an option)."""


@dataclass(frozen=True)
class _Target:
    """Where the rollback goes: an image kept, or a commit to build."""

    image: ImageInfo | None = None
    commit: str | None = None


async def agent_rollback(ctx: OperatorContext, request: AgentRollback) -> AsyncIterator[WireModel]:
    """Refuse bad input at once; then stream the build (for a commit) and the redeploy."""
    ctx.require_agent(request.agent_id)
    lifecycle = lifecycle_of(ctx)
    if lifecycle.runtime.name != "docker":
        raise UsageError(
            f"agent rollback redeploys a kept image, and the {lifecycle.runtime.name} runtime "
            "runs the repos' trees, not images: check out the commit in the agent repo and run "
            f"choirctl agent update {request.agent_id}"
        )
    if request.to is not None and not _REV.fullmatch(request.to):
        raise UsageError(f"--to {request.to!r} is not an image or a commit: name one")
    from choir.adapters.docker.engine import DockerEngine

    engine = await DockerEngine.connect()
    try:
        target = await _target(ctx, engine, request)
    except BaseException:
        engine.close()
        raise

    async def work(report: Report) -> RolledBack:
        try:
            return await _roll_back(ctx, engine, request.agent_id, target, report)
        finally:
            engine.close()

    return reporting(work, lambda done: RollbackResult(result=done))


async def _target(ctx: OperatorContext, engine: DockerEngine, request: AgentRollback) -> _Target:
    from choir.daemon.images import kept

    agent_id = request.agent_id
    images = await kept.kept_images(engine, ctx.home, agent_id)
    if request.to is None:
        current = await _current(ctx, agent_id, images)
        previous = kept.older_than(images, current)
        if previous is None:
            raise NotFoundError(
                f"{agent_id} has no kept image older than the one it runs: name a commit of "
                f"its repo with choirctl agent rollback {agent_id} --to <commit>"
            )
        return _Target(image=previous)
    image = kept.named(images, request.to)
    if image is not None:
        return _Target(image=image)
    key, repo = repos.repo_key(agent_id), ctx.config.agents[agent_id].repo
    commit = await asyncio.to_thread(repos.commit_named, ctx.home, key, repo, request.to)
    if commit is None:
        raise NotFoundError(
            f"{request.to!r} is neither a kept image of {agent_id} nor a commit of its repo: "
            "see docker images choir-agent-" + agent_id + " or git log in the agent repo"
        )
    return _Target(commit=commit)


async def _current(ctx: OperatorContext, agent_id: str, images: list[ImageInfo]) -> str | None:
    """The id of the image the agent runs: by its version when running, else its pin, else
    the latest build (what its next start runs)."""
    from choir.daemon.images import kept

    launched = lifecycle_of(ctx).launched.get(agent_id)
    running = await _running(ctx, agent_id)
    if running is not None and launched is not None:
        for image in images:  # newest first: the newest build of that version
            version = kept.version_of(image)
            if version == launched.version:
                return image.id
    held = await asyncio.to_thread(kept.pinned, ctx.home, agent_id)
    if held is not None:
        return held.image_id
    from choir.daemon.images.build import latest_image_file  # loads docker's SDK: only here

    try:
        return (await asyncio.to_thread(latest_image_file(ctx.home, agent_id).read_text)).strip()
    except OSError:
        return None


async def _running(ctx: OperatorContext, agent_id: str) -> SessionRow | None:
    latest = await ctx.latest_session(agent_id)
    return latest if latest is not None and latest.status == SessionStatus.ACTIVE else None


async def _roll_back(
    ctx: OperatorContext, engine: DockerEngine, agent_id: str, target: _Target, report: Report
) -> RolledBack:
    from choir.daemon.images import kept

    lifecycle = lifecycle_of(ctx)
    async with lifecycle.exclusive(agent_id):
        image, built = await _image(ctx, engine, agent_id, target, report)
        version = kept.version_of(image)
        if version is None:
            commit = image.labels.get("choir.agent_commit", "<commit>")
            raise UsageError(
                f"{kept.tag_of(image)} was built before images carried their version: roll "
                f"back to its commit instead (choirctl agent rollback {agent_id} --to {commit})"
            )
        pin = kept.Pin(image.id, kept.tag_of(image), version)
        view = ImageBuilt(
            agent_id=agent_id,
            tag=pin.tag,
            image_id=image.id,
            built=built,
            version=version.model_dump(mode="json"),
        )
        before = await asyncio.to_thread(kept.pinned, ctx.home, agent_id)
        await asyncio.to_thread(kept.pin, ctx.home, agent_id, pin)
        running = await _running(ctx, agent_id)
        if running is None:
            reason = f"not running: its next start runs {pin.tag}"
            return RolledBack(agent_id=agent_id, outcome="pinned", reason=reason, image=view)
        report(Progress(agent_id=agent_id, phase="stop", title="stopping gracefully"))
        stopped = await stop_session(ctx, running, "update")
        report(Progress(agent_id=agent_id, phase="start", title=f"starting {pin.tag}"))
        try:
            started = await relaunch(ctx, running)
        except ChoirError as error:
            raise await _undo(ctx, agent_id, running, before, error) from None
        reason = f"session {started.session_id} resumed on {pin.tag}"
        return RolledBack(
            agent_id=agent_id,
            outcome="redeployed",
            reason=reason,
            image=view,
            stopped=stopped,
            started=started,
        )


async def _image(
    ctx: OperatorContext, engine: DockerEngine, agent_id: str, target: _Target, report: Report
) -> tuple[ImageInfo, bool]:
    """The target image, building the target commit first; whether a build made it."""
    if target.image is not None:
        return target.image, False
    from choir.daemon.images.build import TOTAL_STEPS, ensure_agent_image

    def progress(item: BuildProgress) -> None:
        report(Progress(agent_id=agent_id, phase="build", total=TOTAL_STEPS, **vars(item)))

    report(Progress(agent_id=agent_id, phase="build", title=f"building {target.commit}"))
    ref = await ensure_agent_image(
        ctx.home, ctx.config, agent_id, progress, engine=engine, agent_commit=target.commit
    )
    image = await engine.image(ref.id)
    if image is None:
        raise NotFoundError(f"the image built for {target.commit} is gone: run it again")
    return image, ref.built


async def _undo(
    ctx: OperatorContext,
    agent_id: str,
    row: SessionRow,
    before: kept.Pin | None,
    error: ChoirError,
) -> ChoirError:
    """The rolled-back image did not start: put the pin back, start the agent on what it ran;
    the error to raise, saying both."""
    from choir.daemon.images import kept

    if before is None:
        await asyncio.to_thread(kept.unpin, ctx.home, agent_id)
    else:
        await asyncio.to_thread(kept.pin, ctx.home, agent_id, before)
    try:
        await relaunch(ctx, row)
    except ChoirError as again:
        return type(error)(f"rollback of {agent_id} failed ({error.message}); {again.message}")
    return type(error)(
        f"rollback of {agent_id} failed ({error.message}); it runs its previous image again"
    )
