"""Every command palette action against a real choird, typed the way an operator types it.

For each catalogue entry (`tui.actions.ACTIONS`): open the palette, type its title, answer each
prompt (clearing the pre-filled value, typing the answer), confirm, and read what the console
shows — choird's answer on a result screen, a notification, or the tab it opens. A refusal is
choird's one-line message (a warning for a conflict); the console never crashes.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

import pytest
from textual.command import CommandPalette
from textual.pilot import Pilot
from textual.widgets import Input, TabbedContent

from tests.security.process_agents import bwrap_works
from tests.tui.actions.conftest import Choird, notes
from tests.tui.pilot import console, until
from tui.actions import ACTIONS
from tui.app import ChoirApp
from tui.dialogs import ConfirmDialog, TextPrompt
from tui.dialogs.result import ResultScreen

# Long console flows: 120 s (the suite default) was too short on a loaded two-core machine
# running the suite in parallel; the timeout guards hangs, it measures nothing.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


async def run(pilot: Pilot[Any], title: str, *answers: str) -> None:
    """Run the palette entry `title`, answering its prompts and confirming."""
    app = pilot.app
    await pilot.press("ctrl+p")
    await until(pilot, lambda: isinstance(app.screen, CommandPalette), what="the palette")
    # the title as one edit, not a key at a time: each key makes the palette search the whole
    # catalogue again and the pilot waits for it (a minute of a test's run); typing into the
    # palette is test_actions_palette's subject
    app.screen.query_one(Input).value = title
    await pilot.pause(0.3)
    await pilot.press("enter")
    for answer in answers:
        await until(pilot, lambda: isinstance(app.screen, TextPrompt), what=f"{title}'s prompt")
        await pilot.press("ctrl+a", "ctrl+k", *answer, "enter")
    await until(pilot, lambda: not isinstance(app.screen, (CommandPalette, TextPrompt)))
    if isinstance(app.screen, ConfirmDialog):
        await pilot.press("y")


async def answer_shown(pilot: Pilot[Any], *expected: str) -> str:
    """The result screen's text once it has every `expected` piece; closes it."""
    app = pilot.app
    await until(pilot, lambda: isinstance(app.screen, ResultScreen), within=60, what="a result")
    screen = app.screen
    assert isinstance(screen, ResultScreen)
    await until(
        pilot,
        lambda: all(part in "\n".join(screen.lines) for part in expected),
        within=60,
        what=f"{expected} in {screen.lines[-5:]}",
    )
    await pilot.press("escape")
    return "\n".join(screen.lines)


async def noted(pilot: Pilot[Any], text: str, severity: str = "information") -> None:
    app = pilot.app
    assert isinstance(app, ChoirApp)
    await until(
        pilot,
        lambda: any(s == severity and text in m for s, m in notes(app)),
        within=60,
        what=f"a {severity} note {text!r} (have {notes(app)})",
    )
    app.clear_notifications()


async def test_every_read_only_action_shows_choirds_answer(choird: Choird):
    session_id = await choird.start_agent()
    approval_id = (await choird.propose("tool"))["approval_id"]
    async with console(choird.home) as (_, pilot):
        await run(pilot, "choird: status")
        await answer_shown(pilot, '"config_version": 1', '"postgres"')
        await run(pilot, "Agent: status", "agent-1")
        await answer_shown(pilot, '"agent_id": "agent-1"', f'"session_id": "{session_id}"')
        await run(pilot, "Agent: verify the security profile", "agent-1")
        verdict = '"ok": true' if bwrap_works() else '"ok": false'  # unsandboxed fails them all
        await answer_shown(pilot, verdict)
        await run(pilot, "Sessions: list", "")
        await answer_shown(pilot, session_id)
        await run(pilot, "Session: list calls a crash interrupted", session_id)
        await answer_shown(pilot, '"interrupted": []')
        await run(pilot, "Approval: show", approval_id)
        await answer_shown(pilot, '"request_type": "tool"', "weather.lookup")
        await run(pilot, "Models: list")
        await answer_shown(pilot, '"name": "demo"')
        await run(pilot, "Model: the agent's current model", "agent-1")
        await answer_shown(pilot, '"llm": "demo"')
        await run(pilot, "Voices: list profiles")
        await answer_shown(pilot, '"voice_profiles": []')
        await run(pilot, "Voice: the agent's current profile", "agent-1")
        await answer_shown(pilot, '"voice_profile": null')
        await run(pilot, "Config: the running config")
        await answer_shown(pilot, '"approval_timeout_ms": 1800000')
        await run(pilot, "Secrets: names and where they are used")
        await answer_shown(pilot, '"name": "git-token"')


