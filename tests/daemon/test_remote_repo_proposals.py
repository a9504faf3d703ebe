"""An agent whose repo is configured as a remote URL (issue 17): choird applies a skill through
its own clone of the remote — the proposal branch pushed, the merge pushed with a lease on the
head it started from, undone by a push back — and refuses what it cannot apply: a repo change
(proposed only for a local repository) and a repo shared with another agent. Real Postgres,
real git: a bare repository behind a `file://` URL (nothing leaves the machine)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from choir.config import load_home
from choir.config.scaffolding.gitrepo import git
from choir.daemon.agents.services import AgentServices
from choir.daemon.images import repos
from choir.daemon.proposals import git_apply
from choir.daemon.proposals.executor import ProposalApplier
from choir.daemon.proposals.skill import ProposedFile
from choir.daemon.proposals.steps import ApplyState
from choir.daemon.proposals.tool import STUB_MARKER, check_registration
from choir.daemon.staging.stage import ConfigStage
from choir.errors import UsageError
from choir.home import ChoirHome
from choir.protocol import RequestApprovalRequest
from choir.store.approvals.pending import ApprovalRow
from choir.store.postgres.pool import Pool
from tests.daemon.conftest import read_config, write_config
from tests.daemon.test_proposal_executor import Edges
from tests.harness.git_http import git_http
from tests.harness.proposals import (
    SHOUT,
    SHOUT_PROPOSAL,
    SKILL,
    TRIAGE,
    head,
    implement,
    push_elsewhere,
)


class RemoteEdges(Edges):
    """`Edges` whose git is the real apply's on a remote: choird's clone in `home`, the merge
    leased on the head the executor recorded; `race` runs right after that head is read."""

    def __init__(
        self,
        stage: ConfigStage,
        home: ChoirHome,
        *,
        fail: str | None = None,
        race: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(stage, fail=fail)
        self.home = home
        self.race = race

    def _repo(self, state: ApplyState) -> git_apply.TargetRepo:
        return git_apply.target_repo(self.stage.running.config, state.agent_id, self.home)

    async def ref_head(self, state: ApplyState) -> str:
        found = await super().ref_head(state)
        if self.race is not None:
            self.race()
        return found

    async def merge(self, state: ApplyState) -> dict[str, str]:
        self.calls.append("merge")
        who = git_apply.identity_of(self.stage.running.config, state.agent_id)
        assert state.commit_id is not None
        git_apply.merge(self._repo(state), state.commit_id, who, "merge", state.merged_from)
        return {}


@pytest.fixture
def repo(home: ChoirHome) -> Path:
    return home.sources / "agents" / "agent-1"


@pytest.fixture
def bare(home: ChoirHome, repo: Path) -> Path:
    """agent-1's repo as a bare repository: the remote."""
    path = home.root.parent / "agent-1.git"
    git(home.root.parent, "clone", "-q", "--bare", str(repo), str(path))
    return path


@pytest.fixture
def remote(home: ChoirHome, bare: Path) -> ConfigStage:
    """The config with agent-1's repo behind a `file://` URL."""
    data = read_config(home)
    data["agents"]["agent-1"]["repo"] = {"url": f"file://{bare}", "ref": "main"}
    write_config(home, data)
    return ConfigStage(load_home(home))


def with_url(home: ChoirHome, url: str) -> ConfigStage:
    data = read_config(home)
    data["agents"]["agent-1"]["repo"] = {"url": url, "ref": "main"}
    write_config(home, data)
    return ConfigStage(load_home(home))


async def approved_skill(
    pool: Pool, stage: ConfigStage, *names: str
) -> tuple[str, list[ApprovalRow]]:
    """A session of agent-1 proposing skill triage (or each of `names`), each approved."""
    services = AgentServices.build(pool, stage)
    started = await services.sessions.start("agent-1", {})
    ctx = await services.sessions.authenticate(started.session_id, started.lease_token)
    approved = []
    for name in names or ("triage",):
        asked = await services.approvals.request(
            ctx,
            RequestApprovalRequest(
                request_type="skill", payload={"spec": {**TRIAGE, "name": name}, "rationale": "x"}
            ),
        )
        approved.append(await services.approvals.approve(asked.approval_id, by="choirctl"))
    return started.session_id, approved


