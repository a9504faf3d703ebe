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


async def test_z_rolls_back_after_a_confirmation_and_shows_why_it_cannot_here(live: Live):
    """`1 z` (choirctl agent rollback): asks first; on the process runtime choird refuses, the
    result screen says why, and the agent runs on untouched."""
    started = await live.client.agent_start("agent-1", {"dm": "console"})
    async with console(live.home) as (app, pilot):
        await tab(pilot, "agents")
        await until(pilot, lambda: column(app, "agents-table", "state")[0] == "running")

        await pilot.press("z")
        await pilot.pause()
        assert type(app.screen).__name__ == "ConfirmDialog"
        await pilot.press("n")
        await pilot.pause(0.2)
        assert type(app.screen).__name__ != "ResultScreen"

        await pilot.press("z")
        await pilot.pause()
        await pilot.press("y")
        await until(pilot, lambda: "not images" in getattr(app.screen, "status", ""))
        assert app.screen.title_text == "choirctl agent rollback agent-1"  # type: ignore[attr-defined]
        assert "the process runtime runs the repos' trees" in app.screen.status  # type: ignore[attr-defined]
    agent = (await live.client.agent_list()).agents[0]
    assert (agent.state, agent.pid, agent.session_id) == (
        "running",
        started.pid,
        started.session_id,
    )
    await live.client.agent_stop("agent-1")
