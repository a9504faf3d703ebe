"""The git side of an apply on real repositories: commit without touching the working tree,
fast-forward or merge into the ref (the checkout kept in step), conflicts refused, undo."""

from __future__ import annotations

from pathlib import Path

import pytest

from choir.config.scaffolding.gitrepo import git, init_with_commit
from choir.daemon.proposals.git_apply import (
    ApplyError,
    Identity,
    TargetRepo,
    commit_file,
    head,
    merge,
    revert,
)
from choir.daemon.proposals.skill import ProposedFile

WHO = Identity("choir agent-1", "agent-1@choir.local")
FILE = ProposedFile("skills/triage.json", b'{"name": "triage"}\n')
BRANCH = "proposal/s-1/triage"


@pytest.fixture
def repo(tmp_path: Path) -> TargetRepo:
    (tmp_path / "skills").mkdir()
    (tmp_path / "skills" / "other.json").write_text("{}\n")
    init_with_commit(tmp_path, "start")
    return TargetRepo(tmp_path, "main")


def test_the_commit_is_the_agents_on_its_branch_and_the_checkout_is_untouched(
    repo: TargetRepo,
) -> None:
    before = head(repo)
    base, commit = commit_file(repo, BRANCH, FILE, WHO, "add triage")

    assert (base, head(repo)) == (before, before)  # main has not moved
    assert git(repo.path, "rev-parse", f"refs/heads/{BRANCH}").strip() == commit
    assert git(repo.path, "show", f"{commit}:skills/triage.json").encode() == FILE.content
    author = git(repo.path, "show", "-s", "--format=%an <%ae>|%cn", commit).strip()
    assert author == "choir agent-1 <agent-1@choir.local>|choir agent-1"
    assert not (repo.path / "skills" / "triage.json").exists()
    assert git(repo.path, "status", "--porcelain") == ""
    assert commit_file(repo, BRANCH, FILE, WHO, "add triage") == (base, commit)  # a rerun


def test_a_branch_of_the_same_name_with_other_content_is_refused(repo: TargetRepo) -> None:
    commit_file(repo, BRANCH, FILE, WHO, "add triage")
    other = ProposedFile(FILE.path, b'{"name": "other"}\n')
    with pytest.raises(ApplyError, match=f"branch {BRANCH} exists with other content"):
        commit_file(repo, BRANCH, other, WHO, "add triage")


def test_a_merge_fast_forwards_the_checked_out_ref_and_its_undo_puts_it_back(
    repo: TargetRepo,
) -> None:
    before = head(repo)
    _, commit = commit_file(repo, BRANCH, FILE, WHO, "add triage")

    assert merge(repo, commit, WHO, "merge") == commit
    assert (repo.path / "skills" / "triage.json").read_bytes() == FILE.content
    assert merge(repo, commit, WHO, "merge") == commit  # already merged: nothing to do
    revert(repo, before, commit)
    assert head(repo) == before
    assert not (repo.path / "skills" / "triage.json").exists()
    revert(repo, before, commit)  # a rerun after a restart
    assert head(repo) == before


def test_a_ref_that_moved_gets_a_merge_commit_and_a_conflict_changes_nothing(
    repo: TargetRepo,
) -> None:
    _, commit = commit_file(repo, BRANCH, FILE, WHO, "add triage")
    (repo.path / "notes.md").write_text("moved on\n")
    git(repo.path, "add", "notes.md")
    git(repo.path, "commit", "-q", "-m", "moved on")
    moved = head(repo)

    merged = merge(repo, commit, WHO, "merge triage")
    parents = git(repo.path, "rev-list", "--parents", "-n", "1", merged).split()[1:]
    assert parents == [moved, commit]
    revert(repo, moved, commit)
    assert head(repo) == moved

    (repo.path / "skills" / "triage.json").write_text('{"name": "mine"}\n')
    git(repo.path, "add", "skills/triage.json")
    git(repo.path, "commit", "-q", "-m", "my own triage")
    mine = head(repo)
    with pytest.raises(ApplyError, match=r"merge conflict with main in skills/triage\.json"):
        merge(repo, commit, WHO, "merge triage")
    assert head(repo) == mine
    assert git(repo.path, "status", "--porcelain") == ""


def test_an_undo_leaves_a_ref_that_moved_on_after_the_merge(repo: TargetRepo) -> None:
    before = head(repo)
    _, commit = commit_file(repo, BRANCH, FILE, WHO, "add triage")
    merge(repo, commit, WHO, "merge")
    (repo.path / "later.md").write_text("later\n")
    git(repo.path, "add", "later.md")
    git(repo.path, "commit", "-q", "-m", "later")
    later = head(repo)
    with pytest.raises(ApplyError, match="main moved on after the merge"):
        revert(repo, before, commit)
    assert head(repo) == later
