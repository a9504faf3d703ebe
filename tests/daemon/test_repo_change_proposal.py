"""`choir.propose.repo_change` over real Postgres, real git and agent-1's real repo (`choirctl
init`'s): the branch is fetched from a clone in the session's workspace when it is proposed,
bound to its diff, and applied by the executor (`Edges`: real git, a build and an update that
fail on demand). What cannot be proposed is refused with one line, nothing left behind."""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from choir.agent.git_identity import configure_git, git_dir
from choir.config import ChoirConfig
from choir.config.scaffolding.gitrepo import git, init_with_commit
from choir.daemon.agents.services import AgentServices
from choir.daemon.proposals import git_apply, repo_change
from choir.daemon.proposals.executor import ProposalApplier
from choir.daemon.runtimes.container_spec import container_repo
from choir.daemon.sessions.state import SessionContext
from choir.daemon.staging.stage import ConfigStage
from choir.errors import UsageError
from choir.home import ChoirHome
from choir.protocol import RequestApprovalRequest
from choir.store.approvals.pending import ApprovalRow
from choir.store.postgres.pool import Pool
from tests.daemon.conftest import daemon_home
from tests.daemon.test_proposal_executor import Edges

GREETING = '{"name": "greeting"}\n'
AGENT_UID = 200_000
"""A uid no host user has, as a container's agent runs as when choird is root."""
AGENT = ("-c", "user.name=choir agent-1", "-c", "user.email=agent-1@choir.local")


@pytest.fixture
def home(short_tmp: Path) -> ChoirHome:
    """daemon_home: agent-2 on a repo of its own."""
    return daemon_home(short_tmp)


@pytest.fixture
def repo(home: ChoirHome) -> Path:
    return home.sources / "agents" / "agent-1"


@pytest.fixture
async def session(services: AgentServices) -> SessionContext:
    started = await services.sessions.start("agent-1", {})
    return await services.sessions.authenticate(started.session_id, started.lease_token)


def workspace(stage: ConfigStage) -> Path:
    path = Path(stage.running.config.workspaces["default"].path)
    path.mkdir(parents=True, exist_ok=True)
    return path


def clone(stage: ConfigStage, source: Path, *, name: str = "repo") -> Path:
    """The agent's clone in its workspace with one commit on `proposal/greeting`."""
    where = workspace(stage) / name
    git(workspace(stage), "clone", "-q", str(source), name)
    git(where, "checkout", "-q", "-b", "proposal/greeting")
    (where / "skills").mkdir(exist_ok=True)
    (where / "skills" / "greeting.json").write_text(GREETING)
    git(where, "add", "skills/greeting.json")
    git(where, *AGENT, "commit", "-q", "-m", "skills: greeting")
    return where


async def propose(services: AgentServices, session: SessionContext, **payload: Any) -> ApprovalRow:
    asked = await services.approvals.request(
        session,
        RequestApprovalRequest(
            request_type="repo_change",
            payload={"branch": "proposal/greeting", "description": "say hello", **payload},
        ),
    )
    return await services.approvals.show(asked.approval_id)


def head(repo: Path, ref: str = "main") -> str:
    return git(repo, "rev-parse", ref).strip()


async def test_the_branch_is_fetched_bound_to_its_diff_applied_and_left_in_the_repo(
    pool: Pool, stage: ConfigStage, services: AgentServices, session: SessionContext, repo: Path
) -> None:
    mine = clone(stage, repo)
    before = head(repo)
    row = await propose(services, session)

    fetched = f"proposal/{session.session_id}/greeting"
    assert head(repo, fetched) == head(mine, "proposal/greeting")
    target = git_apply.TargetRepo(repo, "main")
    review = repo_change.reviewed(target, fetched)
    assert row.content_sha256 == review.sha256
    assert (review.base, review.commit) == (before, head(mine, "proposal/greeting"))
    assert "+++ b/skills/greeting.json" in review.diff
    assert review.shown(target).startswith(f"# {fetched} in {repo} (")

    approved = await services.approvals.approve(row.id, by="choirctl")
    edges = Edges(stage)
    state = await ProposalApplier(pool, edges, lambda *_: None).run(approved.id)

    assert (state.step, state.branch, state.commit_id) == ("done", fetched, review.commit)
    assert edges.calls == ["merge", "build", "update"]  # the agent committed: nothing to commit
    assert head(repo) == review.commit  # fast-forwarded, the checkout in step
    assert (repo / "skills" / "greeting.json").read_text() == GREETING
    author = git(repo, "show", "-s", "--format=%an", review.commit).strip()
    assert author == "choir agent-1"


