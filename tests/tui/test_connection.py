"""The console without choird, losing it, and getting it back — all by itself.

choird not running: a screen says how to start it, and goes away once choird answers. choird
going away while connected: a "disconnected — retrying" banner, then the listings re-read when
it is back. Nothing here touches the console between those steps but the real daemon.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from choir.errors import UnavailableError
from choir.home import ChoirHome
from tests.harness.daemons import running_daemon
from tests.tui.pilot import until
from tui.app import ChoirApp
from tui.widgets.health import ConnectionBanner
from tui.widgets.offline import OfflineScreen


def screen_text(app: ChoirApp) -> str:
    return str(app.screen.query_one("#offline-text").render())


async def test_without_choird_a_screen_says_how_to_start_it_until_it_runs(home: ChoirHome):
    app = ChoirApp(home)
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: isinstance(app.screen, OfflineScreen), what="offline screen")
        text = screen_text(app)
        assert "choird is not running" in text
        assert "choir up" in text
        assert "choird" in text
        assert str(home.operator_socket) in text
        assert app.state.connection == "not_running"

        async with running_daemon(home):
            await until(pilot, lambda: app.state.connection == "connected", what="connected")
            await until(pilot, lambda: not isinstance(app.screen, OfflineScreen))
            await until(pilot, lambda: list(app.state.agents) == ["agent-1", "agent-2"])


async def test_losing_choird_shows_the_banner_and_recovers_by_itself(home: ChoirHome):
    app = ChoirApp(home)
    async with app.run_test(size=(100, 30)) as pilot:
        async with running_daemon(home):
            await until(pilot, lambda: app.state.connection == "connected", what="connected")
            banner = app.query_one(ConnectionBanner)
            assert not banner.has_class("shown")

        await until(pilot, lambda: app.state.connection == "disconnected", what="disconnected")
        assert banner.has_class("shown")
        assert "disconnected — retrying" in str(banner.render())
        assert not isinstance(app.screen, OfflineScreen)  # it was up: a banner, not a screen
        assert "disconnected" in str(app.query_one("#health").render())
        assert app.state.status is not None
        first_start = app.state.status.started_at
        app.state.agents.clear()  # forget them: only a re-read brings them back

        async with running_daemon(home):
            await until(pilot, lambda: app.state.connection == "connected", what="reconnected")
            assert not banner.has_class("shown")
            assert app.state.status.started_at != first_start  # the new choird's status
            assert list(app.state.agents) == ["agent-1", "agent-2"]


async def test_the_bridge_refuses_actions_while_disconnected(tmp_path: Path):
    app = ChoirApp(ChoirHome(tmp_path / "nowhere"))
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.state.connection == "not_running")
        with pytest.raises(UnavailableError, match="not connected to choird"):
            await app.bridge.call("status")
