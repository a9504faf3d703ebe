"""kill -9 of choird while a core job waits for its budget question (issue 19).

choird runs as a real process; agent-1 on the process runtime. Its core job runs out of
`per_job_max_steps` and pauses with a `budget_extension` approval pending; choird is SIGKILLed
and started again. The question is still there — in `choirctl approval list` and in the
recovery inbox — and `choirctl approval extend` answers it: the adopted agent's job resumes for
exactly the steps granted, then asks again; `choirctl approval reject` stops it.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from choir.scripted import ReplyStep, Script, ScriptedCall, ScriptedModelServer, ToolCallsStep
from choir.store.postgres.target import ConnectParams
from tests.faults.scene import (
    GENEROUS,
    START,
    Scene,
    home_for,
    run,
    start_choird,
)
from tests.faults.support import as_json, kill9, teardown
from tests.harness.waits import poll_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

GRIND = Script(
    steps=[
        ToolCallsStep(
            match="grind",
            calls=[
                ScriptedCall(
                    name="choir.core.spawn",
                    arguments={"job_name": "grind", "task_spec": "Tick for ever."},
                )
            ],
        ),
        ReplyStep(after="tool", match="grind started", text="Started."),
        ToolCallsStep(
            repeat=True, calls=[ScriptedCall(name="choir.exec", arguments={"command": "echo t"})]
        ),
    ]
)


@pytest.fixture
def script() -> Script:
    return GRIND


async def questions(scene: Scene) -> list[dict[str, Any]]:
    listed = as_json(await run(scene, "approval", "list", "--json"))
    approvals = listed["approvals"] if isinstance(listed, dict) else listed
    return [a for a in approvals if a["request_type"] == "budget_extension"]


async def next_question(scene: Scene, other_than: str = "") -> dict[str, Any]:
    found: list[dict[str, Any]] = []

    async def asked() -> bool:
        found[:] = [q for q in await questions(scene) if q["approval_id"] != other_than]
        return bool(found)

    await poll_until(asked, within=30, every=0.3)
    return found[0]


async def exec_calls(scene: Scene, session_id: str) -> int:
    records = await asyncio.to_thread(scene.events, session_id)
    return sum(
        1 for r in records if r.lane == "core:grind" and r.event_type == "tool_call_committed"
    )


async def test_a_budget_question_survives_a_choird_kill_and_its_answer_resumes_the_job(
    root: Path, pg_params: ConnectParams, model: ScriptedModelServer
) -> None:
    home = home_for(root, pg_params, model.url, budgets={"per_job_max_steps": 2}, **GENEROUS)
    scene = Scene(home, root, pg_params, "process")
    try:
        await start_choird(scene)
        started = as_json(await run(scene, *START))
        session_id = started["session_id"]
        assert (await run(scene, "chat", "agent-1", "grind")).returncode == 0
        asked = await next_question(scene)
        assert asked["payload"]["budget"] == "per_job_max_steps"
        assert scene.choird is not None
        kill9(scene.choird)
        await asyncio.sleep(1.0)
        await start_choird(scene)

        async def adopted() -> bool:
            status = await run(scene, "agent", "status", "agent-1", "--json")
            return status.returncode == 0 and as_json(status)["state"] == "running"

        await poll_until(adopted, within=30, every=0.3)
        assert [q["approval_id"] for q in await questions(scene)] == [asked["approval_id"]]
        inbox = as_json(await run(scene, "inbox", "list", "--json"))
        items = inbox["items"] if isinstance(inbox, dict) else inbox
        assert any(asked["approval_id"] in item["title"] for item in items), items
        assert await exec_calls(scene, session_id) == 2

        extended = await run(scene, "approval", "extend", asked["approval_id"], "2")
        assert extended.returncode == 0, extended.stderr
        assert "per_job_max_steps extended by 2" in extended.stdout
        again = await next_question(scene, other_than=asked["approval_id"])
        assert (again["payload"]["limit"], again["payload"]["used"]) == (4, 4)
        assert await exec_calls(scene, session_id) == 4

        twice = await run(scene, "approval", "extend", asked["approval_id"], "2")
        assert twice.returncode == 5
        assert f"approval {asked['approval_id']} is already approved" in twice.stderr
        refused = await run(scene, "approval", "reject", again["approval_id"])
        assert refused.returncode == 0, refused.stderr

        async def stopped() -> bool:
            records = await asyncio.to_thread(scene.events, session_id)
            return any(r.event_type == "core_stopped" for r in records)

        await poll_until(stopped, within=20, every=0.3)
        bad = await run(scene, "approval", "extend", again["approval_id"], "0")
        assert bad.returncode != 0
        assert "Traceback" not in bad.stderr
    finally:
        await asyncio.to_thread(teardown, home, scene.choird)
