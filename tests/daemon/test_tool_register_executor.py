"""A tool's two-phase apply (§8.10) over real Postgres and agent-1's real repo, with the build
and update edges of `test_proposal_executor` (real git; a build or update that fails on demand):
phase 1 commits the manifest and a stub and waits; `register` takes the human's commit through
validate, merge, build and update; a failure at any of those leaves the configured ref where it
was (reverted after the merge) and the approval waiting for an implementation again, the failed
step and reason said, and a second register then goes through; an apply stopped mid-build is
resumed by the next executor."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from choir.config.scaffolding.gitrepo import git
from choir.daemon.agents.services import AgentServices
from choir.daemon.proposals import git_apply
from choir.daemon.proposals.executor import ProposalApplier
from choir.daemon.proposals.steps import ApplyState
from choir.daemon.proposals.tool import STUB_MARKER, check_registration
from choir.daemon.staging.stage import ConfigStage
from choir.errors import ConflictError
from choir.protocol import RequestApprovalRequest
from choir.store.approvals.audit import audit_of
from choir.store.approvals.pending import ApprovalRow, get_approval
from choir.store.postgres.pool import Pool
from tests.daemon.test_proposal_executor import Edges, head
from tests.harness.proposals import SHOUT, SHOUT_PROPOSAL, implement


class ToolEdges(Edges):
    """`Edges` whose merge can fail too."""

    async def merge(self, state: ApplyState) -> dict[str, str]:
        if self.fail == "merge":
            self.calls.append("merge")
            raise git_apply.ApplyError("merge conflict with main in tools/text.shout")
        return await super().merge(state)


@pytest.fixture
def repo(stage: ConfigStage) -> Path:
    return stage.running.loaded.home.sources / "agents" / "agent-1"


@pytest.fixture
async def approved(services: AgentServices) -> ApprovalRow:
    started = await services.sessions.start("agent-1", {})
    ctx = await services.sessions.authenticate(started.session_id, started.lease_token)
    asked = await services.approvals.request(
        ctx, RequestApprovalRequest(request_type="tool", payload=SHOUT_PROPOSAL)
    )
    return await services.approvals.approve(asked.approval_id, by="choirctl")


async def phase_one(pool: Pool, stage: ConfigStage, approved: ApprovalRow) -> ApplyState:
    return await ProposalApplier(pool, ToolEdges(stage), lambda *_: None).run(approved.id)


async def test_phase_one_commits_manifest_and_stub_on_the_branch_and_waits_for_a_human(
    pool: Pool, stage: ConfigStage, repo: Path, approved: ApprovalRow
) -> None:
    before = head(repo)
    edges = ToolEdges(stage)
    told: list[ApprovalRow] = []
    applier = ProposalApplier(pool, edges, lambda row, _: told.append(row))

    state = await applier.run(approved.id)

    assert state.step == "implement"
    assert state.branch == f"proposal/{approved.session_id}/{SHOUT}"
    assert edges.calls == ["commit"]
    assert head(repo) == before  # not merged
    listed = git(repo, "ls-tree", "-r", state.branch, "--", "tools").splitlines()
    modes = {line.split("\t")[1]: line.split()[0] for line in listed}
    assert modes[f"tools/{SHOUT}.json"] == "100644"
    assert modes[f"tools/{SHOUT}"] == "100644"  # the stub is not executable
    stub = git(repo, "show", f"{state.branch}:tools/{SHOUT}")
    assert STUB_MARKER in stub
    assert f"choirctl tool register agent-1 {state.branch}" in stub
    [row] = told
    assert row.status == "approved"  # phase 1 of 2: it stays approved
    assert row.outcome is not None
    assert row.outcome.startswith("awaiting implementation: approved, but a human writes")
    assert "until then it cannot be called" in row.outcome
    assert f"choirctl tool register agent-1 {state.branch}" in row.outcome

    assert await applier.run(approved.id) == state  # a restarted choird: waits, says nothing
    assert len(told) == 1


async def test_register_validates_merges_builds_and_updates_the_humans_commit(
    pool: Pool, stage: ConfigStage, repo: Path, approved: ApprovalRow, tmp_path: Path
) -> None:
    state = await phase_one(pool, stage, approved)
    commit = implement(repo, state.branch, tmp_path)
    target = git_apply.target_repo(stage.running.config, "agent-1")
    tip = check_registration(target, state.branch, SHOUT)
    assert tip == commit
    edges = ToolEdges(stage)
    told: list[ApprovalRow] = []

    done = await ProposalApplier(pool, edges, lambda row, _: told.append(row)).register(
        approved.id, tip
    )

    assert (done.step, done.commit_id) == ("done", commit)
    assert edges.calls == ["validate", "merge", "build", "update"]
    assert head(repo) == commit  # fast-forwarded: main had not moved
    assert (repo / "tools" / SHOUT).stat().st_mode & 0o111  # the checkout is in step
    assert [row.status for row in told] == ["applied"]
    with pytest.raises(ConflictError, match="not a tool awaiting its implementation"):
        await ProposalApplier(pool, edges, lambda *_: None).register(approved.id, tip)


@pytest.mark.parametrize("step", ["validate", "merge", "build", "update"])
async def test_a_failure_at_any_step_of_register_leaves_the_ref_and_the_agent_as_they_were(
    pool: Pool,
    stage: ConfigStage,
    repo: Path,
    approved: ApprovalRow,
    tmp_path: Path,
    step: str,
) -> None:
    state = await phase_one(pool, stage, approved)
    before = head(repo)
    commit = implement(repo, state.branch, tmp_path)
    edges = ToolEdges(stage, fail=step)
    told: list[ApprovalRow] = []

    ended = await ProposalApplier(pool, edges, lambda row, _: told.append(row)).register(
        approved.id, commit
    )

    assert (ended.step, ended.failed_step) == ("implement", step)  # waits to be registered again
    assert head(repo) == before
    assert not (repo / "tools" / SHOUT).exists()
    order = ["validate", "merge", "build", "update"]
    ran = order[: order.index(step) + 1]
    undo = {"build": ["revert"], "update": ["revert", "redeploy"]}.get(step, [])
    assert edges.calls == ran + undo
    assert told == []  # not ended: the agent is not told again
    async with pool.acquire() as conn:
        row = await get_approval(conn, approved.id)
        audit = await audit_of(conn, approved.id)
    assert row is not None
    assert row.status == "approved"
    assert row.outcome is not None
    assert row.outcome.startswith(f"awaiting implementation: the last register failed at {step}: ")
    assert f"choirctl tool register agent-1 {state.branch}" in row.outcome
    assert [f.action for f in audit].count("register_failed") == 1
    assert git(repo, "rev-parse", state.branch).strip() == commit  # left for inspection

    # the human fixed it (here: the fault is gone) and registers again: it goes through
    fixed = ToolEdges(stage)
    again = await ProposalApplier(pool, fixed, lambda row, _: told.append(row)).register(
        approved.id, commit
    )
    assert (again.step, again.commit_id, again.failed_step) == ("done", commit, None)
    assert fixed.calls == order
    assert head(repo) == commit
    assert [row.status for row in told] == ["applied"]


async def test_a_register_stopped_mid_build_is_resumed_by_the_next_executor(
    pool: Pool, stage: ConfigStage, repo: Path, approved: ApprovalRow, tmp_path: Path
) -> None:
    state = await phase_one(pool, stage, approved)
    commit = implement(repo, state.branch, tmp_path)
    first = ToolEdges(stage)
    first.stall.set()
    applier = ProposalApplier(pool, first, lambda *_: None)
    registering = asyncio.create_task(applier.register(approved.id, commit))
    await asyncio.wait_for(first.stalled.wait(), 30)
    await applier.close()  # choird stopping: the apply stays where it is
    registering.cancel()
    await asyncio.gather(registering, return_exceptions=True)

    second = ToolEdges(stage)
    told: list[ApprovalRow] = []
    tasks = await ProposalApplier(pool, second, lambda row, _: told.append(row)).resume_all()
    [ended] = await asyncio.gather(*tasks)

    assert first.calls == ["validate", "merge", "build"]
    assert second.calls == ["build", "update"]  # validate and merge were recorded done
    assert (ended.step, ended.commit_id) == ("done", commit)
    assert head(repo) == commit
    assert [row.status for row in told] == ["applied"]
