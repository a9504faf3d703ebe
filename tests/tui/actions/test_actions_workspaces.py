"""The Workspaces tab against a real choird: lease holders, reset with confirmation."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.tui.actions.conftest import Choird, confirmation, notes
from tests.tui.pilot import console, show_tab, until
from tui.views.workspaces import WorkspacesView

pytestmark = pytest.mark.slow


async def test_lease_holders_show_and_a_reset_empties_a_workspace(choird: Choird, other: Path):
    await choird.start_agent("agent-1")
    async with console(choird.home) as (app, pilot):
        await show_tab(pilot, "workspaces")
        view = app.query_one(WorkspacesView)
        await until(pilot, lambda: view.table.row_count == 2, what="both workspaces")
        await until(
            pilot,
            lambda: view.workspaces["default"].leased_to == "agent-1",
            what="agent-1's lease",
        )
        assert str(view.table.get_cell("default", view.table.ordered_columns[2].key)) == "agent-1"
        assert view.highlighted() == "default"
        await pilot.press("down", "r")
        dialog = await confirmation(pilot)
        assert dialog.question == "Reset workspace other?"
        assert dialog.danger
        await pilot.press("y")
        await until(
            pilot, lambda: any("workspace other reset" in t for _, t in notes(app)), what="reset"
        )
    assert sorted(os.listdir(other)) == [".choirtmp"]


async def test_resetting_a_leased_workspace_names_the_holder_and_stops_it_first(choird: Choird):
    session_id = await choird.start_agent("agent-1")
    async with console(choird.home) as (app, pilot):
        await show_tab(pilot, "workspaces")
        view = app.query_one(WorkspacesView)
        await until(
            pilot,
            lambda: (
                "default" in view.workspaces and view.workspaces["default"].leased_to == "agent-1"
            ),
            what="agent-1's lease",
        )
        await pilot.press("r")
        dialog = await confirmation(pilot)
        assert f"agent-1 holds it (session {session_id})" in dialog.detail
        await pilot.press("y")
        await until(
            pilot,
            lambda: any("workspace default reset" in t for _, t in notes(app)),
            within=30,
            what="the reset",
        )
        assert any("stopped agent-1 first" in t for _, t in notes(app))
        await until(pilot, lambda: not view.workspaces["default"].leased_to, what="the lease gone")
    assert (await choird.client.agent_status("agent-1")).state == "stopped"
