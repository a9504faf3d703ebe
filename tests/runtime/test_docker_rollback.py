"""`agent rollback` on the docker runtime: back to the image `agent build` kept, session resumed.

Two real builds of agent-1 (its repo at two commits), the agent running the second; a rollback
redeploys the first and keeps it through a restart (the pin), a second one finds nothing older,
bad names change nothing, `--to <commit>` goes forward to a commit, `agent update` ends the
rollback, and a stopped agent is only pinned: its next start runs the image.
"""

from __future__ import annotations

import asyncio
import json
import subprocess

import pytest

from choir.daemon.images import kept
from choir.daemon.images.kept import pin_file
from tests.harness.processes import run_choirctl
from tests.lifecycle.support import commit_file, one_error_line
from tests.runtime.conftest import BUILD_TIMEOUT_S, Choird, chat

pytestmark = [pytest.mark.slow, pytest.mark.timeout(2 * BUILD_TIMEOUT_S)]


async def choirctl(choird: Choird, *args: str) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(run_choirctl, choird.home, *args)


async def runs(choird: Choird) -> tuple[str, str | None, str | None]:
    """The agent's state, session and the agent repo commit of what it runs."""
    status = await choird.client.agent_status("agent-1")
    commit = status.image["agent_repo_commit"] if status.image else None
    return status.state, status.session_id, commit


async def test_rollback_redeploys_the_kept_image_and_update_ends_it(choird: Choird) -> None:
    client, home = choird.client, choird.home
    repo = home.sources / "agents" / "agent-1"
    first = (await client.agent_build("agent-1")).version.agent_repo_commit
    started = await choird.start()
    second = commit_file(repo, "identity/SOUL.md", "You are agent-1, second edition.\n")
    updated = await client.agent_update("agent-1")
    assert updated.outcome == "redeployed", updated.reason
    assert await runs(choird) == ("running", started["session_id"], second)

    back = await choirctl(choird, "agent", "rollback", "agent-1")

    assert back.returncode == 0, back.stderr
    assert back.stdout.startswith(f"agent-1 redeployed: session {started['session_id']} resumed")
    assert f":{first[:7]}-" in back.stdout
    assert "agent-1: stopping gracefully" in back.stderr
    assert await runs(choird) == ("running", started["session_id"], first)
    assert (await chat(client, "hello"))["text"].startswith("Hello!")
    await client.agent_restart("agent-1")  # the pin holds through a restart
    assert await runs(choird) == ("running", started["session_id"], first)

    nothing_older = await choirctl(choird, "agent", "rollback", "agent-1")
    unknown = await choirctl(choird, "agent", "rollback", "agent-1", "--to", "badc0ffee")
    option = await choirctl(choird, "agent", "rollback", "agent-1", "--to=-x")

    assert "no kept image older than the one it runs" in one_error_line(nothing_older, 4)
    assert "'badc0ffee' is neither a kept image" in one_error_line(unknown, 4)
    assert "is not an image or a commit" in one_error_line(option, 2)
    assert await runs(choird) == ("running", started["session_id"], first)

    forward = await choirctl(choird, "agent", "rollback", "agent-1", "--to", second, "--json")

    assert forward.returncode == 0, forward.stderr
    answer = json.loads(forward.stdout)
    assert answer["outcome"] == "redeployed"
    assert answer["image"]["version"]["agent_repo_commit"] == second
    assert forward.stderr == ""
    assert await runs(choird) == ("running", started["session_id"], second)
    assert pin_file(home, "agent-1").exists()

    latest = await client.agent_update("agent-1")

    # skipped when nothing else changed; redeployed when choir itself did (its wheel is in the
    # base image): either way the agent runs the repo's latest commit and the pin is gone
    assert latest.outcome in ("skipped", "redeployed"), latest.reason
    assert await runs(choird) == ("running", started["session_id"], second)
    assert not pin_file(home, "agent-1").exists()

    await client.agent_stop("agent-1")
    pinned = await client.agent_rollback("agent-1")
    assert (pinned.outcome, pinned.image.version.agent_repo_commit) == ("pinned", first)
    assert (await runs(choird))[0] == "stopped"
    restarted = await choird.start()
    assert restarted["image"]["agent_repo_commit"] == first
    assert (await chat(client, "hello"))["text"].startswith("Hello!")
    await client.agent_stop("agent-1")

    # a pinned image removed from docker: the next start runs the latest build, unpinned
    held = kept.pinned(home, "agent-1")
    assert held is not None
    kept.pin(home, "agent-1", kept.Pin("sha256:" + "0" * 64, "choir-agent-1:gone", held.version))
    again = await choird.start()
    assert again["image"]["agent_repo_commit"] == second
    assert not pin_file(home, "agent-1").exists()
    await client.agent_stop("agent-1")