async def test_changing_actions_on_a_session_do_it_or_say_why_not(choird: Choird, other: Path):
    session_id = await choird.start_agent()
    rejected = (await choird.propose("tool"))["approval_id"]
    async with console(choird.home) as (app, pilot):
        await until(pilot, lambda: rejected in app.state.approvals, what="the approval")
        await run(pilot, "Model: switch a running agent's model", "agent-1", "demo")
        await noted(pilot, "agent-1 now uses demo")
        await run(pilot, "Voice: switch a running agent's profile", "agent-1", "narrator")
        await noted(pilot, "no voice profile named 'narrator'", "error")
        await run(pilot, "Session: compact working memory", session_id, "")
        await noted(pilot, f"asked {session_id} to compact")
        await run(pilot, "Session: cancel a core job", session_id, "no-such-job")
        await noted(pilot, "no-such-job", "error")
        await run(pilot, "Session: decide interrupted calls", session_id, "resume", "")
        await noted(pilot, "nothing to recover", "warning")
        await run(pilot, "Approval: reject", rejected)
        await noted(pilot, f"{rejected} rejected")
        await run(pilot, "Workspace: reset (delete its files)", "other")
        await noted(pilot, "workspace other reset")
    assert (await choird.client.approval_show(rejected)).status == "rejected"


async def test_agent_lifecycle_actions_start_restart_and_stop(choird: Choird, other: Path):
    first = await choird.start_agent("agent-1")
    async with console(choird.home) as (_, pilot):
        await run(pilot, "Agent: start", "agent-2", "")  # no memory key file
        await noted(pilot, "agent-2 started")
        await run(pilot, "Agent: restart (same session)", "agent-1")
        await noted(pilot, "agent-1 restarted")
        await run(pilot, "Agent: stop (graceful)", "agent-2")
        await noted(pilot, "agent-2 stopped")
    assert (await choird.client.agent_status("agent-2")).state == "stopped"
    restarted = await choird.client.agent_status("agent-1")
    assert (restarted.state, restarted.session_id) == ("running", first)


async def test_updates_show_their_progress_and_outcome(choird: Choird):
    await choird.start_agent("agent-1")
    async with console(choird.home) as (_, pilot):
        await run(pilot, "Agent: update (build if changed", "agent-1")
        shown = await answer_shown(pilot, '"outcome": "skipped"')
        assert shown.startswith("agent-1: building if needed")  # progress, then the result
        await run(pilot, "Agents: update all")
        shown = await answer_shown(pilot, '"failed": 0')
        assert "agent-2 built: not running: the next start uses the new build" in shown


def showing(tabs: TabbedContent, view: str | None) -> bool:
    return tabs.active == view


ASKED_IN_TAB = {"memory about": ("console",), "session messages": ("s-none",)}
"""What the tab asks once open (the user; the session, the selected agent's by default)."""


async def test_actions_done_in_a_tab_open_it(choird: Choird):
    async with console(choird.home) as (app, pilot):
        tabs = app.query_one(TabbedContent)
        for action in [a for a in ACTIONS if a.mode == "view"]:
            view = action.view
            await run(pilot, action.title, *ASKED_IN_TAB.get(action.command, ()))
            await until(pilot, partial(showing, tabs, view), what=f"tab {view}")
            if isinstance(app.screen, ConfirmDialog):
                await pilot.press("n")  # apply / secret apply ask first
            await pilot.pause()
