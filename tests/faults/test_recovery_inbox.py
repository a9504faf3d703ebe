"""The recovery inbox after real kills (issue 19, "Recovery inbox" and "Bad input and faults").

choird runs as a real process on the process runtime, its agent is the real `choir-agent`, the
model is scripted, Postgres is the test session's. Two kills:

- **the agent**, SIGKILLed while a core job's non-idempotent `choir.exec` runs: its session
  crashes with an intent and no result. `choirctl inbox` lists it with the call and its
  arguments; resolving it starts the agent resuming the session (`agent.start`), which holds
  the job — listed again as a held job, decided with `abort` (`session.recover`). Each item
  decided a second time says it was decided elsewhere (exit 5, one line), and the call never
  runs again.
- **choird**, SIGKILLed while an approval waits for its answer: after the restart the question
  is still in the inbox — as a pending approval when its deadline has not passed, or as one that
  timed out while choird was down when it has — and the admin console DM is told what waits.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from choir.client import ChoirClient
from choir.home import ChoirHome
from choir.scripted import ReplyStep, Script, ScriptedCall, ScriptedModelServer, ToolCallsStep
from choir.store.postgres.target import ConnectParams
from tests.faults.scene import home_for
from tests.faults.support import as_json, choirctl, kill9, spawn_choird, teardown
from tests.harness.homes import read_config, write_config
from tests.harness.processes import Choird
from tests.harness.proposals import TOOL_PROPOSAL
from tests.harness.waits import poll_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

EXEC = {"command": "echo x >> appended.txt; sleep 60"}
SCRIPT = Script(
    steps=[
        ReplyStep(after="tool", match="proposal submitted", repeat=True, text="Proposed."),
        ToolCallsStep(
            match="propose a tool",
            repeat=True,
            calls=[ScriptedCall(name="choir.propose.tool", arguments=TOOL_PROPOSAL)],
        ),
        ToolCallsStep(
            match="start the appender",
            calls=[
                ScriptedCall(
                    name="choir.core.spawn",
                    arguments={"job_name": "appender", "task_spec": "Append x to appended.txt."},
                )
            ],
        ),
        ReplyStep(after="tool", match="appender started", text="Started appender."),
        ToolCallsStep(calls=[ScriptedCall(name="choir.exec", arguments=EXEC)]),  # the job's
        ReplyStep(repeat=True, text="ok"),
    ]
)
START = ("agent", "start", "agent-1", "--dm", "console", "--json")


@pytest.fixture
def script() -> Script:
    return SCRIPT


@dataclass
class Scene:
    home: ChoirHome
    choird: Choird | None = None

    async def ctl(self, *args: str) -> subprocess.CompletedProcess[str]:
        return await asyncio.to_thread(choirctl, self.home, *args)

    async def items(self) -> list[dict[str, Any]]:
        return list(as_json(await self.ctl("inbox", "--json"))["items"])

    async def start_choird(self) -> None:
        self.choird = await asyncio.to_thread(spawn_choird, self.home, "--runtime", "process")

    def kill_choird(self) -> None:
        assert self.choird is not None
        kill9(self.choird)


def workspace(home: ChoirHome) -> Path:
    return Path(read_config(home)["workspaces"]["default"]["path"])


async def until_listed(scene: Scene, item_id: str, within: float = 30) -> dict[str, Any]:
    async def listed() -> bool:
        return any(item["item_id"] == item_id for item in await scene.items())

    await poll_until(listed, within=within, every=0.3)
    return next(item for item in await scene.items() if item["item_id"] == item_id)


def decided_elsewhere(done: subprocess.CompletedProcess[str], item_id: str) -> str:
    assert done.returncode == 5, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert f"inbox item {item_id} was already decided elsewhere" in lines[0]
    return lines[0]


async def test_an_agent_killed_mid_side_effect_waits_in_the_inbox_until_decided(
    root: Path, pg_params: ConnectParams, model: ScriptedModelServer
) -> None:
    home = home_for(
        root, pg_params, model.url, heartbeat_interval_ms=500, crash_detection_threshold_ms=2000
    )
    appended = workspace(home) / "appended.txt"
    scene = Scene(home)
    try:
        await scene.start_choird()
        started = as_json(await scene.ctl(*START))
        session = started["session_id"]
        assert (await scene.ctl("chat", "agent-1", "please start the appender")).returncode == 0
        await poll_until(lambda: appended.exists(), within=30, every=0.2)
        os.killpg(started["pid"], signal.SIGKILL)  # the agent and its exec

        crashed = await until_listed(scene, f"outcome:{session}")
        assert crashed["kind"] == "unknown_outcome"
        assert (crashed["agent_id"], crashed["session_id"]) == ("agent-1", session)
        assert crashed["context"] == [f"choir.exec {json.dumps(EXEC)}"]
        assert crashed["choices"] == ["resume"]
        shown = (await scene.ctl("inbox")).stdout
        assert "agent-1: session crashed with 1 call(s) of unknown outcome" in shown
        assert f"decide: choirctl inbox resolve outcome:{session} resume" in shown

        resumed = await scene.ctl("inbox", "resolve", f"outcome:{session}", "resume")
        assert resumed.returncode == 0, resumed.stderr
        assert f"started agent-1, resuming session {session}" in resumed.stdout

        held = await until_listed(scene, f"held:{session}:appender")
        assert held["kind"] == "held_job"
        assert held["choices"] == ["resume", "read_only", "abort"]
        assert held["context"] == [f"choir.exec {json.dumps(EXEC)}"]
        assert held["hint"] == (
            f"choirctl inbox resolve held:{session}:appender resume|read-only|abort"
        )
        again = await scene.ctl("inbox", "resolve", f"outcome:{session}", "resume")
        assert "is active now" in decided_elsewhere(again, f"outcome:{session}")

        aborted = await scene.ctl("inbox", "resolve", f"held:{session}:appender", "abort")
        assert aborted.returncode == 0, aborted.stderr
        assert "asked the agent to abort core job appender" in aborted.stdout

        async def empty() -> bool:
            return await scene.items() == []

        await poll_until(empty, within=30, every=0.3)
        twice = await scene.ctl("inbox", "resolve", f"held:{session}:appender", "resume")
        assert "holds no call of unknown outcome" in decided_elsewhere(
            twice, f"held:{session}:appender"
        )
        assert appended.read_text() == "x\n"  # never run again
    finally:
        await asyncio.to_thread(teardown, home, scene.choird)


async def test_a_question_pending_when_choird_dies_is_in_the_inbox_after_restart(
    root: Path, pg_params: ConnectParams, model: ScriptedModelServer
) -> None:
    timeout_s = 8
    home = home_for(
        root,
        pg_params,
        model.url,
        heartbeat_interval_ms=1000,
        crash_detection_threshold_ms=60_000,  # the agent outlives choird's absence
        approval_timeout_ms=timeout_s * 1000,
    )
    scene = Scene(home)
    try:
        await scene.start_choird()
        as_json(await scene.ctl(*START))

        # down past the deadline: the question timed out while nobody could answer it
        first = await proposed(scene)
        scene.kill_choird()
        await asyncio.sleep(timeout_s + 1)
        await scene.start_choird()
        [item] = await scene.items()
        assert item["item_id"] == f"timeout:{first}"
        assert item["kind"] == "approval_timed_out"
        assert item["title"] == f"agent-1: approval {first} timed out while choird was down"
        assert item["choices"] == ["dismiss"]
        await admins_told(home, "choird restarted: 1 item(s) wait for a decision.", item["title"])

        async def timed_out() -> bool:
            shown = as_json(await scene.ctl("approval", "show", first, "--json"))
            return bool((shown["status"], shown["resolved_by"]) == ("rejected", "timeout"))

        await poll_until(timed_out, within=15, every=0.3)  # the sweep told the agent
        dismissed = await scene.ctl("inbox", "resolve", f"timeout:{first}", "dismiss")
        assert dismissed.returncode == 0, dismissed.stderr
        twice = await scene.ctl("inbox", "resolve", f"timeout:{first}", "dismiss")
        assert "dismiss by choirctl" in decided_elsewhere(twice, f"timeout:{first}")

        # back before the deadline: the question is still pending, and answered from the inbox
        data = read_config(home)
        data["approval_timeout_ms"] = 600_000  # a restart on a loaded machine takes seconds
        write_config(home, data)
        assert (await scene.ctl("config", "load")).returncode == 0
        assert (await scene.ctl("config", "apply")).returncode == 0
        second = await proposed(scene)
        scene.kill_choird()
        await scene.start_choird()
        [item] = await scene.items()
        assert (item["item_id"], item["kind"]) == (f"approval:{second}", "approval")
        assert item["choices"] == ["approve", "reject"]
        assert item["context"] == [
            "tool weather.lookup",
            "does: Fetch the forecast for `city` and return temperature and sky.",
            "why: Operators keep asking about the weather.",
        ]
        approved = await scene.ctl("inbox", "resolve", f"approval:{second}", "approve")
        assert approved.returncode == 0, approved.stderr
        assert f"approval {second} approved" in approved.stdout
        twice = await scene.ctl("inbox", "resolve", f"approval:{second}", "reject")
        assert "is already approved" in decided_elsewhere(twice, f"approval:{second}")
        assert await scene.items() == []
    finally:
        await asyncio.to_thread(teardown, home, scene.choird)


async def proposed(scene: Scene) -> str:
    """agent-1 proposes a tool; the pending approval's id."""
    chatted = await scene.ctl("chat", "agent-1", "please propose a tool")
    assert chatted.returncode == 0, chatted.stderr  # why: e.g. the session crashed meanwhile

    async def pending() -> bool:
        return bool(as_json(await scene.ctl("approval", "list", "--json"))["approvals"])

    await poll_until(pending, within=30, every=0.3)
    [approval] = as_json(await scene.ctl("approval", "list", "--json"))["approvals"]
    return str(approval["approval_id"])


async def admins_told(home: ChoirHome, *parts: str) -> None:
    """The console DM (admin in `choirctl init`'s config) shows the restart notice."""
    async with await ChoirClient.connect(home) as client:
        replies = client.chat_replies("agent-1")
        try:
            async with asyncio.timeout(30):
                async for reply in replies:
                    if reply.category == "notice" and reply.text.startswith("choird restarted"):
                        assert all(part in reply.text for part in parts), reply.text
                        return
        finally:
            await replies.aclose()
