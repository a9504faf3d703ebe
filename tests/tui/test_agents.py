"""The Agents tab on a real choird: listing, selection, start, stop (confirmed) and restart."""

from __future__ import annotations

from textual.app import App
from textual.widgets import Static

from tests.security.process_agents import sandbox_word
from tests.tui.conftest import Live, column
from tests.tui.pilot import console, until
from tests.tui.pilot import show_tab as tab


async def test_agents_lists_every_agent_and_starts_and_stops_one(live: Live):
    async with console(live.home) as (app, pilot):
        await tab(pilot, "agents")
        await until(pilot, lambda: column(app, "agents-table", "agent") == ["agent-1", "agent-2"])
        assert column(app, "agents-table", "state") == ["stopped", "stopped"]
        assert app.state.selected_agent == "agent-1"

        await pilot.press("s")
        await until(pilot, lambda: column(app, "agents-table", "state")[0] == "running")
        runtime = column(app, "agents-table", "runtime")[0]
        assert runtime == f"process ({sandbox_word()})"
        session = column(app, "agents-table", "session")[0]
        assert session == (await live.client.agent_list()).agents[0].session_id
        assert "llm=demo" in column(app, "agents-table", "bindings")[0]

        await pilot.press("x")  # asks first
        await pilot.pause()
        assert type(app.screen).__name__ == "ConfirmDialog"
        await pilot.press("n")
        await pilot.pause(0.3)
        assert (await live.client.agent_list()).agents[0].state == "running"

        await pilot.press("x")
        await pilot.pause()
        await pilot.press("y")
        await until(pilot, lambda: column(app, "agents-table", "state")[0] == "stopped")
        assert (await live.client.agent_list()).agents[0].state == "stopped"


async def test_the_detail_line_names_the_tools_the_model_is_not_offered_and_why(live: Live):
    """Integration availability (issue 18) in the console: grouped by reason like choirctl's."""
    async with console(live.home) as (app, pilot):
        await tab(pilot, "agents")
        await until(pilot, lambda: "not offered" in detail(app))

        text = detail(app)
        assert (
            "not offered: choir.email.check, choir.email.receive, choir.email.send "
            "(no email account is bound to the session" in text
        )
        assert "choir.web.search (no web search provider is configured" in text


def detail(app: App[None]) -> str:
    return str(app.query_one("#agent-detail", Static).content)
