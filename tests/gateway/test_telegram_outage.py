"""A Telegram message that arrives while choird's Postgres is down is not confirmed until it is
stored: the bot tries it again, and the agent answers it once the database is back.

choird runs its own embedded Postgres here (so the test stops exactly the server choird uses);
its supervisor's restart is held back 3 s (`postgres.before_restart`) so the outage is real.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from choir import failpoints
from choir.client import ChoirClient
from choir.home import ChoirHome
from tests.harness.botapi import BotApiServer
from tests.harness.daemons import running_daemon
from tests.harness.homes import make_home

from .conftest import PHONE, telegram_home

pytestmark = pytest.mark.slow


@pytest.fixture
def home(root: Path, api: BotApiServer) -> ChoirHome:
    return telegram_home(make_home(root), api.url)  # embedded Postgres, the demo model


async def test_a_message_during_a_postgres_outage_is_answered_once_it_is_back(
    home: ChoirHome,
    api: BotApiServer,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    caplog.set_level(logging.INFO)
    monkeypatch.setattr(failpoints, "_armed", None)
    failpoints.arm_from_env({failpoints.ENV_VAR: "postgres.before_restart=sleep(3000)"})
    async with running_daemon(home) as daemon, await ChoirClient.connect(home) as client:
        await client.agent_start("agent-1", {"dm": "phone"})
        api.user_says(PHONE, "hi")  # the agent is up and talking before the outage
        await api.wait_sent(PHONE, 1, within=30)
        assert daemon.database is not None
        server = daemon.database.embedded
        assert server is not None
        await asyncio.to_thread(server.stop)
        api.user_says(PHONE, "hello")

        answer = (await api.wait_sent(PHONE, 2, within=60))[1]
        assert answer.text.startswith("Hello!")
        said = [r.getMessage() for r in caplog.records]
        assert "telegram update not handled; trying again" in said  # it did meet the outage
        await client.agent_stop("agent-1")
    assert len(api.texts(PHONE)) == 2
