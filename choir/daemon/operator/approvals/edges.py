"""The real edges of an apply (`proposals.executor.ApplyEdges`): the agent's repo, its build
and its update, the ones `agent build` and `agent update` use.

The build is the runtime's: docker builds the agent's image (`ensure_agent_image`); the process
runtime materialises a candidate tree in scratch space (the same merge and checks the agent's
start runs, so a skill that would not load fails here, before the agent is touched). The update
is `agent update`'s `update_one`: stop for update and start resuming the session, so the agent
can use the new skill in the same conversation.

choird builds these edges at its start, and applies are rare: the lifecycle, update and runtime
modules they step into load with the first build or update, not with choird.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import Callable, Collection
from pathlib import Path
from typing import TYPE_CHECKING

from choir.daemon.operator.context import OperatorContext
from choir.daemon.proposals import git_apply, repo_change
from choir.daemon.proposals.check import known_tools
from choir.daemon.proposals.git_apply import ApplyError
from choir.daemon.proposals.skill import ProposedFile
from choir.daemon.proposals.steps import ApplyState
from choir.daemon.proposals.tool import check_registration
from choir.protocol.base import WireModel

if TYPE_CHECKING:
    from choir.daemon.runtimes.process import ProcessRuntime


class OperatorApplyEdges:
    """`ApplyEdges` over choird's operator context (read when called: it is built after)."""

    def __init__(self, context: Callable[[], OperatorContext]) -> None:
        self._context = context

    def known_tools(self, agent_id: str) -> Collection[str]:
        ctx = self._context()
        return known_tools(ctx.home, ctx.config, agent_id)

    async def commit(
        self, state: ApplyState, file: ProposedFile, *more: ProposedFile
    ) -> dict[str, str]:
        config = self._context().config
        repo = await self._repo(state)
        who = git_apply.identity_of(config, state.agent_id)
        message = f"{file.path}: proposed by {state.agent_id} ({state.approval_id})"
        base, commit = await asyncio.to_thread(
            git_apply.commit_files, repo, state.branch, (file, *more), who, message
        )
        return {"base_commit": base, "commit_id": commit}

    async def validate(self, state: ApplyState) -> dict[str, str]:
        """A tool's registration checked again as it is merged: the branch still at the
        commit the operator registered, and that commit still a valid registration."""
        repo = await self._repo(state)
        name = state.branch.rsplit("/", 1)[-1]
        tip = await asyncio.to_thread(check_registration, repo, state.branch, name)
        if tip != state.commit_id:
            raise ApplyError(
                f"{state.branch} moved after it was registered (now {tip[:12]}): register again"
            )
        return {}

    async def fetched(self, state: ApplyState, sha256: str | None) -> dict[str, str]:
        repo = await self._repo(state)
        found = await asyncio.to_thread(repo_change.applicable, repo, state.branch, sha256)
        return {"base_commit": found.base, "commit_id": found.commit}

    async def ref_head(self, state: ApplyState) -> str:
        repo = await self._repo(state)
        return await asyncio.to_thread(git_apply.head, repo)

    async def merge(self, state: ApplyState) -> dict[str, str]:
        config = self._context().config
        repo = await self._repo(state)
        who = git_apply.identity_of(config, state.agent_id)
        message = f"Merge {state.branch} (approval {state.approval_id})"
        commit = _known(state.commit_id)
        await asyncio.to_thread(git_apply.merge, repo, commit, who, message, state.merged_from)
        return {}

    async def build(self, state: ApplyState) -> dict[str, str]:
        from choir.daemon.operator.agents.lifecycle import lifecycle_of
        from choir.daemon.runtimes.process import ProcessRuntime

        ctx = self._context()
        runtime = lifecycle_of(ctx).runtime
        if isinstance(runtime, ProcessRuntime):
            return {"image_id": await asyncio.to_thread(_candidate_digest, runtime, ctx, state)}
        from choir.daemon.images.build import ensure_agent_image

        image = await ensure_agent_image(ctx.home, ctx.config, state.agent_id, lambda _: None)
        return {"image_id": image.id}

    async def update(self, state: ApplyState) -> dict[str, str]:
        await self._update(state)
        return {}

    async def revert(self, state: ApplyState) -> None:
        repo = await self._repo(state)
        merged_from, commit = _known(state.merged_from), _known(state.commit_id)
        await asyncio.to_thread(git_apply.revert, repo, merged_from, commit)

    async def redeploy(self, state: ApplyState) -> None:
        await self._update(state)

    async def _repo(self, state: ApplyState) -> git_apply.TargetRepo:
        """The agent's repo (a remote's clone is fetched: in a thread)."""
        ctx = self._context()
        return await asyncio.to_thread(git_apply.target_repo, ctx.config, state.agent_id, ctx.home)

    async def _update(self, state: ApplyState) -> None:
        from choir.daemon.operator.agents.update import update_one

        def ignore(_: WireModel) -> None:
            return None

        outcome = await update_one(self._context(), state.agent_id, ignore)
        if outcome.outcome == "failed":
            raise ApplyError(outcome.reason or "the update failed")


def _candidate_digest(runtime: ProcessRuntime, ctx: OperatorContext, state: ApplyState) -> str:
    """Materialise the agent's tree as its next start would, in scratch space; its digest."""
    from choir.daemon.operator.agents.update import tree_digest

    with tempfile.TemporaryDirectory(prefix="choir-apply-build-") as scratch:
        tree = Path(scratch) / "choir"
        try:
            runtime.materialize(state.agent_id, ctx.config, tree=tree)
            return tree_digest(tree)
        finally:
            shutil.rmtree(tree, ignore_errors=True)


def _known(value: str | None) -> str:
    if value is None:
        raise ApplyError("the apply lost a commit id it recorded: apply it again by hand")
    return value
