"""An agent's reply to a Telegram DM survives a choird restart: killed, or stopped (issue 16).

choird runs as a real process (the test's Postgres, the process runtime) so it can be SIGKILLed
while a reply is durable in Postgres but Telegram has not taken its `sendMessage` (held by the
local Bot API server, then refused once choird is dead). A new choird adopts the agent and
sends that reply, once, before the next one; a reply already sent is not sent again, after a
kill or after a graceful stop; a reply cut short by a kill goes again whole. Before the DM's
reply cursor, the reply was lost.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from choir.daemon.gateway.telegram.chunks import chunks
from choir.home import ChoirHome
from choir.scripted import ScriptedModelServer
from choir.store.gateway.reply_cursors import ReplyCursor, load_cursor, replies_after
from choir.store.postgres.pool import connect
from choir.store.postgres.target import ConnectParams
from tests.harness.botapi import BotApiServer
from tests.harness.homes import scripted_home
from tests.harness.waits import poll_until

from .conftest import LONG, PHONE, telegram_home
from .restarts import Daemon, leased

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

HOUR = timedelta(hours=1)


@pytest.fixture
def home(
    root: Path, pg_params: ConnectParams, model: ScriptedModelServer, api: BotApiServer
) -> ChoirHome:
    return leased(telegram_home(scripted_home(root, pg_params, model.url), api.url))


async def cursor(params: ConnectParams) -> ReplyCursor | None:
    conn = await connect(params)
    try:
        return await load_cursor(conn, "tg", PHONE)
    finally:
        await conn.close()


async def said(api: BotApiServer, text: str, count: int) -> None:
    """The user says `text`; the chat then holds `count` messages."""
    api.user_says(PHONE, text)
    await api.wait_sent(PHONE, count, within=60)


async def cursor_at_last_reply(params: ConnectParams, session_id: str) -> None:
    """Until the cursor is at the session's newest reply (its sending was written down)."""

    async def written() -> bool:
        conn = await connect(params)
        try:
            newest = await replies_after(conn, session_id, 0, datetime.now(UTC) - HOUR, 1)
            found = await load_cursor(conn, "tg", PHONE)
        finally:
            await conn.close()
        return bool(newest) and found == ReplyCursor(session_id, newest[-1].rev)

    await poll_until(written, within=20, every=0.1)


async def test_a_reply_unsent_when_choird_was_killed_arrives_once_after_the_restart(
    daemon: Daemon, api: BotApiServer, pg_params: ConnectParams
) -> None:
    await daemon.start()
    started = await daemon.ctl("agent", "start", "agent-1", "--dm", "phone")
    session_id = str(started["session_id"])
    await said(api, "echo one", 1)
    await cursor_at_last_reply(pg_params, session_id)
    first = await cursor(pg_params)

    api.hold("sendMessage")  # Telegram does not answer: the reply is durable, never taken
    api.user_says(PHONE, "echo two")
    await poll_until(
        lambda: any(c.params.get("text") == "echo: two" for c in api.sends(PHONE)), within=60
    )
    daemon.kill()
    assert await cursor(pg_params) == first  # the unsent reply is still owed
    api.fail("sendMessage", 502, chat_id=PHONE)  # the dead choird's request: not delivered
    api.release("sendMessage")
    await api.wait_for(lambda: api.faults_left("sendMessage") == 0)
    assert api.texts(PHONE) == ["echo: one"]

    await daemon.start()  # adopts the agent; the bot sends what the DM is owed
    await api.wait_sent(PHONE, 2, within=60)
    await said(api, "echo three", 3)
    assert api.texts(PHONE) == ["echo: one", "echo: two", "echo: three"]
    await cursor_at_last_reply(pg_params, session_id)
    last = await cursor(pg_params)
    assert last is not None
    assert first is not None
    assert last.rev > first.rev

    daemon.kill()  # a kill after everything was sent: nothing goes twice
    await daemon.start()
    await said(api, "echo four", 4)
    assert api.texts(PHONE) == ["echo: one", "echo: two", "echo: three", "echo: four"]


async def test_a_graceful_restart_sends_nothing_twice(
    daemon: Daemon, api: BotApiServer, pg_params: ConnectParams
) -> None:
    await daemon.start()
    first = await daemon.ctl("agent", "start", "agent-1", "--dm", "phone")
    await said(api, "echo one", 1)
    await said(api, "echo two", 2)
    await daemon.stop()
    await cursor_at_last_reply(pg_params, str(first["session_id"]))  # written before it ended

    polls = len(api.offsets)
    await daemon.start()
    await api.wait_for(lambda: len(api.offsets) > polls + 1)  # the new bot runs (polled twice)
    again = await daemon.ctl("agent", "start", "agent-1", "--dm", "phone")
    assert again["session_id"] != first["session_id"]
    await said(api, "echo three", 3)
    assert api.texts(PHONE) == ["echo: one", "echo: two", "echo: three"]
    await cursor_at_last_reply(pg_params, str(again["session_id"]))


async def test_a_reply_cut_short_by_a_kill_is_sent_whole_again(
    daemon: Daemon, api: BotApiServer, pg_params: ConnectParams
) -> None:
    parts = chunks(LONG)
    assert len(parts) == 3
    await daemon.start()
    started = await daemon.ctl("agent", "start", "agent-1", "--dm", "phone")
    await said(api, "echo one", 1)
    await cursor_at_last_reply(pg_params, str(started["session_id"]))

    api.hold("sendMessage")
    api.user_says(PHONE, "long reply")
    await poll_until(lambda: len(api.sends(PHONE)) == 2, within=60)  # its first part, held
    api.release("sendMessage")  # the first part is taken; the second is held
    api.hold("sendMessage")
    await poll_until(lambda: len(api.sends(PHONE)) == 3, within=60)
    daemon.kill()
    api.fail("sendMessage", 502, chat_id=PHONE)
    api.release("sendMessage")
    await api.wait_for(lambda: api.faults_left("sendMessage") == 0)
    assert api.texts(PHONE) == ["echo: one", parts[0]]

    await daemon.start()  # the cursor moves only after a reply's last part: all of it again
    await api.wait_sent(PHONE, 5, within=60)
    await said(api, "echo two", 6)
    assert api.texts(PHONE) == ["echo: one", parts[0], *parts, "echo: two"]
