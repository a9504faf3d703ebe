"""A proposed tool checked when it is proposed (`proposed_tool`) and a human's implementation
checked when it is registered (`check_registration`), on real repositories: each bad input is
one error naming the problem and the fix, and nothing in the repo moves."""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from choir.config.scaffolding.gitrepo import git, init_with_commit
from choir.daemon.proposals.git_apply import Identity, TargetRepo, commit_files, head
from choir.daemon.proposals.tool import (
    EXEC_PREFIX,
    STUB_MARKER,
    check_registration,
    proposed_tool,
)
from choir.errors import NotFoundError, UsageError
from tests.harness.proposals import SHOUT, SHOUT_PROPOSAL, TOOL_PROPOSAL, implement

WHO = Identity("choir agent-1", "agent-1@choir.local")
BRANCH = f"proposal/s-1/{SHOUT}"


def test_choird_sets_where_the_executable_goes_and_the_manifest_bytes_are_canonical() -> None:
    proposed = proposed_tool(SHOUT_PROPOSAL)
    manifest = json.loads(proposed.manifest.content)
    assert proposed.manifest.path == f"tools/{SHOUT}.json"
    assert manifest["runtime"]["implementation"] == "external"
    assert manifest["runtime"]["exec_path"] == f"{EXEC_PREFIX}{SHOUT}"
    reordered = json.loads(json.dumps(SHOUT_PROPOSAL, sort_keys=True))  # jsonb reorders keys
    assert proposed_tool(reordered).manifest.sha256 == proposed.manifest.sha256
    assert proposed_tool(TOOL_PROPOSAL).name == "weather.lookup"


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda p: p.pop("manifest"), "no `manifest` object"),
        (lambda p: p["manifest"]["runtime"].update(implementation="builtin"), "only an"),
        (lambda p: p["manifest"]["runtime"].update(exec_path="/bin/sh"), "choird sets it"),
        (lambda p: p["manifest"]["llm"].update(name="choir.propose.x"), "meta tools"),
        (lambda p: p["manifest"]["llm"].update(parameters={"type": "string"}), "would not load"),
        (lambda p: p["manifest"]["llm"].update(name="../x"), "would not load"),
    ],
)
def test_a_proposal_that_would_not_load_is_refused_with_the_reason(
    change: Callable[[dict[str, Any]], object], expected: str
) -> None:
    payload = copy.deepcopy(SHOUT_PROPOSAL)
    change(payload)
    with pytest.raises(UsageError, match=expected):
        proposed_tool(payload)


@pytest.fixture
def repo(tmp_path: Path) -> TargetRepo:
    root = tmp_path / "repo"
    (root / "tools").mkdir(parents=True)
    (root / "tools" / "README").write_text("tools\n")
    init_with_commit(root, "start")
    target = TargetRepo(root, "main")
    proposed = proposed_tool(SHOUT_PROPOSAL)
    stub = proposed.stub("agent-1", BRANCH, "shout")
    commit_files(target, BRANCH, (proposed.manifest, stub), WHO, "proposed")
    return target


def test_a_branch_with_the_implementation_is_accepted(repo: TargetRepo, tmp_path: Path) -> None:
    commit = implement(repo.path, BRANCH, tmp_path)
    assert check_registration(repo, BRANCH, SHOUT) == commit


def test_an_unknown_branch_is_not_found(repo: TargetRepo) -> None:
    with pytest.raises(NotFoundError, match="no branch proposal/s-1/nope"):
        check_registration(repo, "proposal/s-1/nope", "nope")


def test_the_stub_is_refused(repo: TargetRepo) -> None:
    with pytest.raises(UsageError, match="not an executable file"):  # as committed: 100644
        check_registration(repo, BRANCH, SHOUT)


def test_a_stub_made_executable_is_still_refused(repo: TargetRepo, tmp_path: Path) -> None:
    stub = git(repo.path, "show", f"{BRANCH}:tools/{SHOUT}")
    implement(repo.path, BRANCH, tmp_path, content=stub)
    with pytest.raises(UsageError, match=f"still choird's stub \\('{STUB_MARKER}'"):
        check_registration(repo, BRANCH, SHOUT)


def test_an_implementation_not_executable_is_refused(repo: TargetRepo, tmp_path: Path) -> None:
    implement(repo.path, BRANCH, tmp_path, executable=False)
    with pytest.raises(UsageError, match=r"git update-index --chmod=\+x tools/text.shout"):
        check_registration(repo, BRANCH, SHOUT)


def test_an_invalid_manifest_is_refused(repo: TargetRepo, tmp_path: Path) -> None:
    implement(repo.path, BRANCH, tmp_path)
    implement(repo.path, BRANCH, tmp_path, name=f"{SHOUT}.json", content='{"llm": {}}\n')
    with pytest.raises(UsageError, match=f"tools/{SHOUT}.json on {BRANCH} does not load"):
        check_registration(repo, BRANCH, SHOUT)


def test_a_branch_that_changes_other_files_is_refused(repo: TargetRepo, tmp_path: Path) -> None:
    implement(repo.path, BRANCH, tmp_path)
    implement(repo.path, BRANCH, tmp_path, name="README", content="changed\n")
    with pytest.raises(UsageError, match="changes tools/README: a tool registration commits"):
        check_registration(repo, BRANCH, SHOUT)


def test_a_symlink_as_the_implementation_is_refused(repo: TargetRepo, tmp_path: Path) -> None:
    work = tmp_path / "link"
    git(repo.path, "worktree", "add", "-q", str(work), BRANCH)
    (work / "tools" / SHOUT).unlink()
    os.symlink("/bin/sh", work / "tools" / SHOUT)
    git(work, "add", f"tools/{SHOUT}")
    git(work, "commit", "-q", "-m", "a link")
    git(repo.path, "worktree", "remove", str(work))
    before = head(repo)
    with pytest.raises(UsageError, match="mode 120000"):
        check_registration(repo, BRANCH, SHOUT)
    assert head(repo) == before
