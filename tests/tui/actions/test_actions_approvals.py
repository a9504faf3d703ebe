"""The Approvals tab against a real choird and a live agent that proposes things."""

from __future__ import annotations

import pytest

from tests.tui.actions.conftest import Choird, console, show_tab, until
from tui.views.approvals import ApprovalsView

pytestmark = pytest.mark.slow


async def test_an_approval_appears_live_and_is_approved_after_confirmation(choird: Choird):
    await choird.start_agent()
    async with console(choird.home) as (app, pilot):
        await show_tab(pilot, "approvals")
        view = app.query_one(ApprovalsView)
        proposed = await choird.propose("tool")
        key = proposed["approval_id"]
        await until(pilot, lambda: key in view.table.rows, what="the approval in the table")
        await pilot.press("a")
        await pilot.pause()
        await pilot.press("y")
        await until(pilot, lambda: key not in view.table.rows, what="the row to leave")
    shown = await choird.client.approval_show(key)
    assert (shown["status"], shown["resolved_by"]) == ("approved", "choir tui")
