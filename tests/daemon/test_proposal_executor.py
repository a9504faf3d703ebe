"""The apply executor over real Postgres and agent-1's real repo (`choirctl init`'s), with the
build and update edges replaced by ones that fail or stall on purpose: the failure paths a live
choird cannot be made to take on demand (an update that fails after the merge, content changed
after review, an apply cancelled mid-build and resumed by a new executor)."""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from pathlib import Path

import pytest

from choir.config.scaffolding.gitrepo import git
from choir.daemon.agents.services import AgentServices
from choir.daemon.proposals import git_apply, repo_change
from choir.daemon.proposals.check import known_tools
from choir.daemon.proposals.executor import ProposalApplier
from choir.daemon.proposals.skill import ProposedFile
from choir.daemon.proposals.steps import ApplyState
from choir.daemon.staging.stage import ConfigStage
from choir.home import ChoirHome
from choir.protocol import RequestApprovalRequest
from choir.store.approvals.audit import audit_of
from choir.store.approvals.pending import ApprovalRow
from choir.store.postgres.pool import Pool
from tests.harness.proposals import TRIAGE


class Edges:
    """Real git; a build and an update that record their calls and fail or stall on demand."""

    def __init__(self, stage: ConfigStage, *, fail: str | None = None) -> None:
        self.stage = stage
        self.fail = fail
        self.calls: list[str] = []
        self.stall = asyncio.Event()
        self.stalled = asyncio.Event()

    def _repo(self, state: ApplyState) -> git_apply.TargetRepo:
        return git_apply.target_repo(self.stage.running.config, state.agent_id)

    def known_tools(self, agent_id: str) -> Collection[str]:
        running = self.stage.running
        return known_tools(running.loaded.home, running.config, agent_id)

    async def commit(
        self, state: ApplyState, file: ProposedFile, *more: ProposedFile
    ) -> dict[str, str]:
        self.calls.append("commit")
        who = git_apply.identity_of(self.stage.running.config, state.agent_id)
        base, commit = git_apply.commit_files(
            self._repo(state), state.branch, (file, *more), who, "add"
        )
        return {"base_commit": base, "commit_id": commit}

    async def validate(self, state: ApplyState) -> dict[str, str]:
        self.calls.append("validate")
        if self.fail == "validate":
            raise git_apply.ApplyError("tools/x: not executable")
        return {}

    async def fetched(self, state: ApplyState, sha256: str | None) -> dict[str, str]:
        found = repo_change.applicable(self._repo(state), state.branch, sha256)
        return {"base_commit": found.base, "commit_id": found.commit}

    async def ref_head(self, state: ApplyState) -> str:
        return git_apply.head(self._repo(state))

    async def merge(self, state: ApplyState) -> dict[str, str]:
        self.calls.append("merge")
        who = git_apply.identity_of(self.stage.running.config, state.agent_id)
        assert state.commit_id is not None
        git_apply.merge(self._repo(state), state.commit_id, who, "merge")
        return {}

    async def build(self, state: ApplyState) -> dict[str, str]:
        self.calls.append("build")
        if self.stall.is_set():
            self.stalled.set()
            await asyncio.Event().wait()  # until cancelled
        if self.fail == "build":
            raise git_apply.ApplyError("skills/broken.json: invalid")
        return {"image_id": "img-1"}

    async def update(self, state: ApplyState) -> dict[str, str]:
        self.calls.append("update")
        if self.fail == "update":
            raise git_apply.ApplyError("the agent did not come back")
        return {}

    async def revert(self, state: ApplyState) -> None:
        self.calls.append("revert")
        assert state.merged_from is not None
        assert state.commit_id is not None
        git_apply.revert(self._repo(state), state.merged_from, state.commit_id)

    async def redeploy(self, state: ApplyState) -> None:
        self.calls.append("redeploy")


@pytest.fixture
def repo(home: ChoirHome) -> Path:
    return home.sources / "agents" / "agent-1"


@pytest.fixture
async def approved(services: AgentServices) -> ApprovalRow:
    started = await services.sessions.start("agent-1", {})
    ctx = await services.sessions.authenticate(started.session_id, started.lease_token)
    asked = await services.approvals.request(
        ctx,
        RequestApprovalRequest(
            request_type="skill", payload={"spec": TRIAGE, "rationale": "notes pile up"}
        ),
    )
    return await services.approvals.approve(asked.approval_id, by="choirctl")


def head(repo: Path) -> str:
    return git(repo, "rev-parse", "main").strip()


async def test_an_update_that_fails_reverts_the_merge_redeploys_and_ends_failed(
    pool: Pool, stage: ConfigStage, repo: Path, approved: ApprovalRow
) -> None:
    before = head(repo)
    edges = Edges(stage, fail="update")
    ended: list[ApprovalRow] = []
    applier = ProposalApplier(pool, edges, lambda row, _: ended.append(row))

    state = await applier.run(approved.id)

    assert (state.step, state.failed_step) == ("failed", "update")
    assert edges.calls == ["commit", "merge", "build", "update", "revert", "redeploy"]
    assert head(repo) == before
    assert not (repo / "skills" / "triage.json").exists()
    [row] = ended
    assert (row.status, row.outcome) == (
        "failed",
        "update failed: the agent did not come back; the agent runs as it did",
    )
    async with pool.acquire() as conn:
        details = [fact.detail for fact in await audit_of(conn, approved.id)]
    assert "update: the agent did not come back" in details
    assert f"rollback: merge reverted to {before}" in details
    assert "rollback: agent redeployed on its old build" in details
    assert await applier.run(approved.id) == state  # over: nothing runs again
    assert len(ended) == 1


