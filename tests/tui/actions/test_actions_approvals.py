"""The Approvals tab against a real choird and a live agent that proposes things."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.harness.waits import poll_until
from tests.tui.actions.conftest import Choird, confirmation, notes
from tests.tui.pilot import console, show_tab, until
from tui.dialogs import ConfirmDialog
from tui.views.approvals import ApprovalsView
from tui.views.approvals_detail import parse_time

pytestmark = pytest.mark.slow


async def test_an_approval_appears_live_and_is_approved_after_confirmation(choird: Choird):
    await choird.start_agent()
    async with console(choird.home) as (app, pilot):
        await show_tab(pilot, "approvals")
        view = app.query_one(ApprovalsView)
        proposed = await choird.propose("tool")
        key = proposed["approval_id"]
        await until(pilot, lambda: key in view.table.rows, what="the approval in the table")
        detail = view.query_one("#approval-detail")
        assert "weather.lookup" in str(detail.render())
        assert "more lines (e expands)" in str(detail.render())  # the manifest, collapsed
        await pilot.press("e")
        assert "more lines" not in str(detail.render())
        assert '"timeout_ms": 5000' in str(detail.render())
        await pilot.press("a")
        dialog = await confirmation(pilot)
        assert f"Approve {key} (tool) from agent-1?" in dialog.question
        await pilot.press("y")
        await until(pilot, lambda: key not in view.table.rows, what="the row to leave")
        assert ("information", f"{key} approved; the agent is told.") in notes(app)
    shown = await choird.client.approval_show(key)
    assert (shown.status, shown.resolved_by) == ("approved", "choir tui")


async def test_declining_the_confirmation_leaves_it_pending_and_reject_rejects(choird: Choird):
    await choird.start_agent()
    first = (await choird.propose("tool"))["approval_id"]
    second = (await choird.propose("config change"))["approval_id"]
    async with console(choird.home) as (app, pilot):
        await show_tab(pilot, "approvals")
        view = app.query_one(ApprovalsView)
        await until(pilot, lambda: view.table.row_count == 2, what="both approvals")
        assert view.highlighted() == first
        await pilot.press("r")
        dialog = await confirmation(pilot)
        await pilot.press("n")
        await pilot.pause()
        assert (await choird.client.approval_show(first)).status == "pending"
        await pilot.press("down", "r")
        dialog = await confirmation(pilot)
        assert dialog.danger
        await pilot.press("y")
        await until(pilot, lambda: second not in view.table.rows, what="the rejected row to go")
    assert (await choird.client.approval_show(second)).status == "rejected"
    assert (await choird.client.approval_show(first)).status == "pending"


async def test_resolved_elsewhere_while_the_dialog_is_open_closes_it_unanswered(choird: Choird):
    await choird.start_agent()
    key = (await choird.propose("tool"))["approval_id"]
    async with console(choird.home) as (app, pilot):
        await show_tab(pilot, "approvals")
        view = app.query_one(ApprovalsView)
        await until(pilot, lambda: key in view.table.rows, what="the approval")
        await pilot.press("a")
        await confirmation(pilot)
        await choird.client.approval_reject(key)  # choirctl answers first
        await until(pilot, lambda: not isinstance(app.screen, ConfirmDialog), what="it closing")
        await pilot.press("y")  # too late: the dialog is gone, nothing is sent
        await pilot.pause()
        notice = str(view.query_one("#approvals-notice").render())
        assert f"{key} was rejected by choirctl meanwhile" in notice
        assert key not in view.table.rows
        assert any("already rejected by choirctl" in text for _, text in notes(app))
    shown = await choird.client.approval_show(key)
    assert (shown.status, shown.resolved_by) == ("rejected", "choirctl")


async def test_an_answer_racing_another_is_a_polite_notice_not_a_second_resolution(
    choird: Choird,
):
    await choird.start_agent()
    key = (await choird.propose("tool"))["approval_id"]
    async with console(choird.home) as (app, pilot):
        view = app.query_one(ApprovalsView)
        await until(pilot, lambda: key in view.table.rows, what="the approval")
        approved = await choird.client.approval_approve(key)
        await view._send(key, "reject")  # whether or not the feed item arrived first
        await pilot.pause()
        warnings = [text for severity, text in notes(app) if severity == "warning"]
        assert any("already approved" in text for text in warnings), notes(app)
        assert not [text for severity, text in notes(app) if severity == "error"]
    shown = await choird.client.approval_show(key)
    assert (shown.status, shown.resolved_at) == ("approved", approved.resolved_at)


async def test_ages_and_countdowns_tick_locally_and_config_changes_show_as_a_diff(
    choird: Choird,
):
    await choird.start_agent()
    proposed = await choird.propose("config change")
    key = proposed["approval_id"]
    async with console(choird.home) as (app, pilot):
        await show_tab(pilot, "approvals")
        view = app.query_one(ApprovalsView)
        await until(pilot, lambda: view.timeout_ms == 1_800_000, what="the running timeout")
        created = parse_time(proposed["created_at"])
        assert created is not None
        app.clock = lambda: created + timedelta(minutes=4, seconds=5)
        view.tick()
        assert view.table.get_cell(key, "age") == "4m05s"
        assert view.table.get_cell(key, "left") == "25m55s"
        app.clock = lambda: created + timedelta(minutes=31)
        view.tick()
        assert view.table.get_cell(key, "left") == "due"
        detail = str(view.query_one("#approval-detail").render())
        assert "~ approval_timeout_ms: 1800000 → 600000" in detail
        assert "- event_window_size" in detail
        assert "Give operators ten minutes to answer approvals" in detail


async def test_a_restart_only_config_change_is_refused_plainly_and_approved_with_restart(
    choird: Choird,
):
    session = await choird.start_agent()
    pid = (await choird.client.agent_status("agent-1")).pid
    key = (await choird.propose("restart change"))["approval_id"]
    async with console(choird.home) as (app, pilot):
        await show_tab(pilot, "approvals")
        view = app.query_one(ApprovalsView)
        await until(pilot, lambda: key in view.table.rows, what="the approval in the table")
        await pilot.press("a")
        await confirmation(pilot)
        await pilot.press("y")
        await until(
            pilot, lambda: any(m for s, m in notes(app) if s == "error"), what="the refusal"
        )
        refused = [m for s, m in notes(app) if s == "error"]
        assert "takes effect only with a restart of agent-1" in refused[-1]
        assert "R in the Approvals tab" in refused[-1]
        assert "--restart" not in refused[-1]  # the console's own way, not choirctl's
        assert (await choird.client.approval_show(key)).status == "pending"
        assert key in view.table.rows
        await pilot.press("R")
        dialog = await confirmation(pilot)
        assert f"Approve and restart {key} (config_change) from agent-1?" in dialog.question
        assert f"choirctl approval approve {key} --restart" in dialog.detail
        await pilot.press("y")
        await until(pilot, lambda: key not in view.table.rows, what="the row to leave")
        said = f"{key} approved (restarting what it needs); the agent is told."
        assert ("information", said) in notes(app)

    async def applied() -> bool:
        return (await choird.client.approval_show(key)).status == "applied"

    await poll_until(applied, within=60, every=0.5)
    shown = await choird.client.approval_show(key)
    assert (shown.resolved_by, shown.resolved_via) == ("choir tui", "tui")
    assert "agent-1 restarted" in (shown.outcome or "")
    status = await choird.client.agent_status("agent-1")
    assert (status.session_id, status.pid != pid) == (session, True)
