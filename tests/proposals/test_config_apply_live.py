"""`choir.propose.config_change` applied on approval (issue 17): a live choird on the process
runtime, the real `choir-agent`, a scripted model proposing the change.

Approved, the patch goes through `config load` + `config apply`: config.json rewritten, the
hot-reloaded value served (`config show`, the agent's acknowledged `config_version`), the agent
told `applied`. A patch that would not load is refused at proposal time, back to the model; an
edit of config.json where the patch applies, made after the proposal, fails the apply and
leaves the file as the operator left it; a change only a restart puts into effect is refused a
plain approval (it stays pending, saying so) and applied with `--restart`: an agent-level one
restarts the agent (its session resumed), a choird-level one stays pending until choird
restarts, the outcome naming `choir restart`; choird killed right after writing
config.json comes back with the change running and ends the approval `applied` (the agent,
adopted by the new choird, is not told then: the push precedes its reconnection — a known gap).
"""

from __future__ import annotations

import asyncio
import subprocess
from dataclasses import dataclass
from typing import Any

import pytest

from choir.home import ChoirHome
from choir.scripted import ReplyStep, Script, ScriptedCall, ScriptedModelServer, ToolCallsStep
from choir.store.postgres.target import ConnectParams
from tests.faults.scene import home_for
from tests.faults.support import as_json, choirctl, spawn_choird, teardown
from tests.harness.homes import read_config, write_config
from tests.harness.processes import Choird
from tests.harness.waits import poll_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def proposal(patch: dict[str, Any]) -> dict[str, Any]:
    return {"summary": "a change", "patch": patch, "rationale": "the operator asked"}