async def test_a_branch_that_moved_after_the_proposal_is_not_applied(
    pool: Pool, stage: ConfigStage, services: AgentServices, session: SessionContext, repo: Path
) -> None:
    clone(stage, repo)
    before = head(repo)
    row = await propose(services, session)
    fetched = f"proposal/{session.session_id}/greeting"
    git(repo, "checkout", "-q", fetched)  # someone adds to the branch after the review
    (repo / "skills" / "extra.json").write_text('{"name": "extra"}\n')
    git(repo, "add", "skills/extra.json")
    git(repo, *AGENT, "commit", "-q", "-m", "unreviewed")
    git(repo, "checkout", "-q", "main")

    approved = await services.approvals.approve(row.id, by="choirctl")
    edges = Edges(stage)
    state = await ProposalApplier(pool, edges, lambda *_: None).run(approved.id)

    assert (state.step, state.failed_step) == ("failed", "commit")
    assert state.reason is not None
    assert f"branch {fetched} changed after the proposal" in state.reason
    assert edges.calls == []
    assert head(repo) == before
    assert not (repo / "skills" / "greeting.json").exists()


async def test_a_merge_conflict_fails_at_the_merge_and_main_keeps_the_operators_commit(
    pool: Pool, stage: ConfigStage, services: AgentServices, session: SessionContext, repo: Path
) -> None:
    clone(stage, repo)
    row = await propose(services, session)
    (repo / "skills").mkdir(exist_ok=True)
    (repo / "skills" / "greeting.json").write_text('{"name": "greeting", "mine": true}\n')
    git(repo, "add", "skills/greeting.json")
    git(repo, "commit", "-q", "-m", "the operator's own greeting")
    mine = head(repo)

    approved = await services.approvals.approve(row.id, by="choirctl")
    edges = Edges(stage)
    state = await ProposalApplier(pool, edges, lambda *_: None).run(approved.id)

    assert (state.step, state.failed_step) == ("failed", "merge")
    assert "merge conflict with main in skills/greeting.json" in str(state.reason)
    assert edges.calls == ["merge"]
    assert head(repo) == mine
    assert git(repo, "status", "--porcelain") == ""


@pytest.mark.parametrize("step", ["build", "update"])
async def test_a_failed_build_or_update_reverts_the_merge(
    pool: Pool,
    stage: ConfigStage,
    services: AgentServices,
    session: SessionContext,
    repo: Path,
    step: str,
) -> None:
    clone(stage, repo)
    before = head(repo)
    row = await propose(services, session)
    approved = await services.approvals.approve(row.id, by="choirctl")
    ended: list[ApprovalRow] = []
    edges = Edges(stage, fail=step)

    state = await ProposalApplier(pool, edges, lambda row, _: ended.append(row)).run(approved.id)

    assert (state.step, state.failed_step) == ("failed", step)
    assert head(repo) == before
    assert not (repo / "skills" / "greeting.json").exists()
    assert "revert" in edges.calls
    assert [(r.status, str(r.outcome).split(":")[0]) for r in ended] == [
        ("failed", f"{step} failed")
    ]
    fetched = f"proposal/{session.session_id}/greeting"
    assert head(repo, fetched) == state.commit_id  # left for inspection


def refused(error: pytest.ExceptionInfo[UsageError]) -> str:
    message = error.value.message
    assert "\n" not in message
    return message


