"""The Config tab against a real choird: load, the tagged diff, apply and secret apply."""

from __future__ import annotations

import pytest

from tests.harness.homes import read_config, write_config
from tests.tui.actions.conftest import Choird, confirmation, notes
from tests.tui.pilot import console, show_tab, until
from tui.dialogs import ConfirmDialog
from tui.views.config import NOTHING_STAGED, ConfigView

pytestmark = pytest.mark.slow


def rows(view: ConfigView) -> list[tuple[str, str, str]]:
    table = view.table
    return [
        (str(table.get_row_at(i)[2]), str(table.get_row_at(i)[3]), str(table.get_row_at(i)[4]))
        for i in range(table.row_count)
    ]


def version(view: ConfigView) -> int | None:
    """The config version the view shows; None before `config.show` was read."""
    return view.shown.config_version if view.shown else None


async def test_load_shows_tagged_changes_and_apply_publishes_them(choird: Choird):
    async with console(choird.home) as (app, pilot):
        await show_tab(pilot, "config")
        view = app.query_one(ConfigView)
        await until(pilot, lambda: version(view) == 1, what="config.show")
        assert str(view.query_one("#config-note").render()) == NOTHING_STAGED
        data = read_config(choird.home)
        data["approval_timeout_ms"] = 600_000
        data["workspaces"]["extra"] = {"path": str(choird.root / "ws-extra")}
        write_config(choird.home, data)
        await pilot.press("l")
        await until(pilot, lambda: view.table.row_count == 2, what="the staged changes")
        assert rows(view) == [
            ("approval_timeout_ms", "hot-reload", "choirctl config apply"),
            ("workspaces.extra", "restart-required", "the next choirctl agent start that binds it"),
        ]
        assert "a staged config is waiting" in str(view.query_one("#config-summary").render())
        await pilot.press("a")
        dialog = await confirmation(pilot)
        assert dialog.question == "Apply the staged config (2 change(s))?"
        assert "the next choirctl agent start that binds it" in dialog.detail
        await pilot.press("y")
        await until(pilot, lambda: version(view) == 2, what="v2")
        assert view.shown is not None
        assert not view.shown.staged
        assert any("config v2 applied" in text for _, text in notes(app))
    shown = await choird.client.config_show()
    assert (shown.config_version, shown.config["approval_timeout_ms"]) == (2, 600_000)


async def test_a_broken_config_lists_every_problem_and_stages_nothing(choird: Choird):
    async with console(choird.home) as (app, pilot):
        await show_tab(pilot, "config")
        view = app.query_one(ConfigView)
        data = read_config(choird.home)
        data["approval_timeout_ms"] = -5
        data["agents"]["agent-1"]["defaults"]["llm"] = "no-such-model"
        write_config(choird.home, data)
        await pilot.press("l")
        problems = view.query_one("#config-problems")
        await until(pilot, lambda: problems.display, what="the problems")
        text = str(problems.render())
        assert "approval_timeout_ms" in text
        assert "no-such-model" in text
        assert view.shown is None or not view.shown.staged
        await pilot.press("a")  # nothing staged: a notice, no dialog
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmDialog)
        assert any("Nothing staged" in text for _, text in notes(app))
    assert (await choird.client.config_show()).staged is False


async def test_applied_elsewhere_refreshes_and_secret_apply_asks_first(choird: Choird):
    async with console(choird.home) as (app, pilot):
        await show_tab(pilot, "config")
        view = app.query_one(ConfigView)
        await until(pilot, lambda: version(view) == 1, what="config.show")
        data = read_config(choird.home)
        data["event_window_size"] = 60
        write_config(choird.home, data)
        await choird.client.config_load()
        await choird.client.config_apply()  # choirctl, elsewhere
        await until(pilot, lambda: version(view) == 2, what="the feed's v2")
        await pilot.press("s")
        await confirmation(pilot)
        await pilot.press("y")
        await until(
            pilot,
            lambda: any("secret(s) served" in text for _, text in notes(app)),
            what="secret apply's answer",
        )
