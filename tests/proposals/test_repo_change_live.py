"""`choir.propose.repo_change` end to end (§20 user-initiated flow, issue 17): a live choird on
the process runtime, the real `choir-agent`, a scripted model, the real git repos `choirctl init`
makes (agent-2 moved to a repo of its own: a shared repo is refused).

The agent clones its repo into /workspace with `choir.exec` (`$CHOIR_AGENT_REPO`: the repo's
path unsandboxed, its read-only bind at /agent-repo in the bwrap sandbox), commits a skill on a
branch and proposes it; choird fetches the branch into agent-1's repo, `approval show` prints
its full diff; approved, it is merged, built and the agent updated with its session resumed, and
the agent starts the new skill in the same conversation — unsandboxed and in bwrap. In the
sandbox a write to the repo fails (read-only), and a repo shared with another agent is not bound
at all (the tool withheld, with why). Rejected, main is untouched and the branch stays
where the diff's header says. A build failing after the merge (an invalid skill in the
checkout) reverts it and leaves the agent running as it was; choird killed right after the
merge resumes the apply at the build when it starts again.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
from pathlib import Path
from typing import Any

import pytest

from choir.config.scaffolding.gitrepo import git
from choir.core.security.profile import REPO_TARGET
from choir.scripted import ReplyStep, Script, ScriptedCall, ScriptedModelServer, ToolCallsStep
from choir.store.postgres.target import ConnectParams
from tests.faults.scene import home_for
from tests.faults.support import as_json, teardown
from tests.harness.homes import read_config, write_config
from tests.harness.waits import poll_until
from tests.proposals.test_skill_apply_live import Scene, head, told
from tests.security.process_agents import (
    SANDBOXES,
    Sandbox,
    exec_script,
    process_agent,
    require_bwrap,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

UNSANDBOXED = {"CHOIR_BWRAP": ""}
"""Agents unsandboxed even where bwrap works (the agent clones the repo's host path)."""
IN_BWRAP: dict[str, str] = {}
"""choird's own sandbox choice: bwrap where it works (`require_bwrap` first)."""

GREETING: dict[str, Any] = {
    "name": "greeting",
    "description": "Greet whoever writes first.",
    "initial_state": "greet",
    "states": {
        "greet": {
            "objective": "Say hello.",
            "allowed_tools": ["choir.fs.read"],
            "transitions": [{"on": "complete", "to": "done"}],
        },
        "done": {"terminal": True},
    },
    "max_steps": 3,
}
CLONE_AND_COMMIT = " && ".join(
    [
        'git clone -q "$CHOIR_AGENT_REPO" repo',
        "cd repo",
        "git checkout -q -b proposal/greeting",
        "mkdir -p skills",
        f"printf '%s\\n' {shlex.quote(json.dumps(GREETING))} > skills/greeting.json",
        "git add skills/greeting.json",
        "git -c user.name='choir agent-1' -c user.email=agent-1@choir.local "
        "commit -q -m 'skills: greeting'",
        "echo committed-the-greeting",
    ]
)
SCRIPT = Script(
    steps=[
        ToolCallsStep(
            match="use the greeting skill",
            calls=[ScriptedCall(name="choir.skill.start", arguments={"skill": "greeting"})],
        ),
        ReplyStep(after="tool", match="started skill 'greeting'", text="Greeting is running."),
        ReplyStep(after="tool", match="unknown skill", text="There is no greeting skill."),
        ToolCallsStep(
            match="add a greeting skill to your repo",
            calls=[ScriptedCall(name="choir.exec", arguments={"command": CLONE_AND_COMMIT})],
        ),
        ToolCallsStep(
            after="tool",
            match="committed-the-greeting",
            calls=[
                ScriptedCall(
                    name="choir.propose.repo_change",
                    arguments={
                        "branch": "proposal/greeting",
                        "description": "A skill to greet whoever writes first.",
                    },
                )
            ],
        ),
        ReplyStep(after="tool", match="proposal submitted", text="I proposed the greeting."),
        ReplyStep(repeat=True, text="ok"),
    ]
)


@pytest.fixture
def script() -> Script:
    return SCRIPT


@pytest.fixture
def scene(root: Path, pg_params: ConnectParams, model: ScriptedModelServer) -> Any:
    home = home_for(root, pg_params, model.url)
    made = Scene(home)
    yield made
    teardown(made.home, made.choird)


async def proposed(scene: Scene) -> tuple[str, str]:
    """Start agent-1, have it clone, commit and propose; (session id, approval id)."""
    started = as_json(await scene.ctl("agent", "start", "agent-1", "--dm", "console", "--json"))
    status = as_json(await scene.ctl("agent", "status", "agent-1", "--json"))
    assert "choir.propose.repo_change" not in status["unavailable_tools"], status
    said = await scene.ctl("chat", "agent-1", "please add a greeting skill to your repo")
    assert "I proposed the greeting." in said.stdout, (said.stdout, said.stderr)
    [approval] = as_json(await scene.ctl("approval", "list", "--json"))["approvals"]
    assert (approval["request_type"], approval["status"]) == ("repo_change", "pending")
    return started["session_id"], approval["approval_id"]


@pytest.mark.parametrize("sandbox", SANDBOXES)
async def test_a_branch_the_agent_committed_is_shown_merged_built_and_used_in_the_same_session(
    scene: Scene, sandbox: Sandbox
) -> None:
    if sandbox == "bwrap":
        require_bwrap()
    await scene.start_choird(**(IN_BWRAP if sandbox == "bwrap" else UNSANDBOXED))
    before = head(scene.repo)
    session, approval_id = await proposed(scene)
    branch = f"proposal/{session}/greeting"
    shown = await scene.show(approval_id)
    assert shown["diff"].startswith(f"# {branch} in {scene.repo} ({before[:12]}..")
    assert "+++ b/skills/greeting.json" in shown["diff"]
    text = (await scene.ctl("approval", "show", approval_id)).stdout
    assert f"# {branch} in {scene.repo}" in text
    assert '+{"name": "greeting", ' in text  # the file as the agent wrote it

    approved = await scene.ctl("approval", "approve", approval_id)
    assert approved.returncode == 0, approved.stderr
    shown = await scene.ended(approval_id)

    assert shown["status"] == "applied", shown
    apply = shown["apply"]
    assert (apply["step"], apply["branch"], apply["merged_from"]) == ("done", branch, before)
    assert head(scene.repo) == apply["commit_id"] == git(scene.repo, "rev-parse", branch).strip()
    author = git(scene.repo, "show", "-s", "--format=%an", apply["commit_id"]).strip()
    assert author == "choir agent-1"  # the agent's commit, as it made it
    assert (scene.repo / "skills" / "greeting.json").is_file()
    steps = [f["detail"].split(":")[0] for f in shown["audit"] if f["action"] == "step"]
    assert steps == ["commit", "commit", "merge", "merge", "build", "build", "update", "update"]
    assert await scene.active_session() == session  # updated, its session resumed
    said = await scene.ctl("chat", "agent-1", "now use the greeting skill")
    assert "Greeting is running." in said.stdout, (said.stdout, said.stderr)
    assert (await told(scene, session, approval_id))["status"] == "applied"
    if sandbox == "bwrap":  # the updated agent, its repo bound again: still what the profile says
        verified = as_json(await scene.ctl("agent", "verify", "agent-1", "--json"))
        assert verified["ok"] is True, verified


async def test_a_rejected_branch_is_left_in_the_repo_and_main_is_untouched(scene: Scene) -> None:
    await scene.start_choird(**UNSANDBOXED)
    before = head(scene.repo)
    session, approval_id = await proposed(scene)

    rejected = await scene.ctl("approval", "reject", approval_id)
    assert rejected.returncode == 0, rejected.stderr

    assert head(scene.repo) == before
    branch = f"proposal/{session}/greeting"
    assert git(scene.repo, "rev-parse", "--verify", branch).strip()  # left for inspection
    shown = await scene.show(approval_id)
    assert shown["status"] == "rejected"
    assert shown["diff"].startswith(f"# {branch} in {scene.repo}")  # says where it is


async def test_a_build_that_fails_after_the_merge_reverts_it_and_the_agent_runs_on(
    scene: Scene,
) -> None:
    await scene.start_choird(**UNSANDBOXED)
    session, approval_id = await proposed(scene)
    before = head(scene.repo)
    pid = as_json(await scene.ctl("agent", "status", "agent-1", "--json"))["pid"]
    broken = scene.repo / "skills" / "broken.json"  # the build reads the checkout
    broken.parent.mkdir(exist_ok=True)
    broken.write_text('{"name": "broken"}\n')

    approved = await scene.ctl("approval", "approve", approval_id)
    assert approved.returncode == 0, approved.stderr
    shown = await scene.ended(approval_id)

    assert shown["status"] == "failed", shown
    assert (shown["apply"]["step"], shown["apply"]["failed_step"]) == ("failed", "build")
    assert "broken.json" in shown["apply"]["reason"]
    assert head(scene.repo) == before
    assert not (scene.repo / "skills" / "greeting.json").exists()
    status = as_json(await scene.ctl("agent", "status", "agent-1", "--json"))
    assert (status["session_id"], status["pid"]) == (session, pid)  # never stopped
    assert (await told(scene, session, approval_id))["status"] == "failed"


async def test_choird_killed_after_the_merge_resumes_the_repo_change_when_it_starts_again(
    scene: Scene,
) -> None:
    await scene.start_choird(CHOIR_FAILPOINTS="proposal.after_merge=exit", **UNSANDBOXED)
    session, approval_id = await proposed(scene)
    approved = await scene.ctl("approval", "approve", approval_id)
    assert approved.returncode == 0, approved.stderr
    assert scene.choird is not None
    assert await asyncio.to_thread(scene.choird.process.wait, 60) == 137  # killed mid-apply

    await scene.start_choird(**UNSANDBOXED)  # no failpoint: it picks the apply up at `build`
    shown = await scene.ended(approval_id)

    assert shown["status"] == "applied", shown
    steps = [f["detail"] for f in shown["audit"] if f["action"] == "step"]
    assert steps.count("merge: started") == 1  # recorded done before the kill: not run again
    assert head(scene.repo) == shown["apply"]["commit_id"]
    assert (await told(scene, session, approval_id))["status"] == "applied"
    said = await scene.ctl("chat", "agent-1", "now use the greeting skill")
    assert "Greeting is running." in said.stdout, (said.stdout, said.stderr)


async def test_in_the_sandbox_a_repo_shared_with_another_agent_is_not_bound_and_says_why(
    scene: Scene,
) -> None:
    require_bwrap()
    data = read_config(scene.home)
    data["agents"]["agent-2"]["repo"] = data["agents"]["agent-1"]["repo"]  # shared again
    write_config(scene.home, data)
    await scene.start_choird(**IN_BWRAP)
    await scene.ctl("agent", "start", "agent-1", "--dm", "console", "--json")

    status = as_json(await scene.ctl("agent", "status", "agent-1", "--json"))

    reason = status["unavailable_tools"]["choir.propose.repo_change"]
    assert reason == (
        "agent agent-1's repo is also agent agent-2's: a proposal would change both; "
        "give agent-1 a repo of its own (agents.agent-1.repo.url)"
    )
    assert status["sandboxed"] is True
    inside = f"/proc/{status['pid']}/root{REPO_TARGET}"
    assert not await asyncio.to_thread(os.path.lexists, inside)  # nothing bound


WRITE_ATTEMPT = (
    'for target in "$CHOIR_AGENT_REPO/written" "$CHOIR_AGENT_REPO/.git/written"; do '
    'touch "$target" 2>> write.txt; echo "rc=$?" >> write.txt; done; '
    'git -C "$CHOIR_AGENT_REPO" branch agent-was-here 2>> write.txt; echo "rc=$?" >> write.txt; '
    "echo write-done"
)


async def test_in_the_sandbox_the_agent_cannot_write_to_its_repo(
    root: Path, pg_params: ConnectParams, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = exec_script(WRITE_ATTEMPT, done="write-done")
    async with process_agent(
        root,
        pg_params,
        script,
        sandbox="bwrap",
        monkeypatch=monkeypatch,
    ) as agent:
        repo = agent.home.sources / "agents" / "agent-1"
        before = git(repo, "for-each-ref").strip()
        await agent.start_worker()
        answer = agent.workspace / "write.txt"
        await poll_until(lambda: answer.exists() and answer.read_text().count("rc=") == 3, 60)

        text = answer.read_text()
        codes = [line for line in text.splitlines() if line.startswith("rc=")]
        assert len(codes) == 3, text
        assert "rc=0" not in codes, text  # each write failed
        assert text.count("Read-only file system") == 3, text
        assert not (repo / "written").exists()
        assert not (repo / ".git" / "written").exists()
        assert git(repo, "for-each-ref").strip() == before  # no branch made
        await agent.client.agent_stop("agent-1")