async def no_approval(pool: Pool) -> None:
    async with pool.acquire() as conn:
        count = await conn.fetchval("SELECT count(*) FROM choir_control.pending_approvals")
    assert count == 0


async def test_a_clone_reached_through_a_symlink_or_outside_the_workspace_is_refused(
    pool: Pool, stage: ConfigStage, services: AgentServices, session: SessionContext, repo: Path
) -> None:
    elsewhere = clone(stage, repo, name="real")
    os.symlink(elsewhere, workspace(stage) / "link")
    for path, problem in [
        ("link", "is not a plain clone"),
        ("../x", "leaves /workspace"),
        ("/etc", "is outside /workspace"),
        ("missing", "no git clone at /workspace/missing"),
    ]:
        with pytest.raises(UsageError) as error:
            await propose(services, session, path=path)
        assert problem in refused(error)
    await no_approval(pool)
    assert git(repo, "branch", "--list", "proposal/*").strip() == ""


async def test_borrowed_objects_unrelated_history_symlinks_and_bad_names_are_refused(
    pool: Pool, stage: ConfigStage, services: AgentServices, session: SessionContext, repo: Path
) -> None:
    borrowed = workspace(stage) / "borrowed"
    git(workspace(stage), "clone", "-q", "--shared", str(repo), "borrowed")
    with pytest.raises(UsageError) as error:
        await propose(services, session, path="borrowed")
    assert "objects/info/alternates" in refused(error)

    stranger = workspace(stage) / "stranger"
    stranger.mkdir()
    (stranger / "x.txt").write_text("x\n")
    init_with_commit(stranger, "unrelated")
    git(stranger, "checkout", "-q", "-b", "proposal/greeting")
    with pytest.raises(UsageError) as error:
        await propose(services, session, path="stranger")
    assert "does not descend from main" in refused(error)

    linked = clone(stage, repo, name="linked")
    os.symlink("/etc/passwd", linked / "skills" / "evil.json")
    git(linked, "add", "skills/evil.json")
    git(linked, *AGENT, "commit", "-q", "-m", "evil")
    with pytest.raises(UsageError) as error:
        await propose(services, session, path="linked")
    assert "adds a symlink at skills/evil.json" in refused(error)

    with pytest.raises(UsageError) as error:
        await propose(services, session, path="linked", branch="main..x")
    assert "not a valid branch name" in refused(error)
    await no_approval(pool)
    assert git(repo, "branch", "--list", "proposal/*").strip() == ""
    assert borrowed.is_dir()


def test_a_remote_or_shared_repo_is_refused_at_proposal_time(
    stage: ConfigStage, repo: Path
) -> None:
    clone(stage, repo)
    for url, problem in [
        ("https://git.example.org/agent-1.git", "agents.agent-1.repo.url is a remote URL"),
        (str(stage.running.config.agents["agent-2"].repo.url), "is also agent agent-2's"),
        (stage.running.config.global_repo.url, "is the global repo"),
    ]:
        with pytest.raises(UsageError) as error:
            repo_change.fetch_proposal(
                with_repo_url(stage.running.config, url),
                "agent-1",
                workspace(stage),
                {"branch": "proposal/greeting", "description": "x"},
                "proposal/s/greeting",
            )
        assert problem in refused(error)
    assert git(repo, "branch", "--list", "proposal/*").strip() == ""


def with_repo_url(config: ChoirConfig, url: str) -> ChoirConfig:
    agents = {**config.agents}
    agents["agent-1"] = agents["agent-1"].model_copy(
        update={"repo": agents["agent-1"].repo.model_copy(update={"url": url})}
    )
    return config.model_copy(update={"agents": agents})


