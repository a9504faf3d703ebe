"""What an adopted agent does while choird is still starting is heard, as it happens.

A restarted choird gives adopted agents their sockets back at step 6 and only says "choird
ready" after its listeners and gateways started; choird's own reactions to the agents' news
(a session's end closing its socket and its pushes, approval outcomes pushed, archives stored)
listen from before step 6, so nothing an agent does in between is missed. choird runs as a real
process, held by the failpoint `choird.start.after_adoption` after the agent reconnected.
"""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest

from choir.client import ChoirClient
from choir.home import ChoirHome
from choir.scripted import ScriptedModelServer
from choir.store.postgres.pool import connect
from choir.store.postgres.target import ConnectParams
from choir.store.sessions import SessionStatus, get_session
from tests.faults.support import agent_processes
from tests.harness.chat import replies_through
from tests.harness.homes import scripted_home
from tests.harness.waits import poll_until

from .restarts import Daemon, leased
from .test_telegram_cards_restart import HOLD_MS

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


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
        await client.chat_send("agent-1", "echo hello")
        got = await replies_through(client, 0, lambda r: r["category"] == "reply")
    assert [r["text"] for r in got if r["category"] == "reply"] == ["echo: hello"]
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
