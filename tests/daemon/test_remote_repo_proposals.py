"""An agent whose repo is configured as a remote URL (issue 17): choird applies proposals only
to a local repository, so a skill or repo change is refused when it is proposed, with one line
the model reads; one approved before the repo became remote fails at its first step, the reason
on the approval, nothing written anywhere. Real Postgres, real git (a bare clone behind a
`file://` URL: nothing leaves the machine)."""

from __future__ import annotations

from pathlib import Path

import pytest

from choir.config import load_home
from choir.config.scaffolding.gitrepo import git
from choir.daemon.agents.services import AgentServices
from choir.daemon.proposals.executor import ProposalApplier
from choir.daemon.staging.stage import ConfigStage
from choir.errors import UsageError
from choir.home import ChoirHome
from choir.protocol import RequestApprovalRequest
from choir.store.approvals.pending import ApprovalRow
from choir.store.postgres.pool import Pool
from tests.daemon.conftest import read_config, write_config
from tests.daemon.test_proposal_executor import Edges
from tests.proposals.test_skill_apply_live import TRIAGE

SKILL = RequestApprovalRequest(
    request_type="skill", payload={"spec": TRIAGE, "rationale": "notes pile up"}
)
REMOTE = "agents.agent-1.repo.url is a remote URL; choird applies proposals only to a local"


@pytest.fixture
def repo(home: ChoirHome) -> Path:
    return home.sources / "agents" / "agent-1"


def go_remote(home: ChoirHome, repo: Path) -> ConfigStage:
    """agent-1's repo moved behind a `file://` URL (a bare clone); the config choird then runs."""
    bare = home.root.parent / "agent-1.git"
    git(home.root.parent, "clone", "-q", "--bare", str(repo), str(bare))
    data = read_config(home)
    data["agents"]["agent-1"]["repo"] = {"url": f"file://{bare}", "ref": "main"}
    write_config(home, data)
    return ConfigStage(load_home(home))


async def count_approvals(pool: Pool) -> int:
    async with pool.acquire() as conn:
        return int(await conn.fetchval("SELECT count(*) FROM choir_control.pending_approvals"))


async def test_a_skill_or_repo_change_for_a_remote_repo_is_refused_when_proposed(
    pool: Pool, home: ChoirHome, repo: Path
) -> None:
    services = AgentServices.build(pool, go_remote(home, repo))
    started = await services.sessions.start("agent-1", {})
    ctx = await services.sessions.authenticate(started.session_id, started.lease_token)

    with pytest.raises(UsageError) as skill:
        await services.approvals.request(ctx, SKILL)
    change = RequestApprovalRequest(
        request_type="repo_change", payload={"branch": "proposal/x", "description": "x"}
    )
    with pytest.raises(UsageError) as repo_change:
        await services.approvals.request(ctx, change)

    assert skill.value.message.startswith(f"this proposal could not be applied: {REMOTE}")
    assert repo_change.value.message.startswith(REMOTE)
    assert "\n" not in skill.value.message + repo_change.value.message
    assert await count_approvals(pool) == 0


async def test_one_approved_before_the_repo_became_remote_fails_at_its_first_step(
    pool: Pool, services: AgentServices, home: ChoirHome, repo: Path
) -> None:
    started = await services.sessions.start("agent-1", {})
    ctx = await services.sessions.authenticate(started.session_id, started.lease_token)
    asked = await services.approvals.request(ctx, SKILL)
    approved = await services.approvals.approve(asked.approval_id, by="choirctl")
    before = git(repo, "rev-parse", "main").strip()
    edges = Edges(go_remote(home, repo))
    ended: list[ApprovalRow] = []

    state = await ProposalApplier(pool, edges, lambda row, _: ended.append(row)).run(approved.id)

    assert (state.step, state.failed_step) == ("failed", "commit")
    assert edges.calls == ["commit"]  # refused there: nothing merged, built or deployed
    [row] = ended
    assert row.status == "failed"
    assert str(row.outcome).startswith(f"commit failed: {REMOTE}")
    assert git(repo, "rev-parse", "main").strip() == before
    assert git(repo, "branch", "--list", "proposal/*").strip() == ""
    bare = home.root.parent / "agent-1.git"
    assert git(bare, "branch", "--list", "proposal/*").strip() == ""
