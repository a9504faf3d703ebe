"""`agent status` (§17.1): lane states, budgets, skill, bindings, uptime, config version,
runtime and image, for a running agent and a stopped one."""

from __future__ import annotations

import json

import pytest

from tests.lifecycle.conftest import Choird
from tests.lifecycle.support import chat, choirctl
from tests.security.process_agents import bwrap_works, sandbox_word

pytestmark = pytest.mark.slow


async def test_status_of_a_running_agent_shows_every_aspect(choird: Choird) -> None:
    daemon, client = choird
    started = await client.agent_start("agent-1", {"dm": "console"})
    await chat(client, "hello")

    human = await choirctl(daemon.home, "agent", "status", "agent-1")
    data = json.loads((await choirctl(daemon.home, "agent", "status", "agent-1", "--json")).stdout)

    assert human.returncode == 0, human.stderr
    lines = human.stdout.splitlines()
    assert lines[0] == f"agent-1  running  session {started.session_id} (active)"
    labels = [line.split()[0] for line in lines[1:12]]
    for label in ("runtime", "image", "uptime", "config", "skill", "bindings", "budgets"):
        assert label in labels, label
    assert f"runtime    process ({sandbox_word()}), pid {started.pid}" in lines
    assert any(line.startswith("edge ") and "EDGE_" in line for line in lines)
    assert data["image"] == started.image.model_dump(mode="json")
    assert data["image"]["image_version"] == "process"
    runtime = ("process", bwrap_works(), started.pid)
    assert (data["runtime"], data["sandboxed"], data["pid"]) == runtime
    assert data["config_version"] == data["config_version_latest"]
    assert data["uptime_s"] >= 0
    assert data["bindings"]["dm"] == "console"
    assert set(data["budgets"]) >= {"max_core_jobs", "total_session_tokens"}
    assert [lane["lane"] for lane in data["lanes"]] == ["edge"]
    await client.agent_stop("agent-1")

    stopped = json.loads(
        (await choirctl(daemon.home, "agent", "status", "agent-1", "--json")).stdout
    )
    assert (stopped["state"], stopped["runtime"], stopped["uptime_s"]) == ("stopped", None, None)
    assert stopped["image"] == started.image.model_dump(mode="json")  # what it last ran
