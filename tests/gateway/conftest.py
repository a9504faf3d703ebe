"""A choird with a Telegram bot on a local Bot API server (`tests.harness.botapi`).

The home is `choirctl init`'s on the test's Postgres, its demo model the test's scripted
server, plus a bot `tg` whose `base_url` is the local server and two DMs on it: `phone`
(user 4242, regular; agent-1's default DM) and `boss` (user 777, admin).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

import choir.daemon.gateway.telegram.client  # noqa: F401  PTB as choird configures it (PTB_TIMEDELTA)
from choir.config import SecretStore
from choir.home import ChoirHome
from choir.scripted import ReplyStep, Script, ScriptedModelServer
from choir.scripted.demo import SUMMARY, SUMMARY_REQUEST
from choir.store.postgres.target import ConnectParams
from tests.faults.support import teardown
from tests.harness.botapi import BotApiServer
from tests.harness.homes import read_config, scripted_home, write_config

from .restarts import Daemon

TOKEN = "7000001:AAH-test-token-of-the-choir-bot"
"""The bot's token: in secrets.json and the local server, never in a log line."""
PHONE = 4242
"""The regular DM's Telegram user (and private chat) id."""
BOSS = 777
"""The admin DM's user id."""
STRANGER = 999
"""A user no DM names."""

LOREM = " ".join(["lorem ipsum dolor sit amet"] * 3)
LONG = "\n".join(f"line {n:04d} {LOREM}" for n in range(120))
"""A reply of about 11,000 characters: three Telegram messages."""
STARS = "2 * 3 = 6, a lone _underscore, a `tick and [brackets](: none of it markup"


@pytest.fixture
def script() -> Script:
    return Script(
        steps=[
            ReplyStep(match=SUMMARY_REQUEST, repeat=True, text=SUMMARY),
            ReplyStep(match="long reply", repeat=True, text=LONG),
            ReplyStep(match="stars", repeat=True, text=STARS),
            ReplyStep(match="slowly", repeat=True, delay_ms=1500, text="done, slowly"),
            ReplyStep(match_regex=r"echo (\w+)", templated=True, repeat=True, text="echo: {1}"),
            ReplyStep(repeat=True, text="I only echo."),
        ]
    )


@pytest.fixture
async def api() -> AsyncIterator[BotApiServer]:
    async with BotApiServer(TOKEN) as server:
        yield server


def telegram_home(home: ChoirHome, base_url: str, token: str = TOKEN) -> ChoirHome:
    """`home` with the bot `tg` on `base_url` and the DMs `phone` and `boss` on it."""
    data = read_config(home)
    data["gateways"]["tg"] = {"type": "telegram", "secret": "tg-token", "base_url": base_url}
    data["dms"]["phone"] = {"gateway": "tg", "user_id": str(PHONE)}
    data["dms"]["boss"] = {"gateway": "tg", "user_id": str(BOSS), "admin": True}
    data["agents"]["agent-1"]["defaults"]["dm"] = "phone"
    write_config(home, data)
    SecretStore.load(home.secrets_file).with_secret("tg-token", token).save(home.secrets_file)
    return home


@pytest.fixture
def home(
    root: Path, pg_params: ConnectParams, model: ScriptedModelServer, api: BotApiServer
) -> ChoirHome:
    return telegram_home(scripted_home(root, pg_params, model.url), api.url)


@pytest.fixture
async def daemon(home: ChoirHome) -> AsyncIterator[Daemon]:
    """choird for the test's `home` as a process (the restart tests): torn down after."""
    daemon = Daemon(home)
    try:
        yield daemon
    finally:
        await asyncio.to_thread(teardown, home, daemon.process)
