"""After a choird restart, `agent status` shows the adopted agent's lanes and budgets at once.

choird keeps lane states, remaining calls and held core jobs in memory only. Before, a restarted
choird that adopted a running agent showed it with no lanes and no remaining-calls figure (and
no held job) until a lane happened to move — for an idle agent, indefinitely. Now the agent
sends every lane's status again as soon as its connection to choird is made again.

choird is a real process on the test's Postgres (as in `test_choird_restart.py`), killed with
SIGKILL; agent-1 runs on the process runtime and stays idle throughout the restart.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from choir.scripted import ScriptedModelServer
from choir.store.postgres.target import ConnectParams
from tests.faults.scene import (
    START,
    process_scene,
    run,
    script,  # noqa: F401 — the fixture
    start_choird,
)
from tests.faults.support import as_json, kill9
from tests.harness.waits import poll_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


async def test_an_adopted_agent_reports_its_lanes_again_without_moving(
    root: Path,
    pg_params: ConnectParams,
    model: ScriptedModelServer,
) -> None:
    async with process_scene(root, pg_params, model.url) as scene:
        await start_choird(scene)
        started = as_json(await run(scene, *START))
        assert (await run(scene, "chat", "agent-1", "hello")).returncode == 0
        before = as_json(await run(scene, "agent", "status", "agent-1", "--json"))
        assert [lane["lane"] for lane in before["lanes"]] == ["edge"]
        assert before["budget_remaining"]  # the remaining-calls figures

        assert scene.choird is not None
        kill9(scene.choird)
        await start_choird(scene)
        requests = len(model.requests)

        async def lanes_shown() -> bool:
            status = await run(scene, "agent", "status", "agent-1", "--json")
            if status.returncode != 0:
                return False
            data = as_json(status)
            return data["state"] == "running" and bool(data["lanes"])

        await poll_until(lanes_shown, within=10, every=0.2)
        after = as_json(await run(scene, "agent", "status", "agent-1", "--json"))
        assert (after["session_id"], after["pid"]) == (started["session_id"], started["pid"])
        assert [lane["lane"] for lane in after["lanes"]] == ["edge"]
        assert after["lanes"][0]["state"] == before["lanes"][0]["state"]
        assert after["budget_remaining"] == before["budget_remaining"]
        assert len(model.requests) == requests  # the agent did nothing: it told it again