async def test_an_approved_skill_is_merged_on_the_remote_and_in_choirds_clone(
    pool: Pool, home: ChoirHome, bare: Path, remote: ConfigStage
) -> None:
    before = head(bare)
    session, [approved] = await approved_skill(pool, remote)
    edges = RemoteEdges(remote, home)
    ended: list[ApprovalRow] = []

    state = await ProposalApplier(pool, edges, lambda row, _: ended.append(row)).run(approved.id)

    assert (state.step, state.merged_from) == ("done", before)
    assert edges.calls == ["commit", "merge", "build", "update"]
    assert head(bare) == state.commit_id  # fast-forwarded: main had not moved
    assert head(bare, f"proposal/{session}/triage") == state.commit_id  # the branch, pushed
    author = git(bare, "show", "-s", "--format=%an <%ae>", "main").strip()
    assert author == "choir agent-1 <agent-1@choir.local>"
    assert git(bare, "show", "main:skills/triage.json").startswith("{")
    # what the process runtime builds from without fetching: choird's clone, in step
    clone = repos.checkout(home, "agents/agent-1", remote.running.config.agents["agent-1"].repo)
    assert clone.commit == state.commit_id
    assert (clone.path / "skills" / "triage.json").is_file()
    assert [row.status for row in ended] == ["applied"]


async def test_an_update_that_fails_pushes_the_remote_back(
    pool: Pool, home: ChoirHome, bare: Path, remote: ConfigStage
) -> None:
    before = head(bare)
    _, [approved] = await approved_skill(pool, remote)
    edges = RemoteEdges(remote, home, fail="update")

    state = await ProposalApplier(pool, edges, lambda *_: None).run(approved.id)

    assert (state.step, state.failed_step) == ("failed", "update")
    assert edges.calls == ["commit", "merge", "build", "update", "revert", "redeploy"]
    assert head(bare) == before
    assert git(bare, "ls-tree", "main", "skills/triage.json").strip() == ""


async def test_a_remote_that_moved_after_choird_read_it_fails_the_merge_and_is_left_as_is(
    pool: Pool, home: ChoirHome, bare: Path, remote: ConfigStage
) -> None:
    _, [approved] = await approved_skill(pool, remote)
    theirs: list[str] = []
    work = home.root.parent / "work"
    edges = RemoteEdges(
        remote, home, race=lambda: theirs.append(push_elsewhere(bare, work, "theirs"))
    )

    state = await ProposalApplier(pool, edges, lambda *_: None).run(approved.id)

    assert (state.step, state.failed_step) == ("failed", "merge")
    assert state.reason is not None
    assert f"main on file://{bare} moved while choird applied the proposal" in state.reason
    assert "nothing pushed" in state.reason
    assert edges.calls == ["commit", "merge"]  # nothing built, nothing to undo
    assert head(bare) == theirs[0]  # untouched: their commit, no merge of ours
    assert git(bare, "rev-list", "--count", "--merges", "main").strip() == "0"


def test_the_push_of_the_merge_is_a_compare_and_swap_on_the_remote(
    home: ChoirHome, bare: Path, remote: ConfigStage
) -> None:
    config = remote.running.config
    target = git_apply.target_repo(config, "agent-1", home)
    who = git_apply.identity_of(config, "agent-1")
    file = ProposedFile("skills/x.json", b"{}\n")
    _, commit = git_apply.commit_file(target, "proposal/s/x", file, who, "add x")
    theirs = push_elsewhere(bare, home.root.parent / "work", "theirs")  # after choird's fetch

    with pytest.raises(git_apply.ApplyError, match="moved while choird applied") as error:
        git_apply.merge(target, commit, who, "merge")  # computed on the head it fetched

    assert theirs[:12] in error.value.message
    assert head(bare) == theirs
    assert git_apply.commit_file(target, "proposal/s/x", file, who, "add x")[1] == commit
    other = ProposedFile("skills/x.json", b'{"other": 1}\n')
    git(bare, "branch", "proposal/s/y", theirs)  # a branch of that name, someone else's
    with pytest.raises(git_apply.ApplyError, match="refused the push of proposal/s/y"):
        git_apply.commit_file(target, "proposal/s/y", other, who, "add x")
    assert head(bare, "proposal/s/y") == theirs


