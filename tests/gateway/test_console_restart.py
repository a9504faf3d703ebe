"""The console DM keeps the replies adopted agents replicate as choird comes back.

A chat window opened after a restart shows the agent's recent replies (`ConsoleDm`); a reply
made while choird was away is replicated the moment the adopted agent reconnects (startup step
6), before the operator API exists (step 9): it is kept for the console all the same
(`gateway.held`). choird runs as a real process, the failpoint `choird.start.after_adoption`
holding its start after the agent reconnected.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from choir.client import ChoirClient
from choir.home import ChoirHome
from choir.scripted import ReplyStep, Script, ScriptedModelServer, ToolCallsStep
from choir.scripted.demo import SUMMARY, SUMMARY_REQUEST
from choir.store.events import read_events
from choir.store.postgres.pool import connect
from choir.store.postgres.target import ConnectParams
from tests.harness.chat import replies_through
from tests.harness.homes import read_config, scripted_home
from tests.harness.waits import poll_until

from .restarts import Daemon, leased
from .test_telegram_cards import run, scripted
from .test_telegram_cards_restart import HOLD_MS

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

GATED_REPLY = Script(
    steps=[
        ReplyStep(match=SUMMARY_REQUEST, repeat=True, text=SUMMARY),
        ToolCallsStep(
            match="answer after the gate",
            calls=[run("touch at0; until [ -e go0 ]; do sleep 0.2; done; echo gate-zero-open")],
        ),
        ReplyStep(after="tool", match="gate-zero-open", text="Through the gate."),
    ]
)
"""Edge answers once the test opens a gate (`at0`: it waits at it)."""


@pytest.fixture
def script(request: pytest.FixtureRequest) -> Script:
    found: Script = request.param
    return found


@pytest.fixture
def home(root: Path, pg_params: ConnectParams, model: ScriptedModelServer) -> ChoirHome:
    return leased(scripted_home(root, pg_params, model.url))


@scripted(GATED_REPLY)
async def test_a_reply_made_while_choird_was_away_is_in_the_console_after_the_restart(
    daemon: Daemon, home: ChoirHome, pg_params: ConnectParams
) -> None:
    await daemon.start()
    started = await daemon.ctl("agent", "start", "agent-1", "--dm", "console")
    session_id = str(started["session_id"])
    async with await ChoirClient.connect(home) as client:
        await client.chat_send("agent-1", "please answer after the gate")
    gates = Path(read_config(home)["workspaces"]["default"]["path"])
    await poll_until(lambda: (gates / "at0").exists(), within=60, every=0.1)
    daemon.kill()
    (gates / "go0").touch()  # edge answers with choird away

    starting = asyncio.create_task(
        daemon.start(CHOIR_FAILPOINTS=f"choird.start.after_adoption=sleep({HOLD_MS})")
    )
    await poll_until(lambda: _replied(pg_params, session_id), within=60, every=0.1)
    assert not starting.done()  # replicated before the console listened
    await starting
    async with await ChoirClient.connect(home) as client:  # a chat window opened now
        got = await replies_through(client, 0, lambda r: r["category"] == "reply")
    assert [r["text"] for r in got if r["category"] == "reply"] == ["Through the gate."]


async def _replied(params: ConnectParams, session_id: str) -> bool:
    """Whether the session's edge reply is durable."""
    conn = await connect(params)
    try:
        records = await read_events(conn, session_id, 1, 10_000)
    finally:
        await conn.close()
    return any(r.event_type == "agent_replied" for r in records)
