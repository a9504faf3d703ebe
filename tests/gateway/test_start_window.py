"""What an adopted agent does while choird is still starting is heard, as it happens.

A restarted choird gives adopted agents their sockets back at step 6 and only says "choird
ready" after its listeners and gateways started; choird's own reactions to the agents' news
(a session's end closing its socket and its pushes, approval outcomes pushed, archives stored)
listen from before step 6, so nothing an agent does, or an operator does to it, in between is
missed. choird runs as a real process, held by a failpoint: `choird.start.after_adoption`
(the agent reconnected, nothing listens for operators yet) or `choird.start.after_gateways`
(the operator API listens, choird is not ready).
"""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest

from choir.client import ChoirClient
from choir.home import ChoirHome
from choir.scripted import ReplyStep, Script, ScriptedCall, ScriptedModelServer, ToolCallsStep
from choir.scripted.demo import SUMMARY, SUMMARY_REQUEST
from choir.store.approvals.pending import list_approvals
from choir.store.events import read_events
from choir.store.postgres.pool import connect
from choir.store.postgres.target import ConnectParams
from choir.store.sessions import SessionStatus, get_session
from tests.faults.support import agent_processes, choirctl
from tests.harness.chat import replies_through
from tests.harness.homes import scripted_home
from tests.harness.proposals import TOOL_PROPOSAL
from tests.harness.waits import poll_until

from .restarts import Daemon, leased
from .test_telegram_cards_restart import HOLD_MS

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

PROPOSING = Script(
    steps=[
        ReplyStep(match=SUMMARY_REQUEST, repeat=True, text=SUMMARY),
        ToolCallsStep(
            match="please propose",
            calls=[ScriptedCall(name="choir.propose.tool", arguments=TOOL_PROPOSAL)],
        ),
        ReplyStep(after="tool", match="proposal submitted", text="Proposed."),
        ReplyStep(repeat=True, text="I only echo."),
    ]
)
"""Edge proposes a tool when asked; its outcome comes back as the `approval_resolved` push."""


@pytest.fixture
def script() -> Script:
    return PROPOSING


@pytest.fixture
def home(root: Path, pg_params: ConnectParams, model: ScriptedModelServer) -> ChoirHome:
    return leased(scripted_home(root, pg_params, model.url))


async def status_of(params: ConnectParams, session_id: str) -> SessionStatus | None:
    conn = await connect(params)
    try:
        row = await get_session(conn, session_id)
    finally:
        await conn.close()
    return None if row is None else row.status


async def test_a_session_that_ends_while_choird_starts_has_its_socket_closed(
    daemon: Daemon, home: ChoirHome, pg_params: ConnectParams
) -> None:
    await daemon.start()
    started = await daemon.ctl("agent", "start", "agent-1", "--dm", "console")
    session_id = str(started["session_id"])
    async with await ChoirClient.connect(home) as client:  # running, not starting: adopted
        await client.chat_send("agent-1", "hello")
        got = await replies_through(client, 0, lambda r: r["category"] == "reply")
    assert [r["text"] for r in got if r["category"] == "reply"] == ["I only echo."]
    socket = home.agent_socket("agent-1")
    daemon.kill()

    starting = asyncio.create_task(
        daemon.start(CHOIR_FAILPOINTS=f"choird.start.after_adoption=sleep({HOLD_MS})")
    )
    await poll_until(lambda: '"adopted":["agent-1"]' in home.choird_log.read_text(), within=60)
    assert socket.exists()  # its socket is back
    for process in agent_processes(home):  # the agent dies while choird is held
        os.killpg(process.pid, signal.SIGKILL)

    async def crashed() -> bool:
        return await status_of(pg_params, session_id) == SessionStatus.CRASHED

    await poll_until(crashed, within=30, every=0.1)
    assert not starting.done()  # its session ended before "choird ready"
    await starting
    # its socket goes with it, as after any session's end (left open, it was never closed)
    await poll_until(lambda: not socket.exists(), within=20, every=0.1)
    assert (await daemon.ctl("agent", "start", "agent-1", "--dm", "console"))["session_id"]


async def test_an_approval_decided_before_choird_is_ready_reaches_its_agent(
    daemon: Daemon, home: ChoirHome, pg_params: ConnectParams
) -> None:
    await daemon.start()
    started = await daemon.ctl("agent", "start", "agent-1", "--dm", "console")
    session_id = str(started["session_id"])
    async with await ChoirClient.connect(home) as client:
        await client.chat_send("agent-1", "please propose a tool")
        got = await replies_through(client, 0, lambda r: r["category"] == "reply")
    assert [r["text"] for r in got if r["category"] == "reply"] == ["Proposed."]
    [asked] = await pending(pg_params)
    daemon.kill()

    starting = asyncio.create_task(
        daemon.start(CHOIR_FAILPOINTS=f"choird.start.after_gateways=sleep({HOLD_MS})")
    )

    async def rejected() -> bool:  # as soon as the operator socket answers
        done = await asyncio.to_thread(choirctl, home, "approval", "reject", asked)
        return done.returncode == 0

    await poll_until(rejected, within=60, every=0.2)
    assert not starting.done()  # decided before "choird ready"
    await starting

    async def resolved() -> list[str]:
        conn = await connect(pg_params)
        try:
            records = await read_events(conn, session_id, 1, 10_000)
        finally:
            await conn.close()
        return [
            str(r.payload["status"])
            for r in records
            if r.event_type == "approval_resolved" and r.payload["approval_id"] == asked
        ]

    await poll_until(resolved, within=30, every=0.2)  # pushed: the agent committed its outcome
    assert await resolved() == ["rejected"]


async def pending(params: ConnectParams) -> list[str]:
    """The ids of the pending approvals."""
    conn = await connect(params)
    try:
        return [row.id for row in await list_approvals(conn)]
    finally:
        await conn.close()
