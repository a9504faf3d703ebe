"""The merged `/choir` tree (§6.5, §15.1): override rules, validation and version.json."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from choir.daemon.images.agent_tree import commit_of, manifest_hashes, materialize
from choir.errors import ChoirError, ConfigError
from choir.protocol import VersionInfo
from tests.build.support import make_repo, skill, tool

GLOBAL_FILES: dict[str, str | None] = {
    "tools/test.shared.json": tool("test.shared", "The global version of the shared test tool."),
    "tools/test.global_only.json": tool("test.global_only"),
    "skills/shared-skill.json": skill("shared-skill", "global"),
    "skills/global-skill.json": skill("global-skill"),
    "identity/USER.md": "global user\n",
    "identity/SOUL.md": "global soul\n",
    "identity/SOUL-CORE.md": "global core soul\n",
}
AGENT_FILES: dict[str, str | None] = {
    "Dockerfile": "FROM choir-base\n",
    "tools/test.shared.json": tool("test.shared", "The agent's version of the shared test tool."),
    "tools/test.agent_only.json": tool("test.agent_only"),
    "skills/shared-skill.json": skill("shared-skill", "agent"),
    "identity/USER.md": "the agent's USER.md is ignored\n",
    "identity/SOUL.md": "agent soul\n",
}


def _materialize(tmp_path: Path, global_files=GLOBAL_FILES, agent_files=AGENT_FILES):
    global_repo, agent_repo = tmp_path / "global", tmp_path / "agent"
    commits = (make_repo(global_repo, global_files), make_repo(agent_repo, agent_files))
    tree = tmp_path / "tree"
    version = materialize(
        global_repo, agent_repo, tree, agent_id="a1", image_version="v", commits=commits
    )
    return tree, version, commits


def test_tools_sit_side_by_side_and_skills_and_identity_follow_the_override_rules(tmp_path):
    tree, _, _ = _materialize(tmp_path)

    assert sorted(p.name for p in (tree / "tools" / "global").iterdir()) == [
        "test.global_only.json",
        "test.shared.json",
    ]
    assert sorted(p.name for p in (tree / "tools" / "agent").iterdir()) == [
        "test.agent_only.json",
        "test.shared.json",
    ]
    assert sorted(p.name for p in (tree / "skills").iterdir()) == [
        "global-skill.json",
        "shared-skill.json",
    ]
    assert json.loads((tree / "skills" / "shared-skill.json").read_text())["description"] == (
        "agent"
    )
    assert (tree / "USER.md").read_text() == "global user\n", "USER.md comes from global only"
    assert (tree / "SOUL.md").read_text() == "agent soul\n", "the agent's SOUL.md wins"
    assert (tree / "SOUL-CORE.md").read_text() == "global core soul\n", "falls back to global"


def test_version_json_records_both_commits_and_the_merged_manifest_hashes(tmp_path):
    tree, version, commits = _materialize(tmp_path)

    on_disk = VersionInfo.model_validate_json((tree / "version.json").read_text())
    assert on_disk == version
    assert (version.global_repo_commit, version.agent_repo_commit) == commits
    assert (version.agent_id, version.image_version) == ("a1", "v")
    assert manifest_hashes(tree) == {
        "tool_manifest_hash": version.tool_manifest_hash,
        "skill_manifest_hash": version.skill_manifest_hash,
    }


def test_the_agent_tool_overrides_the_global_one_in_the_tool_hash(tmp_path):
    _, version, _ = _materialize(tmp_path / "one")
    without_override = {k: v for k, v in AGENT_FILES.items() if k != "tools/test.shared.json"}
    _, plain, _ = _materialize(tmp_path / "two", agent_files=without_override)

    assert version.tool_manifest_hash != plain.tool_manifest_hash
    assert version.skill_manifest_hash == plain.skill_manifest_hash


def test_every_invalid_manifest_is_reported_with_its_file(tmp_path):
    broken = {
        **AGENT_FILES,
        "tools/test.bad.json": '{"llm": {"name": "test.bad"}}',
        "tools/test.worse.json": "not json",
    }

    with pytest.raises(ConfigError) as raised:
        _materialize(tmp_path, agent_files=broken)

    assert str(raised.value).startswith("the agent's tools are invalid: fix them in its repos")
    files = {problem.split(":")[0] for problem in raised.value.problems}
    assert files == {"tools/agent/test.bad.json", "tools/agent/test.worse.json"}


def test_a_skill_naming_an_unknown_tool_is_refused(tmp_path):
    document = json.loads(skill("needs-tool"))
    document["states"]["work"]["allowed_tools"] = ["test.missing"]
    broken = {**AGENT_FILES, "skills/needs-tool.json": json.dumps(document)}

    with pytest.raises(ConfigError, match=r"test\.missing"):
        _materialize(tmp_path, agent_files=broken)


def test_an_external_tool_needs_its_executable_or_its_source_directory(tmp_path):
    external = tool("test.ext", implementation="external", exec_path="/choir/tools/agent/test.ext")
    missing = {**AGENT_FILES, "tools/test.ext.json": external}
    with pytest.raises(ConfigError) as raised:
        _materialize(tmp_path / "missing", agent_files=missing)
    assert raised.value.problems == [
        "tools/agent/test.ext.json: runtime.exec_path /choir/tools/agent/test.ext is not in the "
        "repo: commit the executable, or its source directory tools/test.ext/ for the "
        "Dockerfile to build"
    ]

    with_source = {**missing, "tools/test.ext/main.c": "int main(void) { return 0; }\n"}
    tree, _, _ = _materialize(tmp_path / "source", agent_files=with_source)
    assert (tree / "tools" / "agent" / "test.ext" / "main.c").is_file()

    with_binary = {**missing, "tools/test.ext": "#!/bin/sh\necho ok\n"}
    tree, _, _ = _materialize(tmp_path / "binary", agent_files=with_binary)
    assert (tree / "tools" / "agent" / "test.ext").is_file()


def test_commit_of_marks_uncommitted_work_and_non_repos(tmp_path):
    head = make_repo(tmp_path / "repo", {"a.txt": "1\n"})
    assert commit_of(tmp_path / "repo") == head
    (tmp_path / "repo" / "b.txt").write_text("new\n")
    assert commit_of(tmp_path / "repo") == f"{head}+dirty"
    (tmp_path / "repo" / "b.txt").unlink()
    (tmp_path / "repo" / "a.txt").write_text("2\n")  # a tracked file changed
    assert commit_of(tmp_path / "repo") == f"{head}+dirty"
    (tmp_path / "plain").mkdir()
    assert commit_of(tmp_path / "plain") == "none"


def test_commit_of_a_repo_without_commits_says_so(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    subprocess.run(["git", "init", "--quiet", str(empty)], check=True)
    with pytest.raises(ChoirError, match="has no commit yet"):
        commit_of(empty)


def test_reading_the_operators_repo_never_rewrites_its_index(tmp_path):
    """Before: `git status` refreshed a stale index under `.git/index.lock`, and the operator's
    own `git commit` at that moment failed with "index.lock: File exists"."""
    repo = tmp_path / "repo"
    head = make_repo(repo, {"a.txt": "1\n"})
    index = repo / ".git" / "index"
    (repo / "a.txt").write_text("1\n")  # same content, new mtime: the index is stale
    os.utime(repo / "a.txt", (1, 1))
    before = index.stat()
    assert commit_of(repo) == head
    after = index.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
