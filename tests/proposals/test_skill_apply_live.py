"""`choir.propose.skill` applied end to end (issue 17): a live choird on the process runtime,
the real `choir-agent`, a scripted model, the real git repos `choirctl init` makes.

The agent runs skill-builder to its proposal; the operator approves with choirctl; choird
commits the skill on `proposal/<session>/triage`, merges it into agent-1's repo, builds and
updates the agent resuming its session; the agent then starts the new skill in the same
conversation. Faults: choird SIGKILLed (failpoint `exit`) right after the merge resumes the apply
when it starts again; a build that fails (a broken skill in the repo's working tree) reverts
the merge and leaves the agent running as it was, the approval `failed` at `build`.
"""

from __future__ import annotations

import asyncio
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from choir.config.scaffolding.gitrepo import git
from choir.home import ChoirHome
from choir.scripted import ReplyStep, Script, ScriptedCall, ScriptedModelServer, ToolCallsStep
from choir.store.postgres.target import ConnectParams
from tests.faults.support import as_json, choirctl, spawn_choird, teardown
from tests.faults.test_choird_restart import home_for
from tests.harness.processes import Choird
from tests.harness.waits import poll_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

TRIAGE: dict[str, Any] = {
    "name": "triage",
    "description": "Sort incoming notes by urgency.",
    "initial_state": "sort",
    "states": {
        "sort": {
            "objective": "Read the notes and sort them.",
            "allowed_tools": ["choir.fs.read"],
            "transitions": [{"on": "complete", "to": "done"}],
        },
        "done": {"terminal": True},
    },
    "max_steps": 5,
}
COMPLETE = ScriptedCall(name="choir.skill.transition", arguments={"on": "complete"})
SCRIPT = Script(
    steps=[
        # the second conversation turn, after the update: the new skill starts, or it does not
        ToolCallsStep(
            match="use the triage skill",
            calls=[ScriptedCall(name="choir.skill.start", arguments={"skill": "triage"})],
        ),
        ReplyStep(after="tool", match="started skill 'triage'", text="Triage is running."),
        ReplyStep(after="tool", match="unknown skill", text="There is no triage skill."),
        # the first: skill-builder from start to its proposal
        ToolCallsStep(
            match="build a triage skill",
            calls=[ScriptedCall(name="choir.skill.start", arguments={"skill": "skill-builder"})],
        ),
        ToolCallsStep(after="tool", match="started skill 'skill-builder'", calls=[COMPLETE]),
        ToolCallsStep(after="tool", match="to 'design'", calls=[COMPLETE]),
        ToolCallsStep(after="tool", match="to 'validate'", calls=[COMPLETE]),
        ToolCallsStep(
            after="tool",
            match="to 'propose'",
            calls=[
                ScriptedCall(
                    name="choir.propose.skill",
                    arguments={"spec": TRIAGE, "rationale": "Notes pile up unsorted."},
                )
            ],
        ),
        ToolCallsStep(after="tool", match="proposal submitted", calls=[COMPLETE]),
        ReplyStep(after="tool", match="to 'done'", text="I proposed the triage skill."),
        ReplyStep(repeat=True, text="ok"),
    ]
)


@pytest.fixture
def script() -> Script:
    return SCRIPT


@dataclass
class Scene:
    home: ChoirHome
    choird: Choird | None = None

    async def ctl(self, *args: str) -> subprocess.CompletedProcess[str]:
        return await asyncio.to_thread(choirctl, self.home, *args)

    async def start_choird(self, **env: str) -> None:
        self.choird = await asyncio.to_thread(
            spawn_choird, self.home, "--runtime", "process", **env
        )

    @property
    def repo(self) -> Path:
        return self.home.sources / "agents" / "agent-1"

    async def proposed(self) -> tuple[str, str]:
        """Start agent-1, have it build the skill; (session id, approval id)."""
        started = as_json(await self.ctl("agent", "start", "agent-1", "--dm", "console", "--json"))
        said = await self.ctl("chat", "agent-1", "please build a triage skill")
        assert "I proposed the triage skill." in said.stdout, (said.stdout, said.stderr)
        [approval] = as_json(await self.ctl("approval", "list", "--json"))["approvals"]
        assert (approval["request_type"], approval["status"]) == ("skill", "pending")
        return started["session_id"], approval["approval_id"]

    async def show(self, approval_id: str) -> dict[str, Any]:
        return dict(as_json(await self.ctl("approval", "show", approval_id, "--json")))

    async def ended(self, approval_id: str, within: float = 180) -> dict[str, Any]:
        async def done() -> bool:
            return (await self.show(approval_id))["status"] in ("applied", "failed")

        await poll_until(done, within=within, every=0.5)
        return await self.show(approval_id)

    async def active_session(self) -> str:
        status = as_json(await self.ctl("agent", "status", "agent-1", "--json"))
        return str(status["session_id"])


@pytest.fixture
def scene(root: Path, pg_params: ConnectParams, model: ScriptedModelServer) -> Any:
    made = Scene(home_for(root, pg_params, model.url))
    yield made
    teardown(made.home, made.choird)


def head(repo: Path) -> str:
    return git(repo, "rev-parse", "main").strip()


async def test_an_approved_skill_is_committed_merged_built_and_used_in_the_same_session(
    scene: Scene,
) -> None:
    await scene.start_choird()
    before = head(scene.repo)
    session, approval_id = await scene.proposed()

    approved = await scene.ctl("approval", "approve", approval_id)
    assert approved.returncode == 0, approved.stderr
    shown = await scene.ended(approval_id)

    assert shown["status"] == "applied", shown
    assert (shown["resolved_by"], shown["resolved_via"]) == ("choirctl", "choirctl")
    apply = shown["apply"]
    assert apply["step"] == "done"
    assert apply["branch"] == f"proposal/{session}/triage"
    assert apply["merged_from"] == before
    assert head(scene.repo) == apply["commit_id"]  # fast-forwarded: main had not moved
    committed = git(scene.repo, "show", "-s", "--format=%an <%ae>", apply["commit_id"]).strip()
    assert committed == "choir agent-1 <agent-1@choir.local>"  # the agent's git identity
    assert (scene.repo / "skills" / "triage.json").is_file()  # the checkout is in step
    actions = [(fact["action"], fact["detail"].split(":")[0]) for fact in shown["audit"]]
    assert actions[:2] == [
        ("requested", "sha256 " + shown["content_sha256"]),
        ("approved", "content sha256 " + shown["content_sha256"]),
    ]
    steps = [fact["detail"] for fact in shown["audit"] if fact["action"] == "step"]
    assert [s.split(":")[0] for s in steps] == [
        "commit",
        "commit",
        "merge",
        "merge",
        "build",
        "build",
        "update",
        "update",
    ]
    assert shown["audit"][-1]["action"] == "applied"
    text = (await scene.ctl("approval", "show", approval_id)).stdout
    assert "applied by choirctl via choirctl" in text
    assert f"commit    {apply['commit_id']}" in text

    assert await scene.active_session() == session  # updated, its session resumed
    said = await scene.ctl("chat", "agent-1", "now use the triage skill")
    assert "Triage is running." in said.stdout, (said.stdout, said.stderr)
