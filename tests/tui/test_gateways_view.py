"""The Gateways tab and the header's gateway item against a real choird whose Telegram bot
polls the local Bot API server: a bot at work with its DMs and their agents, then its token
revoked — shown in red in the tab and named in the header, while choird serves on."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from textual.widgets import Static

from choir.home import ChoirHome
from tests.gateway.conftest import PHONE, TOKEN, telegram_home
from tests.harness.botapi import BotApiServer
from tests.tui.conftest import Live, column
from tests.tui.pilot import console, show_tab, until
from tui.views.gateways import GatewaysView

pytestmark = pytest.mark.slow


@pytest.fixture
async def api() -> AsyncIterator[BotApiServer]:
    async with BotApiServer(TOKEN) as server:
        yield server


@pytest.fixture
def home(home: ChoirHome, api: BotApiServer) -> ChoirHome:
    """The harness's home with the bot `tg` and its DMs `phone` and `boss`."""
    return telegram_home(home, api.url)


def header(app: Any) -> str:
    return str(app.query_one("#health").render())


def detail(app: Any) -> str:
    return str(app.query_one("#gateways-detail", Static).render())


async def test_the_gateways_tab_shows_bots_dms_and_a_revoked_token(
    live: Live, api: BotApiServer
) -> None:
    await live.client.agent_start("agent-1", {"dm": "phone"})
    api.user_says(PHONE, "hello")
    await api.wait_sent(PHONE, 1, within=30)
    async with console(live.home) as (app, pilot):
        await show_tab(pilot, "gateways")
        view = app.query_one(GatewaysView)
        await until(pilot, lambda: column(app, "gateways-table", "gateway") == ["console", "tg"])
        await until(pilot, lambda: "gateways 2/2 up" in header(app), what="the header")
        assert column(app, "gateways-table", "state") == ["running", "running"]
        assert column(app, "gateways-table", "bot") == ["-", "@choir_test_bot"]
        assert column(app, "gateways-table", "sends") == ["-", "0 queued, 0 failed"]
        assert column(app, "gateways-table", "last update")[1] != "-"

        await pilot.press("down")  # the bot's DMs
        await until(pilot, lambda: "phone" in detail(app), what="the bot's DMs")
        shown = detail(app)
        assert "tg (telegram @choir_test_bot) running" in shown
        assert f"user {PHONE}" in shown
        assert "→ agent-1 (session s-" in shown
        assert "boss" in shown
        assert "no agent running" in shown

        api.token = "7000001:AAH-the-token-botfather-issued-instead"  # revoked
        api.user_says(PHONE, "still there?")  # wakes the poll in flight; the next one: 401
        await until(
            pilot,
            lambda: column(app, "gateways-table", "state")[1] == "token rejected",
            within=30,
            what="the revoked token",
        )
        await until(pilot, lambda: "gateways 1/2 up · tg token rejected" in header(app))
        await until(pilot, lambda: "rejected its token (invalid or revoked)" in detail(app))
        assert "choirctl secret set tg-token" in detail(app)
        assert TOKEN not in detail(app)
        assert view.highlighted() == "tg"
    assert (await live.client.status()).version  # choird serves on