SHORTER = {"approval_timeout_ms": 600_000}
BROKEN = {"approval_timeout_ms": "soon"}
RESTART_ONLY = {"rpc": {"read_timeout_ms": 45_000}}
AGENT_RESTART = {"git_identities": {"agent-1": {"name": "choir agent one"}}}
SCRIPT = Script(
    steps=[
        ReplyStep(after="tool", match="proposal submitted", repeat=True, text="Proposed."),
        ReplyStep(after="tool", match="would not load", repeat=True, text="Refused: not loadable."),
        ToolCallsStep(
            match="shorter approval timeout",
            repeat=True,
            calls=[ScriptedCall(name="choir.propose.config_change", arguments=proposal(SHORTER))],
        ),
        ToolCallsStep(
            match="broken timeout",
            repeat=True,
            calls=[ScriptedCall(name="choir.propose.config_change", arguments=proposal(BROKEN))],
        ),
        ToolCallsStep(
            match="slower rpc reads",
            repeat=True,
            calls=[
                ScriptedCall(name="choir.propose.config_change", arguments=proposal(RESTART_ONLY))
            ],
        ),
        ToolCallsStep(
            match="rename your git identity",
            repeat=True,
            calls=[
                ScriptedCall(name="choir.propose.config_change", arguments=proposal(AGENT_RESTART))
            ],
        ),
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

    async def started(self, **env: str) -> str:
        """choird and agent-1 running; agent-1's session id."""
        await self.start_choird(**env)
        started = as_json(await self.ctl("agent", "start", "agent-1", "--dm", "console", "--json"))
        return str(started["session_id"])

    async def proposed(self, ask: str) -> str:
        said = await self.ctl("chat", "agent-1", ask)
        assert "Proposed." in said.stdout, (said.stdout, said.stderr)
        [approval] = as_json(await self.ctl("approval", "list", "--json"))["approvals"]
        assert (approval["request_type"], approval["status"]) == ("config_change", "pending")
        return str(approval["approval_id"])

    async def approved(self, approval_id: str, *, answer: bool = True) -> dict[str, Any]:
        if answer:
            answered = await self.ctl("approval", "approve", approval_id)
            assert answered.returncode == 0, answered.stderr

        async def ended() -> bool:
            shown = as_json(await self.ctl("approval", "show", approval_id, "--json"))
            return bool(shown["status"] in ("applied", "failed"))

        await poll_until(ended, within=60, every=0.5)
        return dict(as_json(await self.ctl("approval", "show", approval_id, "--json")))

    async def shown_config(self) -> dict[str, Any]:
        return dict(as_json(await self.ctl("config", "show", "--json")))

    async def told(self, session: str, approval_id: str) -> dict[str, Any]:
        """The approval_resolved event agent-1 committed for `approval_id` (waits for it)."""

        async def events() -> list[dict[str, Any]]:
            shown = as_json(await self.ctl("session", "events", session, "-n", "500", "--json"))
            return [
                e["payload"]
                for e in shown["events"]
                if e["event_type"] == "approval_resolved"
                and e["payload"]["approval_id"] == approval_id
            ]

        async def committed() -> bool:
            return bool(await events())

        await poll_until(committed, within=30, every=0.5)
        return (await events())[0]


@pytest.fixture
def scene(root: Any, pg_params: ConnectParams, model: ScriptedModelServer) -> Any:
    made = Scene(home_for(root, pg_params, model.url))
    yield made
    teardown(made.home, made.choird)


async def test_an_approved_config_change_is_loaded_applied_and_served_to_the_agent(
    scene: Scene,
) -> None:
    session = await scene.started()
    version = (await scene.shown_config())["config_version"]
    approval_id = await scene.proposed("please propose a shorter approval timeout")

    shown = await scene.approved(approval_id)

    assert shown["status"] == "applied", shown
    assert read_config(scene.home)["approval_timeout_ms"] == 600_000  # config.json written
    config = await scene.shown_config()
    assert config["config_version"] == version + 1
    assert config["config"]["approval_timeout_ms"] == 600_000
    assert not config["staged"]
    assert not config["pending"]

    async def acknowledged() -> bool:
        status = as_json(await scene.ctl("agent", "status", "agent-1", "--json"))
        return bool(status["config_version"] == version + 1)

    await poll_until(acknowledged, within=30, every=0.5)  # agent-1 fetched the new config
    steps = [fact["detail"].split(":")[0] for fact in shown["audit"] if fact["action"] == "step"]
    assert steps == ["check", "write", "apply"]
    assert shown["audit"][-1]["action"] == "applied"
    assert "~ approval_timeout_ms [hot-reload]" in shown["outcome"]
    resolved = await scene.told(session, approval_id)
    assert resolved["status"] == "applied"
    assert f"config_version {version + 1}" in resolved["reason"]
    text = (await scene.ctl("approval", "show", approval_id)).stdout
    assert "applied by choirctl via choirctl" in text
    assert f"outcome   config_version {version + 1}" in text


async def test_a_patch_that_would_not_load_is_refused_to_the_model_at_proposal_time(
    scene: Scene,
) -> None:
    await scene.started()
    before = scene.home.config_file.read_bytes()

    said = await scene.ctl("chat", "agent-1", "please propose a broken timeout")

    assert "Refused: not loadable." in said.stdout, (said.stdout, said.stderr)
    assert as_json(await scene.ctl("approval", "list", "--all", "--json"))["approvals"] == []
    assert scene.home.config_file.read_bytes() == before


async def test_config_json_edited_where_the_patch_applies_after_the_proposal_fails_the_apply(
    scene: Scene,
) -> None:
    session = await scene.started()
    version = (await scene.shown_config())["config_version"]
    approval_id = await scene.proposed("please propose a shorter approval timeout")
    data = read_config(scene.home)
    data["approval_timeout_ms"] = 900_000  # the operator's own edit, not applied yet
    write_config(scene.home, data)
    edited = scene.home.config_file.read_bytes()

    shown = await scene.approved(approval_id)

    assert shown["status"] == "failed", shown
    assert "changed where the patch applies" in shown["outcome"]
    assert scene.home.config_file.read_bytes() == edited  # the operator's edit untouched
    config = await scene.shown_config()
    assert config["config_version"] == version
    assert config["config"]["approval_timeout_ms"] == 1_800_000
    resolved = await scene.told(session, approval_id)
    assert resolved["status"] == "failed"
    assert resolved["reason"].startswith("config apply failed: ")


async def plainly_refused(scene: Scene, approval_id: str) -> str:
    """`approval approve` without `--restart`: refused (exit 2), the approval still pending."""
    answered = await scene.ctl("approval", "approve", approval_id)
    assert answered.returncode == 2, (answered.stdout, answered.stderr)
    shown = as_json(await scene.ctl("approval", "show", approval_id, "--json"))
    assert shown["status"] == "pending"
    assert f"approval approve {approval_id} --restart" in answered.stderr
    assert "it stays pending" in answered.stderr
    return answered.stderr


async def test_a_choird_restart_only_change_needs_the_restart_choice_and_then_stays_pending(
    scene: Scene,
) -> None:
    session = await scene.started()
    approval_id = await scene.proposed("please propose slower rpc reads")
    before = scene.home.config_file.read_bytes()

    said = await plainly_refused(scene, approval_id)

    assert "a choird restart (rpc.read_timeout_ms)" in said
    assert scene.home.config_file.read_bytes() == before  # nothing written
    answered = await scene.ctl("approval", "approve", approval_id, "--restart")
    assert answered.returncode == 0, answered.stderr
    shown = await scene.approved(approval_id, answer=False)
    assert shown["status"] == "applied", shown
    assert read_config(scene.home)["rpc"]["read_timeout_ms"] == 45_000
    config = await scene.shown_config()
    assert [change["path"] for change in config["pending"]] == ["rpc.read_timeout_ms"]
    assert config["config"]["rpc"]["read_timeout_ms"] == 30_000  # what still runs
    assert "pending until choird restarts: ~ rpc.read_timeout_ms" in shown["outcome"]
    assert "choird is not restarted by an approval: choir restart puts it" in shown["outcome"]
    resolved = await scene.told(session, approval_id)
    assert (resolved["status"], "choir restart puts it into effect" in resolved["reason"]) == (
        "applied",
        True,
    )


async def test_an_agent_level_restart_only_change_restarts_the_agent_when_chosen(
    scene: Scene,
) -> None:
    session = await scene.started()
    pid = as_json(await scene.ctl("agent", "status", "agent-1", "--json"))["pid"]
    approval_id = await scene.proposed("please rename your git identity")

    said = await plainly_refused(scene, approval_id)

    assert "a restart of agent-1" in said
    assert as_json(await scene.ctl("agent", "status", "agent-1", "--json"))["pid"] == pid
    answered = await scene.ctl("approval", "approve", approval_id, "--restart")
    assert answered.returncode == 0, answered.stderr
    shown = await scene.approved(approval_id, answer=False)
    assert shown["status"] == "applied", shown
    assert read_config(scene.home)["git_identities"]["agent-1"]["name"] == "choir agent one"
    assert "agent-1 restarted" in shown["outcome"]
    steps = [fact["detail"] for fact in shown["audit"] if fact["action"] == "step"]
    assert "restart: agent-1 restarted, its session resumed" in steps
    status = as_json(await scene.ctl("agent", "status", "agent-1", "--json"))
    assert (status["session_id"], status["pid"] != pid) == (session, True)
    assert not (await scene.shown_config())["pending"]


async def test_a_dm_refuses_a_plain_approve_naming_approve_restart_which_applies_it(
    scene: Scene,
) -> None:
    session = await scene.started()  # bound to the console DM
    approval_id = await scene.proposed("please rename your git identity")

    plain = await scene.ctl("chat", "agent-1", f"/approve {approval_id}")

    assert plain.returncode == 1, (plain.stdout, plain.stderr)
    assert f"approve it with `/approve {approval_id} restart`" in plain.stderr
    assert "--restart" not in plain.stderr  # the DM's own way, not choirctl's
    shown = as_json(await scene.ctl("approval", "show", approval_id, "--json"))
    assert shown["status"] == "pending"
    chosen = await scene.ctl("chat", "agent-1", "/approve restart")  # the only pending one
    assert chosen.returncode == 0, chosen.stderr
    assert f"{approval_id} approved" in chosen.stdout
    shown = await scene.approved(approval_id, answer=False)
    assert shown["status"] == "applied", shown
    assert (shown["resolved_by"], shown["resolved_via"]) == ("console", "console")
    assert "agent-1 restarted" in shown["outcome"]
    status = as_json(await scene.ctl("agent", "status", "agent-1", "--json"))
    assert status["session_id"] == session


async def test_choird_killed_after_writing_config_json_ends_the_apply_applied_on_restart(
    scene: Scene,
) -> None:
    session = await scene.started(CHOIR_FAILPOINTS="proposal.config_after_write=exit")
    approval_id = await scene.proposed("please propose a shorter approval timeout")
    answered = await scene.ctl("approval", "approve", approval_id)
    assert answered.returncode == 0, answered.stderr
    assert scene.choird is not None
    assert await asyncio.to_thread(scene.choird.process.wait, 60) == 137  # killed mid-apply
    assert read_config(scene.home)["approval_timeout_ms"] == 600_000  # written before the kill

    await scene.start_choird()  # starts with the written config.json, resumes the apply
    shown = await scene.approved(approval_id, answer=False)

    assert shown["status"] == "applied", shown
    assert "already in effect" in shown["outcome"]
    assert (await scene.shown_config())["config"]["approval_timeout_ms"] == 600_000
    status = as_json(await scene.ctl("agent", "status", "agent-1", "--json"))
    assert status["session_id"] == session  # the agent was adopted, not restarted
