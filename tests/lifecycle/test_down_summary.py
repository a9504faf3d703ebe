"""`choir down` says how each agent's session summary went, as `agent stop` does (§11.8).

Before, `choir down` printed "stopped: session … stopped" and nothing about the summary, so a
summary the model failed to make went unnoticed. Now each agent's stop is followed by
`summary: stored (rev N)`, or by a warning that names why there is none; `--json` carries the
same in each agent's `summary`.

choird is a real process (the test's Postgres, the process runtime) with two agents whose
model is a scripted server: agent-1's summary is made, agent-2's summary call fails (HTTP 500).
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest

from choir.agent.lanes.summary import SUMMARY_MARKER
from choir.scripted import HttpErrorStep, ReplyStep, Script, ScriptedModelServer
from choir.store.postgres.target import ConnectParams
from tests.faults.support import as_json, choirctl, spawn_choird, teardown
from tests.harness.cluster import cluster_home
from tests.harness.processes import Choird, run_choir

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

SUMMARY = json.dumps(
    {"summary": "The user said hello.", "topics": ["greetings"], "decisions": [], "open_items": []}
)
SCRIPT = Script(
    steps=[
        ReplyStep(match=SUMMARY_MARKER, text=SUMMARY),  # agent-1 stops first
        HttpErrorStep(match=SUMMARY_MARKER, status=500, message="summarizer down"),
        ReplyStep(match="hello", repeat=True, text="Hello from the script."),
    ]
)


async def test_down_says_whether_each_agents_summary_was_stored(
    root: Path, pg_params: ConnectParams
) -> None:
    async with ScriptedModelServer(SCRIPT) as model:
        home = cluster_home(root, pg_params, model.url, agents=2)
        choird: Choird | None = None
        try:
            choird = await asyncio.to_thread(spawn_choird, home, "--runtime", "process")
            sessions = {}
            for agent_id, dm in (("agent-1", "console"), ("agent-2", "dm-agent-2")):
                started = await asyncio.to_thread(
                    choirctl, home, "agent", "start", agent_id, "--dm", dm, "--json"
                )
                sessions[agent_id] = as_json(started)["session_id"]
                said = await asyncio.to_thread(choirctl, home, "chat", agent_id, "hello")
                assert said.stdout == "Hello from the script.\n", said.stderr

            down = await asyncio.to_thread(run_choir, home, "down", "--json")

            assert down.returncode == 0, down.stderr
            lines = down.stderr.splitlines()
            one, two = sessions["agent-1"], sessions["agent-2"]
            assert lines[:6] == [
                "agent-1   stopping gracefully (session summary, final flush)",
                f"agent-1   stopped: session {one} stopped",
                lines[2],
                "agent-2   stopping gracefully (session summary, final flush)",
                f"agent-2   stopped: session {two} stopped",
                "agent-2   warning: no session summary: skipped: the model call failed "
                "(see choirctl logs agent-2)",
            ]
            assert re.fullmatch(r"agent-1   summary: stored \(rev \d+\)", lines[2]), lines[2]
            stopped = {agent["agent_id"]: agent for agent in json.loads(down.stdout)["agents"]}
            assert stopped["agent-1"]["summary"]["stored"] is True
            assert f"stored (rev {stopped['agent-1']['summary']['rev']})" in lines[2]
            assert stopped["agent-2"]["summary"] == {
                "stored": False,
                "rev": None,
                "skipped": "call_failed",
                "warn": True,
                "detail": "skipped: the model call failed (see choirctl logs agent-2)",
            }
            assert choird.process.wait(timeout=30) == 0
        finally:
            await asyncio.to_thread(teardown, home, choird)
