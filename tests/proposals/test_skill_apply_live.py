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
from tests.faults.scene import home_for
from tests.faults.support import as_json, choirctl, spawn_choird, teardown
from tests.harness.processes import Choird
from tests.harness.proposals import TRIAGE
from tests.harness.waits import poll_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

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


async def told(scene: Scene, session: str, approval_id: str) -> dict[str, Any]:
    """The approval_resolved event the agent committed for `approval_id` (waits for it)."""

    async def events() -> list[dict[str, Any]]:
        shown = as_json(await scene.ctl("session", "events", session, "-n", "1000", "--json"))
        return [
            e["payload"]
            for e in shown["events"]
            if e["event_type"] == "approval_resolved" and e["payload"]["approval_id"] == approval_id
        ]

    async def committed() -> bool:
        return bool(await events())

    await poll_until(committed, within=30, every=0.5)
    return (await events())[0]


async def test_choird_killed_after_the_merge_resumes_the_apply_when_it_starts_again(
    scene: Scene,
) -> None:
    await scene.start_choird(CHOIR_FAILPOINTS="proposal.after_merge=exit")
    session, approval_id = await scene.proposed()
    approved = await scene.ctl("approval", "approve", approval_id)
    assert approved.returncode == 0, approved.stderr
    assert scene.choird is not None
    assert await asyncio.to_thread(scene.choird.process.wait, 60) == 137  # killed mid-apply

    await scene.start_choird()  # no failpoint: it picks the apply up at `build`
    shown = await scene.ended(approval_id)

    assert shown["status"] == "applied", shown
    steps = [f["detail"] for f in shown["audit"] if f["action"] == "step"]
    assert steps.count("merge: started") == 1  # the merge was recorded done; not run again
    assert steps.count("build: started") == 1
    assert head(scene.repo) == shown["apply"]["commit_id"]
    assert (await told(scene, session, approval_id))["status"] == "applied"
    said = await scene.ctl("chat", "agent-1", "now use the triage skill")
    assert "Triage is running." in said.stdout, (said.stdout, said.stderr)


async def test_a_failed_build_reverts_the_merge_and_leaves_the_agent_as_it_was(
    scene: Scene,
) -> None:
    await scene.start_choird()
    session, approval_id = await scene.proposed()
    before = head(scene.repo)
    pid = as_json(await scene.ctl("agent", "status", "agent-1", "--json"))["pid"]
    broken = scene.repo / "skills" / "broken.json"  # the build reads the working tree
    broken.parent.mkdir(exist_ok=True)
    broken.write_text('{"name": "broken"}\n')

    approved = await scene.ctl("approval", "approve", approval_id)
    assert approved.returncode == 0, approved.stderr
    shown = await scene.ended(approval_id)

    assert shown["status"] == "failed", shown
    assert (shown["apply"]["step"], shown["apply"]["failed_step"]) == ("failed", "build")
    assert "broken.json" in shown["apply"]["reason"]
    assert head(scene.repo) == before  # the merge was undone
    assert not (scene.repo / "skills" / "triage.json").exists()
    assert any("rollback: merge reverted" in f["detail"] for f in shown["audit"])
    status = as_json(await scene.ctl("agent", "status", "agent-1", "--json"))
    assert (status["session_id"], status["pid"]) == (session, pid)  # never stopped
    resolved = await told(scene, session, approval_id)
    assert resolved["status"] == "failed"
    assert resolved["reason"].startswith("build failed: ")
    text = (await scene.ctl("approval", "show", approval_id)).stdout
    assert "failed at build: " in text
