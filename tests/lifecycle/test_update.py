"""`agent update` and `agent update-all` (§17.4, §17.5) on the process runtime.

Its "build" re-materialises the agent's `/choir` tree from the repos' working trees; a running
agent whose build changed is stopped and started again on the same session.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from choir.client import ChoirClient
from choir.config.scaffolding.skeleton import agent_entry
from choir.daemon.app import ChoirDaemon
from choir.errors import UsageError
from choir.home import ChoirHome
from tests.harness.daemons import running_daemon
from tests.harness.homes import read_config, write_config
from tests.harness.processes import gone
from tests.lifecycle.conftest import Choird
from tests.lifecycle.support import chat, choirctl, commit_file

pytestmark = pytest.mark.slow

BROKEN_TOOL = json.dumps({"name": "broken.tool", "description": "no schema, no runtime"})


def global_repo(home: ChoirHome) -> Path:
    return home.sources / "global"


def tree(home: ChoirHome, agent_id: str = "agent-1") -> Path:
    return home.root / "runtime" / agent_id / "choir"


async def test_update_redeploys_a_changed_build_and_resumes_the_session(choird: Choird) -> None:
    daemon, client = choird
    started = await client.agent_start("agent-1", {"dm": "console"})
    await chat(client, "hello")
    progress: list[dict[str, Any]] = []

    unchanged = await client.agent_update("agent-1", progress.append)
    head = commit_file(global_repo(daemon.home), "identity/USER.md", "The operator likes tea.\n")
    updated = await client.agent_update("agent-1", progress.append)

    assert unchanged.model_dump(mode="json") == {
        "agent_id": "agent-1",
        "outcome": "skipped",
        "reason": "up to date: it runs the latest build",
    }
    assert updated.outcome == "redeployed"
    assert updated.stopped.status == "suspended"
    assert (updated.started.session_id, updated.started.resumed) == (
        started.session_id,
        True,
    )
    assert gone(started.pid)
    assert (tree(daemon.home) / "USER.md").read_text() == "The operator likes tea.\n"
    status = await client.agent_status("agent-1")
    assert status.image["global_repo_commit"] == head
    assert status.state == "running"
    assert [p.phase for p in progress] == ["build", "build", "stop", "start"]
    assert (await chat(client, "hello"))["text"].startswith("Hello!")
    await client.agent_stop("agent-1")


async def test_a_failed_build_leaves_the_agent_running(choird: Choird) -> None:
    daemon, client = choird
    started = await client.agent_start("agent-1", {"dm": "console"})
    commit_file(global_repo(daemon.home), "tools/broken.tool.json", BROKEN_TOOL)

    with pytest.raises(UsageError, match=r"tools/global/broken\.tool\.json"):
        await client.agent_update("agent-1")
    refused = await choirctl(daemon.home, "agent", "update", "agent-1")

    assert refused.returncode == 2, refused.stderr
    assert "broken.tool.json" in refused.stderr
    assert "Traceback" not in refused.stderr
    listed = {a.agent_id: a for a in (await client.agent_list()).agents}
    assert (listed["agent-1"].state, listed["agent-1"].pid) == ("running", started.pid)
    assert (await chat(client, "hello"))["text"].startswith("Hello!")
    assert not (daemon.home.root / "runtime" / "agent-1" / "choir.next").exists()
    await client.agent_stop("agent-1")


async def test_update_all_reports_each_agent_and_goes_past_a_failure(home: ChoirHome) -> None:
    add_unbuildable_agent(home)
    async with (
        running_daemon(home) as daemon,
        await ChoirClient.connect(home, call_timeout=None) as client,
    ):
        await update_all_three(daemon, client)


async def update_all_three(daemon: ChoirDaemon, client: ChoirClient) -> None:
    started = await client.agent_start("agent-1", {"dm": "console"})
    commit_file(global_repo(daemon.home), "identity/USER.md", "Changed for update-all.\n")

    first = await choirctl(daemon.home, "agent", "update-all")
    again = await choirctl(daemon.home, "agent", "update-all", "--json")

    assert first.returncode == 1, first.stderr
    rows = [line.split(None, 2) for line in first.stdout.splitlines()[1:]]
    assert [(agent, outcome) for agent, outcome, _ in rows] == [
        ("agent-1", "redeployed"),
        ("agent-2", "built"),
        ("agent-3", "failed"),
    ]
    assert "agents.agent-3.repo.url" in rows[2][2]
    assert "agent-1: stopping gracefully" in first.stderr
    assert again.returncode == 1
    outcomes = json.loads(again.stdout)
    assert outcomes["failed"] == 1
    assert [(a["agent_id"], a["outcome"]) for a in outcomes["agents"]] == [
        ("agent-1", "skipped"),
        ("agent-2", "skipped"),
        ("agent-3", "failed"),
    ]
    assert again.stderr == ""  # --json: no progress lines
    status = await client.agent_status("agent-1")
    assert (status.session_id, status.state) == (started.session_id, "running")
    assert (await client.agent_status("agent-2")).state == "stopped"
    await client.agent_stop("agent-1")


def add_unbuildable_agent(home: ChoirHome) -> None:
    """agent-3, whose repo is remote: the process runtime cannot build it."""
    data = read_config(home)
    defaults = {"workspace": "other", "llm": "demo", "dm": "ops"}
    data["agents"]["agent-3"] = agent_entry("https://git.invalid/agent-3.git", defaults)
    write_config(home, data)
