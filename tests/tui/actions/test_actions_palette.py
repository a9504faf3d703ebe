"""The command palette and the help screen against a real choird."""

from __future__ import annotations

import pytest
from textual.binding import Binding
from textual.command import CommandPalette

from choir.commands import Command
from tests.tui.actions.conftest import Choird, confirmation, notes
from tests.tui.pilot import console, until
from tui.actions import ConsoleAction
from tui.commands import perform
from tui.dialogs import TextPrompt
from tui.dialogs.help import HelpScreen, help_rows
from tui.dialogs.result import ResultScreen
from tui.views import VIEWS

pytestmark = pytest.mark.slow


async def palette(pilot, query: str) -> None:
    """Open the palette, type `query`, run the best hit."""
    await pilot.press("ctrl+p")
    await until(pilot, lambda: isinstance(pilot.app.screen, CommandPalette), what="the palette")
    await pilot.press(*query)
    await pilot.pause(0.3)
    await pilot.press("enter")
    await until(
        pilot, lambda: not isinstance(pilot.app.screen, CommandPalette), what="the palette to go"
    )


async def prompt(pilot) -> TextPrompt:
    await until(pilot, lambda: isinstance(pilot.app.screen, TextPrompt), what="a prompt")
    screen = pilot.app.screen
    assert isinstance(screen, TextPrompt)
    return screen


async def test_approving_from_the_palette_asks_which_then_confirms(choird: Choird):
    await choird.start_agent()
    key = (await choird.propose("tool"))["approval_id"]
    async with console(choird.home) as (app, pilot):
        await until(pilot, lambda: key in app.state.approvals, what="the approval")
        await palette(pilot, "approval approve")
        asked = await prompt(pilot)
        assert (asked.value, asked.choices) == (key, (key,))
        await pilot.press("enter")
        dialog = await confirmation(pilot)
        assert dialog.question == f"Approve {key}? The agent is told at once."
        await pilot.press("y")
        await until(pilot, lambda: key not in app.state.approvals, what="the approval to go")
    shown = await choird.client.approval_show(key)
    assert (shown.status, shown.resolved_by) == ("approved", "choir tui")


async def test_read_only_commands_show_choirds_answer(choird: Choird):
    async with console(choird.home) as (app, pilot):
        await palette(pilot, "models: list")
        await until(pilot, lambda: isinstance(app.screen, ResultScreen), what="the answer")
        assert isinstance(app.screen, ResultScreen)
        text = "\n".join(app.screen.lines)
        assert '"name": "demo"' in text
        assert "choirctl model list" in app.screen.title_text
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, ResultScreen)


async def test_a_verb_this_choird_lacks_is_not_available_not_a_crash(choird: Choird):
    async with console(choird.home) as (app, pilot):
        teleport = Command("agent teleport", "Move an agent.", verb="agent.teleport")
        action = ConsoleAction(teleport, "Agent: teleport", "show")
        await perform(app, action)
        await pilot.pause()
        [(severity, message)] = notes(app)
        assert severity == "warning"
        assert message.startswith("Agent: teleport is not available in this choird")
        assert "agent.teleport" in message
        assert app.is_running


async def test_stopping_from_the_palette_confirms_and_stops(choird: Choird):
    await choird.start_agent()
    async with console(choird.home) as (app, pilot):
        await until(
            pilot,
            lambda: (
                "agent-1" in app.state.agents and app.state.agents["agent-1"].state == "running"
            ),
            what="agent-1 running",
        )
        await palette(pilot, "agent stop")
        asked = await prompt(pilot)
        assert asked.value == "agent-1"
        await pilot.press("enter")
        dialog = await confirmation(pilot)
        assert dialog.question.startswith("Stop agent-1?")
        await pilot.press("y")
        await until(pilot, lambda: ("information", "agent-1 stopped") in notes(app), within=30)
    assert (await choird.client.agent_status("agent-1")).state == "stopped"


async def test_the_help_screen_lists_every_views_keys(choird: Choird):
    async with console(choird.home) as (app, pilot):
        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen), what="help")
        rows = help_rows(app)
        for row in [
            ("everywhere", "^p", "Commands"),
            ("everywhere", "?", "Help"),
            ("6 Approvals", "a", "Approve"),
            ("6 Approvals", "r", "Reject"),
            ("9 Config", "s", "Secret apply"),
            ("0 Workspaces", "r", "Reset"),
            ("8 Logs", "j", "Raw JSON"),
            ("confirmations", "n / esc", "No"),
        ]:
            assert row in rows, rows
        for spec in VIEWS:
            described = {what for where, _, what in rows if where == f"{spec.key} {spec.title}"}
            assert described >= {b.description for b in Binding.make_bindings(spec.view.BINDINGS)}
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, HelpScreen)


async def test_restarting_choird_from_the_palette_confirms_then_says_why_this_one_cannot(
    choird: Choird,
):
    """The palette's "choird: restart in place" is `choird.restart`: confirmed first, and a
    choird that cannot re-execute itself (this one runs inside the test) refuses, its reason
    shown, nothing stopped."""
    async with console(choird.home) as (app, pilot):
        await palette(pilot, "choird: restart")
        dialog = await confirmation(pilot)
        assert dialog.question.startswith("Restart choird? It re-executes itself")
        await pilot.press("y")
        await until(
            pilot,
            lambda: any("cannot restart in place" in text for _, text in notes(app)),
            what="the refusal",
        )
        [(severity, message)] = [note for note in notes(app) if "restart" in note[1]]
        assert severity == "error"
        assert "it runs inside another program" in message
    assert not choird.daemon.restarting
    assert (await choird.client.status()).version
