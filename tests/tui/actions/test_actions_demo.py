"""A new operator's first session with the built-in demo model, all inside the console.

The home is `choirctl init`'s (plus agent-2): agent-1 talks to the demo model its own process
serves (no model server of the test's). The operator chats, asks for a proposal, switches to
Approvals, approves it — choird records the approval — without leaving `choir tui`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from choir.client import ChoirClient
from choir.home import ChoirHome
from choir.store.postgres.target import ConnectParams
from tests.harness.daemons import running_daemon
from tests.harness.homes import external_postgres, make_home, short_root
from tests.tui.actions.conftest import confirmation
from tests.tui.pilot import console, show_tab, until
from tui.views.approvals import ApprovalsView
from tui.views.chat import ChatView

pytestmark = pytest.mark.slow


@pytest.fixture
async def demo(pg_params: ConnectParams) -> AsyncIterator[tuple[ChoirHome, ChoirClient]]:
    with short_root("cd-") as root:
        home = make_home(root, postgres=external_postgres(pg_params))
        async with running_daemon(home), await ChoirClient.connect(home) as client:
            await client.agent_start("agent-1")
            try:
                yield home, client
            finally:
                await client.agent_stop("agent-1")


def said(view: ChatView, text: str) -> bool:
    return any(
        text in line for category, line in view.transcripts["agent-1"] if category == "reply"
    )


async def test_the_demo_model_proposes_and_the_operator_approves_in_the_console(
    demo: tuple[ChoirHome, ChoirClient],
):
    home, client = demo
    async with console(home) as (app, pilot):
        await until(pilot, lambda: app.state.selected_agent == "agent-1", what="agent-1")
        await show_tab(pilot, "chat")
        chat = app.query_one(ChatView)
        await pilot.press(*"hello", "enter")
        await until(pilot, lambda: said(chat, "demo model"), what="the greeting")
        await pilot.press(*"propose something", "enter")
        await until(pilot, lambda: said(chat, "approve or reject it"), what="the proposal")
        await pilot.press("escape")  # out of the input: digits switch tabs again
        await show_tab(pilot, "approvals")
        view = app.query_one(ApprovalsView)
        await until(pilot, lambda: view.table.row_count == 1, what="the pending approval")
        approval_id = view.highlighted()
        assert approval_id is not None
        assert "demo.greet" in str(view.query_one("#approval-detail").render())
        await pilot.press("a")
        await confirmation(pilot)
        await pilot.press("y")
        await until(pilot, lambda: view.table.row_count == 0, what="the approval to go")
    shown = await client.approval_show(approval_id)
    assert (shown.status, shown.resolved_by) == ("approved", "choir tui")
