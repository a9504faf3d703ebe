"""Telegram DMs end to end: a real choird, a real agent (process runtime, scripted model) and
python-telegram-bot against the local Bot API server (`tests.harness.botapi`).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from choir import failpoints
from choir.client import ChoirClient
from choir.daemon.app import ChoirDaemon
from choir.daemon.gateway.telegram.chunks import units
from choir.home import ChoirHome
from tests.harness.botapi import MAX_TEXT, BotApiServer
from tests.harness.daemons import poll_until, running_daemon
from tests.harness.homes import read_config, write_config

from .conftest import BOSS, LONG, PHONE, STARS, STRANGER, TOKEN, telegram_home

pytestmark = pytest.mark.slow


@pytest.fixture
async def choird(home: ChoirHome) -> AsyncIterator[tuple[ChoirDaemon, ChoirClient]]:
    async with running_daemon(home) as daemon, await ChoirClient.connect(home) as client:
        yield daemon, client


@pytest.fixture
async def agent(choird: tuple[ChoirDaemon, ChoirClient]) -> AsyncIterator[ChoirClient]:
    """agent-1 running, bound to the DM `phone`."""
    _, client = choird
    await client.agent_start("agent-1", {"dm": "phone"})
    yield client
    await client.agent_stop("agent-1")


async def test_a_dm_round_trip_shows_typing_and_sends_plain_text_without_previews(
    agent: ChoirClient, api: BotApiServer
) -> None:
    api.user_says(PHONE, "please answer slowly")
    [reply] = await api.wait_sent(PHONE, 1, within=30)
    assert reply.text == "done, slowly"
    assert (PHONE, "typing") in api.actions
    assert reply.params["link_preview_options"] == {"is_disabled": True}
    assert "parse_mode" not in reply.params

    api.user_says(PHONE, "echo second")
    second = await api.wait_sent(PHONE, 2, within=30)
    assert second[1].text == "echo: second"
    states = {g.name: g.state for g in (await agent.status()).gateways}
    assert states == {"console": "running", "tg": "running"}


async def test_markup_characters_and_long_replies_always_get_through(
    agent: ChoirClient, api: BotApiServer
) -> None:
    api.user_says(PHONE, "stars please")
    [stars] = await api.wait_sent(PHONE, 1, within=30)
    assert stars.text == STARS  # sent as plain text: Telegram had nothing to parse

    api.user_says(PHONE, "a long reply please")
    sent = await api.wait_sent(PHONE, 4, within=30)
    parts = [message.text for message in sent[1:]]
    assert len(parts) == 3
    assert all(units(part) <= MAX_TEXT for part in parts)
    assert "\n".join(parts) == LONG  # cut between lines, nothing lost
    assert all(part.startswith("line ") for part in parts)


async def test_a_user_outside_the_allowlist_is_ignored_and_not_quoted_in_the_log(
    agent: ChoirClient, api: BotApiServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    api.user_says(STRANGER, "echo intruder")
    api.user_says(PHONE, "echo member")
    await api.wait_sent(PHONE, 1, within=30)
    assert api.texts(PHONE) == ["echo: member"]
    assert STRANGER not in api.all_sent
    dropped = [r for r in caplog.records if r.getMessage().startswith("telegram update from out")]
    assert len(dropped) == 1
    assert all("intruder" not in str(record.__dict__) for record in caplog.records)


async def test_commands_run_through_the_command_layer_with_the_dms_scope(
    agent: ChoirClient, api: BotApiServer, root: Path
) -> None:
    api.user_says(PHONE, "/status")
    [status] = await api.wait_sent(PHONE, 1, within=30)
    assert "agent-1" in status.text
    assert "running" in status.text

    api.user_says(PHONE, "/stop agent-2")
    api.user_says(PHONE, "/agent list")
    api.user_says(PHONE, "/frobnicate")
    replies = [m.text for m in await api.wait_sent(PHONE, 4, within=30)][1:]
    assert replies == [
        "refused: a regular DM acts only on its bound agent: send /stop without an agent id",
        "refused: /agent list is an admin command: this DM may not run it",
        "unknown command /frobnicate: /help lists the commands this DM can run",
    ]

    api.user_says(BOSS, "/agent list")  # an admin DM with no agent of its own
    [listed] = await api.wait_sent(BOSS, 1, within=30)
    assert "agent-1" in listed.text
    assert "agent-2" in listed.text
    api.user_says(BOSS, "hello")
    [nobody] = (await api.wait_sent(BOSS, 2, within=30))[1:]
    assert nobody.text.startswith("no agent is bound to this DM")

    (root / "ws-other").mkdir()  # agent-2's workspace
    api.user_says(BOSS, "/start agent-2")  # §19.4: the DM that sends /start is bound
    [started] = (await api.wait_sent(BOSS, 3, within=30))[2:]
    assert started.text == "agent-2 started"
    api.user_says(BOSS, "echo boss")
    [answer] = (await api.wait_sent(BOSS, 4, within=30))[3:]
    assert answer.text == "echo: boss"
    await agent.agent_stop("agent-2")


async def test_a_message_to_an_agent_that_is_not_running_is_answered_with_how_to_start_it(
    choird: tuple[ChoirDaemon, ChoirClient], api: BotApiServer
) -> None:
    api.user_says(PHONE, "echo anyone")
    [answer] = await api.wait_sent(PHONE, 1, within=30)
    assert answer.text == "agent-1 is not running: ask the operator to start it"


async def test_a_429_delays_the_reply_and_garbage_updates_are_skipped(
    agent: ChoirClient, api: BotApiServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    api.fail("getUpdates", 502)
    api.fail("sendMessage", 429, retry_after=2)
    api.inject({"message": "not an object"})
    api.inject({"message": {"message_id": "x", "chat": 5}})
    api.inject({"something_new": {"a": 1}})
    api.user_says(PHONE, "echo after")
    [reply] = await api.wait_sent(PHONE, 1, within=30)
    assert reply.text == "echo: after"
    sends = [c for c in api.calls if c.method == "sendMessage"]
    assert len(sends) == 2
    assert sends[1].at - sends[0].at >= 2.0  # retried after retry_after, not before
    skipped = [r for r in caplog.records if r.getMessage() == "malformed telegram update skipped"]
    assert len(skipped) == 2
    assert api.pending_updates == []  # every update confirmed, garbage included


async def test_the_token_is_in_no_log_line(
    agent: ChoirClient, api: BotApiServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    api.user_says(PHONE, "echo token")
    await api.wait_sent(PHONE, 1, within=30)
    assert all(TOKEN not in str(record.__dict__) for record in caplog.records)
    assert all(TOKEN not in record.getMessage() for record in caplog.records)


async def test_a_restart_neither_loses_nor_repeats_an_update(
    home: ChoirHome, api: BotApiServer
) -> None:
    async with running_daemon(home), await ChoirClient.connect(home) as client:
        await client.agent_start("agent-1", {"dm": "phone"})
        first = api.user_says(PHONE, "/model")  # a command: no inbox to drop a repeat of it
        [model] = await api.wait_sent(PHONE, 1, within=30)
        assert "demo" in model.text
    # while no choird runs: Telegram offers the command again (it never heard it confirmed)
    # and the user writes twice more
    api.inject(api.injected[first], update_id=first)
    api.user_says(PHONE, "echo two")
    api.user_says(PHONE, "echo three")
    before = len(api.offsets)
    api.hold("getUpdates")  # until the agent runs again, so the messages reach it
    async with running_daemon(home), await ChoirClient.connect(home) as client:
        await client.agent_start("agent-1", {"dm": "phone"})
        api.release("getUpdates")
        await api.wait_sent(PHONE, 3, within=30)
        await api.wait_for(lambda: not api.pending_updates, within=10)
        assert api.texts(PHONE) == [model.text, "echo: two", "echo: three"]
        assert api.offsets[before] == first + 1  # the stored offset, not a fresh start
        await client.agent_stop("agent-1")
    assert api.texts(PHONE) == [model.text, "echo: two", "echo: three"]


BAD_TOKEN = "7000001:AAH-a-token-the-bot-api-rejects"


async def test_a_rejected_token_is_reported_and_choird_keeps_running(
    home: ChoirHome, api: BotApiServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    telegram_home(home, api.url, token=BAD_TOKEN)
    data = read_config(home)  # and a bot whose token was never set
    data["gateways"]["tg2"] = {"type": "telegram", "secret": "tg2-token", "base_url": api.url}
    write_config(home, data)
    async with running_daemon(home), await ChoirClient.connect(home) as client:

        async def rejected() -> bool:
            states = {g.name: g.state for g in (await client.status()).gateways}
            return states["tg"] == "invalid_token" and states["tg2"] == "no_token"

        await poll_until(rejected, within=20)
        await client.agent_start("agent-1", {"dm": "phone"})  # choird serves on
        await client.agent_stop("agent-1")
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == [
        "telegram bot tg2: its token secret 'tg2-token' is not set; set it with "
        "`choirctl secret set tg2-token` and restart choird (`choir restart`)",
        errors[1],
    ]
    assert errors[1].startswith(
        "telegram bot tg: the Bot API rejected the bot's token (401 Unauthorized); "
        "set the right token with `choirctl secret set tg-token` and restart choird"
    )
    assert all(BAD_TOKEN not in str(record.__dict__) for record in caplog.records)
    assert [c.method for c in api.calls] == ["getMe"]  # no polling with a rejected token


async def test_a_message_its_session_never_read_is_reported_undelivered(
    choird: tuple[ChoirDaemon, ChoirClient], api: BotApiServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, client = choird
    await client.agent_start("agent-1", {"dm": "phone"})
    monkeypatch.setattr(failpoints, "_armed", None)  # choird holds the message back a while
    failpoints.arm_from_env({failpoints.ENV_VAR: "inbox.after_accept_before_push=sleep(8000)"})
    api.user_says(PHONE, "echo lost")
    await api.wait_for(lambda: (PHONE, "typing") in api.actions)  # accepted, not yet pushed
    await client.agent_stop("agent-1")
    [notice] = await api.wait_sent(PHONE, 1, within=30)
    assert notice.text == (
        "Your message was not delivered: the session stopped before the agent read it. "
        "Send it again once agent-1 runs."
    )


async def test_other_kinds_get_a_clear_answer_and_group_chats_are_ignored(
    choird: tuple[ChoirDaemon, ChoirClient], api: BotApiServer
) -> None:
    user = {"id": PHONE, "is_bot": False, "first_name": "Ada"}
    where = {"latitude": 48.85, "longitude": 2.35}
    group = {"id": -100123, "type": "group", "title": "family"}
    api.inject({"message": {"message_id": 1, "date": 0, "chat": group, "from": user,
                            "text": "echo in a group"}})  # fmt: skip
    api.inject({"message": {"message_id": 2, "date": 0, "chat": {"id": PHONE, "type": "private"},
                            "from": user, "location": where}})  # fmt: skip
    [answer] = await api.wait_sent(PHONE, 1, within=30)
    assert answer.text == (
        "Only text, files, photos, voice messages, audio and video reach the agent: this "
        "message was not delivered."
    )
    api.user_sends(PHONE, "photo", b"\xff\xd8\xff a photo")  # a file, and no agent runs
    [_, file] = await api.wait_sent(PHONE, 2, within=30)
    assert file.text == "agent-1 is not running: ask the operator to start it"
    await api.wait_for(lambda: not api.pending_updates, within=10)
    assert list(api.all_sent) == [PHONE]  # nothing to the group
    assert api.downloads == []
