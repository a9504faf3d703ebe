"""The Chat tab against a real choird and a live agent on the scripted model."""

from __future__ import annotations

import pytest

from tests.tui.actions.conftest import Choird
from tests.tui.pilot import console, show_tab, until
from tui.views.chat import ChatView

pytestmark = pytest.mark.slow


def transcript(view: ChatView, agent_id: str = "agent-1") -> list[tuple[str, str]]:
    return list(view.transcripts[agent_id])


async def test_messages_get_replies_and_core_reports_and_inject_goes_to_edge(choird: Choird):
    await choird.start_agent()
    async with console(choird.home) as (app, pilot):
        await until(pilot, lambda: app.state.selected_agent == "agent-1", what="the selection")
        await show_tab(pilot, "chat")
        view = app.query_one(ChatView)
        await pilot.press(*"hello there", "enter")
        await until(
            pilot,
            lambda: ("reply", "Hello from the script.") in transcript(view),
            what="the reply",
        )
        assert transcript(view)[0] == ("you", "hello there")
        await pilot.press(*"please start a job", "enter")
        await until(
            pilot,
            lambda: any(c == "core_report" for c, _ in transcript(view)),
            within=30,
            what="the core report",
        )
        report = next(t for c, t in transcript(view) if c == "core_report")
        assert "job-a" in report
        await pilot.press(*"/inject tell job-a to hurry", "enter")
        await until(
            pilot,
            lambda: ("injected", "tell job-a to hurry") in transcript(view),
            what="the injection",
        )
        await pilot.pause(0.3)
        assert not [t for c, t in transcript(view) if c == "error"]
        shown = "\n".join(str(line.text) for line in view.log_widget.lines)
        assert "agent-1  Hello from the script." in shown


async def test_an_agent_that_is_not_running_answers_with_the_fix(choird: Choird):
    await choird.start_agent()
    async with console(choird.home) as (app, pilot):
        await until(pilot, lambda: "agent-2" in app.state.agents, what="the agents")
        app.select_agent("agent-2")
        await show_tab(pilot, "chat")
        view = app.query_one(ChatView)
        await until(pilot, lambda: view.agent_id == "agent-2", what="agent-2's chat")
        await pilot.press(*"hello", "enter")
        await until(
            pilot,
            lambda: any(c == "error" for c, _ in transcript(view, "agent-2")),
            what="the refusal",
        )
        [error] = [t for c, t in transcript(view, "agent-2") if c == "error"]
        assert "is not running: start it with choirctl agent start agent-2 --dm" in error
        app.select_agent("agent-1")
        await until(pilot, lambda: view.agent_id == "agent-1", what="agent-1's chat")
        await pilot.press(*"hello", "enter")
        await until(
            pilot,
            lambda: ("reply", "Hello from the script.") in transcript(view),
            what="agent-1's reply",
        )


async def test_commands_answer_in_the_transcript_every_answer_shown(choird: Choird):
    await choird.start_agent()
    async with console(choird.home) as (app, pilot):
        await until(pilot, lambda: app.state.selected_agent == "agent-1", what="the selection")
        await show_tab(pilot, "chat")
        view = app.query_one(ChatView)

        def answers() -> list[str]:
            return [t for c, t in transcript(view) if c.startswith("command")]

        for number, line in enumerate(("/status", "/cores", "/frobnicate"), start=1):
            await pilot.press(*line, "enter")
            await until(pilot, lambda n=number: len(answers()) == n, what=f"{line}'s answer")
        status, cores, unknown = answers()
        assert status.startswith("agent-1: running")
        assert "cores: none" in cores  # no event carries these: each is still shown
        assert unknown.startswith("unknown command /frobnicate")
        shown = "\n".join(str(line.text) for line in view.log_widget.lines)
        assert "choird  agent-1: running" in shown
        assert ("command_error", unknown) in transcript(view)
        assert not [t for c, t in transcript(view) if c == "reply"], "a command reached the agent"
