"""`choir.propose.tool` end to end (§8.10's two-phase registration, issue 17): a live choird on
the process runtime, the real `choir-agent`, a scripted model, the real git repos `choirctl init`
makes.

The agent runs the shipped tool-builder skill to its proposal; the operator approves with
choirctl; choird commits the manifest and a not-ready stub on `proposal/<session>/text.shout`
without merging, and the agent is told it cannot call the tool yet (it cannot: it is not in its
registry). The test then writes the implementation on that branch as a human would (plain git in
a worktree of agent-1's repo); bad registrations are refused with one line and the right exit
code, nothing merged; `choirctl tool register` merges, builds and updates the agent, which calls
the tool in its resumed session. Faults: choird SIGKILLed right after the register's merge
resumes it on restart; a build that fails reverts the merge and leaves the agent running as it
was, the approval waiting for the implementation again, and a second register goes through.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from choir.config.scaffolding.gitrepo import git
from choir.daemon.proposals.tool import STUB_MARKER
from choir.scripted import ReplyStep, Script, ScriptedCall, ToolCallsStep
from tests.faults.support import as_json
from tests.harness.proposals import SHOUT, SHOUT_PROPOSAL, implement
from tests.harness.waits import poll_until
from tests.proposals.test_skill_apply_live import COMPLETE, Scene, head, scene, told

__all__ = ["scene"]  # the fixture, shared with the skill's live test

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

SCRIPT = Script(
    steps=[
        # asked to shout: the tool's result, or the agent's registry has no such tool
        ToolCallsStep(
            match="shout hello",
            repeat=True,
            calls=[ScriptedCall(name=SHOUT, arguments={"text": "hello"})],
        ),
        ReplyStep(after="tool", match="HELLO", repeat=True, text="It says HELLO."),
        ReplyStep(after="tool", match="unknown tool", repeat=True, text="I have no shout tool."),
        # tool-builder from start to its proposal
        ToolCallsStep(
            match="build a shout tool",
            calls=[ScriptedCall(name="choir.skill.start", arguments={"skill": "tool-builder"})],
        ),
        ToolCallsStep(after="tool", match="started skill 'tool-builder'", calls=[COMPLETE]),
        ToolCallsStep(after="tool", match="to 'design'", calls=[COMPLETE]),
        ToolCallsStep(after="tool", match="to 'validate'", calls=[COMPLETE]),
        ToolCallsStep(
            after="tool",
            match="to 'propose'",
            calls=[ScriptedCall(name="choir.propose.tool", arguments=SHOUT_PROPOSAL)],
        ),
        ToolCallsStep(after="tool", match="proposal submitted", calls=[COMPLETE]),
        ReplyStep(after="tool", match="to 'done'", text="I proposed the shout tool."),
        ReplyStep(repeat=True, text="ok"),
    ]
)


@pytest.fixture
def script() -> Script:
    return SCRIPT


async def proposed(scene: Scene) -> tuple[str, str]:
    """Start agent-1, have it run tool-builder; (session id, approval id)."""
    started = as_json(await scene.ctl("agent", "start", "agent-1", "--dm", "console", "--json"))
    said = await scene.ctl("chat", "agent-1", "please build a shout tool")
    assert "I proposed the shout tool." in said.stdout, (said.stdout, said.stderr)
    [approval] = as_json(await scene.ctl("approval", "list", "--json"))["approvals"]
    assert (approval["request_type"], approval["status"]) == ("tool", "pending")
    return started["session_id"], approval["approval_id"]


async def awaiting(scene: Scene, approval_id: str) -> dict[str, Any]:
    """Approve; once phase 1 ended, the approval as `approval show --json` shows it."""
    approved = await scene.ctl("approval", "approve", approval_id)
    assert approved.returncode == 0, approved.stderr

    async def waiting() -> bool:
        return (await scene.show(approval_id)).get("outcome") is not None

    await poll_until(waiting, within=60, every=0.5)
    return await scene.show(approval_id)


async def shout(scene: Scene) -> str:
    return (await scene.ctl("chat", "agent-1", "shout hello")).stdout


async def test_tool_builder_to_a_registered_tool_the_agent_calls_in_the_same_session(
    scene: Scene, tmp_path: Path
) -> None:
    await scene.start_choird()
    before = head(scene.repo)
    session, approval_id = await proposed(scene)

    shown = await awaiting(scene, approval_id)

    branch = f"proposal/{session}/{SHOUT}"
    assert shown["status"] == "approved"
    assert (shown["apply"]["step"], shown["apply"]["branch"]) == ("implement", branch)
    assert f"choirctl tool register agent-1 {branch}" in shown["outcome"]
    assert f'+    "exec_path": "/choir/tools/agent/{SHOUT}"' in shown["diff"]  # as committed
    assert head(scene.repo) == before  # phase 1 merges nothing
    assert STUB_MARKER in git(scene.repo, "show", f"{branch}:tools/{SHOUT}")
    committed = git(scene.repo, "show", "-s", "--format=%an", branch).strip()
    assert committed == "choir agent-1"  # the agent's git identity
    text = (await scene.ctl("approval", "show", approval_id)).stdout
    assert f"apply     implement (branch {branch})" in text
    resolved = await told(scene, session, approval_id)
    assert resolved["status"] == "approved"
    assert resolved["reason"].startswith("awaiting implementation: approved, but a human")
    assert "until then it cannot be called" in resolved["reason"]
    assert "I have no shout tool." in await shout(scene)  # the stub is offered to nobody

    # bad registrations: one line each, the right exit code, nothing merged
    unknown_agent = await scene.ctl("tool", "register", "agent-9", branch)
    unknown_branch = await scene.ctl("tool", "register", "agent-1", "proposal/x/nope")
    still_stub = await scene.ctl("tool", "register", "agent-1", branch)
    assert (unknown_agent.returncode, unknown_branch.returncode) == (4, 4)
    assert "no agent named 'agent-9'" in unknown_agent.stderr
    assert "no approved tool proposal of agent-1 waits on branch" in unknown_branch.stderr
    assert still_stub.returncode == 2, still_stub.stderr
    assert "is not an executable file" in still_stub.stderr
    for refused in (unknown_agent, unknown_branch, still_stub):
        assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert head(scene.repo) == before

    commit = implement(scene.repo, branch, tmp_path)  # the human's part
    registered = await scene.ctl("tool", "register", "agent-1", branch)

    assert registered.returncode == 0, (registered.stdout, registered.stderr)
    assert f"approval  {approval_id} (applied)" in registered.stdout
    shown = await scene.show(approval_id)
    assert shown["status"] == "applied"
    assert (shown["apply"]["step"], shown["apply"]["commit_id"]) == ("done", commit)
    assert head(scene.repo) == commit
    steps = [f["detail"] for f in shown["audit"] if f["action"] == "step"]
    assert [s.split(":")[0] for s in steps] == ["commit", "commit"] + [
        s for s in ("validate", "merge", "build", "update") for _ in range(2)
    ]
    assert await scene.active_session() == session  # updated, its session resumed
    assert "It says HELLO." in await shout(scene)


async def test_choird_killed_after_the_registers_merge_resumes_it_when_it_starts_again(
    scene: Scene, tmp_path: Path
) -> None:
    await scene.start_choird(CHOIR_FAILPOINTS="proposal.after_merge=exit")
    session, approval_id = await proposed(scene)
    branch = (await awaiting(scene, approval_id))["apply"]["branch"]
    commit = implement(scene.repo, branch, tmp_path)

    registering = await scene.ctl("tool", "register", "agent-1", branch)
    assert registering.returncode != 0  # choird died under it
    assert scene.choird is not None
    assert await asyncio.to_thread(scene.choird.process.wait, 60) == 137

    await scene.start_choird()  # no failpoint: it picks the register up at `build`
    shown = await scene.ended(approval_id)

    assert shown["status"] == "applied", shown
    steps = [f["detail"] for f in shown["audit"] if f["action"] == "step"]
    assert steps.count("merge: started") == 1
    assert steps.count("build: started") == 1
    assert head(scene.repo) == commit
    assert await scene.active_session() == session
    assert "It says HELLO." in await shout(scene)


async def test_a_failed_build_reverts_the_registers_merge_and_leaves_the_agent_as_it_was(
    scene: Scene, tmp_path: Path
) -> None:
    await scene.start_choird()
    session, approval_id = await proposed(scene)
    branch = (await awaiting(scene, approval_id))["apply"]["branch"]
    implement(scene.repo, branch, tmp_path)
    before = head(scene.repo)
    pid = as_json(await scene.ctl("agent", "status", "agent-1", "--json"))["pid"]
    broken = scene.repo / "skills" / "broken.json"  # the build reads the working tree
    broken.parent.mkdir(exist_ok=True)
    broken.write_text('{"name": "broken"}\n')

    registered = await scene.ctl("tool", "register", "agent-1", branch)

    assert registered.returncode == 1, (registered.stdout, registered.stderr)
    assert "the last register failed at build: " in registered.stdout
    shown = await scene.show(approval_id)
    assert (shown["status"], shown["apply"]["step"], shown["apply"]["failed_step"]) == (
        "approved",
        "implement",
        "build",
    )  # still registrable: no new proposal needed
    assert shown["outcome"].startswith("awaiting implementation: the last register failed at")
    failures = [f["detail"] for f in shown["audit"] if f["action"] == "register_failed"]
    assert len(failures) == 1
    assert failures[0].startswith("build: ")
    said = (await scene.ctl("approval", "show", approval_id)).stdout
    assert "the last register failed at build: " in said
    assert head(scene.repo) == before  # the merge was undone
    assert not (scene.repo / "tools" / SHOUT).exists()
    status = as_json(await scene.ctl("agent", "status", "agent-1", "--json"))
    assert (status["session_id"], status["pid"]) == (session, pid)  # never stopped
    broken.unlink()
    assert "I have no shout tool." in await shout(scene)

    again = await scene.ctl("tool", "register", "agent-1", branch)  # fixed: registered again

    assert again.returncode == 0, (again.stdout, again.stderr)
    shown = await scene.show(approval_id)
    assert (shown["status"], shown["apply"]["failed_step"]) == ("applied", None)
    assert await scene.active_session() == session
    assert "It says HELLO." in await shout(scene)