def test_only_a_repo_that_can_be_proposed_is_given_to_mount_and_by_its_real_path(
    stage: ConfigStage, repo: Path, short_tmp: Path
) -> None:
    config = stage.running.config
    assert repo_change.mount_source(config, "agent-1") == (repo.resolve(), "main")
    link = short_tmp / "repo-link"
    link.symlink_to(repo)
    assert repo_change.mount_source(with_repo_url(config, str(link)), "agent-1") == (
        repo.resolve(),
        "main",
    )  # the engine binds what the link points at now, and the check compares that
    for url, problem in [
        (str(short_tmp / "missing"), "is not a directory: nothing to clone"),
        ("https://git.example.org/agent-1.git", "is a remote URL"),
        (str(config.agents["agent-2"].repo.url), "is also agent agent-2's"),
        (config.global_repo.url, "is the global repo"),
    ]:
        refused = repo_change.mount_source(with_repo_url(config, url), "agent-1")
        assert isinstance(refused, str)
        assert problem in refused


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to own files as another uid")
async def test_a_clone_the_agents_uid_owns_is_fetched_as_a_container_leaves_it(
    stage: ConfigStage, services: AgentServices, session: SessionContext, repo: Path
) -> None:
    """Docker with choird as root: the workspace (and the clone) belong to the agent's uid,
    which git refuses to read from unless told to trust that one clone."""
    tip = head(clone(stage, repo), "proposal/greeting")
    for path in [workspace(stage), *workspace(stage).rglob("*")]:
        os.lchown(path, AGENT_UID, AGENT_UID)

    row = await propose(services, session)

    fetched = f"proposal/{session.session_id}/greeting"
    assert head(repo, fetched) == tip
    assert (
        row.content_sha256
        == repo_change.reviewed(git_apply.TargetRepo(repo, "main"), fetched).sha256
    )


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run git as another uid")
def test_the_agents_git_trusts_the_repo_it_was_given_though_another_uid_owns_it(
    short_tmp: Path,
) -> None:
    """What a container's agent does at start (`git_identity`): its git config names the mounted
    repo safe, so its uid (not the repo owner's) can clone it; without that, git refuses."""
    short_tmp.chmod(0o711)  # the agent's uid may pass through, not list
    repo = short_tmp / "repo"  # root's, readable by all: as an operator's repo is
    repo.mkdir(mode=0o755)
    (repo / "README.md").write_text("the agent's repo\n")
    init_with_commit(repo, "start")
    scratch = short_tmp / "agent-home"
    scratch.mkdir()
    os.chown(scratch, AGENT_UID, AGENT_UID)
    config = scratch / "gitconfig"

    def clone_as_agent(name: str) -> subprocess.CompletedProcess[str]:
        env = {"PATH": os.environ["PATH"], "HOME": str(scratch), "GIT_CONFIG_GLOBAL": str(config)}
        return subprocess.run(
            ["git", "clone", "-q", str(repo), str(scratch / name)],
            env=env,
            user=AGENT_UID,
            group=AGENT_UID,
            capture_output=True,
            text=True,
            check=False,
        )

    refused = clone_as_agent("refused")
    assert "dubious ownership" in refused.stderr
    asyncio.run(configure_git(config, {"safe.directory": git_dir(repo)}))
    os.chown(config, AGENT_UID, AGENT_UID)
    cloned = clone_as_agent("cloned")
    assert cloned.returncode == 0, cloned.stderr
    assert (scratch / "cloned" / "README.md").read_text() == "the agent's repo\n"


@pytest.mark.skipif(os.geteuid() != 0, reason="choird as root runs containers as another uid")
def test_a_container_is_given_no_repo_its_uid_could_not_read_and_says_how_to_fix_it(
    stage: ConfigStage, repo: Path
) -> None:
    config = stage.running.config
    mode = repo.stat().st_mode
    try:
        repo.chmod(0o700)
        refused = container_repo(config, "agent-1")
        assert refused == (
            f"{repo.resolve()} is not readable by the agent's uid (mode 0700): "
            f"chmod -R o+rX {repo.resolve()} to let the agent clone it"
        )
        repo.chmod(0o755)
        assert container_repo(config, "agent-1") == (repo.resolve(), "main")
    finally:
        repo.chmod(mode)
