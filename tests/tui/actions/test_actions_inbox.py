"""The Inbox tab against a real choird: what waits is listed with its context, and decided.

A pending approval is the inbox item here (the restart kinds are the fault tests' subject,
`tests/faults/test_recovery_inbox.py`): the tab lists it with the proposal to decide with,
`d` picks a choice and confirms, and choird answers through `approval.approve`. An item decided
elsewhere while the operator picks is a warning naming it, never an error or a crash.
"""

from __future__ import annotations

import pytest
from textual.widgets import Static

from tests.tui.actions.conftest import Choird, confirmation, notes
from tests.tui.pilot import console, show_tab, until
from tui.dialogs import TextPrompt
from tui.views.inbox import InboxView

pytestmark = pytest.mark.slow


async def test_an_item_is_shown_with_its_context_and_decided_from_the_tab(choird: Choird):
    await choird.start_agent("agent-1")
    first = (await choird.propose("tool"))["approval_id"]
    item_id = f"approval:{first}"
    async with console(choird.home) as (app, pilot):
        await pilot.press("b")  # the tab's key, from anywhere
        view = app.query_one(InboxView)
        await until(pilot, lambda: item_id in view.items, what="the pending approval")
        assert view.highlighted() == item_id
        shown = str(app.query_one("#inbox-detail", Static).render())
        assert "does: Fetch the forecast for `city` and return temperature and sky." in shown
        assert "choices: approve, reject" in shown
        assert f"choirctl inbox resolve {item_id} approve|reject" in shown

        await pilot.press("d")
        await until(pilot, lambda: isinstance(app.screen, TextPrompt), what="the choice")
        await pilot.press("enter")  # pre-filled with the usual choice: approve
        dialog = await confirmation(pilot)
        assert dialog.question == f"approve {item_id}?"
        await pilot.press("y")
        await until(
            pilot,
            lambda: any(f"{item_id}: approval {first} approved" in t for _, t in notes(app)),
            what="the outcome",
        )
        await until(pilot, lambda: item_id not in view.items, what="the item gone")
    assert (await choird.client.approval_show(first)).resolved_by == "choir tui"


async def test_an_item_decided_elsewhere_meanwhile_is_a_warning(choird: Choird):
    await choird.start_agent("agent-1")
    second = (await choird.propose("tool"))["approval_id"]
    item_id = f"approval:{second}"
    async with console(choird.home) as (app, pilot):
        await show_tab(pilot, "inbox")
        view = app.query_one(InboxView)
        await until(pilot, lambda: item_id in view.items, what="the pending approval")
        await pilot.press("d")
        await until(pilot, lambda: isinstance(app.screen, TextPrompt), what="the choice")
        await pilot.press("ctrl+a", "ctrl+k", *"reject", "enter")
        await confirmation(pilot)
        await choird.client.approval_approve(second)  # someone else, meanwhile
        await pilot.press("y")
        expected = f"inbox item {item_id} was already decided elsewhere"
        await until(
            pilot,
            lambda: any(s == "warning" and expected in t for s, t in notes(app)),
            what="the warning",
        )
    assert (await choird.client.approval_show(second)).status == "approved"