async def test_over_smart_http_with_a_token_in_the_url_which_no_message_shows(
    pool: Pool, home: ChoirHome, bare: Path
) -> None:
    token = "s3cret-token-7f"
    with git_http(bare.parent, "agent-1", token) as (server, requests):
        stage = with_url(home, server.url(bare.name))
        _, [first, second] = await approved_skill(pool, stage, "triage", "sorting")
        state = await ProposalApplier(pool, RemoteEdges(stage, home), lambda *_: None).run(first.id)
        assert state.step == "done"
        assert head(bare) == state.commit_id  # pushed over HTTP
        assert any("git-receive-pack" in line for line in requests)

        theirs: list[str] = []
        work = home.root.parent / "work"
        race = RemoteEdges(
            stage, home, race=lambda: theirs.append(push_elsewhere(bare, work, "theirs"))
        )
        moved = await ProposalApplier(pool, race, lambda *_: None).run(second.id)

    assert (moved.step, moved.failed_step) == ("failed", "merge")
    assert f"main on {server.url(bare.name, credentials=False)} moved" in str(moved.reason)
    assert head(bare) == theirs[0]
    async with pool.acquire() as conn:
        said = await conn.fetchval(
            "SELECT string_agg(detail, ' ') FROM choir_control.approval_audit"
        )
    assert token not in said + str(moved.reason)
    assert token not in (home.repos / "state.json").read_text()
    # git is handed the token by a credential helper, never in argv nor the clone's config
    assert token not in (home.repos / "agents" / "agent-1" / ".git" / "config").read_text()


async def test_a_tool_is_registered_from_the_branch_a_human_pushed_to_the_remote(
    pool: Pool, home: ChoirHome, bare: Path, remote: ConfigStage, tmp_path: Path
) -> None:
    services = AgentServices.build(pool, remote)
    started = await services.sessions.start("agent-1", {})
    ctx = await services.sessions.authenticate(started.session_id, started.lease_token)
    tool = RequestApprovalRequest(request_type="tool", payload=SHOUT_PROPOSAL)
    asked = await services.approvals.request(ctx, tool)
    approved = await services.approvals.approve(asked.approval_id, by="choirctl")
    applier = ProposalApplier(pool, RemoteEdges(remote, home), lambda *_: None)

    waiting = await applier.run(approved.id)
    assert waiting.step == "implement"
    assert STUB_MARKER in git(bare, "show", f"{waiting.branch}:tools/{SHOUT}")  # pushed
    commit = implement(bare, waiting.branch, tmp_path)  # written and pushed by a human
    target = git_apply.target_repo(remote.running.config, "agent-1", home)
    assert check_registration(target, waiting.branch, SHOUT) == commit  # read as fetched
    done = await applier.register(approved.id, commit)

    assert (done.step, done.commit_id) == ("done", commit)
    assert head(bare) == commit
    assert git(bare, "ls-tree", "main", f"tools/{SHOUT}").split()[0] == "100755"


async def test_a_repo_change_or_a_shared_remote_is_refused_when_proposed(
    pool: Pool, home: ChoirHome, bare: Path, remote: ConfigStage
) -> None:
    services = AgentServices.build(pool, remote)
    started = await services.sessions.start("agent-1", {})
    ctx = await services.sessions.authenticate(started.session_id, started.lease_token)
    change = RequestApprovalRequest(
        request_type="repo_change", payload={"branch": "proposal/x", "description": "x"}
    )
    with pytest.raises(UsageError) as repo_change:
        await services.approvals.request(ctx, change)
    data = read_config(home)
    data["agents"]["agent-2"]["repo"] = {"url": f"{bare}/", "ref": "main"}  # the same, spelt
    write_config(home, data)  # as a path
    shared = AgentServices.build(pool, ConfigStage(load_home(home)))
    with pytest.raises(UsageError) as skill:
        await shared.approvals.request(ctx, SKILL)

    assert repo_change.value.message.startswith(
        "agents.agent-1.repo.url is a remote URL; a repo change is proposed only for a local"
    )
    assert "agent agent-1's repo is also agent agent-2's" in skill.value.message
    assert "\n" not in skill.value.message + repo_change.value.message
    async with pool.acquire() as conn:
        count = await conn.fetchval("SELECT count(*) FROM choir_control.pending_approvals")
    assert count == 0