async def test_content_changed_after_review_is_not_applied(
    pool: Pool, stage: ConfigStage, repo: Path, approved: ApprovalRow
) -> None:
    async with pool.acquire() as conn:
        await conn.execute(
            "UPDATE choir_control.pending_approvals SET payload = $2 WHERE id = $1",
            approved.id,
            {"spec": {**TRIAGE, "description": "Something else."}, "rationale": "x"},
        )
    edges = Edges(stage)
    state = await ProposalApplier(pool, edges, lambda *_: None).run(approved.id)

    assert (state.step, state.failed_step) == ("failed", "commit")
    assert state.reason is not None
    assert "differs from what was reviewed" in state.reason
    assert edges.calls == []
    assert git(repo, "branch", "--list", "proposal/*").strip() == ""


async def test_an_apply_stopped_mid_build_is_resumed_at_the_build_by_the_next_executor(
    pool: Pool, stage: ConfigStage, repo: Path, approved: ApprovalRow
) -> None:
    first = Edges(stage)
    first.stall.set()
    applier = ProposalApplier(pool, first, lambda *_: None)
    applier.begin(approved)
    await asyncio.wait_for(first.stalled.wait(), 30)
    await applier.close()  # choird stopping: the apply stays where it is

    second = Edges(stage)
    ended: list[ApprovalRow] = []
    [task] = await ProposalApplier(pool, second, lambda row, _: ended.append(row)).resume_all()
    state = await task

    assert first.calls == ["commit", "merge", "build"]
    assert second.calls == ["build", "update"]  # commit and merge were recorded done
    assert (state.step, state.image_id) == ("done", "img-1")
    assert head(repo) == state.commit_id
    assert [row.status for row in ended] == ["applied"]


class StallingRevert(Edges):
    """An update that fails, then a revert that stalls: choird stopped while undoing."""

    async def revert(self, state: ApplyState) -> None:
        self.calls.append("revert")
        self.stalled.set()
        await asyncio.Event().wait()  # until cancelled


async def test_an_undo_stopped_midway_is_finished_by_the_next_executor_not_the_step_retried(
    pool: Pool, stage: ConfigStage, repo: Path, approved: ApprovalRow
) -> None:
    before = head(repo)
    first = StallingRevert(stage, fail="update")
    applier = ProposalApplier(pool, first, lambda *_: None)
    applier.begin(approved)
    await asyncio.wait_for(first.stalled.wait(), 30)
    await applier.close()  # choird stopping after the failure was saved, before the revert
    assert head(repo) != before  # the merge is still there

    second = Edges(stage)
    ended: list[ApprovalRow] = []
    [task] = await ProposalApplier(pool, second, lambda row, _: ended.append(row)).resume_all()
    state = await task

    assert first.calls == ["commit", "merge", "build", "update", "revert"]
    assert second.calls == ["revert", "redeploy"]  # the undo again; no build of the reverted ref
    assert (state.step, state.failed_step, state.undo_pending) == ("failed", "update", False)
    assert head(repo) == before
    assert [(row.status, row.outcome) for row in ended] == [
        ("failed", "update failed: the agent did not come back; the agent runs as it did")
    ]
    async with pool.acquire() as conn:
        details = [fact.detail for fact in await audit_of(conn, approved.id)]
    assert "rollback: resumed after a restart" in details
    assert f"rollback: merge reverted to {before}" in details
    third = Edges(stage)
    assert await ProposalApplier(pool, third, lambda *_: None).resume_all() == []
    assert third.calls == []


class MovedBeforeMerge(Edges):
    """The operator commits their own `skills/triage.json` between the commit and the merge."""

    async def merge(self, state: ApplyState) -> dict[str, str]:
        repo = self._repo(state).path
        (repo / "skills").mkdir(exist_ok=True)
        (repo / "skills" / "triage.json").write_text('{"name": "triage", "mine": true}\n')
        git(repo, "add", "skills/triage.json")
        git(repo, "commit", "-q", "-m", "the operator's own triage")
        return await super().merge(state)


async def test_a_merge_conflict_fails_at_the_merge_and_touches_nothing_the_agent_runs(
    pool: Pool, stage: ConfigStage, repo: Path, approved: ApprovalRow
) -> None:
    edges = MovedBeforeMerge(stage)

    state = await ProposalApplier(pool, edges, lambda *_: None).run(approved.id)

    assert (state.step, state.failed_step) == ("failed", "merge")
    assert state.reason is not None
    assert "merge conflict with main in skills/triage.json" in state.reason
    assert edges.calls == ["commit", "merge"]  # no build, no update, nothing to undo
    assert git(repo, "log", "-1", "--format=%s", "main").strip() == "the operator's own triage"
    assert git(repo, "status", "--porcelain") == ""
    assert git(repo, "rev-parse", "--verify", f"refs/heads/{state.branch}").strip()  # kept
