"""`config diff` shows what the staged repos change for each running agent (§17.6): the tools,
skills and identity files that differ from the commits the agent runs, and the commits."""

from __future__ import annotations

import json

import pytest

from choir.config.scaffolding.gitrepo import git
from tests.build.support import skill, tool
from tests.lifecycle.conftest import Choird
from tests.lifecycle.support import choirctl, commit_file

pytestmark = pytest.mark.slow


async def test_config_diff_lists_changed_repo_files_and_commits(choird: Choird) -> None:
    daemon, client = choird
    home = daemon.home
    global_repo, agent_repo = home.sources / "global", home.sources / "agents" / "agent-1"
    await client.agent_start("agent-1", {"dm": "console"})
    global_was = git(global_repo, "rev-parse", "HEAD").strip()
    agent_was = git(agent_repo, "rev-parse", "HEAD").strip()
    commit_file(agent_repo, "skills/test_notes.json", skill("test_notes"))
    commit_file(agent_repo, "README.txt", "not part of the image's tools, skills or identity\n")
    commit_file(global_repo, "tools/test.lookup.json", tool("test.lookup"))
    global_now = commit_file(global_repo, "identity/USER.md", "The operator likes tea.\n")
    agent_now = git(agent_repo, "rev-parse", "HEAD").strip()

    loaded = await choirctl(home, "config", "load")
    shown = await choirctl(home, "config", "diff")
    as_json = await choirctl(home, "config", "diff", "--json")

    assert loaded.returncode == 0, loaded.stderr
    assert shown.returncode == 0, shown.stderr
    lines = [" ".join(line.split()) for line in shown.stdout.splitlines()]
    update = "→ use: choirctl agent update agent-1"
    assert f"+ agent-1:skills/test_notes.json [restart-required] {update}" in lines
    assert f"+ global:tools/test.lookup.json [restart-required] {update}" in lines
    assert f"~ global:identity/USER.md [restart-required] {update}" in lines
    assert f"~ agent-1 repo: {agent_was[:7]}→{agent_now[:7]} [restart-required] {update}" in lines
    assert f"~ global repo: {global_was[:7]}→{global_now[:7]} [restart-required] {update}" in lines
    assert not any("README.txt" in line for line in lines)
    assert " ".join(loaded.stdout.split()).count("agent-1:skills/test_notes.json") == 1
    changes = json.loads(as_json.stdout)["changes"]
    assert {
        "op": "+",
        "source": "agent-1",
        "path": "skills/test_notes.json",
        "scope": "restart-required",
        "action": "choirctl agent update agent-1",
    } in changes

    await client.agent_update("agent-1")  # it now runs the staged repos: nothing left to show
    after = await choirctl(home, "config", "diff", "--json")
    assert not [c for c in json.loads(after.stdout)["changes"] if c["source"] != "config.json"]
    await client.agent_stop("agent-1")
